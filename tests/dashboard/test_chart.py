"""The context chart's series, derived from stored message tokens and compactions (no DB)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from sessions.dashboard.chart import MAX_POINTS, build_chart, context_series, drop_seq
from sessions.dashboard.present import Usage, fmt_ago, fmt_duration, fmt_short

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class FakeCompaction:
    reason: str
    first_kept_seq: int | None
    last_summarized_seq: int | None
    tokens_before: int | None
    tokens_after: int | None
    activated_at: datetime | None = None
    finished_at: datetime | None = None
    snapshot_seq: int | None = None

    def get_reason_display(self) -> str:
        return self.reason


def msgs(n: int, tokens: int = 100) -> list[tuple[int, int, datetime]]:
    return [(seq, tokens, T0 + timedelta(seconds=seq)) for seq in range(1, n + 1)]


def test_series_accumulates_and_drops_at_activation():
    messages = msgs(10)
    c = FakeCompaction("threshold", 6, 5, 700, 350, activated_at=T0 + timedelta(seconds=7.5))
    assert drop_seq(c, messages) == 7  # after the last message stored before activation
    points, drops = context_series(messages=messages, compactions=[c], base_tokens=50)
    # The drop starts at the compaction's (calibrated) tokens_before, not the estimate sum (750).
    assert points[0] == (0, 50) and points[7] == (7, 700)
    assert points[8] == (7, 350)  # vertical step
    assert points[-1] == (10, 650)  # later messages add on top of tokens_after
    assert drops[0].before == 700 and drops[0].after == 350
    assert "700 → 350 tokens after message 7" in drops[0].label


def test_import_drops_right_before_first_kept():
    messages = msgs(10)
    c = FakeCompaction("import", 8, 7, 900, 120, activated_at=T0 + timedelta(days=1))
    assert drop_seq(c, messages) == 7


def test_chart_downsamples_but_keeps_every_drop():
    messages = msgs(5000, tokens=40)
    cs = [
        FakeCompaction("threshold", k, k - 1, None, 500, activated_at=T0 + timedelta(seconds=k + 0.5))
        for k in (1000, 2500, 4000)
    ]
    chart = build_chart(messages=messages, compactions=cs, base_tokens=0, trigger_tokens=30_000, context_window=200_000)
    assert len(chart.points.split()) <= MAX_POINTS + 20
    assert len(chart.drops) == 3 and all(d["y2"] > d["y1"] for d in chart.drops)  # SVG y grows downwards
    assert chart.window_y is None  # 200k is far above the data: not drawn, the data stays readable
    assert "3 compactions" in chart.description


def test_empty_session_has_no_chart():
    chart = build_chart(messages=[], compactions=[], base_tokens=0, trigger_tokens=1, context_window=2)
    assert chart.empty and chart.description == "No messages yet."


def test_usage_levels_and_words():
    assert Usage(143_201, 200_000, 183_616).words == "143,201 / 200,000 tokens (72%) · auto-compact at 183,616"
    assert Usage(100, 200_000, 183_616).level == "ok"
    assert Usage(170_000, 200_000, 183_616).level == "near"
    assert Usage(183_616, 200_000, 183_616).level == "over"
    assert Usage(400_000, 200_000, 183_616).bar_percent == 100.0


def test_formatters():
    assert fmt_short(167_094) == "167k" and fmt_short(21_380) == "21k" and fmt_short(1_048_576) == "1.05M"
    assert fmt_duration(3200) == "3.2 s" and fmt_duration(64) == "64 ms" and fmt_duration(125_000) == "2 min 5 s"
    assert fmt_ago(T0, T0 + timedelta(minutes=2)) == "2 min ago"
    assert fmt_ago(T0, T0 + timedelta(days=3)) == "3 days ago"


def test_import_after_excludes_the_kept_messages_it_already_counts():
    # Imported: 10 messages of 100 stored, then the agent's compaction (cut before #8) recorded
    # with its provider figure 1,500 and tokens_after measured over the whole import (#1–#10).
    messages = msgs(10)
    c = FakeCompaction("import", 8, 7, 1500, 500, activated_at=T0 + timedelta(days=1), snapshot_seq=10)
    points, drops = context_series(messages=messages, compactions=[c], base_tokens=0, current_tokens=500)
    assert drops[0].seq == 7 and drops[0].before == 1500
    assert drops[0].after == 200  # 500 less #8–#10 (300), which are drawn on top
    assert points[-1] == (10, 500)  # equals the gauge, not 500 + 300


def test_line_ends_at_the_current_usage_and_ticks_are_round():
    messages = msgs(30, tokens=1100)
    chart = build_chart(
        messages=messages, compactions=[], base_tokens=0, trigger_tokens=60_000, context_window=64_000,
        current_tokens=35_698,
    )  # fmt: skip
    last_x, last_y = chart.points.split()[-1].split(",")
    assert chart.x_ticks[0]["label"] == "#1" and chart.x_ticks[-1]["label"] == "#30"
    assert chart.x_ticks[-1]["anchor"] == "end" and chart.x_ticks[0]["anchor"] == "start"
    labels = [t["label"] for t in chart.ticks]
    assert labels == ["0", "20k", "40k", "60k", "80k"]
    assert "now 35,698" in chart.description


def test_nice_steps_and_labels():
    from sessions.dashboard.chart import nice_step, tick_label

    assert nice_step(67_000) == 20_000 and nice_step(9_000) == 2500 and nice_step(420_000) == 200_000
    assert tick_label(2500) == "2.5k" and tick_label(1_250_000) == "1.25M" and tick_label(0) == "0"


def _covers(baseline: float, y: float) -> bool:
    """Does a label drawn at `baseline` (as tall as the phone layout draws it) cover height y?"""
    from sessions.dashboard.chart import LABEL_ROOM

    return baseline - LABEL_ROOM + 6 <= y <= baseline + 6


@pytest.mark.parametrize("trigger", [120_000, 160_000, 184_000, 196_000])
def test_the_window_and_trigger_labels_never_sit_on_the_other_line(trigger):
    from sessions.dashboard.chart import build_chart

    messages = [(i, 500, None) for i in range(1, 400)]  # peaks near the window: both lines drawn
    chart = build_chart(
        messages=messages, compactions=[], base_tokens=0, trigger_tokens=trigger, context_window=200_000
    )
    assert chart.window_y is not None
    assert not _covers(chart.window_label_y, chart.trigger_y)
    assert not _covers(chart.trigger_label_y, chart.window_y)
    assert chart.window_label_y - 22 >= 0 and chart.trigger_label_y <= chart.height  # inside the drawing
