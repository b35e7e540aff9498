"""Affine calibration of our token estimate against the provider's reported usage.

reported ≈ fixed + ratio × estimate. A single additive offset (reported − estimate) is wrong
as soon as the context shrinks: on the real Claude Code sessions the gap grows with size
(~31k at the first report, ~67k near 167k) because the provider's tokenizer counts ~25–35%
more than cl100k for the same text, on top of the ~26k of tool definitions and system prompt
Compactor never sees. After a compaction the additive offset overstated usage by 30–40k.

History: the last CALIBRATION_REPORTS non-stale (estimate, reported) pairs, not running
least-squares sums over the whole session. A window forgets: the gap is not linear over a
whole session (on a real Claude Code session it jumped by 24k within 7k of estimate early on,
when dense JSON entered the context), and a fit over all reports, dominated by those early
points, predicted the later half 4% off against 0.4% for the last 20: the `corpus` tests of
tests/api/test_calibration_replay.py replay it.
After a compaction the new, small estimates join the window and give it a wide spread.

Plausibility: every report is first judged against our own figure for what was
served for that call (`judge`); a report far off is stored and flagged but neither calibrates
nor moves the meter, and the meter never shows less than MIN_PROVIDER_RATIO × the served
estimate (`served_floor`), whatever the calibration says. See `judge` for the rule.

Pure: the fit is a typed `Calibration`; the state between reports (pairs, pending report,
last flag) is a plain dict stored by the caller (Session.calibration).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CALIBRATION_REPORTS = 20
# A fit needs reports that span enough of the estimate scale, or the slope is noise.
MIN_SPREAD_TOKENS = 2_000
MIN_SPREAD_FRACTION = 0.10  # of the largest estimate in the window
# No provider counts the context Compactor served at less than this share of our estimate
# (cl100k, or the model's own tokenizer): Claude's tokenizer counts 25–35% more than cl100k on
# top of the tools and system prompt only the provider sees (reported / served ≥ 1.48 on every
# report of the shared Claude Code sessions), OpenAI's count is o200k itself plus message
# framing. A report below it did not count what was served (cache figures dropped, a call on
# another context); the meter never goes below it either.
MIN_PROVIDER_RATIO = 0.9
RATIO_BOUNDS = (MIN_PROVIDER_RATIO, 1.8)
# Once calibrated, the meter predicts each report within ~1% (p90, the shared sessions; at most
# 0.944–1.33 × the prediction: dense JSON entering the context moves the ratio). A report outside
# this band of the prediction is flagged until the next report confirms it (CONFIRM_TOLERANCE):
# a client that really added or removed tools, or changed its own system prompt, is believed
# after two reports that agree; a single far-off figure (another session's numbers) is not.
EXPECTED_BAND = (0.8, 1.5)
CONFIRM_TOLERANCE = 0.05


@dataclass(frozen=True)
class Calibration:
    """The fit the meter applies: reported ≈ fixed + ratio × estimate, from `reports` reports
    (`fitted`: the ratio was fitted on a spread of them, else 1 or the last fitted one)."""

    fixed: int
    ratio: float
    reports: int
    fitted: bool

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None, offset: int | None = None) -> Calibration | None:
        """The fit of a stored state (`update`'s dict); sessions calibrated before the window of
        pairs existed fall back to their additive offset; None before any report."""
        if state and state.get("pairs"):
            return cls(int(state["fixed"]), float(state["ratio"]), len(state["pairs"]), bool(state.get("fitted")))
        if offset is not None:
            return cls(offset, 1.0, 1, False)
        return None

    def provider_tokens(self, estimated: int) -> int:
        """An estimate of the served context on the provider's scale (see `calibrated_tokens`)."""
        return max(served_floor(estimated), round(self.fixed + self.ratio * estimated))

    def scale(self, estimated: int) -> int:
        """A change we estimated, in the provider's tokens."""
        return round(self.ratio * estimated)

    def as_dict(self) -> dict[str, Any]:
        return {"fixed": self.fixed, "ratio": self.ratio, "reports": self.reports, "fitted": self.fitted}


def as_calibration(calibration: Calibration | Mapping[str, Any] | None) -> Calibration | None:
    """A fit given as a `Calibration` or as a mapping with `fixed` and `ratio` (a stored state,
    a test's literal); None or a mapping without a fit is no calibration."""
    if calibration is None or isinstance(calibration, Calibration):
        return calibration
    if "fixed" not in calibration:
        return None
    pairs = calibration.get("pairs")
    reports = len(pairs) if pairs is not None else int(calibration.get("reports") or 1)
    return Calibration(calibration["fixed"], float(calibration["ratio"]), reports, bool(calibration.get("fitted")))


CalibrationLike = Calibration | Mapping[str, Any] | None


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


def served_floor(estimated: int) -> int:
    """The least the provider can count for a context we estimate at `estimated` (see
    MIN_PROVIDER_RATIO): the meter's floor, so no calibration can show a served context as 0."""
    return max(0, math.ceil(MIN_PROVIDER_RATIO * estimated))


def calibrated_tokens(calibration: CalibrationLike, estimated: int) -> int:
    """An estimate of the served context on the provider's scale: fixed + ratio × estimate,
    never below the served floor (an additive offset measured on a large context, where we
    overestimated, would otherwise take a small one below 0).

    None (no report yet) leaves the estimate as it is.
    """
    fit = as_calibration(calibration)
    return max(0, estimated) if fit is None else fit.provider_tokens(estimated)


def scaled(calibration: CalibrationLike, estimated: int) -> int:
    """A change we estimated (e.g. messages since the report) in the provider's tokens."""
    fit = as_calibration(calibration)
    return estimated if fit is None else fit.scale(estimated)


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
    calibration: CalibrationLike = None,
) -> UsageEstimate:
    """The meter's hybrid figure, calibrated.

    With a current report: the provider's prompt size (it already includes the system prompt,
    tool definitions and its own tokenizer's view of every message) + our estimate of what
    changed since, scaled by the calibrated ratio (the provider counts those tokens too).
    Without one (a compaction dropped it): fixed + ratio × estimate. Without any calibration:
    the pure estimate.
    """
    if reported_prompt_tokens is not None:
        return UsageEstimate(
            estimated_tokens,
            max(served_floor(estimated_tokens), reported_prompt_tokens + scaled(calibration, tokens_since_report)),
            "provider+estimate",
            reported_prompt_tokens,
            tokens_since_report,
        )
    if as_calibration(calibration) is not None:
        return UsageEstimate(
            estimated_tokens,
            calibrated_tokens(calibration, estimated_tokens),
            "estimate+calibration",
            None,
            estimated_tokens,
        )
    return UsageEstimate(estimated_tokens, estimated_tokens, "estimate", None, estimated_tokens)


