"""Figures read from the database when Prometheus scrapes: the compaction queue and the workers'
heartbeats. They are states, not events, so they are read where they are kept (the job table,
the heartbeat rows) instead of being counted by each process: every web process answers alike,
and a job queued while no worker runs is seen although no process touched it.
"""

from __future__ import annotations

import logging
import math

from django.conf import settings
from django.db.models import Case, Count, F, Min, Q, When
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from compaction.models import Compaction, Status

from .heartbeat import heartbeats_read

logger = logging.getLogger("ops.scrape")


def queue_read(*, now) -> dict[str, float]:
    """Queued and running jobs, and how long the oldest queued job has been waiting (one query).

    A job waits from its creation until a worker first takes it; a job handed back to the queue
    (its worker died, a database error) waits from its hand-back (enqueued_at).
    """
    row = Compaction.objects.filter(status__in=[Status.QUEUED, Status.RUNNING]).aggregate(
        queued=Count("pk", filter=Q(status=Status.QUEUED)),
        running=Count("pk", filter=Q(status=Status.RUNNING)),
        oldest=Min(
            Case(
                When(first_started_at__isnull=True, then=F("created_at")),
                default=Coalesce(F("enqueued_at"), F("created_at")),
            ),
            filter=Q(status=Status.QUEUED),
        ),
    )
    oldest = row["oldest"]
    return {
        "queued": float(row["queued"] or 0),
        "running": float(row["running"] or 0),
        "oldest_age": max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0,
    }


class DatabaseCollector(Collector):
    """The gauges read from the database, for ops.views.metrics' registry."""

    def describe(self):
        return []  # registered without a scrape: the figures are read only when collected

    def collect(self):
        now = timezone.now()
        up = GaugeMetricFamily(
            "compactor_metrics_database_up", "1 when the figures below could be read from the database, else 0."
        )
        try:
            queue = queue_read(now=now)
            beats = heartbeats_read(now=now, max_age_seconds=float(settings.WORKER_HEARTBEAT_MAX_AGE))
        except Exception as exc:  # noqa: BLE001 - a scrape must still answer (and say the database is down)
            logger.warning("Metrics: database figures unavailable: %s", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield GaugeMetricFamily(
            "compactor_compaction_queue_depth", "Compaction jobs queued, waiting for a worker.", value=queue["queued"]
        )
        yield GaugeMetricFamily(
            "compactor_compactions_running", "Compaction jobs a worker is running.", value=queue["running"]
        )
        yield GaugeMetricFamily(
            "compactor_compaction_queue_oldest_age_seconds",
            "How long the oldest queued compaction has waited for a worker (0 when none is queued).",
            value=queue["oldest_age"],
        )
        yield GaugeMetricFamily(
            "compactor_worker_heartbeat_age_seconds",
            "Age of the freshest Celery worker heartbeat (+Inf when no worker ever recorded one).",
            value=beats.age_seconds if beats.age_seconds is not None else math.inf,
        )
        yield GaugeMetricFamily(
            "compactor_workers_alive",
            "Celery workers whose heartbeat is within COMPACTOR_WORKER_HEARTBEAT_MAX_AGE.",
            value=float(beats.alive),
        )
        yield GaugeMetricFamily(
            "compactor_worker_heartbeat_max_age_seconds",
            "COMPACTOR_WORKER_HEARTBEAT_MAX_AGE: a worker whose heartbeat is older counts as gone.",
            value=float(settings.WORKER_HEARTBEAT_MAX_AGE),
        )
