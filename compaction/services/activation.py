"""Activation and undo: write a job's outcome and switch the session's overlay atomically, only
if the compaction the job was based on is still the active one."""

from __future__ import annotations

import logging
import time

from django.db import transaction
from django.utils import timezone

from compaction.core.policy import cache_invalidated
from compaction.models import Compaction, EventKind, ReviewStatus, Status, WorkStateRecord
from sessions import services as ss
from sessions.models import Session, UsageSample

from .common import CompactionError, describe, event_record, metrics_record
from .planning import Activate, NewOverlay, Outcome, Skipped

logger = logging.getLogger("compaction.services")


# --- activation --------------------------------------------------------------------------


def _write_overlay(job: Compaction, overlay: NewOverlay, summary_count: tuple[int, str] | None) -> None:
    """The overlay on the job row; typed values become the row's JSON here and nowhere else."""
    job.strategy = overlay.strategy
    job.first_kept_seq = overlay.first_kept_seq
    job.summary = overlay.summary
    job.turn_prefix_summary = overlay.turn_prefix_summary
    job.summary_tokens = overlay.summary_tokens
    job.split_turn = overlay.split_turn
    job.read_files = list(overlay.read_files)
    job.modified_files = list(overlay.modified_files)
    job.prune_before_seq = overlay.prune_before_seq
    job.kept_plan = dict(overlay.kept_plan)
    job.first_summarized_seq = overlay.first_summarized_seq
    job.last_summarized_seq = overlay.last_summarized_seq
    job.messages_summarized = overlay.messages_summarized
    job.fallbacks = [fallback.as_json() for fallback in overlay.fallbacks]
    job.summarizer_model = overlay.summarizer_model
    job.usage = dict(overlay.usage)
    job.fidelity = overlay.fidelity.as_json() if overlay.fidelity is not None else {}
    job.first_changed_seq = overlay.first_changed_seq
    job.policy_reason = overlay.policy_reason[:300]
    job.policy_candidates = [candidate.as_json() for candidate in overlay.policy_candidates]
    if summary_count is not None:
        job.summary_message_tokens, job.summary_tokenizer = summary_count


def _claim_lost(job: Compaction, attempt: int | None) -> bool:
    """Whether the worker's claim (`attempt`) was taken over; call with the session row locked."""
    if attempt is None:
        return False
    current = Compaction.objects.select_for_update().filter(pk=job.pk).values("status", "attempts").first()
    if current is None or current["status"] != Status.RUNNING or current["attempts"] != attempt:
        logger.warning("Compaction %s: attempt %s lost its claim; result discarded", job.pk, attempt)
        return True
    return False


def _finish_skipped(job: Compaction, session: Session) -> Compaction:
    job.status = Status.SKIPPED
    job.review_status = ReviewStatus.NOT_APPLICABLE
    job.save()
    data = {"detail": job.detail, "tokens_before": job.tokens_before}
    event_record(session.pk, EventKind.COMPACTION_SKIPPED, describe(job), compaction=job, data=data)
    return job


def _finish_superseded(job: Compaction, session: Session, outcome: Activate) -> Compaction:
    job.status = Status.FAILED
    job.review_status = ReviewStatus.NOT_APPLICABLE
    job.error = (
        f"superseded: another compaction ({session.active_compaction_id or 'none'}) became active while "
        f"this one was running from {outcome.based_on_id or 'the full history'}; not activated"
    )
    job.save()
    event_record(session.pk, EventKind.COMPACTION_FAILED, describe(job), compaction=job, data={"superseded": True})
    return job


def _activate(job: Compaction, session: Session, outcome: Activate, *, now) -> Compaction:
    """Make the job the session's active compaction and record what it measured."""
    job.status = Status.SUCCEEDED
    job.activated_at = now
    job.save()
    state = outcome.overlay.work_state
    if state:
        WorkStateRecord.objects.update_or_create(
            compaction=job, defaults={"version": int(state.get("version") or 0), "data": state}
        )
    session.active_compaction = job
    session.save(update_fields=["active_compaction", "updated_at"])
    ss.session_recompute_usage(session=session)  # also brings `session`'s counters up to date
    # "After" is the meter right after activation, from the one function every figure comes
    # from (session_usage): never 0 for a served context (its served floor), equal to the
    # gauge, the list's stored usage and the chart's point after the drop.
    job.tokens_after = int(session.usage_tokens)
    _record_samples(session, job, now=now)
    job.save(update_fields=_measured(job, session, outcome))
    data = {
        "tokens_before": job.tokens_before,
        "tokens_after": job.tokens_after,
        "messages_summarized": job.messages_summarized,
        "strategy": job.strategy,
        "fallbacks": len(job.fallbacks or []),
        "runway_tokens": job.runway_tokens,
        "cache_invalidated_tokens": job.cache_invalidated_tokens,
    }
    event_record(session.pk, EventKind.COMPACTION_FINISHED, describe(job), compaction=job, data=data)
    return job


