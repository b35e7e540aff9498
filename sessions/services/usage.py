"""Provider usage reports: the prompt size the provider counted for a call, which calibrates
the meter when it is plausible (compaction.core.calibration.judge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from compaction.core import calibration
from compaction.core import tokens as core_tokens
from compaction.core.types import ProviderUsage
from compaction.selectors import OVERLAY_FIELDS, Overlay, active_overlay

from .. import validation
from ..models import Message, Session, UsageSample
from .append import APPEND_FIELDS
from .config import model_key, session_tokenizer
from .meter import Usage, counters_copy, meter_set, session_usage, usage_sample_record
from .served import served_assistant


@dataclass
class UsageReportResult:
    usage: Usage
    message_seq: int | None  # the assistant message the report was attached to
    dropped_tool_use_ids: list[str]
    session: Session  # the reported-on session, as stored
    # A truncated reply or a calibrated (usually higher) figure can cross the trigger: the
    # job the compaction layer queued after this report, if any (usage_report_then_compact).
    compaction: Any = None


# Columns a usage report reads under its row lock: what an append reads (the meter's inputs and
# the counters; not the system prompt, title or last_usage) and the active compaction's overlay
# (stale reports, what is in context). The compaction row is joined, not locked.
REPORT_FIELDS = (*APPEND_FIELDS, *(f"active_compaction__{name}" for name in OVERLAY_FIELDS))

# What a report writes besides the meter's columns (and the model, when it names the first one).
REPORT_WRITES = [
    "reported_input_tokens",
    "reported_at_seq",
    "tokens_since_report",
    "calibration_offset",
    "calibration",
    "last_usage",
    "context_tokens",
    "last_activity_at",
    "updated_at",
]


def usage_report(
    *,
    session: Session,
    input_tokens: int,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
    stop_reason: str | None = None,
    model: str | None = None,
    message_seq: int | None = None,
    now: datetime | None = None,
) -> UsageReportResult:
    """Record the provider's usage for the last model call (calibrates the hybrid estimate).

    The reported prompt size is input + cache read + cache write. The report belongs to an
    assistant message: `message_seq`, or by default the newest message when it is an
    assistant message (the agent appended the reply, then reported). The provider had seen
    every message before that reply, so later messages (the reply included) are added as
    estimates. Without such a message the provider had seen everything stored.

    stop_reason "max_tokens": the reply was cut off; its trailing tool_use blocks are
    incomplete and have no result, so the served context drops them.
    """
    provider = ProviderUsage(
        input_tokens=input_tokens,
        cache_read_input_tokens=cache_read_input_tokens,
        cache_creation_input_tokens=cache_creation_input_tokens,
    )
    record = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "stop_reason": stop_reason,
        "model": model or None,
        "prompt_tokens": provider.prompt_tokens,
        # Set by the plausibility check (None: passed, or a stale report, which is not judged).
        "implausible": None,
    }
    with transaction.atomic():
        locked = (
            Session.objects.select_for_update(of=("self",))
            .select_related("active_compaction")
            .only(*REPORT_FIELDS)
            .get(pk=session.pk)
        )
        report = _Report(locked, active_overlay(locked), record, model, now or timezone.now())
        report.attach(_report_target(locked, message_seq))
        report.judge()
        report.save()
    counters_copy(locked, session)
    return UsageReportResult(
        usage=session_usage(locked),
        message_seq=report.target.seq if report.target else None,
        dropped_tool_use_ids=report.dropped,
        session=locked,
    )


def _report_target(locked: Session, message_seq: int | None) -> Message | None:
    """The assistant message a report belongs to: `message_seq`'s, or the newest message when it
    is an assistant's; None when the provider had seen everything stored."""
    if message_seq is None:
        if not locked.last_seq:
            return None
        newest = Message.objects.filter(session=locked, seq=locked.last_seq).first()
        return newest if newest is not None and newest.role == "assistant" else None
    target: Message | None = Message.objects.filter(session=locked, seq=message_seq).first()
    if target is None:
        raise ValidationError({"message_seq": [f"no message with seq {message_seq} in this session"]})
    if target.role != "assistant":
        problem = f"message {message_seq} is a {target.role} message; usage belongs to an assistant reply"
        raise ValidationError({"message_seq": [problem]})
    return target


