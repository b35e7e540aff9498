"""Affine calibration of the usage figure: reported ≈ fixed + ratio × estimate, fitted on the
session's recent reports, served after a compaction drops the report, kept across compactions
and undo, reset by a change of model."""

from __future__ import annotations

import pytest

from compaction import services as engine
from compaction.core import calibration
from sessions import services
from sessions.models import Session

from .helpers import url

pytestmark = pytest.mark.django_db

HIDDEN = 26_000  # tool definitions and the agent's own prompt: only the provider counts them
RATIO = 1.3  # the provider's tokenizer counts 30% more than ours for the same text


def words(i: int, n: int = 300) -> str:
    return " ".join(f"step{i}-word{j}" for j in range(n))


def provider(estimate: int) -> int:
    return round(HIDDEN + RATIO * estimate)


def append(api, session, *messages):
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def report(api, session, tokens: int, **extra):
    response = api.post(url(session, "usage/"), {"input_tokens": tokens, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["usage"]


@pytest.fixture
def calibrated(api, user) -> Session:
    """A session whose provider reports HIDDEN + RATIO × our estimate at 8 growing sizes."""
    session = services.session_create(
        owner=user, model="claude-sonnet-4-5", compaction_settings={"auto_compact": False, "keep_recent_tokens": 1_500}
    )
    for i in range(8):
        append(api, session, {"role": "assistant", "content": words(i + 100)}, {"role": "user", "content": words(i)})
        session.refresh_from_db()
        # No assistant message last: the provider saw everything stored, i.e. our whole estimate.
        report(api, session, provider(session.context_tokens))
    session.refresh_from_db()
    return session


def test_reports_spanning_a_range_fit_fixed_and_ratio(calibrated):
    usage = services.session_usage(calibrated).as_dict()
    cal = usage["calibration"]
    assert cal["fitted"] is True and cal["reports"] == 8
    assert abs(cal["ratio"] - RATIO) < 0.001, cal
    assert abs(cal["fixed"] - HIDDEN) <= 2, cal
    # While the report is current the figure is the provider's own.
    assert usage["source"] == "provider+estimate"
    assert usage["tokens"] == provider(calibrated.context_tokens)
    # The additive offset of the last report is still exposed (and is much larger than HIDDEN).
    assert usage["calibration_offset"] == provider(calibrated.context_tokens) - calibrated.context_tokens


def test_after_a_compaction_usage_is_fixed_plus_ratio_times_the_estimate(calibrated):
    before = services.session_usage(calibrated).as_dict()
    offset = before["calibration_offset"]
    job = engine.compaction_run(
        compaction_id=engine.compaction_request(session=calibrated, reason="manual", strategy="truncate").pk
    )
    assert job.status == "succeeded", (job.error, job.detail)
    calibrated.refresh_from_db()
    after = services.session_usage(calibrated).as_dict()
    assert after["source"] == "estimate+calibration"
    estimate = after["estimated_tokens"]
    assert estimate < before["estimated_tokens"] / 2
    # What the provider will report for the smaller context, not estimate + the old offset.
    assert abs(after["tokens"] - provider(estimate)) <= 3, (after, provider(estimate))
    assert after["tokens"] < estimate + offset - 1_000
    assert job.tokens_before == before["tokens"]
    assert job.tokens_after == after["tokens"]
    assert after["usage_ratio"] == round(after["tokens"] / after["context_window"], 4)


def test_the_trailing_estimate_is_scaled_by_the_ratio(api, calibrated):
    reported = services.session_usage(calibrated).reported_tokens
    added = append(api, calibrated, {"role": "assistant", "content": words(7, 400)})
    usage = added["usage"]
    trailing = added["messages"][0]["token_count"]
    assert usage["trailing_tokens"] == trailing  # our estimate of the change, as counted
    assert usage["tokens"] == reported + round(usage["calibration"]["ratio"] * trailing)


def test_one_report_or_too_little_spread_is_the_additive_offset(api, session):
    append(api, session, {"role": "user", "content": words(1)})
    session.refresh_from_db()
    usage = report(api, session, session.context_tokens + 30_000)
    assert usage["calibration"] == {"fixed": 30_000, "ratio": 1.0, "reports": 1, "fitted": False}
    # A second report 30 tokens further on: no spread to fit a slope from.
    append(api, session, {"role": "user", "content": "and a few more words"})
    session.refresh_from_db()
    usage = report(api, session, session.context_tokens + 31_000)
    assert usage["calibration"] == {"fixed": 31_000, "ratio": 1.0, "reports": 2, "fitted": False}
    assert usage["calibration_offset"] == 31_000


def test_without_spread_a_fitted_ratio_is_kept_and_fixed_reanchored(api, calibrated):
    # Twenty reports a few tokens apart push the spread out of the window ...
    for i in range(20):
        append(api, calibrated, {"role": "user", "content": f"ok {i}"})
        calibrated.refresh_from_db()
        usage = report(api, calibrated, provider(calibrated.context_tokens))
    cal = usage["calibration"]
    assert cal["reports"] == 20  # the window is bounded
    assert abs(cal["ratio"] - RATIO) < 0.001 and cal["fitted"] is True
    # ... so a report 700 tokens above the line moves `fixed` (what is hidden grew), not the slope.
    append(api, calibrated, {"role": "user", "content": "one more"})
    calibrated.refresh_from_db()
    usage = report(api, calibrated, provider(calibrated.context_tokens) + 700)
    assert usage["calibration"]["ratio"] == cal["ratio"]
    assert abs(usage["calibration"]["fixed"] - (HIDDEN + 700)) <= 3, usage["calibration"]


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        # Slope 4 → clamped to 1.8; fixed from the means with that ratio (110k − 1.8 × 25k).
        ([[10_000, 50_000], [40_000, 170_000]], (65_000, 1.8)),
        # Negative fixed → a fit through the origin (Σxy / Σxx) ...
        ([[10_000, 1_000], [40_000, 38_000]], (0, 0.9)),
        # ... clamped to at least 0.9 (MIN_PROVIDER_RATIO: no provider counts less).
        ([[10_000, 500], [40_000, 20_000]], (0, 0.9)),
        ([[10_000, 40_000], [11_000, 42_000]], None),  # 1k apart: not enough spread
        ([[10_000, 40_000]], None),
    ],
)
def test_the_fit_is_clamped_to_sane_bounds(pairs, expected):
    fit = calibration.fit(pairs)
    if expected is None:
        assert fit is None
        return
    fixed, ratio = fit
    assert (round(fixed), round(ratio, 3)) == expected