# --- plausibility ---------------------------------------------------------------------------

BELOW_SERVED = "below_served"
BELOW_EXPECTED = "below_expected"
ABOVE_EXPECTED = "above_expected"
ABOVE_WINDOW = "above_window"
# No released model reads a prompt above this (the largest windows are 1–10M tokens): the
# ceiling when the session's window is only a default guess for a model nobody named.
MAX_PROMPT_TOKENS = 10_000_000


@dataclass(frozen=True)
class Verdict:
    """What `judge` made of one report: `code` None when plausible, else why not (`reason`)."""

    reported_tokens: int
    served_tokens: int  # our estimate of the context served for that call (uncalibrated)
    expected_tokens: int | None  # the meter's prediction for that call; None before calibration
    code: str | None = None
    reason: str = ""
    confirmed: bool = False  # outside the band, but the previous flagged report agrees with it

    @property
    def plausible(self) -> bool:
        return self.code is None

    def flag(self) -> dict[str, Any] | None:
        """The machine-readable flag stored with the report (None when plausible)."""
        if self.code is None:
            return None
        return {
            "code": self.code,
            "reason": self.reason,
            "reported_tokens": self.reported_tokens,
            "served_tokens": self.served_tokens,
            "expected_tokens": self.expected_tokens,
        }


def expected_report(calibration: CalibrationLike, *, served: int, last_report: tuple[int, int] | None) -> int | None:
    """The meter's prediction for a call on a context we estimate at `served`: the last accepted
    report (served then, reported) plus the change since, scaled; without a current report the
    affine calibration; None before any accepted report (nothing to predict with)."""
    if last_report is not None:
        served_then, reported_then = last_report
        return max(served_floor(served), reported_then + scaled(calibration, served - served_then))
    if as_calibration(calibration) is not None:
        return calibrated_tokens(calibration, served)
    return None