@dataclass
class _Report:
    """One usage report being applied to a locked session."""

    locked: Session
    overlay: Overlay | None
    record: dict[str, Any]
    model: str | None
    now: datetime
    target: Message | None = None
    reported_at_seq: int = 0  # the last seq the provider had seen
    truncated: int = 0  # the served change of the reported reply (max_tokens hides its tool calls)
    dropped: list[str] = field(default_factory=list)
    verdict: calibration.Verdict | None = None  # None: a stale report, not judged
    # The meter's basis before this report: the last accepted report and the served estimate
    # it was compared with (what the plausibility check predicts from).
    last_report: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        locked = self.locked
        if locked.reported_input_tokens is not None:
            self.last_report = (locked.context_tokens - locked.tokens_since_report, locked.reported_input_tokens)

    def attach(self, target: Message | None) -> None:
        """Attach the report to its reply: a max_tokens reply is served smaller from now on."""
        locked = self.locked
        self.target = target
        self.reported_at_seq = locked.last_seq
        if target is None:
            return
        self.reported_at_seq = target.seq - 1
        before, _ = served_assistant(locked, target)
        if _stop_reason(target.provider_usage) != _stop_reason(self.record):
            # A reply cut off by max_tokens (or no longer) hides other tool_uses: the stored
            # tool-pair state is read again from the messages by the next append.
            locked.turn_state = None
        target.provider_usage = self.record
        after, self.dropped = served_assistant(locked, target)
        if after != before and _in_context(self.overlay, target.seq):
            locked.context_tokens = max(0, locked.context_tokens + after - before)
            self.truncated = after - before

    def judge(self) -> None:
        """Judge the report and, when plausible, make it the meter's basis and calibrate on it."""
        locked, prompt_tokens = self.locked, self.record["prompt_tokens"]
        # A report for a call made before the active compaction's snapshot describes the old,
        # larger context: keep it on the message, but don't calibrate the served context with it.
        stale = _reported_before(self.overlay, self.reported_at_seq)
        self.reported_at_seq = max(0, self.reported_at_seq)
        if not stale:
            # Our estimate of the context the provider saw = the served estimate minus what came
            # after the report point; the difference is what only the provider counts.
            since = _served_after(locked, self.overlay, self.reported_at_seq, self.target)
            seen = max(0, locked.context_tokens - since)
            self.verdict = verdict = _judge_report(
                locked, reported=prompt_tokens, served=seen, model=self.model, last_report=self.last_report
            )
            key = model_key(self.model or locked.model)
            if verdict.plausible:
                locked.reported_input_tokens = prompt_tokens
                locked.reported_at_seq = self.reported_at_seq
                locked.tokens_since_report = since
                locked.calibration_offset = prompt_tokens - seen
                locked.calibration = calibration.accepted(locked.calibration, verdict, model=key)
            else:
                # Stored and shown, but the meter keeps its basis: the last plausible report
                # plus what was appended since (or the calibrated estimate, or the estimate).
                locked.calibration = calibration.flagged(locked.calibration, verdict, model=key)
            self.record["implausible"] = verdict.flag()
        target = self.target  # set whenever `truncated` is (attach)
        if target is not None and not self.plausible and self.truncated and locked.reported_input_tokens is not None:
            # The meter keeps its basis report: the reply after it is served smaller now.
            if target.seq > (locked.reported_at_seq or 0):
                locked.tokens_since_report += self.truncated

    @property
    def plausible(self) -> bool:
        return self.verdict is not None and self.verdict.plausible

    def save(self) -> None:
        """Write the reply's usage, the session's basis and meter, and the history's sample."""
        locked, target = self.locked, self.target
        if target is not None:
            target.save(update_fields=["provider_usage"])
        locked.last_usage = {
            **self.record,
            "reported_at": self.now.isoformat(),
            "message_seq": target.seq if target else None,
            "calibrated": self.plausible,
        }
        update = list(REPORT_WRITES)
        if locked.turn_state is None:
            update.append("turn_state")
        if self.model and not locked.model:
            locked.model = self.model
            update.append("model")
        locked.last_activity_at = self.now
        locked.save(update_fields=[*update, *meter_set(locked)])
        usage_sample_record(
            session=locked,
            kind=UsageSample.Kind.REPORT,
            seq=self.reported_at_seq,
            tokens=_meter_at_report(self.verdict, fallback=locked.usage_tokens),
            estimated_tokens=self.verdict.served_tokens if self.verdict else locked.context_tokens,
            reported_tokens=self.record["prompt_tokens"],
            flagged=self.verdict is not None and not self.verdict.plausible,
            now=self.now,
        )


