"""compaction.core.breakdown: the parts add up to the meter and the window, whatever the inputs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.breakdown import (
    FIXED,
    FREE,
    MESSAGES,
    RESERVE,
    SUMMARY,
    SYSTEM,
    USED_KEYS,
    apportion,
    context_breakdown,
)

tokens = st.integers(min_value=0, max_value=2_000_000)
ratios = st.none() | st.floats(min_value=0.8, max_value=1.8)


@st.composite
def inputs(draw):
    window = draw(st.integers(min_value=1_000, max_value=2_000_000))
    return {
        "meter_tokens": draw(tokens),
        "estimated_tokens": draw(tokens),
        "system_tokens": draw(st.integers(min_value=0, max_value=50_000)),
        "summary_tokens": draw(st.integers(min_value=0, max_value=50_000)),
        "context_window": window,
        "trigger_tokens": draw(st.integers(min_value=0, max_value=window)),
        "ratio": draw(ratios),
        "stored_kept_tokens": draw(st.none() | tokens),
    }


@settings(max_examples=500, deadline=None)
@given(inputs())
def test_used_parts_add_up_to_the_meter_and_everything_to_the_window(kwargs):
    b = context_breakdown(**kwargs)
    used = sum(s.tokens for s in b.segments if s.key in USED_KEYS)
    assert used == b.used_tokens == kwargs["meter_tokens"]
    assert sum(s.tokens for s in b.segments) == max(kwargs["context_window"], kwargs["meter_tokens"])
    assert all(s.tokens >= 0 for s in b.segments)
    assert [s.key for s in b.segments] == [SYSTEM, FIXED, SUMMARY, MESSAGES, FREE, RESERVE]
    assert b.tokens_left_before_compact == kwargs["trigger_tokens"] - kwargs["meter_tokens"]
    assert (b.segment(FREE).tokens > 0) == (b.tokens_left_before_compact > 0)
    assert b.over_window_tokens == max(0, kwargs["meter_tokens"] - kwargs["context_window"])
    assert abs(sum(b.percent(s) for s in b.segments) - 100.0) < 1e-6
    if b.pruned is not None:
        assert b.pruned.saved_tokens >= 0 and b.pruned.saved_estimated_tokens >= 0
    # Our own parts are never larger than what Compactor counted, scaled by at most the ratio.
    own = [b.segment(k) for k in (SYSTEM, SUMMARY, MESSAGES)]
    assert sum(s.estimated_tokens for s in own) == b.estimated_tokens <= kwargs["estimated_tokens"]


@settings(max_examples=300, deadline=None)
@given(
    seen=st.integers(min_value=1, max_value=500_000),
    since=st.integers(min_value=0, max_value=50_000),
    hidden=st.integers(min_value=0, max_value=60_000),
    ratio=st.floats(min_value=0.8, max_value=1.8),
    system=st.integers(min_value=0, max_value=5_000),
)
def test_the_fixed_part_is_what_the_provider_counted_beyond_our_estimate(seen, since, hidden, ratio, system):
    """A report of hidden + ratio × seen, then `since` estimated tokens appended: the meter is the
    hybrid (report + ratio × since), and the fixed part is the hidden part again (± rounding)."""
    reported = hidden + round(ratio * seen)
    meter = reported + round(ratio * since)
    estimated = seen + since + system
    b = context_breakdown(
        meter_tokens=meter + round(ratio * system),
        estimated_tokens=estimated,
        system_tokens=system,
        summary_tokens=0,
        context_window=2_000_000,
        trigger_tokens=1_500_000,
        ratio=ratio,
    )
    assert abs(b.segment(FIXED).tokens - hidden) <= 2
    assert b.calibrated and b.segment(FIXED).inferred
    own = sum(b.segment(k).tokens for k in (SYSTEM, SUMMARY, MESSAGES))
    assert abs(own - ratio * estimated) <= 3


def on_200k(meter: int, estimated: int | None = None, **kwargs):
    """A breakdown on a 200k window with the default trigger (reserve 16,384), nothing but the meter
    and the estimate given unless asked."""
    defaults = {"system_tokens": 0, "summary_tokens": 0, "trigger_tokens": 183_616, "ratio": None}
    return context_breakdown(
        meter_tokens=meter,
        estimated_tokens=meter if estimated is None else estimated,
        context_window=200_000,
        **{**defaults, **kwargs},
    )


@given(meter=tokens, system=st.integers(0, 10_000), summary=st.integers(0, 10_000))
def test_without_a_report_the_parts_are_our_own_counts(meter, system, summary):
    estimated = max(meter, system + summary)
    b = on_200k(estimated, system_tokens=system, summary_tokens=summary)
    assert b.segment(FIXED).tokens == 0 and not b.calibrated and b.scale == 1.0
    assert (b.segment(SYSTEM).tokens, b.segment(SUMMARY).tokens) == (system, summary)
    assert b.segment(MESSAGES).tokens == estimated - system - summary


def test_a_leaner_provider_scales_our_parts_down_and_hides_nothing():
    b = on_200k(90_000, 100_000, system_tokens=10_000, summary_tokens=20_000, trigger_tokens=160_000, ratio=1.0)
    assert b.segment(FIXED).tokens == 0
    assert [b.segment(k).tokens for k in (SYSTEM, SUMMARY, MESSAGES)] == [9_000, 18_000, 63_000]
    assert b.scale == 0.9


def test_free_space_and_reserve_split_the_rest_of_the_window_at_the_trigger():
    b = on_200k(120_000, 100_000, ratio=1.2, stored_kept_tokens=130_000)
    assert b.segment(FREE).tokens == 63_616 and b.segment(RESERVE).tokens == 16_384
    assert b.tokens_left_before_compact == 63_616 and round(b.percent_left_before_compact, 1) == 31.8
    # 30,000 stored tokens are served as placeholders; on the provider's scale ×1.2.
    assert b.pruned.saved_estimated_tokens == 30_000 and b.pruned.saved_tokens == 36_000


def test_past_the_trigger_the_meter_eats_into_the_reserve_and_past_the_window_it_is_all_used():
    over_trigger = on_200k(190_000)
    assert over_trigger.segment(FREE).tokens == 0 and over_trigger.segment(RESERVE).tokens == 10_000
    assert over_trigger.tokens_left_before_compact == -6_384
    past_window = on_200k(210_000)
    assert past_window.segment(RESERVE).tokens == 0 and past_window.over_window_tokens == 10_000
    assert past_window.total_tokens == 210_000


@given(total=st.integers(0, 10**7), weights=st.lists(st.integers(0, 10**6), min_size=1, max_size=6))
def test_apportion_adds_up_and_stays_within_one_of_the_exact_share(total, weights):
    parts = apportion(total, weights)
    assert sum(parts) == total and all(p >= 0 for p in parts)
    if sum(weights):
        for part, weight in zip(parts, weights, strict=True):
            assert abs(part - total * weight / sum(weights)) < 1
