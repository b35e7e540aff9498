"""The plausibility rule for usage reports (compaction.core.calibration.judge) and the served floor."""

from __future__ import annotations

from compaction.core import calibration
from compaction.core.calibration import (
    ABOVE_EXPECTED,
    BELOW_EXPECTED,
    BELOW_SERVED,
    calibrated_tokens,
    expected_report,
    judge,
    served_floor,
)


def test_a_report_below_what_was_served_is_flagged_with_a_reason():
    # A client forwarding input_tokens only: 3 uncached tokens of a 120k context.
    verdict = judge(reported=3, served=120_000, expected=None)
    assert not verdict.plausible and verdict.code == BELOW_SERVED
    flag = verdict.flag()
    assert flag["served_tokens"] == 120_000 and flag["reported_tokens"] == 3
    assert "cache_read_input_tokens" in flag["reason"] and "0%" in flag["reason"]


def test_a_first_report_far_above_the_estimate_is_plausible():
    # Claude Code's first call: ~26k of tools and system prompt we never see, on 400 served tokens.
    assert judge(reported=26_300, served=400, expected=None).plausible
    assert judge(reported=int(0.9 * 50_000), served=50_000, expected=None).plausible


def test_once_calibrated_a_report_far_from_the_prediction_is_flagged_until_confirmed():
    cal = {"fixed": 26_000, "ratio": 1.3, "pairs": [[10_000, 39_000], [40_000, 78_000]]}
    expected = expected_report(cal, served=50_000, last_report=(40_000, 78_000))
    assert expected == 78_000 + 13_000
    assert judge(reported=92_000, served=50_000, expected=expected).plausible
    high = judge(reported=160_000, served=50_000, expected=expected)
    assert high.code == ABOVE_EXPECTED and "next report" in high.reason
    low = judge(reported=60_000, served=50_000, expected=expected)
    assert low.code == BELOW_EXPECTED
    # The client really added 70k of tools: the next report agrees with the flagged one.
    pending = calibration.flagged(cal, high, model="claude-sonnet-4-5")["pending"]
    confirmed = judge(reported=160_000 + 1_300, served=51_000, expected=expected + 1_300, pending=pending, ratio=1.3)
    assert confirmed.plausible and confirmed.confirmed
    restarted = calibration.accepted({**cal, "pending": pending}, confirmed, model="claude-sonnet-4-5")
    assert restarted["pairs"] == [[50_000, 160_000], [51_000, 161_300]] and "pending" not in restarted


def test_a_flag_below_the_served_floor_is_never_pending():
    state = calibration.flagged(None, judge(reported=3, served=120_000, expected=None), model="m")
    assert state["pairs"] == [] and "pending" not in state and state["last_flag"]["code"] == BELOW_SERVED
    assert calibration.accepted(state, judge(reported=150_000, served=120_000, expected=None), model="m")["pairs"]


def test_the_meter_never_shows_less_than_the_served_floor():
    assert served_floor(24_301) == 21_871
    # The additive offset left by the README replay (-67,588) took 24,602 served tokens to 0.
    assert calibrated_tokens({"fixed": -67_588, "ratio": 1.0}, 24_602) == served_floor(24_602)
    hybrid = calibration.usage_estimate(estimated_tokens=144_998, reported_prompt_tokens=1_105, tokens_since_report=0)
    assert hybrid.tokens == served_floor(144_998)


def test_a_report_above_the_window_is_never_plausible_even_first_or_confirmed():
    # A client adding the cache figures twice: far above a 200k window, with nothing to predict from.
    first = judge(reported=443_000_000, served=60_000, expected=None, window=200_000)
    assert first.code == calibration.ABOVE_WINDOW
    assert "200,000-token context window" in first.reason and "context_window" in first.reason
    # The previous flagged report agreeing with it does not make it a real change.
    again = judge(reported=210_000, served=60_000, expected=90_000, pending=[60_000, 210_000], window=200_000)
    assert again.code == calibration.ABOVE_WINDOW and not again.confirmed
    assert judge(reported=200_000, served=60_000, expected=None, window=200_000).plausible


def test_without_a_known_window_only_sizes_no_model_reads_are_refused():
    assert judge(reported=900_000, served=60_000, expected=None, window=None).plausible
    huge = judge(reported=calibration.MAX_PROMPT_TOKENS + 1, served=60_000, expected=None, window=None)
    assert huge.code == calibration.ABOVE_WINDOW and "any model's context window" in huge.reason
