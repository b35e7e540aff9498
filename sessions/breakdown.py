"""The breakdown of a session's served context, for the session page and the API.

Reads the session row, its active compaction (already joined by the callers' lookups) and, only
while a prune overlay or a kept plan trims tool output, one aggregate over the kept messages'
stored sizes; never the messages themselves. The arithmetic is compaction.core.breakdown's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Sum
from django.utils.dateparse import parse_datetime

from compaction.core import breakdown as core
from compaction.core.calibration import calibrated_tokens
from compaction.selectors import active_overlay, active_tool_results_pruned

from . import services
from .models import Message, Session


@dataclass(frozen=True)
class LastReport:
    """The provider's last usage report (Session.last_usage), as recorded."""

    prompt_tokens: int  # input + cache read + cache write
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    reported_at: datetime | None
    message_seq: int | None  # the assistant reply it was reported with
    # The meter still stands on this report (no compaction since it): the meter is this
    # figure + the estimate of what came after. Else it describes a context no longer served.
    current: bool
    calibrated: bool  # False: it was for a call made before the active compaction (stale)


@dataclass(frozen=True)
class SessionBreakdown:
    breakdown: core.Breakdown
    usage: services.Usage  # sessions.services.session_usage(session)
    auto_compact: bool
    compacted: bool  # a compaction is active (a summary, a prune, or both)
    first_kept_seq: int
    last_seq: int
    summary_strategy: str
    prune_before_seq: int | None
    tool_results_pruned: int | None  # known for a prune-only compaction and a kept plan
    # The kept plan's trimmed tool results by rule (compaction.core.kept: same, superseded,
    # long, large, old), only the rules that trimmed any; {} when the kept messages are served whole.
    kept_trimmed: dict[str, int]
    last_report: LastReport | None
    warning: str  # a plausibility warning about the last report, "" when none

    @property
    def kept_messages(self) -> int:
        return max(0, self.last_seq - self.first_kept_seq + 1)

    @property
    def reports(self) -> int:
        return self.usage.calibration.reports if self.usage.calibration else 0

    @property
    def calibrated_estimate_tokens(self) -> int | None:
        """Compactor's count on the provider's scale (fixed + ratio × estimate): the figure to
        hold against a report; None before any report."""
        cal = self.usage.calibration
        return calibrated_tokens(cal, self.breakdown.estimated_tokens) if cal else None

    @property
    def segments(self) -> list[SegmentRow]:
        return [segment_row(self, s) for s in self.breakdown.segments]


@dataclass(frozen=True)
class SegmentRow:
    """One part as the page and the API show it: what it is, how big, how we know."""

    key: str
    label: str
    tokens: int
    estimated_tokens: int | None
    percent: float  # of the window (of the meter when past the window)
    inferred: bool
    note: str


LABELS = {
    core.SYSTEM: "System prompt",
    core.FIXED: "Agent's fixed part (tools, harness prompt)",
    core.SUMMARY: "Summary",
    core.MESSAGES: "Kept messages",
    core.FREE: "Free space",
    core.RESERVE: "Reserve above the auto-compact trigger",
}


def segment_row(sb: SessionBreakdown, segment: core.Segment) -> SegmentRow:
    return SegmentRow(
        key=segment.key,
        label=LABELS[segment.key],
        tokens=segment.tokens,
        estimated_tokens=segment.estimated_tokens,
        percent=round(sb.breakdown.percent(segment), 2),
        inferred=segment.inferred and segment.tokens > 0,
        note=_NOTES[segment.key](sb, segment),
    )


def _system_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    if not segment.estimated_tokens:
        return "None stored with the session (an agent's own prompt counts in the fixed part)"
    return f"Stored with the session: {segment.estimated_tokens:,} tokens by Compactor's count"


def _fixed_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    b = sb.breakdown
    if b.calibrated and segment.tokens:
        reports = f"{sb.reports} provider report{'s' if sb.reports != 1 else ''}"
        return (
            f"Inferred from {reports}: what the provider counts beyond Compactor's own count "
            f"(tool definitions, the agent's own prompt), never sent to Compactor"
        )
    if b.calibrated:
        return "None inferred: the provider counts no more than Compactor does"
    if segment.tokens:
        return "Not attributed: the meter is above Compactor's count without any provider report"
    return "Not known until the agent reports the provider's usage (POST …/usage/)"


def _summary_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    if not segment.estimated_tokens:
        if sb.prune_before_seq:
            return "No summary: the active compaction only pruned tool output"
        return "No summary served" if sb.compacted else "No summary: nothing compacted yet"
    # A summary stands for every message before the kept ones (later summaries merge earlier ones).
    covered = f"Stands for messages #1–#{sb.first_kept_seq - 1:,}" if sb.first_kept_seq > 1 else "Summary"
    if sb.summary_strategy and sb.summary_strategy != "prune":
        return f"{covered} (summarized by {sb.summary_strategy})"
    return f"{covered} (kept from the compaction before the prune)"


