"""Overflow recovery: the provider refused the prompt as too long; compact at once.

It runs in the request with a bounded time and writes its row only when it is finished, so it
never waits behind a slow background job; if both finish, the activation check lets exactly
one of them win.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.utils import timezone

from compaction.core.overflow import OverflowCheck, detect_overflow
from compaction.models import Compaction, EventKind, Reason, ReviewStatus, Status
from sessions import services as ss
from sessions.models import Session

from . import activation, planning
from .common import describe, event_record, metrics_record

logger = logging.getLogger("compaction.services")


# --- overflow recovery -------------------------------------------------------------------


def _within_stated_limit(session: Session, limit: int | None) -> dict[str, int] | None:
    """When the provider states its limit (possibly below the window the session believes in),
    size the emergency compaction by it: a quarter of the limit kept, a fifth for the summary,
    so the retried prompt lands near half the real limit instead of overflowing again."""
    if not limit:
        return None
    config = ss.session_config(session)
    return {
        "keep_recent_tokens": min(config.keep_recent_tokens, limit // 4),
        "summary_max_tokens": max(256, min(config.summary_budget, limit // 5)),
    }


def _compute(
    session: Session, check: OverflowCheck, input_tokens: int | None
) -> tuple[planning.Outcome | None, Exception | None]:
    """(the outcome, or the failure that prevented it). Runs with no transaction open: the
    summary may take the whole overflow budget, and an open write transaction would hold the
    session's row (on SQLite, the database's write lock) all that time."""
    try:
        snap = planning.snapshot_take(session.pk, _within_stated_limit(session, check.limit_tokens))
        if input_tokens and input_tokens > snap.tokens_before:
            snap = replace(snap, tokens_before=input_tokens)
        run = planning.SummaryRun(
            llm_timeout=settings.COMPACTION_OVERFLOW_LLM_TIMEOUT,
            max_retries=0,
            time_budget=settings.COMPACTION_OVERFLOW_TIME_BUDGET,
        )
        outcome = planning.outcome_compute(
            snap, reason=Reason.OVERFLOW, strategy="auto", instructions="", force=True, run=run
        )
        return outcome, None
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - recorded on the job; the agent still gets an answer
        logger.exception("Overflow compaction for session %s failed", session.pk)
        return None, exc


def _apply(
    job: Compaction, outcome: planning.Outcome | None, failure: Exception | None, started: float
) -> Compaction | None:
    """Write the job (activated, skipped, superseded or failed); call inside the request's transaction."""
    applied = None
    if outcome is not None:
        try:
            applied = activation.outcome_apply(job, outcome, attempt=None, started=started)
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:  # noqa: BLE001 - outcome_apply's own savepoint rolled its writes back
            logger.exception("Overflow compaction for session %s could not be applied", job.session_id)
            failure = exc
            job._state.adding = True
    if failure is not None:
        applied = _record_failure(job, failure, started)
    return applied


def _record_overflow(session: Session, check: OverflowCheck, *, status_code: int | None, input_tokens: int | None):
    message = f"Provider reported a context overflow ({check.provider or 'unknown provider'}): {check.reason}"
    data = {
        "provider": check.provider,
        "pattern": check.pattern,
        "status_code": status_code,
        "input_tokens": input_tokens,
    }
    event_record(session.pk, EventKind.OVERFLOW, message[:500], data=data)


def compaction_overflow(
    *,
    session: Session,
    error_text: str | None,
    status_code: int | None = None,
    input_tokens: int | None = None,
    now=None,
) -> dict[str, Any]:
    """The agent's provider refused the prompt: if it is a context overflow, compact at once
    (forced, short LLM timeout, extractive fallback) and answer with the new context."""

    check = detect_overflow(
        error_text=error_text, status_code=status_code, input_tokens=input_tokens, context_window=session.context_window
    )
    if not check.is_overflow:
        return {"overflow": False, "reason": check.reason}
    started = time.monotonic()
    started_at = now or timezone.now()
    job = Compaction(
        session_id=session.pk,
        reason=Reason.OVERFLOW,
        status=Status.RUNNING,
        strategy_requested="auto",
        params={"force": True, "provider": check.provider, "pattern": check.pattern},
        attempts=1,
        started_at=started_at,
        first_started_at=started_at,  # run at once: it never waited for a worker
    )
    outcome, failure = _compute(session, check, input_tokens)
    # One transaction for the request's writes: the overflow event, the retired queued job,
    # the compaction and the context served from it stand or fall together.
    with transaction.atomic():
        _record_overflow(session, check, status_code=status_code, input_tokens=input_tokens)
        _retire_queued(session.pk)
        applied = _apply(job, outcome, failure, started)
        session.refresh_from_db()
        reason = check.reason
        if applied is not None and applied.status == Status.SKIPPED:
            reason = applied.detail
        elif applied is not None and applied.status == Status.FAILED:
            reason = applied.error
        context = ss.context_build(session=session)
    return {
        "overflow": True,
        "compacted": applied is not None and applied.status == Status.SUCCEEDED,
        "reason": reason,
        "provider": check.provider,
        "pattern": check.pattern,
        "compaction": applied,
        "context": context,
    }


def _retire_queued(session_id) -> None:
    """A queued (not yet started) job would only redo the overflow's work: retire it. A running
    one is left alone; whichever activates first wins and the other is recorded as superseded."""
    for queued in Compaction.objects.filter(session_id=session_id, status=Status.QUEUED):
        if Compaction.objects.filter(pk=queued.pk, status=Status.QUEUED).update(
            status=Status.SKIPPED,
            review_status=ReviewStatus.NOT_APPLICABLE,
            detail="superseded by an overflow compaction",
            finished_at=timezone.now(),
        ):
            event_record(
                session_id,
                EventKind.COMPACTION_SKIPPED,
                "Queued compaction superseded by an overflow compaction",
                compaction=queued,
            )


def _record_failure(job: Compaction, exc: Exception, started: float) -> Compaction:
    job.status = Status.FAILED
    job.review_status = ReviewStatus.NOT_APPLICABLE
    job.error = f"{type(exc).__name__}: {exc}"[:5000]
    job.finished_at = timezone.now()
    job.duration_ms = int((time.monotonic() - started) * 1000)
    job.save()
    event_record(job.session_id, EventKind.COMPACTION_FAILED, describe(job), compaction=job)
    metrics_record(job)
    return job
