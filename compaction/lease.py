"""A running job's lease: the worker renews `deadline_at` while the job runs, so a job whose
worker died (SIGKILL, OOM, a lost machine) is re-queued by the sweeper within about
lease + sweep interval (30 s + 15 s by default) instead of after the whole hard time limit.

The renewal runs in a thread beside the task: the summarizer may sit in one network call for
minutes, and the lease must not lapse while it does. It renews only the claim this task made
(RUNNING and started at or after the task began), and never past the job's hard time limit
plus a grace, so a job stuck in a call that nothing can interrupt (a solo pool has no hard
time limit) still loses its lease once it has had all its time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from compaction.models import Compaction, Status

logger = logging.getLogger(__name__)

# Extra time past the hard limit before a job's lease may no longer be renewed.
GRACE_SECONDS = 30


def lease_seconds() -> int:
    return int(settings.COMPACTION_LEASE_SECONDS)


def renew(*, compaction_id, since, now=None) -> int:
    """Push the deadline of this task's claim one lease ahead; 0 when there is nothing to renew
    (not claimed yet, finished, or re-queued by the sweeper meanwhile)."""
    now = now or timezone.now()
    cap = since + timedelta(seconds=settings.COMPACTION_HARD_TIME_LIMIT + GRACE_SECONDS)
    deadline = min(now + timedelta(seconds=lease_seconds()), cap)
    return Compaction.objects.filter(pk=compaction_id, status=Status.RUNNING, started_at__gte=since).update(
        deadline_at=deadline
    )


@contextmanager
def renewing(*, compaction_id) -> Iterator[None]:
    """Renew the job's lease every third of a lease while the body runs."""
    since = timezone.now()
    stop = threading.Event()
    interval = max(1.0, lease_seconds() / 3)

    def beat() -> None:
        try:
            while not stop.wait(interval):
                try:
                    renew(compaction_id=compaction_id, since=since)
                except Exception:  # noqa: BLE001 - a missed renewal only shortens the lease
                    logger.warning("Compaction %s: could not renew its lease", compaction_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"lease-{compaction_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