def judge(
    *,
    reported: int,
    served: int,
    expected: int | None,
    pending: list[int] | None = None,
    ratio: float = 1.0,
    window: int | None = None,
) -> Verdict:
    """Is `reported` a plausible count of the context served for that call?

    The rule (README, "Usage reports"):
    0. Above `window` (the session's context window when it is known, else MAX_PROMPT_TOKENS):
       never plausible (`above_window`), whatever came before: a provider refuses a prompt
       larger than its window, so such a figure is a client's arithmetic (cache figures added
       twice), and believing it would drive the meter and a compaction far past anything real.
    1. Below MIN_PROVIDER_RATIO × served: never plausible (`below_served`). No provider counts
       less than what it was sent; the usual cause is a client that forwards `input_tokens` but
       drops `cache_read_input_tokens` / `cache_creation_input_tokens`.
    2. Before any accepted report nothing else is judged: a first report is legitimately far
       above our estimate (the provider's tokenizer, the tools and system prompt we never see).
    3. Once calibrated, outside EXPECTED_BAND × the meter's prediction (`below_expected` /
       `above_expected`), unless the previous flagged report (`pending`: [served, reported])
       predicts this one within CONFIRM_TOLERANCE: two reports that agree are a real change.
    """
    verdict = Verdict(reported, served, expected)
    ceiling = window if window and window > 0 else MAX_PROMPT_TOKENS
    if reported > ceiling:
        return Verdict(reported, served, expected, ABOVE_WINDOW, _above_window_reason(reported, window))
    if reported < MIN_PROVIDER_RATIO * served:
        share = reported / served if served else 0.0
        return Verdict(
            reported,
            served,
            expected,
            BELOW_SERVED,
            f"reported prompt {reported:,} tokens is {share:.0%} of the {served:,} tokens Compactor served for "
            f"this call (a provider counts at least {MIN_PROVIDER_RATIO:.0%}); are cache_read_input_tokens and "
            "cache_creation_input_tokens missing, or is this another context's usage?",
        )
    if expected is None or expected <= 0:
        return verdict
    low, high = EXPECTED_BAND
    if low * expected <= reported <= high * expected:
        return verdict
    if pending:
        served_then, reported_then = int(pending[0]), int(pending[1])
        predicted = reported_then + round(ratio * (served - served_then))
        if abs(predicted - reported) <= CONFIRM_TOLERANCE * reported:
            return Verdict(reported, served, expected, confirmed=True)
    code = BELOW_EXPECTED if reported < expected else ABOVE_EXPECTED
    return Verdict(
        reported,
        served,
        expected,
        code,
        f"reported prompt {reported:,} tokens is {reported / expected:.0%} of the {expected:,} the calibration "
        f"predicted for this call (accepted: {low:.0%}–{high:.0%}); the next report that agrees with it is believed",
    )


def _above_window_reason(reported: int, window: int | None) -> str:
    if not window:
        return (
            f"reported prompt {reported:,} tokens is above any model's context window ({MAX_PROMPT_TOKENS:,}); "
            "are cache figures added twice, or input_tokens already including them?"
        )
    return (
        f"reported prompt {reported:,} tokens is above the session's {window:,}-token context window, which no "
        "provider accepts; are cache figures added twice? If the model's window is larger, set the session's "
        "context_window"
    )


def flagged(previous: Mapping[str, Any] | None, verdict: Verdict, *, model: str) -> dict[str, Any]:
    """The calibration after a flagged report: the fit unchanged, the flag kept for the meter to
    show, and a band miss kept as `pending` for the next report to confirm (never a report below
    the served floor: a client that drops cache figures does so every time)."""
    out = dict(previous or {"model": model, "pairs": []})
    out["last_flag"] = verdict.flag()
    if verdict.code in (BELOW_EXPECTED, ABOVE_EXPECTED):
        out["pending"] = [verdict.served_tokens, verdict.reported_tokens]
    else:
        out.pop("pending", None)
    return out


def accepted(previous: Mapping[str, Any] | None, verdict: Verdict, *, model: str) -> dict[str, Any]:
    """The calibration after a plausible report (`update`); a confirmed change starts the
    window over from the pending report it confirms, so the old level does not drag the fit."""
    base: dict[str, Any] | None = dict(previous) if previous else None
    if base is not None and verdict.confirmed and base.get("pending"):
        base["pairs"] = [list(base["pending"])]
    return update(base, estimate=verdict.served_tokens, reported=verdict.reported_tokens, model=model)
