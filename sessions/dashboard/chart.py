"""Server-rendered SVG chart of a session's context tokens over its life (zero JavaScript).

The series is derived from stored data only: every message's token count in seq order,
and each effective compaction dropping the context to its `tokens_after` at the point it
was activated. The output is numbers for `templates/dashboard/_chart.html` to draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .present import fmt_int, fmt_short

WIDTH = 800
HEIGHT = 220
PAD_LEFT = 56
PAD_RIGHT = 12
PAD_TOP = 12
PAD_BOTTOM = 28
MAX_POINTS = 600


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
    empty: bool = True
    width: int = WIDTH
    height: int = HEIGHT
    description: str = ""


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


def context_series(
    *, messages: list[tuple[int, int, datetime]], compactions: list[Any], base_tokens: int = 0
) -> tuple[list[tuple[int, int]], list[Drop]]:
    """[(seq, context tokens)] including a vertical step at every compaction, and the drops."""
    at: dict[int, list[Any]] = {}
    for compaction in compactions:
        at.setdefault(drop_seq(compaction, messages), []).append(compaction)
    points: list[tuple[int, int]] = [(0, base_tokens)]
    drops: list[Drop] = []
    context = base_tokens
    for seq, tokens, _created_at in messages:
        context += tokens
        points.append((seq, context))
        for compaction in at.get(seq, []):
            before = context
            context = compaction.tokens_after if compaction.tokens_after is not None else context
            points.append((seq, context))
            drops.append(
                Drop(
                    seq=seq,
                    before=before,
                    after=context,
                    label=f"{compaction.get_reason_display()}: {fmt_int(compaction.tokens_before)} → "
                    f"{fmt_int(compaction.tokens_after)} tokens after message {seq}",
                )
            )
    return points, drops


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


def build_chart(
    *,
    messages: list[tuple[int, int, datetime]],
    compactions: list[Any],
    base_tokens: int,
    trigger_tokens: int,
    context_window: int,
) -> Chart:
    chart = Chart()
    if not messages:
        chart.description = "No messages yet."
        return chart
    points, drops = context_series(messages=messages, compactions=compactions, base_tokens=base_tokens)
    keep: set[int] = set()
    for index in range(1, len(points)):
        if points[index][0] == points[index - 1][0]:
            keep.update({index - 1, index})
    points = _downsample(points, keep)

    max_seq = max(points[-1][0], 1)
    peak = max(p[1] for p in points)
    y_max = max(peak, trigger_tokens) * 1.08 or 1
    plot_w = WIDTH - PAD_LEFT - PAD_RIGHT
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM

    def x(seq: int) -> float:
        return round(PAD_LEFT + plot_w * seq / max_seq, 1)

    def y(tokens: float) -> float:
        return round(PAD_TOP + plot_h * (1 - tokens / y_max), 1)

    chart.empty = False
    chart.points = " ".join(f"{x(s)},{y(t)}" for s, t in points)
    base_y = y(0)
    chart.area = f"{x(points[0][0])},{base_y} {chart.points} {x(points[-1][0])},{base_y}"
    chart.drops = [{"x": x(d.seq), "y1": y(d.before), "y2": y(d.after), "label": d.label} for d in drops]
    chart.ticks = [{"y": y(y_max * i / 4), "label": fmt_short(int(y_max * i / 4))} for i in range(0, 5)]
    chart.x_ticks = [{"x": x(int(max_seq * i / 4)), "label": f"#{int(max_seq * i / 4)}"} for i in range(0, 5)]
    chart.trigger_y = y(trigger_tokens)
    chart.trigger_label = f"auto-compact {fmt_short(trigger_tokens)}"
    if context_window <= y_max:
        chart.window_y = y(context_window)
        chart.window_label = f"window {fmt_short(context_window)}"
    chart.description = (
        f"Context tokens over {max_seq:,} messages, peak {peak:,}; {len(drops)} compaction"
        f"{'s' if len(drops) != 1 else ''} shown as drops."
    )
    return chart
