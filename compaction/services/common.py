"""What every part of the compaction services shares: the strategies, the error type, events,
the hand-off to the broker and the one-line description of a job."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from functools import partial

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.core.summarizers.chain import STRATEGIES as SUMMARIZER_STRATEGIES
from compaction.models import Compaction, Event, Reason, Status
from ops import metrics

logger = logging.getLogger("compaction.services")


# What a request may ask for: a summarizer chain (defined once, by the chain) or pruning only.
STRATEGIES = (*SUMMARIZER_STRATEGIES, "prune")
# The Celery task that runs a job (compaction.tasks), named rather than imported: tasks call
# services, never the other way round.
RUN_COMPACTION_TASK = "compaction.tasks.run_compaction"


def requeue_queued_after() -> timedelta:
    """A QUEUED job no worker started within this is re-enqueued by the sweeper (its message may
    have been lost: the broker was down at commit time, or its queue was flushed). A duplicate
    delivery is a no-op: the worker claims the row with a conditional UPDATE."""
    return timedelta(seconds=settings.COMPACTION_REQUEUE_QUEUED_SECONDS)


class CompactionError(Exception):
    """A request the current state does not allow (e.g. undoing a compaction that is not active)."""

    def __init__(self, message: str, *, field: str | None = None, code: str = "conflict"):
        super().__init__(message)
        self.field = field
        self.code = code


def event_record(
    session_id, kind: str, message: str, *, compaction: Compaction | None = None, data: dict | None = None
) -> Event:
    """One line of the session's history (the dashboard's timeline, the API's events)."""
    return Event.objects.create(
        session_id=session_id, kind=kind, compaction=compaction, message=message[:500], data=data or {}
    )


# The broker's priorities (Redis: kombu keeps one list per step 0, 3, 6, 9 and a worker takes
# from the lowest number first). An attempt a dead worker interrupted was first in line: it is
# sent again ahead of the jobs queued after it (issue 35: re-queued after a worker restart, the
# interrupted jobs waited behind every queued one). A message without a priority (sent by an
# older process) counts as 0. The embedded filesystem broker has no priorities: order as sent.
PRIORITY_RESUMED = 0
PRIORITY_QUEUED = 3


def enqueue(compaction_id, *, mark: bool = True, resumed: bool = False) -> None:
    """Hand the job's message to the broker, recording when (`enqueued_at`, which the sweeper
    measures staleness from). `mark=False`: the caller already recorded it (the sweeper does,
    in the transaction that decides to re-send, so two sweeps cannot both send). `resumed`: an
    attempt whose worker died, sent ahead of the queued jobs (PRIORITY_RESUMED)."""

    if mark:
        # Recorded even when the broker is down: the sweeper then retries one stale period later.
        Compaction.objects.filter(pk=compaction_id, status=Status.QUEUED).update(enqueued_at=timezone.now())
    try:
        # By name: the registered task (its options, eager mode in tests) when this process has
        # loaded it (compaction.apps does), else a plain message to the broker.
        current_app.signature(RUN_COMPACTION_TASK, kwargs={"compaction_id": str(compaction_id)}).apply_async(
            priority=PRIORITY_RESUMED if resumed else PRIORITY_QUEUED
        )
    except Exception:  # noqa: BLE001 - broker down: the row stays QUEUED and the sweeper re-enqueues it
        logger.exception("Could not enqueue compaction %s; the sweeper will retry", compaction_id)


_NOTHING_PREFIX = re.compile(r"^\s*nothing to compact\s*[:\-—]?\s*", re.IGNORECASE)


def skip_reason(detail: str | None) -> str:
    """Why a job compacted nothing, without the engine's own "nothing to compact:" prefix."""
    text = _NOTHING_PREFIX.sub("", detail or "").strip()
    return text or "the context has nothing that can be summarized or pruned"


def describe(job: Compaction) -> str:
    """The one-line outcome people read in events, the API and the dashboard."""
    before = f"{job.tokens_before:,}" if job.tokens_before is not None else "?"
    after = f"{job.tokens_after:,}" if job.tokens_after is not None else "?"
    if job.status == Status.SUCCEEDED and job.strategy == "prune":
        return f"Tool output pruned (before #{job.prune_before_seq}), {before} → {after} tokens"
    if job.status == Status.SUCCEEDED:
        noun = "message" if job.messages_summarized == 1 else "messages"
        return f"Conversation compacted: {job.messages_summarized:,} {noun} → summary, {before} → {after} tokens"
    if job.status == Status.SKIPPED:
        return f"Not compacted: {skip_reason(job.detail)}"
    if job.status == Status.FAILED:
        return f"Compaction failed: {job.error}"
    if job.status == Status.RUNNING:
        return "Compaction running"
    return "Compaction queued"


_FINISHED = (Status.SUCCEEDED, Status.SKIPPED, Status.FAILED)


def _bounded(value: str | None, allowed) -> str:
    """A label value from a known set ("other" otherwise): every value is a series to keep."""
    return value if value is not None and value in allowed else "other"


def metrics_record(job: Compaction) -> None:
    """Count a finished job in the Prometheus metrics (ops.metrics) once its row is committed,
    so an outcome that was rolled back is never counted."""
    if job.status not in _FINISHED:
        return
    fallbacks = tuple(
        _bounded(item.get("strategy"), SUMMARIZER_STRATEGIES) for item in job.fallbacks or [] if isinstance(item, dict)
    )
    observe = partial(
        metrics.compaction_observe,
        strategy=_bounded(job.strategy or job.strategy_requested, STRATEGIES),
        outcome=str(job.status),
        reason=_bounded(job.reason, Reason.values),
        seconds=job.duration_ms / 1000 if job.duration_ms is not None else None,
        tokens_before=job.tokens_before,
        tokens_after=job.tokens_after,
        fallbacks=fallbacks,
    )
    transaction.on_commit(observe)
