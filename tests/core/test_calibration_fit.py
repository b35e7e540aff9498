"""The meter's fit as a typed value (compaction.core.calibration.Calibration)."""

from __future__ import annotations

from compaction.core.calibration import Calibration, accepted, as_calibration, calibrated_tokens, judge, served_floor


def test_the_fit_of_a_stored_state_counts_its_reports():
    state = {"model": "claude-sonnet-4-5", "pairs": [[40_000, 78_000], [60_000, 104_000]], "fixed": 26_000}
    state |= {"ratio": 1.3, "fitted": True}
    fit = Calibration.from_state(state)
    assert fit == Calibration(fixed=26_000, ratio=1.3, reports=2, fitted=True)
    assert fit.provider_tokens(50_000) == 26_000 + 65_000
    assert fit.scale(1_000) == 1_300
    assert fit.as_dict() == {"fixed": 26_000, "ratio": 1.3, "reports": 2, "fitted": True}


def test_a_session_calibrated_before_the_window_of_reports_keeps_its_additive_offset():
    assert Calibration.from_state(None, offset=31_000) == Calibration(31_000, 1.0, 1, False)
    assert Calibration.from_state({"pairs": []}, offset=None) is None
    assert Calibration.from_state(None) is None


def test_no_fit_shows_the_served_context_below_the_served_floor():
    # An offset measured on a large context where we overestimated would take a small one below 0.
    fit = Calibration(fixed=-67_588, ratio=1.0, reports=1, fitted=False)
    assert fit.provider_tokens(24_602) == served_floor(24_602)


def test_a_fit_given_as_a_mapping_or_typed_gives_the_same_figures():
    typed = Calibration(fixed=3_000, ratio=1.25, reports=4, fitted=True)
    literal = {"fixed": 3_000, "ratio": 1.25}
    assert calibrated_tokens(typed, 10_000) == calibrated_tokens(literal, 10_000) == 15_500
    assert as_calibration(literal) == Calibration(3_000, 1.25, 1, False)
    assert as_calibration({"pairs": []}) is None and as_calibration(None) is None


def test_an_accepted_report_becomes_part_of_the_fit():
    state = accepted(None, judge(reported=30_000, served=4_000, expected=None), model="claude-sonnet-4-5")
    fit = Calibration.from_state(state)
    assert fit is not None and fit.reports == 1 and fit.provider_tokens(4_000) == 30_000
