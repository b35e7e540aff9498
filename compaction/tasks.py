"""Celery tasks: ids in, one service call each. The row is the result (ignore_result).

Tasks call services; services enqueue tasks by name (compaction.services.common), never by import.
"""

from __future__ import annotations

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import InterfaceError, OperationalError

from compaction import lease, services
from compaction.services.common import RUN_COMPACTION_TASK

# Database trouble: the task is sent again after a short, growing pause (1 s, 2 s, 4 s … up to a
# minute; about seven minutes in all), so a job resumes within seconds of a database restart.
RETRY_ERRORS = (OperationalError, InterfaceError, services.HandBackPending)
MAX_DB_RETRIES = 12
RETRY_BACKOFF_MAX = 60


@shared_task(
    name=RUN_COMPACTION_TASK,
    bind=True,
    acks_late=True,  # safe: the service claims the row with a conditional UPDATE
    max_retries=MAX_DB_RETRIES,
    soft_time_limit=settings.COMPACTION_SOFT_TIME_LIMIT,
    time_limit=settings.COMPACTION_HARD_TIME_LIMIT,
    ignore_result=True,
)
def run_compaction(self, *, compaction_id: str, hand_back: int | None = None, **kwargs) -> None:
    # The claim's deadline is one lease; this keeps renewing it while the job runs. A session
    # being replayed (import_transcript --replay) runs its own jobs: leave them.
    try:
        with lease.renewing(compaction_id=compaction_id):
            services.compaction_run_unless_replaying(compaction_id=compaction_id, hand_back=hand_back)
    except RETRY_ERRORS as exc:
        # A job the worker could not hand back (the database still down) is handed back by the
        # retry as soon as the database answers; else the retry claims the job handed back.
        pending = exc.attempt if isinstance(exc, services.HandBackPending) else hand_back
        countdown = get_exponential_backoff_interval(
            factor=1, retries=self.request.retries, maximum=RETRY_BACKOFF_MAX, full_jitter=False
        )
        raise self.retry(
            exc=exc, countdown=countdown, kwargs={**kwargs, "compaction_id": compaction_id, "hand_back": pending}
        ) from exc


@shared_task(name="compaction.tasks.sweep_stuck_compactions", ignore_result=True, soft_time_limit=60, time_limit=90)
def sweep_stuck_compactions(**kwargs) -> None:
    services.compaction_sweep_stuck()