def _messages_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    if not sb.kept_messages:
        return "No messages yet"
    span = f"#{sb.first_kept_seq:,}" + (f"–#{sb.last_seq:,}" if sb.last_seq > sb.first_kept_seq else "")
    text = f"{span}: {sb.kept_messages:,} message{'s' if sb.kept_messages != 1 else ''}"
    if sb.kept_trimmed:
        text += f", {kept_trimmed_words(sb.kept_trimmed)}"
    if sb.prune_before_seq:
        text += f", tool outputs before #{sb.prune_before_seq:,} served as placeholders"
    return text


KEPT_WORDS = {  # rule → (one, several, what is done to them)
    "same": ("repeated output", "repeated outputs", "served as a pointer to the copy kept"),
    "superseded": ("out-of-date file read", "out-of-date file reads", "trimmed"),
    "long": ("long search or listing", "long searches or listings", "trimmed"),
    "large": ("output over 8,000 tokens", "outputs over 8,000 tokens", "trimmed"),
    "old": ("older output", "older outputs", "trimmed"),
}


def kept_trimmed_words(counts: Mapping[str, int]) -> str:
    """ "3 repeated outputs served as a pointer to the copy kept, 2 out-of-date file reads
    trimmed" — what the kept plan does to the kept messages' tool results."""
    parts = []
    for kind, (one, several, how) in KEPT_WORDS.items():
        n = counts.get(kind, 0)
        if n:
            parts.append(f"{n:,} {one if n == 1 else several} {how}")
    return ", ".join(parts)


def _free_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    trigger = sb.breakdown.trigger_tokens
    if not sb.auto_compact:
        return f"Up to the trigger at {trigger:,} (auto-compact is off)"
    return f"Up to the auto-compact trigger at {trigger:,}" if segment.tokens else "None: the trigger is reached"


def _reserve_note(sb: SessionBreakdown, segment: core.Segment) -> str:
    b = sb.breakdown
    text = f"Window − trigger ({b.context_window:,} − {b.trigger_tokens:,}): room for the reply and the compaction"
    if b.over_window_tokens:
        return f"None left: the context is {b.over_window_tokens:,} tokens past the window"
    if b.used_tokens > b.trigger_tokens:
        return text + "; partly used, the context is past the trigger"
    return text


_NOTES = {
    core.SYSTEM: _system_note,
    core.FIXED: _fixed_note,
    core.SUMMARY: _summary_note,
    core.MESSAGES: _messages_note,
    core.FREE: _free_note,
    core.RESERVE: _reserve_note,
}


def session_context_breakdown(*, session: Session) -> SessionBreakdown:
    """What the meter's figure is made of, from the row and the active compaction (its kept
    plan is parsed once per compaction)."""
    usage = services.session_usage(session)
    active = active_overlay(session)
    first_kept = active.kept_from if active else 1
    prune_before = (active.prune_before_seq if active else None) or None
    kept_trimmed = {kind: n for kind, n in services.overlay_kept_plan(active).counts().items() if n}
    stored_kept = None
    if (prune_before and prune_before > first_kept) or kept_trimmed:
        # The only read beyond the row: the kept messages' stored sizes (the index on
        # (session, seq) serves the range); served − stored is what the prune saves.
        stored_kept = (
            Message.objects.filter(session=session, seq__gte=first_kept).aggregate(total=Sum("token_count"))["total"]
            or 0
        )
    calibration = usage.calibration
    result = core.context_breakdown(
        meter_tokens=usage.tokens,
        estimated_tokens=usage.estimated_tokens,
        system_tokens=session.system_prompt_tokens,
        summary_tokens=services.served_summary_tokens(session),
        context_window=usage.context_window,
        trigger_tokens=usage.trigger_tokens,
        ratio=calibration.ratio if calibration else None,
        stored_kept_tokens=stored_kept,
    )
    return SessionBreakdown(
        breakdown=result,
        usage=usage,
        auto_compact=usage.auto_compact,
        compacted=active is not None,
        first_kept_seq=first_kept,
        last_seq=session.last_seq,
        summary_strategy=(active.strategy if active else "") or "",
        prune_before_seq=prune_before,
        tool_results_pruned=(
            active_tool_results_pruned(session) if prune_before or not kept_trimmed else sum(kept_trimmed.values())
        ),
        kept_trimmed=kept_trimmed,
        last_report=last_report(session),
        warning=usage_warning(usage),
    )


def last_report(session: Session) -> LastReport | None:
    record = session.last_usage
    if not isinstance(record, Mapping) or record.get("prompt_tokens") is None:
        return None
    when = record.get("reported_at")
    return LastReport(
        prompt_tokens=int(record["prompt_tokens"]),
        input_tokens=int(record.get("input_tokens") or 0),
        cache_read_input_tokens=int(record.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(record.get("cache_creation_input_tokens") or 0),
        reported_at=parse_datetime(when) if isinstance(when, str) else None,
        message_seq=record.get("message_seq"),
        current=session.reported_input_tokens is not None,
        calibrated=bool(record.get("calibrated", True)),
    )


def usage_warning(usage: services.Usage) -> str:
    """The plausibility warning about the last report (its `implausible` verdict, see
    compaction.core.calibration.judge), "" when it passed."""
    verdict = usage.implausible
    if not verdict:
        return ""
    return str(verdict.get("reason") or "The provider's last usage report looks implausible.")