def _measured(job: Compaction, session: Session, outcome: Activate) -> list[str]:
    """Runway and cache cost from the measured tokens_after (the policy chose on estimates);
    the fields it set."""
    update = ["tokens_after", "runway_tokens"]
    trigger = outcome.overlay.policy_trigger or outcome.trigger or ss.session_config(session).trigger_tokens
    job.runway_tokens = trigger - job.tokens_after
    if outcome.overlay.unchanged_prefix_tokens is not None:
        job.cache_invalidated_tokens = cache_invalidated(
            tokens_after=job.tokens_after, unchanged_prefix=outcome.overlay.unchanged_prefix_tokens
        )
        update.append("cache_invalidated_tokens")
    if outcome.trigger is not None and job.tokens_after > outcome.trigger and "above the trigger" not in job.detail:
        job.detail = (f"still above the trigger {outcome.trigger:,} after compacting; " + job.detail)[:300]
        update.append("detail")
    return update


def outcome_apply(job: Compaction, outcome: Outcome, *, attempt: int | None, started: float) -> Compaction | None:
    """Write the outcome and, for a new overlay, activate it — atomically and only if the
    compaction the snapshot was based on is still the active one.

    `attempt` is the claim this worker holds (None for a job run in the request, overflow or
    import, whose row is inserted here). A worker whose claim was taken over (the sweeper
    re-queued it and another worker claimed it) writes nothing: returns None.
    """
    summary_count = None
    if isinstance(outcome, Activate):
        # The summary as served, counted once here (before the lock), not on every request.
        session_row = Session.objects.only("id", "model").get(pk=job.session_id)
        summary_count = ss.summary_message_count(
            session=session_row,
            summary=outcome.overlay.summary,
            turn_prefix_summary=outcome.overlay.turn_prefix_summary,
        )
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=job.session_id)
        if _claim_lost(job, attempt):
            return None
        now = timezone.now()
        if isinstance(outcome, Activate):
            _write_overlay(job, outcome.overlay, summary_count)
        job.based_on_id = outcome.based_on_id
        job.tokens_before = outcome.tokens_before
        job.snapshot_seq = outcome.snapshot_seq
        job.finished_at = now
        job.duration_ms = int((time.monotonic() - started) * 1000)
        job.detail = outcome.detail[:300]
        if isinstance(outcome, Skipped):
            finished = _finish_skipped(job, session)
        elif session.active_compaction_id != outcome.based_on_id:
            finished = _finish_superseded(job, session, outcome)
        else:
            finished = _activate(job, session, outcome, now=now)
        metrics_record(finished)
        return finished


def _record_samples(session: Session, job: Compaction, *, now) -> None:
    """The compaction in the usage history: the meter before it (at its snapshot) and after it."""
    ss.usage_sample_record(
        session=session,
        kind=UsageSample.Kind.COMPACTION,
        seq=job.snapshot_seq or 0,
        tokens=job.tokens_before or 0,
        estimated_tokens=None,
        compaction=job,
        now=now,
    )
    ss.usage_sample_record(
        session=session,
        kind=UsageSample.Kind.COMPACTION,
        seq=session.last_seq,
        tokens=job.tokens_after,
        estimated_tokens=session.context_tokens,
        compaction=job,
        now=now,
    )


# --- undo --------------------------------------------------------------------------------


def compaction_revert(*, compaction: Compaction, user=None) -> Compaction | None:
    """Undo: reactivate the compaction this one was based on (None = the full history).

    Only the active compaction can be undone, so undo steps back one overlay at a time and
    never skips over a newer one. Returns the compaction that is active afterwards.
    """
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=compaction.session_id)
        if session.active_compaction_id != compaction.pk:
            raise CompactionError(
                "only the active compaction can be undone"
                + (
                    f"; the active one is {session.active_compaction_id}"
                    if session.active_compaction_id
                    else "; none is active"
                )
            )
        usage_before = ss.session_usage(session).tokens
        previous = compaction.based_on
        if previous is not None and previous.status != Status.SUCCEEDED:
            previous = None
        session.active_compaction = previous
        session.save(update_fields=["active_compaction", "updated_at"])
        ss.session_recompute_usage(session=session)  # also brings `session`'s counters up to date
        usage_after = ss.session_usage(session).tokens
        who = f" by {user.get_username()}" if user is not None else ""
        target = f"compaction {previous.pk}" if previous else "the full history"
        event_record(
            session.pk,
            EventKind.COMPACTION_REVERTED,
            f"Compaction undone{who}: back to {target}, {usage_before:,} → {usage_after:,} tokens",
            compaction=compaction,
            data={
                "active": str(previous.pk) if previous else None,
                "tokens_before": usage_before,
                "tokens_after": usage_after,
            },
        )
        return previous
