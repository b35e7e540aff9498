"""Celery tasks: ids in, one service call each. The row is the result (ignore_result).

Tasks call services; services enqueue tasks by name (compaction.services.common), never by import.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from celery import shared_task
from celery.signals import worker_init, worker_ready
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from compaction import lease, services
from compaction.core import tokens
from compaction.services.common import RUN_COMPACTION_TASK

logger = logging.getLogger(__name__)

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
            services.compaction_run_unless_replaying(
                compaction_id=compaction_id, hand_back=hand_back, worker=self.request.hostname or ""
            )
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


# --- a worker that (re)starts takes up at once what its previous process left ------------------

_process_started_at: datetime | None = None


@worker_init.connect
def _note_start(**kwargs) -> None:
    """Before the worker consumes anything: every claim of this process is later than this. The
    tokenizers' BPE ranks are loaded here, in the main process, so the pool's processes forked from
    it share them: each no longer loads them on its first job (~0.4 s of CPU, many times that on a
    loaded machine, right when a restarted worker takes up its jobs)."""
    global _process_started_at
    _process_started_at = datetime.now(UTC)
    for name in ("cl100k_base", "o200k_base"):
        tokens.get_tokenizer(name).count("warm up")
    if settings.ANTHROPIC_API_KEY:
        # The summarizer's SDK too (with a key the chain calls it: planning.build_summarizer_chain):
        # once here, ~1.5 s of CPU, instead of in each pool process on its first summary call, in
        # parallel, ahead of every job queued behind those first ones. Side by side (issue 35, the
        # restart bench at load 8): all four jobs started 9.6-11.5 s after a SIGKILL with it here,
        # 13.7-15.8 s with each pool process importing it.
        import anthropic  # noqa: F401  lazy: needed only with an API key; importing it is the point


@worker_ready.connect
def _recover_orphans(sender=None, **kwargs) -> None:
    """The jobs a previous process of this worker's name was running (a SIGKILL, an OOM kill) are
    re-queued now, and queued jobs sent again, instead of waiting for their lease to lapse and the
    sweeper (compaction.services.compaction_recover_orphans). The database down: logged, and the
    sweeper does it once the database is back (it sees the worker's heartbeat restarted)."""
    hostname = getattr(sender, "hostname", None)
    if not hostname or _process_started_at is None:
        return
    try:
        services.compaction_recover_orphans(worker=hostname, since=_process_started_at)
    except Exception:  # noqa: BLE001 - never stop a worker from starting
        logger.warning("Worker %s: could not take up its previous process's jobs; the sweeper will", hostname,
                       exc_info=True)  # fmt: skip
    finally:
        connection.close()  # the main process's connection: not shared with pool processes forked later
