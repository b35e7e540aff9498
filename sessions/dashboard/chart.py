"""Server-rendered SVG chart of a session's context tokens over its life (zero JavaScript).

The series is derived from stored data only, all on the meter's scale (sessions.services
.session_usage): the usage history (UsageSample) gives the figure at each usage report — what
the provider reported when plausible, the meter's prediction when the report was flagged — and
each effective compaction drops the context from its `tokens_before` to its `tokens_after` (the
meter right after it) at the point it was activated; between those points our estimate (every
message's token count in seq order) draws the line, spread to meet them. The output is numbers
for `templates/dashboard/_chart.html` to draw.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .present import fmt_int, fmt_short

WIDTH = 800
HEIGHT = 220
PAD_LEFT = 92  # room for "1.25M" at the phone layout's larger axis text
PAD_RIGHT = 12
PAD_TOP = 18
PAD_BOTTOM = 34
MAX_POINTS = 600
# Height a line's label needs in SVG units: the phone layout draws axis text at 26 units (it is
# scaled down ~2.3x there), whose box (ascent and descent) is about 30 units tall.
LABEL_ROOM = 32


@dataclass(frozen=True)
class Drop:
    seq: int
    before: int
    after: int
    label: str


@dataclass
class Chart:
    points: str = ""  # SVG polyline "x,y x,y …"
    area: str = ""  # closed polygon for the fill
    drops: list[dict[str, Any]] = field(default_factory=list)
    ticks: list[dict[str, Any]] = field(default_factory=list)
    x_ticks: list[dict[str, Any]] = field(default_factory=list)
    trigger_y: float | None = None
    window_y: float | None = None
    trigger_label: str = ""
    window_label: str = ""
    trigger_label_y: float | None = None  # baselines, placed so no label sits on the other line
    window_label_y: float | None = None
    empty: bool = True
    width: int = WIDTH
    pad_left: int = PAD_LEFT
    height: int = HEIGHT
    description: str = ""
    last_tokens: int | None = None  # the line's last value (the gauge's figure when given)


def drop_seq(compaction: Any, messages: list[tuple[int, int, datetime]]) -> int:
    """The seq after which a compaction took effect.

    Imports mark where the agent itself compacted, right before `first_kept_seq`. Live
    compactions took effect when activated: after the last message stored before then,
    and never before the end of what they summarized.
    """
    floor = max(compaction.last_summarized_seq or 0, (compaction.first_kept_seq or 1) - 1)
    if compaction.reason == "import":
        return floor
    when = compaction.activated_at or compaction.finished_at
    if when is None:
        return floor
    last = floor
    for seq, _tokens, created_at in messages:
        if created_at <= when:
            last = max(last, seq)
    return last


def _measured_seq(compaction: Any, drop_at: int, measured_at: dict[Any, int]) -> int:
    """The last seq counted in `tokens_after`.

    The usage history records it (the compaction's "after" sample: the last seq stored at
    activation). Without one, live compactions measured it when activated, i.e. at the drop,
    and an import recorded after the whole transcript was stored also counted the messages
    from the cut to the end of the import (`snapshot_seq`).
    """
    recorded = measured_at.get(getattr(compaction, "pk", None))
    if recorded is not None:
        return max(drop_at, recorded)
    if compaction.reason != "import":
        return drop_at
    snapshot = compaction.snapshot_seq
    try:
        return max(drop_at, int(snapshot))
    except (TypeError, ValueError):
        return drop_at


def _blend(segment: list[list[int]], target: int) -> None:
    """Shift a segment so it ends at `target`, spreading the difference linearly over it.

    Message token counts are local estimates; the figures at the segment's ends (a
    compaction's `tokens_before`, the gauge's current usage) may be provider-calibrated.
    Spreading the gap keeps the line continuous and its ends equal to the figures shown
    elsewhere (tooltip, gauge, history) instead of drawing a jump where nothing happened.
    """
    if not segment:
        return
    delta = target - segment[-1][1]
    if delta == 0:
        return
    first, last = segment[0][0], segment[-1][0]
    count = len(segment)
    for index, point in enumerate(segment):
        if last > first:
            share = (point[0] - first) / (last - first)
        else:
            share = 1.0 if index == count - 1 else 0.0
        point[1] = max(0, round(point[1] + delta * share))


class _Series:
    """The line as it is drawn message by message: the finished points, the open segment since
    the last figure it met (a report or a drop), where it stands, and the drops."""

    def __init__(self, messages: list[tuple[int, int, datetime]], base_tokens: int, measured_at: dict[Any, int]):
        self.measured_at = measured_at
        # Cumulative message tokens by seq, to take out what an import's tokens_after already counts.
        self.seqs: list[int] = []
        self.cumulative: list[int] = []
        running = 0
        for seq, tokens, _created_at in messages:
            running += tokens
            self.seqs.append(seq)
            self.cumulative.append(running)
        self.at: dict[int, list[Any]] = {}  # seq → the compactions dropping the line there
        self.anchors: dict[int, int] = {}  # seq → the usage report's figure
        self.points: list[tuple[int, int]] = []
        self.drops: list[Drop] = []
        self.segment: list[list[int]] = [[0, base_tokens]]
        self.context = base_tokens

    def on_series(self, seq: int) -> int:
        # A long session's series stands at bucket ends (queries.message_token_series): a drop
        # or a report goes to the end of the bucket holding its seq.
        index = bisect_left(self.seqs, seq)
        return self.seqs[index] if seq and index < len(self.seqs) and self.seqs[index] != seq else seq

    def upto(self, seq: int) -> int:
        index = bisect_right(self.seqs, seq) - 1
        return self.cumulative[index] if index >= 0 else 0

    def add(self, seq: int, tokens: int) -> None:
        self.context += tokens
        self.segment.append([seq, self.context])
        self.apply(seq)

    def apply(self, seq: int) -> None:
        if seq in self.anchors:
            # A usage report: the line meets its figure, our estimate spread over the messages before.
            if len(self.segment) == 1:
                self.segment.append([seq, self.context])
            _blend(self.segment, self.anchors[seq])
            self.points.extend((s, t) for s, t in self.segment[:-1])
            self.segment = [self.segment[-1]]
            self.context = self.segment[-1][1]
        for compaction in self.at.get(seq, []):
            self._drop(compaction, seq)

    def _drop(self, compaction: Any, seq: int) -> None:
        if len(self.segment) == 1:
            self.segment.append([seq, self.context])  # keep the segment's start when two drops share a seq
        before = compaction.tokens_before if compaction.tokens_before is not None else self.context
        _blend(self.segment, before)
        self.points.extend((s, t) for s, t in self.segment)
        if compaction.tokens_after is None:
            after = before
        else:
            later = self.upto(_measured_seq(compaction, seq, self.measured_at)) - self.upto(seq)
            after = max(0, compaction.tokens_after - later)
        label = (
            f"{compaction.get_reason_display()}: {fmt_int(compaction.tokens_before)} → "
            f"{fmt_int(compaction.tokens_after)} tokens after message {seq}"
        )
        self.drops.append(Drop(seq=seq, before=before, after=after, label=label))
        self.segment = [[seq, after]]
        self.context = after

    def finish(self, current_tokens: int | None) -> tuple[list[tuple[int, int]], list[Drop]]:
        if current_tokens is not None:
            if len(self.segment) == 1 and self.points:
                self.segment.append([self.segment[0][0], self.segment[0][1]])
            _blend(self.segment, current_tokens)
        self.points.extend((s, t) for s, t in self.segment)
        return self.points, self.drops


def context_series(
    *,
    messages: list[tuple[int, int, datetime]],
    compactions: list[Any],
    base_tokens: int = 0,
    current_tokens: int | None = None,
    reports: Sequence[tuple[int, int]] = (),
    measured_at: dict[Any, int] | None = None,
) -> tuple[list[tuple[int, int]], list[Drop]]:
    """[(seq, context tokens)] including a vertical step at every compaction, and the drops.

    Each drop starts at the compaction's `tokens_before` and ends at its `tokens_after`
    less the messages after the drop that figure already counts (`measured_at`: compaction →
    the last seq its tokens_after counted); later messages add on top. The line passes through
    each usage report's figure (`reports`: (seq, tokens), the usage history), so its peak is the
    provider's; with `current_tokens` (the gauge's figure) it ends exactly there.
    """
    series = _Series(messages, base_tokens, measured_at or {})
    for compaction in compactions:
        series.at.setdefault(series.on_series(drop_seq(compaction, messages)), []).append(compaction)
    for seq, tokens in reports:
        series.anchors[series.on_series(seq)] = tokens  # the last report of a bucket stands for it
    series.apply(0)
    for seq, tokens, _created_at in messages:
        series.add(seq, tokens)
    return series.finish(current_tokens)


def _downsample(points: list[tuple[int, int]], keep: set[int]) -> list[tuple[int, int]]:
    """At most ~MAX_POINTS points; keeps every drop's step and each stride's peak."""
    if len(points) <= MAX_POINTS:
        return points
    stride = len(points) // MAX_POINTS + 1
    out: list[tuple[int, int]] = []
    for start in range(0, len(points), stride):
        chunk = range(start, min(start + stride, len(points)))
        forced = [i for i in chunk if i in keep]
        if forced:
            out.extend(points[i] for i in forced)
        else:
            out.append(max((points[i] for i in chunk), key=lambda p: p[1]))
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def nice_step(span: float, target_ticks: int = 4) -> float:
    """A round step (1, 2, 2.5 or 5 × 10^k) giving about `target_ticks` intervals over `span`."""
    if span <= 0:
        return 1
    raw = span / target_ticks
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def tick_label(value: float) -> str:
    """Axis figures: 25000 → "25k", 2500 → "2.5k", 1250000 → "1.25M" (never rounded to a wrong value)."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _x_tick_seqs(max_seq: int) -> list[int]:
    """#1, round seqs in between and the last seq; inner ticks too close to an end are dropped."""
    if max_seq <= 1:
        return [1]
    step = max(1, int(nice_step(max_seq - 1, 5)))
    gap = max(1, (max_seq - 1) * 0.12)
    inner = [s for s in range(step, max_seq, step) if s - 1 >= gap and max_seq - s >= gap]
    return [1, *inner, max_seq]


