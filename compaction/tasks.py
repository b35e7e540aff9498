"""Celery tasks: ids in, one service call each. The row is the result (ignore_result).

Tasks call services; services enqueue tasks by name (compaction.services.common), never by import.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from compaction import lease, services
from compaction.services.common import RUN_COMPACTION_TASK


@shared_task(
    name=RUN_COMPACTION_TASK,
    acks_late=True,  # safe: the service claims the row with a conditional UPDATE
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=5,
    soft_time_limit=settings.COMPACTION_SOFT_TIME_LIMIT,
    time_limit=settings.COMPACTION_HARD_TIME_LIMIT,
    ignore_result=True,
)
def run_compaction(*, compaction_id: str, **kwargs) -> None:
    # The claim's deadline is one lease; this keeps renewing it while the job runs. A session
    # being replayed (import_transcript --replay) runs its own jobs: leave them.
    with lease.renewing(compaction_id=compaction_id):
        services.compaction_run_unless_replaying(compaction_id=compaction_id)


@shared_task(name="compaction.tasks.sweep_stuck_compactions", ignore_result=True, soft_time_limit=60, time_limit=90)
def sweep_stuck_compactions(**kwargs) -> None:
    services.compaction_sweep_stuck()
