"""What the served context is made of, like Claude Code's `/context` or Letta's context viewer.

The meter's figure (sessions.services.session_usage().tokens) is on the provider's scale:
the last reported prompt + our estimate of what came since, or fixed + ratio × estimate after
a compaction dropped the report (compaction.core.calibration). Compactor counts three parts
itself, with its own tokenizer: the stored system prompt, the active summary as served and the
kept messages as served (their sum is `estimated_tokens`). The breakdown puts those three on
the provider's scale by the calibrated ratio, and what the provider counts beyond them is the
agent's fixed part (tool definitions, the harness's own system prompt): meter − ratio × estimate,
which is exactly the last report minus ratio × what Compactor estimated the provider had seen.
That part is an inference from provider reports, never a count; before any report it is 0.

Then the window: free space up to the auto-compact trigger, and the reserve above it
(window − trigger). The used parts add up to the meter, and the meter + free + reserve to
the window (or to the meter, when it is past the window).

Pure: plain numbers in, dataclasses out (no Django, no clock).
"""

from __future__ import annotations

from dataclasses import dataclass

SYSTEM = "system"
FIXED = "fixed"
SUMMARY = "summary"
MESSAGES = "messages"
FREE = "free"
RESERVE = "reserve"
USED_KEYS = (SYSTEM, FIXED, SUMMARY, MESSAGES)


@dataclass(frozen=True)
class Segment:
    key: str  # one of SYSTEM, FIXED, SUMMARY, MESSAGES, FREE, RESERVE
    tokens: int  # on the meter's (provider's) scale
    estimated_tokens: int | None  # Compactor's own count of this part; None when not counted by us
    inferred: bool  # derived from provider reports rather than counted


@dataclass(frozen=True)
class Pruned:
    """Tool outputs the active prune overlay serves as placeholders: not in the context."""

    saved_tokens: int  # on the meter's scale
    saved_estimated_tokens: int  # stored − served tokens of the kept messages, Compactor's count


@dataclass(frozen=True)
class Breakdown:
    segments: tuple[Segment, ...]  # used parts first (SYSTEM, FIXED, SUMMARY, MESSAGES), then FREE, RESERVE
    used_tokens: int  # the meter's figure: the used segments add up to it
    estimated_tokens: int  # Compactor's count of system + summary + kept messages
    context_window: int
    trigger_tokens: int  # the auto-compact trigger, capped at the window
    scale: float  # provider tokens per estimated token applied to our parts (1.0 uncalibrated)
    calibrated: bool  # a provider report scaled our parts and inferred the fixed part
    pruned: Pruned | None

    @property
    def total_tokens(self) -> int:
        """What the segments add up to: the window, or the meter when it is past the window."""
        return max(self.context_window, self.used_tokens)

    @property
    def tokens_left_before_compact(self) -> int:
        """New tokens before the trigger is crossed (negative: past it)."""
        return self.trigger_tokens - self.used_tokens

    @property
    def percent_left_before_compact(self) -> float:
        """tokens_left_before_compact as a share of the window (the way /context says it)."""
        return 100.0 * self.tokens_left_before_compact / self.context_window if self.context_window else 0.0

    @property
    def over_window_tokens(self) -> int:
        return max(0, self.used_tokens - self.context_window)

    def segment(self, key: str) -> Segment:
        return next(s for s in self.segments if s.key == key)

    def percent(self, segment: Segment) -> float:
        """A segment's share of the window (of the meter when past the window): bar and table."""
        return 100.0 * segment.tokens / self.total_tokens if self.total_tokens else 0.0


def apportion(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights`, whole numbers that add up exactly (largest
    remainder). All-zero weights leave everything to the last part."""
    if not weights:
        return []
    weight_sum = sum(weights)
    if weight_sum <= 0:
        return [0] * (len(weights) - 1) + [total]
    exact = [total * w / weight_sum for w in weights]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _own_parts(*, estimated_tokens: int, system_tokens: int, summary_tokens: int) -> tuple[int, int, int]:
    """(system, summary, kept messages) in Compactor's count, adding up to `estimated_tokens`.

    Kept messages are what is left of the cached estimate; should the stored parts ever
    exceed it (rows written by hand, a counter behind), they are cut to fit rather than made
    to sum to more than the meter was built from."""
    estimated = max(0, estimated_tokens)
    system = min(max(0, system_tokens), estimated)
    summary = min(max(0, summary_tokens), estimated - system)
    return system, summary, estimated - system - summary


def context_breakdown(
    *,
    meter_tokens: int,
    estimated_tokens: int,
    system_tokens: int,
    summary_tokens: int,
    context_window: int,
    trigger_tokens: int,
    ratio: float | None,
    stored_kept_tokens: int | None = None,
) -> Breakdown:
    """The breakdown of a served context whose meter reads `meter_tokens`.

    `ratio`: the session's calibrated ratio (None before any provider report: our parts are
    the meter as they are). `stored_kept_tokens`: the stored (unpruned) size of the kept
    messages when a prune overlay is active, else None; the difference to what is served is
    what the prune saves.
    """
    used = max(0, meter_tokens)
    system, summary, kept = _own_parts(
        estimated_tokens=estimated_tokens, system_tokens=system_tokens, summary_tokens=summary_tokens
    )
    estimated = system + summary + kept
    calibrated = ratio is not None
    factor = ratio if ratio is not None else 1.0
    scaled_own = round(factor * estimated)
    # What the provider counts beyond our parts. Negative means we over-count (the provider's
    # tokenizer is leaner, or the meter was held up for another reason): no hidden part then,
    # and our parts are scaled down to the meter instead.
    fixed = max(0, used - scaled_own) if estimated else used
    own_total = used - fixed
    own = apportion(own_total, [system, summary, kept])
    scale = own_total / estimated if estimated else factor

    window = max(0, context_window)
    trigger = min(max(0, trigger_tokens), window)
    segments = (
        Segment(SYSTEM, own[0], system, inferred=False),
        Segment(FIXED, fixed, None, inferred=True),
        Segment(SUMMARY, own[1], summary, inferred=False),
        Segment(MESSAGES, own[2], kept, inferred=False),
        Segment(FREE, max(0, trigger - used), None, inferred=False),
        Segment(RESERVE, max(0, window - max(used, trigger)), None, inferred=False),
    )
    pruned = None
    if stored_kept_tokens is not None:
        saved = max(0, stored_kept_tokens - kept)
        pruned = Pruned(saved_tokens=round(scale * saved), saved_estimated_tokens=saved)
    return Breakdown(
        segments=segments,
        used_tokens=used,
        estimated_tokens=estimated,
        context_window=window,
        trigger_tokens=trigger,
        scale=round(scale, 4),
        calibrated=calibrated,
        pruned=pruned,
    )
