"""Worker heartbeats in the database: written by every Celery worker (ops.worker), read by
/readyz (ops.health) and the heartbeat-age gauge (ops.scrape).

The database is the one store the web processes and every worker share in every deployment (the
embedded mode has no Redis), so a heartbeat there is seen by whichever web process answers.
Ages are measured with the reading process's clock against the writer's: hosts need their
clocks in sync (NTP) to within a small part of COMPACTOR_WORKER_HEARTBEAT_MAX_AGE.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q

from .models import WorkerHeartbeat

# Rows of workers gone this long are deleted when a worker starts: names of replaced hosts
# (containers, autoscaled machines) would otherwise pile up.
FORGET_AFTER = timedelta(days=1)


def heartbeat_record(*, worker: str, pid: int, started_at: datetime, now: datetime) -> None:
    """This worker is alive now (one UPDATE; an INSERT the first time its name is seen)."""
    updated = WorkerHeartbeat.objects.filter(worker=worker).update(pid=pid, started_at=started_at, seen_at=now)
    if updated:
        return
    try:
        with transaction.atomic():
            WorkerHeartbeat.objects.create(worker=worker, pid=pid, started_at=started_at, seen_at=now)
    except IntegrityError:
        # Another process of the same name inserted it first: take it over.
        WorkerHeartbeat.objects.filter(worker=worker).update(pid=pid, started_at=started_at, seen_at=now)


def heartbeat_forget(*, worker: str, pid: int) -> None:
    """A worker stopping cleanly removes its row (only its own: a successor may have taken the name)."""
    WorkerHeartbeat.objects.filter(worker=worker, pid=pid).delete()


def heartbeats_prune(*, now: datetime) -> int:
    return WorkerHeartbeat.objects.filter(seen_at__lt=now - FORGET_AFTER).delete()[0]


@dataclass(frozen=True)
class Heartbeats:
    """What the heartbeats say at `now`."""

    age_seconds: float | None  # of the freshest heartbeat; None: no worker ever recorded one
    alive: int  # workers seen within the max age

    def fresh(self) -> bool:
        return self.alive > 0


def heartbeats_read(*, now: datetime, max_age_seconds: float) -> Heartbeats:
    """One query: the freshest heartbeat and how many are within the max age."""
    row = WorkerHeartbeat.objects.aggregate(
        latest=Max("seen_at"), alive=Count("pk", filter=Q(seen_at__gte=now - timedelta(seconds=max_age_seconds)))
    )
    latest = row["latest"]
    age = max(0.0, (now - latest).total_seconds()) if latest is not None else None
    return Heartbeats(age_seconds=age, alive=int(row["alive"] or 0))