@dataclass(frozen=True)
class _Scale:
    """Seq and tokens to SVG coordinates: the x axis starts at message #1, the y axis at 0."""

    max_seq: int
    y_max: float

    def x(self, seq: int) -> float:
        # The system prompt alone (seq 0) sits on the left edge.
        if self.max_seq <= 1:
            return float(PAD_LEFT)
        plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
        return round(PAD_LEFT + plot_w * (max(seq, 1) - 1) / (self.max_seq - 1), 1)

    def y(self, tokens: float) -> float:
        plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
        return round(PAD_TOP + plot_h * (1 - tokens / self.y_max), 1)


def _drawn_points(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The series downsampled, every drop's vertical step kept."""
    keep: set[int] = set()
    for index in range(1, len(points)):
        if points[index][0] == points[index - 1][0]:
            keep.update({index - 1, index})
    return _downsample(points, keep)


def build_chart(
    *,
    messages: list[tuple[int, int, datetime]],
    compactions: list[Any],
    base_tokens: int,
    trigger_tokens: int,
    context_window: int,
    current_tokens: int | None = None,
    reports: Sequence[tuple[int, int]] = (),
    measured_at: dict[Any, int] | None = None,
) -> Chart:
    chart = Chart()
    if not messages:
        chart.description = "No messages yet."
        return chart
    points, drops = context_series(
        messages=messages,
        compactions=compactions,
        base_tokens=base_tokens,
        current_tokens=current_tokens,
        reports=reports,
        measured_at=measured_at,
    )
    points = _drawn_points(points)
    max_seq = max(points[-1][0], 1)
    peak = max(p[1] for p in points)
    step = nice_step(max(peak, trigger_tokens) * 1.05)
    scale = _Scale(max_seq, max(step, math.ceil(max(peak, trigger_tokens) * 1.05 / step) * step))
    x, y = scale.x, scale.y
    chart.empty = False
    chart.last_tokens = points[-1][1]
    chart.points = " ".join(f"{x(s)},{y(t)}" for s, t in points)
    chart.area = f"{x(points[0][0])},{y(0)} {chart.points} {x(points[-1][0])},{y(0)}"
    chart.drops = [{"x": x(d.seq), "y1": y(d.before), "y2": y(d.after), "label": d.label} for d in drops]
    _axes(chart, scale, step, trigger_tokens, context_window)
    chart.description = (
        f"Context tokens over {max_seq:,} messages, peak {peak:,}"
        + (f", now {current_tokens:,}" if current_tokens is not None else "")
        + f"; {len(drops)} compaction{'s' if len(drops) != 1 else ''} shown as drops."
    )
    return chart


def _axes(chart: Chart, scale: _Scale, step: float, trigger_tokens: int, context_window: int) -> None:
    """The y ticks, the x ticks, the trigger's line and (when it fits) the window's."""
    count = int(round(scale.y_max / step))
    chart.ticks = [{"y": scale.y(step * i), "label": tick_label(step * i)} for i in range(count + 1)]
    x_seqs = _x_tick_seqs(scale.max_seq)
    chart.x_ticks = [
        {
            "x": scale.x(seq),
            "label": f"#{seq}",
            "anchor": "start" if index == 0 else "end" if index == len(x_seqs) - 1 else "middle",
        }
        for index, seq in enumerate(x_seqs)
    ]
    chart.trigger_y = scale.y(trigger_tokens)
    chart.trigger_label = f"auto-compact {fmt_short(trigger_tokens)}"
    if context_window <= scale.y_max:
        chart.window_y = scale.y(context_window)
        chart.window_label = f"window {fmt_short(context_window)}"
    chart.window_label_y, chart.trigger_label_y = label_baselines(chart.window_y, chart.trigger_y)


def label_baselines(window_y: float | None, trigger_y: float) -> tuple[float | None, float]:
    """Baselines of the window label (drawn on the left) and the trigger label (on the right).

    Each goes above its line when there is room for it there (inside the chart, and clear of the
    other line), else below it; the window label, when there is room neither above its line nor
    between the two lines, goes under the trigger line. A text drawn with its baseline at b covers
    about b - LABEL_ROOM + 6 .. b + 6."""
    above, below = _label_above, _label_below
    if window_y is None:
        return None, above(trigger_y) if trigger_y >= LABEL_ROOM else below(trigger_y)
    gap = trigger_y - window_y  # the window is above the trigger (window > trigger)
    if window_y >= LABEL_ROOM:
        window_label = above(window_y)
    elif gap >= LABEL_ROOM + 8:
        window_label = below(window_y)
    else:
        window_label = below(trigger_y)
    trigger_label = above(trigger_y) if gap >= LABEL_ROOM + 2 else below(trigger_y)
    return window_label, trigger_label


def _label_above(line: float) -> float:
    return round(line - 6, 1)


def _label_below(line: float) -> float:
    return round(line + LABEL_ROOM, 1)
