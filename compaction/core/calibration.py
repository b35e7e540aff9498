"""Affine calibration of our token estimate against the provider's reported usage.

reported ≈ fixed + ratio × estimate. A single additive offset (reported − estimate) is wrong
as soon as the context shrinks: on the real Claude Code sessions the gap grows with size
(~31k at the first report, ~67k near 167k) because the provider's tokenizer counts ~25–35%
more than cl100k for the same text, on top of the ~26k of tool definitions and system prompt
Compactor never sees. After a compaction the additive offset overstated usage by 30–40k.

History: the last CALIBRATION_REPORTS non-stale (estimate, reported) pairs, not running
least-squares sums over the whole session. A window forgets: the gap is not linear over a
whole session (on 8463c716 it jumps by 24k within 7k of estimate early on, when dense JSON
entered the context), and a fit over all reports, dominated by those early points, predicted
the later half 4% off against 0.4% for the last 20 (tests/api/test_calibration_replay.py).
After a compaction the new, small estimates join the window and give it a wide spread.

Pure: plain dicts in and out, stored by the caller (Session.calibration).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CALIBRATION_REPORTS = 20
# A fit needs reports that span enough of the estimate scale, or the slope is noise.
MIN_SPREAD_TOKENS = 2_000
MIN_SPREAD_FRACTION = 0.10  # of the largest estimate in the window
RATIO_BOUNDS = (0.8, 1.8)


def fit(pairs: list[list[int]]) -> tuple[float, float] | None:
    """Least squares (fixed, ratio) of reported on estimate, clamped; None without enough spread."""
    xs = [float(x) for x, _ in pairs]
    ys = [float(y) for _, y in pairs]
    n = len(pairs)
    if n < 2:
        return None
    spread = max(xs) - min(xs)
    if spread < max(MIN_SPREAD_TOKENS, MIN_SPREAD_FRACTION * max(xs)):
        return None
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    low, high = RATIO_BOUNDS
    ratio = min(high, max(low, sxy / sxx))
    fixed = mean_y - ratio * mean_x
    if fixed < 0:
        # Nothing hidden can be negative: fit through the origin instead (clamped again).
        ratio = min(high, max(low, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)))
        fixed = 0.0
    return fixed, ratio


def update(previous: Mapping[str, Any] | None, *, estimate: int, reported: int, model: str) -> dict[str, Any]:
    """The calibration after a non-stale report of `reported` for a context we estimate at `estimate`.

    `model` is the registry name of the reporting model. A report from another model than the
    one calibrated starts over (another tokenizer). Too little spread in the window: the last
    fitted ratio is kept (it changes slowly) and `fixed` re-anchored on this report; without a
    fitted ratio, ratio 1 and the additive offset of this report (which may be negative when we
    overestimate).
    """
    pairs: list[list[int]] = []
    if previous and (not model or not previous.get("model") or previous.get("model") == model):
        pairs = [list(p) for p in previous.get("pairs", [])]
    else:
        previous = None  # another model: its fitted ratio does not carry over either
    pairs = [*pairs, [estimate, reported]][-CALIBRATION_REPORTS:]
    fitted_pair = fit(pairs)
    if fitted_pair is not None:
        fixed, ratio, fitted = fitted_pair[0], fitted_pair[1], True
    else:
        # Deliberately not back to ratio 1 once a ratio was fitted: near the trigger the reports
        # come densely (one per call) and 20 of them can span < 10%; the additive offset would
        # bring back the 30–40k overstatement exactly when a compaction is due.
        fitted = bool(previous and previous.get("fitted") and len(pairs) > 1)
        ratio = float(previous["ratio"]) if previous and fitted else 1.0
        fixed = reported - ratio * estimate
        if fitted and fixed < 0:
            ratio, fixed, fitted = 1.0, float(reported - estimate), False
    kept_model = model or (previous or {}).get("model") or ""
    return {"model": kept_model, "pairs": pairs, "fixed": round(fixed), "ratio": round(ratio, 4), "fitted": fitted}


def calibrated_tokens(calibration: Mapping[str, Any] | None, estimated: int) -> int:
    """An estimate of the served context on the provider's scale: fixed + ratio × estimate.

    None (no report yet) leaves the estimate as it is.
    """
    if not calibration:
        return max(0, estimated)
    return max(0, round(calibration["fixed"] + calibration["ratio"] * estimated))


def scaled(calibration: Mapping[str, Any] | None, estimated: int) -> int:
    """A change we estimated (e.g. messages since the report) in the provider's tokens."""
    if not calibration:
        return estimated
    return round(calibration["ratio"] * estimated)


@dataclass(frozen=True)
class UsageEstimate:
    """Both figures the service exposes: the pure estimate and the calibrated one."""

    estimated_tokens: int
    tokens: int
    source: str  # "estimate", "provider+estimate" or "estimate+calibration"
    reported_tokens: int | None
    trailing_tokens: int


def usage_estimate(
    *,
    estimated_tokens: int,
    reported_prompt_tokens: int | None,
    tokens_since_report: int,
    calibration: Mapping[str, Any] | None = None,
) -> UsageEstimate:
    """Seed 002's hybrid, calibrated.

    With a current report: the provider's prompt size (it already includes the system prompt,
    tool definitions and its own tokenizer's view of every message) + our estimate of what
    changed since, scaled by the calibrated ratio (the provider counts those tokens too).
    Without one (a compaction dropped it): fixed + ratio × estimate. Without any calibration:
    the pure estimate.
    """
    if reported_prompt_tokens is not None:
        return UsageEstimate(
            estimated_tokens,
            max(0, reported_prompt_tokens + scaled(calibration, tokens_since_report)),
            "provider+estimate",
            reported_prompt_tokens,
            tokens_since_report,
        )
    if calibration:
        return UsageEstimate(
            estimated_tokens,
            calibrated_tokens(calibration, estimated_tokens),
            "estimate+calibration",
            None,
            estimated_tokens,
        )
    return UsageEstimate(estimated_tokens, estimated_tokens, "estimate", None, estimated_tokens)