def test_calibration_survives_compaction_and_undo_but_not_a_change_of_model(api, calibrated):
    cal = services.session_usage(calibrated).calibration
    job = engine.compaction_run(
        compaction_id=engine.compaction_request(session=calibrated, reason="manual", strategy="truncate").pk
    )
    calibrated.refresh_from_db()
    assert services.session_usage(calibrated).calibration == cal
    engine.compaction_revert(compaction=job)
    calibrated.refresh_from_db()
    undone = services.session_usage(calibrated).as_dict()
    assert undone["calibration"] == cal.as_dict() and undone["source"] == "estimate+calibration"
    assert abs(undone["tokens"] - provider(undone["estimated_tokens"])) <= 3

    # Naming the same model differently keeps it; another model (another tokenizer) resets it.
    response = api.patch(url(calibrated), {"model": "anthropic/claude-sonnet-4-5-20250929"}, format="json")
    assert response.status_code == 200 and response.json()["usage"]["calibration"] == cal.as_dict()
    response = api.patch(url(calibrated), {"model": "gpt-4.1"}, format="json")
    assert response.status_code == 200, response.json()
    usage = response.json()["usage"]
    assert usage["calibration"] is None and usage["calibration_offset"] is None
    assert usage["source"] == "estimate" and usage["tokens"] == usage["estimated_tokens"]


def test_a_report_from_another_model_restarts_the_history(api, calibrated):
    # The API names the dated snapshot of the session's model: the same model, the same history.
    usage = report(api, calibrated, provider(calibrated.context_tokens), model="claude-sonnet-4-5-20250929")
    assert usage["calibration"]["reports"] == 9 and usage["calibration"]["fitted"]
    usage = report(api, calibrated, calibrated.context_tokens + 5_000, model="claude-opus-4-1")
    assert usage["calibration"] == {"fixed": 5_000, "ratio": 1.0, "reports": 1, "fitted": False}


def test_a_stale_report_does_not_join_the_history(api, calibrated):
    old_reply = calibrated.last_seq - 1  # an assistant message from before the compaction
    job = engine.compaction_run(
        compaction_id=engine.compaction_request(session=calibrated, reason="manual", strategy="truncate").pk
    )
    assert job.status == "succeeded"
    calibrated.refresh_from_db()
    before = services.session_usage(calibrated).as_dict()
    usage = report(api, calibrated, 190_000, message_seq=old_reply)
    assert usage["calibration"] == before["calibration"]
    assert usage["tokens"] == before["tokens"]
