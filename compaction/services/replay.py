"""Replay and recorded compactions: record another agent's own compaction, replay a recorded transcript
through the services the API uses (import_transcript, the replay tests, the benches)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from compaction.core.tokens import count_text
from compaction.core.types import ProviderUsage
from compaction.models import Compaction, Reason, Status
from sessions import services as ss
from sessions.models import Message, Session

from .activation import outcome_apply
from .jobs import compaction_run, messages_append_then_compact, usage_report_then_compact
from .planning import Activate, NewOverlay

# --- import ------------------------------------------------------------------------------


def compaction_record_import(
    *, session: Session, summary: str, first_kept_seq: int, tokens_before: int | None = None, detail: str = ""
) -> Compaction:
    """Record a compaction another agent already made (e.g. Claude Code's compact_boundary) and
    activate it, so the imported session serves the same context the agent had."""
    started = time.monotonic()
    with transaction.atomic():
        session = Session.objects.select_related("active_compaction").get(pk=session.pk)
        based_on = session.active_compaction
        summarized = Message.objects.filter(session=session, seq__lt=first_kept_seq)
        if based_on and based_on.first_kept_seq:
            summarized = summarized.filter(seq__gte=based_on.first_kept_seq)
        seqs = list(summarized.values_list("seq", flat=True))
        job = Compaction(
            session_id=session.pk,
            reason=Reason.IMPORT,
            status=Status.RUNNING,
            strategy_requested="import",
            attempts=1,
            started_at=timezone.now(),
            first_started_at=timezone.now(),
        )
        overlay = NewOverlay(
            strategy="import",
            summary=summary,
            summary_tokens=count_text(summary, ss.session_tokenizer(session)),
            first_summarized_seq=min(seqs) if seqs else None,
            last_summarized_seq=max(seqs) if seqs else None,
            first_kept_seq=first_kept_seq,
            messages_summarized=len(seqs),
        )
        outcome = Activate(
            based_on_id=based_on.pk if based_on else None,
            # The agent's own figure (provider's scale), else the meter's: never the raw estimate.
            tokens_before=tokens_before if tokens_before is not None else ss.session_usage(session).tokens,
            # The agent compacted when the messages before the boundary were all it had: calls
            # made after the boundary ran on the compacted context (their usage reports count).
            snapshot_seq=max(0, first_kept_seq - 1),
            overlay=overlay,
            detail=detail or "imported from the agent's own compaction",
        )
        applied = outcome_apply(job, outcome, attempt=None, started=started)
    assert applied is not None
    return applied


# --- transcript replay (import_transcript --replay, the replay tests' twin, the bench) ----


@dataclass
class ReplayStep:
    index: int
    seq: int
    role: str
    reported_tokens: int | None
    usage_tokens: int
    compaction: Compaction | None


@dataclass
class ReplayResult:
    steps: int = 0
    reports: int = 0
    compactions: list[Compaction] = field(default_factory=list)
    first_compaction_index: int | None = None
    usage_before_first: int | None = None
    # The highest usage (session_usage().tokens, the figure the trigger compares) after
    # any step or just before a compaction (its tokens_before), and the step: tells why a
    # replay that never compacted did not.
    peak_usage: int = 0
    peak_index: int | None = None


def transcript_messages_for_api(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded messages as an agent would send them: whitespace-only text blocks (Claude Code
    logs "\n\n" blocks between thinking and text) are dropped, as the Messages API rejects them;
    a message left with no content is skipped."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [b for b in content if not (b.get("type") == "text" and not str(b.get("text", "")).strip())]
            if not content:
                continue
        elif isinstance(content, str) and not content.strip():
            continue
        out.append({**message, "content": content})
    return out


def reported_prompt_tokens(usage: dict[str, Any] | None) -> int | None:
    """The prompt's size in a recorded provider usage report (input + cache read + cache
    creation), or None when the report has none."""
    if not usage or usage.get("input_tokens") is None:
        return None
    return ProviderUsage.of(usage).prompt_tokens


def usage_report_recorded(*, session: Session, usage: dict[str, Any], message_seq: int):
    """Report a transcript's recorded provider usage for the assistant message at `message_seq`."""
    return usage_report_then_compact(
        session=session,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        message_seq=message_seq,
    )


def transcript_replay(
    *, session: Session, messages: list[dict[str, Any]], run_inline: bool = False, on_step=None
) -> ReplayResult:
    """Append a recorded conversation one message at a time through the services the API uses.

    After each assistant message its recorded usage is reported (calibrating the hybrid
    estimate, so auto-compaction fires where the recorded agent's context really was) until
    the service has compacted once: after that the recorded figures describe a context the
    service no longer serves, and reporting them would make it compact again and again.
    Compaction jobs run wherever Celery runs them, or here right after the step that queued
    them with `run_inline` (the queued task then finds the job claimed and does nothing).
    """
    result = ReplayResult()
    earlier = set(Compaction.objects.filter(session=session).values_list("pk", flat=True))
    new_succeeded = Compaction.objects.filter(session=session, status=Status.SUCCEEDED).exclude(pk__in=earlier)
    for index, message in enumerate(messages):
        said = {"provenance": message["provenance"]} if message.get("provenance") else {}
        appended = messages_append_then_compact(
            session=session, messages=[{"role": message["role"], "content": message["content"], **said}]
        )
        seq = appended.messages[-1].seq
        job = appended.compaction
        reported = None
        # Stop reporting as soon as the service has compacted (even if this very append did it).
        compacted = bool(result.compactions) or new_succeeded.exists()
        if run_inline and job is not None and not compacted:
            compaction_run(compaction_id=job.pk)
            compacted = new_succeeded.exists()
        if message["role"] == "assistant" and not compacted:
            reported = reported_prompt_tokens(message.get("usage"))
            if reported is not None:
                report = usage_report_recorded(session=session, usage=message["usage"], message_seq=seq)
                result.reports += 1
                job = report.compaction or job
        if run_inline:
            queued = Compaction.objects.filter(session=session, status=Status.QUEUED).first()
            if queued is not None:
                compaction_run(compaction_id=queued.pk)
        session.refresh_from_db()
        # A compaction may also activate later, in a worker: the active one is what counts.
        if (
            session.active_compaction_id
            and session.active_compaction_id not in earlier
            and all(c.pk != session.active_compaction_id for c in result.compactions)
        ):
            activated = Compaction.objects.get(pk=session.active_compaction_id)
            result.compactions.append(activated)
            if (activated.tokens_before or 0) > result.peak_usage:
                result.peak_usage, result.peak_index = activated.tokens_before, index
            if result.first_compaction_index is None:
                result.first_compaction_index = index
                result.usage_before_first = activated.tokens_before
        result.steps += 1
        usage_tokens = ss.session_usage(session).tokens
        if result.peak_index is None or usage_tokens > result.peak_usage:
            result.peak_usage, result.peak_index = usage_tokens, index
        if on_step is not None:
            on_step(ReplayStep(index, seq, message["role"], reported, usage_tokens, job))
    return result
