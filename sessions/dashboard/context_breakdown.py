"""The session page's context breakdown (templates/dashboard/_context_breakdown.html): the
figures of sessions.breakdown in words, widths and the report-vs-estimate comparison.

No queries here: `context_breakdown_view` takes the SessionBreakdown the view read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compaction.core.config import usage_level
from sessions.breakdown import SegmentRow, SessionBreakdown, kept_trimmed_words, session_context_breakdown

from .present import fmt_ago


@dataclass(frozen=True)
class Figure:
    """One of the figures shown side by side: the provider's, Compactor's, the meter's."""

    label: str
    tokens: int | None
    detail: str
    when: datetime | None = None  # shown as a <time> (the last report's)
    when_words: str = ""


@dataclass(frozen=True)
class BreakdownView:
    used: list[SegmentRow]  # system, fixed, summary, messages: add up to the meter
    room: list[SegmentRow]  # free, reserve: with the used ones, add up to the window
    tokens: int
    percent: float
    context_window: int
    level: str  # ok / near / over, as the gauge colours it
    left_words: str
    bar_label: str
    pruned_words: str
    scale_words: str
    figures: list[Figure]
    warning: str

    @property
    def segments(self) -> list[SegmentRow]:
        return [*self.used, *self.room]


def context_breakdown_view(session, now: datetime | None = None) -> BreakdownView:
    return breakdown_view(session_context_breakdown(session=session), now=now)


def breakdown_view(sb: SessionBreakdown, now: datetime | None = None) -> BreakdownView:
    b = sb.breakdown
    rows = sb.segments
    used = [r for r in rows if r.key in ("system", "fixed", "summary", "messages")]
    room = [r for r in rows if r.key in ("free", "reserve")]
    return BreakdownView(
        used=used,
        room=room,
        tokens=b.used_tokens,
        percent=round(100.0 * b.used_tokens / b.context_window, 1) if b.context_window else 0.0,
        context_window=b.context_window,
        level=usage_level(tokens=b.used_tokens, trigger_tokens=b.trigger_tokens, context_window=b.context_window),
        left_words=left_words(sb),
        bar_label="; ".join(f"{r.label}: {r.tokens:,} tokens ({r.percent:.1f}%)" for r in rows if r.tokens),
        pruned_words=pruned_words(sb),
        scale_words=scale_words(sb),
        figures=figures(sb, now=now),
        warning=sb.warning,
    )


def left_words(sb: SessionBreakdown) -> str:
    """ "41,230 tokens left before auto-compact (20.6 % of the window)", the /context way."""
    b = sb.breakdown
    left, percent = b.tokens_left_before_compact, b.percent_left_before_compact
    what = "auto-compact" if sb.auto_compact else f"the trigger at {b.trigger_tokens:,}"
    off = "" if sb.auto_compact else "; auto-compact is off"
    if left > 0:
        return f"{left:,} tokens left before {what} ({percent:.1f} % of the window){off}"
    return f"No room left before {what}: {-left:,} tokens past it ({-percent:.1f} % of the window){off}"


def pruned_words(sb: SessionBreakdown) -> str:
    pruned = sb.breakdown.pruned
    if pruned is None:
        return ""
    saved = f"≈{pruned.saved_tokens:,} tokens saved, not in the context (stored − served size of the kept messages)."
    if sb.kept_trimmed and not sb.prune_before_seq:
        return f"Kept messages served lean: {kept_trimmed_words(sb.kept_trimmed)}; {saved}"
    count = sb.tool_results_pruned
    what = f"{count:,} tool output{'s' if count != 1 else ''}" if count is not None else "Tool outputs"
    if not pruned.saved_tokens:
        return f"A prune boundary at #{sb.prune_before_seq:,} is active; no kept tool output is pruned by it."
    return f"{what} before #{sb.prune_before_seq:,} served as one-line placeholders: {saved}"


def scale_words(sb: SessionBreakdown) -> str:
    b = sb.breakdown
    if not b.calibrated:
        return "Compactor's own counts: no provider report yet to put them on the provider's scale."
    reports = f"{sb.reports} report{'s' if sb.reports != 1 else ''}"
    return (
        f"System prompt, summary and messages are Compactor's counts ({sb.usage.tokenizer}) "
        f"× {b.scale:.3f}, the provider's tokens per Compactor token (calibrated on {reports}); "
        f"the fixed part is inferred from provider reports."
    )


def figures(sb: SessionBreakdown, now: datetime | None = None) -> list[Figure]:
    """The provider's last report, Compactor's estimate and the meter, side by side."""
    report = sb.last_report
    if report is None:
        reported = Figure("Reported by the provider", None, "No usage report yet")
    else:
        parts = f"input {report.input_tokens:,} + cache read {report.cache_read_input_tokens:,} + cache write {report.cache_creation_input_tokens:,}"
        where = f" with reply #{report.message_seq:,}" if report.message_seq else ""
        if report.current:
            state = "The meter stands on it"
        elif not report.calibrated:
            state = "For a call made before the active compaction: not used"
        else:
            state = "Describes the context before the last compaction: no longer served"
        reported = Figure(
            "Reported by the provider",
            report.prompt_tokens,
            f"{parts}{where}. {state}.",
            when=report.reported_at,
            when_words=fmt_ago(report.reported_at, now) if report.reported_at else "",
        )
    calibrated = sb.calibrated_estimate_tokens
    estimate_detail = f"Compactor's own count ({sb.usage.tokenizer}) of system prompt, summary and kept messages"
    if calibrated is not None:
        estimate_detail += f"; on the provider's scale (fixed + ratio × count) ≈ {calibrated:,}"
    estimated = Figure("Estimated by Compactor", sb.breakdown.estimated_tokens, estimate_detail + ".")
    meter = Figure("Meter (what auto-compact compares)", sb.breakdown.used_tokens, _meter_detail(sb))
    return [reported, estimated, meter]


def _meter_detail(sb: SessionBreakdown) -> str:
    source = sb.usage.source
    if source == "provider+estimate":
        trailing = sb.usage.trailing_tokens
        return f"The last report + {trailing:,} estimated tokens since (× the calibrated ratio)."
    if source == "estimate+calibration":
        return "No report since the last compaction: fixed + ratio × Compactor's count."
    return "Compactor's count: no provider report yet."