def _meter_at_report(verdict: calibration.Verdict | None, *, fallback: int) -> int:
    """The meter's figure for the context the reported call saw (UsageSample.tokens): the report
    itself when plausible, else what the meter predicted for it (the estimate before any
    calibration). A stale report (a call before the active compaction) keeps the meter's figure."""
    if verdict is None:
        return fallback
    if verdict.plausible:
        return verdict.reported_tokens
    return verdict.expected_tokens if verdict.expected_tokens is not None else verdict.served_tokens


def _judge_report(
    session: Session, *, reported: int, served: int, model: str | None, last_report: tuple[int, int] | None
) -> calibration.Verdict:
    """compaction.core.calibration.judge against the meter's prediction for this call. A report
    from another model than the one calibrated is judged against the served floor only (its
    tokenizer and hidden prompt are new: the calibration will start over)."""
    same_model = session.calibration_model_matches(model_key(model) if model else None)
    fit = session.calibration_fit if same_model else None
    expected = calibration.expected_report(fit, served=served, last_report=last_report if same_model else None)
    return calibration.judge(
        reported=reported,
        served=served,
        expected=expected,
        pending=(session.calibration or {}).get("pending") if same_model else None,
        ratio=fit.ratio if fit else 1.0,
        window=session.known_context_window(model),
    )


def _served_after(session: Session, overlay: Overlay | None, seq: int, target: Message | None) -> int:
    """Served tokens of the messages in context after `seq` (usually just the reported reply).

    Bounded by the messages since the report point; only runs when a report arrives.
    """
    first_kept = overlay.kept_from if overlay else 1
    total = 0
    tokenizer = session_tokenizer(session)
    for row_seq, content, tokens in Message.objects.filter(
        session=session, seq__gt=seq, seq__gte=first_kept
    ).values_list("seq", "content", "token_count"):
        if target is not None and row_seq == target.seq:
            tokens, _ = served_assistant(session, target)
        elif validation.has_blank_text(content):
            served = validation.without_blank_text(content)
            tokens = 0 if served is None else core_tokens.count_content(served, tokenizer)
        total += tokens
    return total


def _reported_before(overlay: Overlay | None, reported_at_seq: int) -> bool:
    """True when the provider saw fewer messages than the active compaction's snapshot held.

    Such a call was made before the compaction existed, so its prompt size is the old one.
    """
    if overlay is None:
        return False
    snapshot = overlay.snapshot_seq
    if snapshot is None:
        snapshot = overlay.kept_from - 1
    return reported_at_seq < snapshot


def _in_context(overlay: Overlay | None, seq: int) -> bool:
    return not (overlay and overlay.first_kept_seq and seq < overlay.first_kept_seq)


def _stop_reason(usage: Any) -> Any:
    return usage.get("stop_reason") if isinstance(usage, dict) else None
