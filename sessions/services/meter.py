"""The meter: one session's usage on the provider's scale, and its stored columns.

- `estimated_tokens` = system prompt + active summary + kept messages (after the prune
  overlay), cached in `Session.context_tokens`, updated incrementally on append and fully
  recomputed when a compaction is (de)activated (`session_recompute_usage`).
- `tokens` = the hybrid: the last provider-reported prompt size plus estimates of what changed
  after it (`Session.tokens_since_report`, a running counter kept on append, so usage never
  sums the history), the trailing estimate scaled by the calibrated ratio. After a
  (de)activation drops the report, `tokens` = fixed + ratio × estimate, the affine calibration
  fitted on the session's recent reports (`Session.calibration_fit`, the math in
  `compaction.core.calibration`): `fixed` is what the provider counts and Compactor cannot see
  (tool definitions, the agent's own system prompt), `ratio` the provider tokenizer's count per
  cl100k token. So figures before and after a compaction are on the same scale. Without any
  report it is the pure estimate. Never below 0.9 × the estimate
  (compaction.core.calibration.served_floor): no provider counts less than it was served.
  This one figure (`session_usage().tokens`) is what the meter shows, what the auto-compaction
  trigger compares, a compaction's tokens_before / tokens_after, the dry run's estimate, the
  list's stored usage and the chart's line.
- Each usage report is judged first (compaction.core.calibration.judge): one far below what
  was served for that call (a client dropping the cache figures) or far off the calibrated
  prediction is stored and flagged (`implausible`) but neither calibrates nor moves the meter.
- Every report and every compaction is a row of the usage history (UsageSample), for the chart.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from django.utils import timezone

from compaction.core import calibration
from compaction.core.calibration import Calibration
from compaction.core.config import usage_level

from ..models import Session, UsageSample
from .config import session_config, session_tokenizer


@dataclass(frozen=True)
class Usage:
    """The meter: one session's usage on the provider's scale and what it is measured against.

    `tokens` is the one figure the gauge, the list, the trigger, a compaction's tokens_before
    and tokens_after, the dry run and the chart's line share (see the module doc). The API's
    JSON is `as_dict()`.
    """

    tokens: int
    estimated_tokens: int  # ours, uncalibrated: system prompt + summary + kept messages as served
    reported_tokens: int | None  # the last plausible report, while it describes the served context
    reported_at_seq: int | None
    trailing_tokens: int  # estimated tokens on top of the report (or the whole estimate)
    calibration_offset: int | None
    calibration: Calibration | None
    source: str  # "estimate", "provider+estimate" or "estimate+calibration"
    tokenizer: str
    exact: bool
    context_window: int
    usage_ratio: float | None
    trigger_tokens: int
    auto_compact: bool
    # The last usage report failed the plausibility check (compaction.core.calibration.judge):
    # {code, reason, reported_tokens, served_tokens, expected_tokens}; None when it passed.
    implausible: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        # Scalars, the calibration and one flat dict, copied by hand: asdict() deep-copies
        # through every value, and this is in every append's answer.
        out = {}
        for name in _USAGE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, Calibration):
                value = value.as_dict()
            out[name] = dict(value) if isinstance(value, dict) else value
        return out


_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def session_usage(session: Session) -> Usage:
    """Both figures (pure estimate and hybrid provider+estimate) and what they are measured against.

    Reads only the session row (no query), so listing sessions costs no query per session.
    """
    fit = session.calibration_fit
    estimate = calibration.usage_estimate(
        estimated_tokens=session.context_tokens,
        reported_prompt_tokens=session.reported_input_tokens,
        tokens_since_report=session.tokens_since_report,
        calibration=fit,
    )
    tokens = estimate.tokens
    tokenizer = session_tokenizer(session)
    window = session.context_window
    config = session_config(session)
    return Usage(
        tokens=tokens,
        estimated_tokens=estimate.estimated_tokens,
        reported_tokens=estimate.reported_tokens,
        reported_at_seq=session.reported_at_seq if estimate.reported_tokens is not None else None,
        trailing_tokens=estimate.trailing_tokens,
        calibration_offset=session.calibration_offset,
        calibration=fit,
        source=estimate.source,
        tokenizer=tokenizer.name,
        exact=tokenizer.exact,
        context_window=window,
        usage_ratio=round(tokens / window, 4) if window else None,
        trigger_tokens=config.trigger_tokens,
        auto_compact=config.auto_compact,
        implausible=(session.calibration or {}).get("last_flag"),
    )


def usage_sample_record(
    *,
    session: Session,
    kind: str,
    seq: int,
    tokens: int,
    estimated_tokens: int | None,
    reported_tokens: int | None = None,
    flagged: bool = False,
    compaction: Any = None,
    now: datetime | None = None,
) -> UsageSample:
    """One point of the usage history (UsageSample): written by a usage report and by a
    compaction's activation, in their transaction; the chart reads them."""
    sample: UsageSample = UsageSample.objects.create(
        session_id=session.pk,
        kind=kind,
        seq=max(0, seq),
        tokens=max(0, tokens),
        estimated_tokens=None if estimated_tokens is None else max(0, estimated_tokens),
        reported_tokens=reported_tokens,
        flagged=flagged,
        compaction=compaction,
        created_at=now or timezone.now(),
    )
    return sample


METER_FIELDS = ("usage_tokens", "usage_percent", "usage_level")


def meter_fields(session: Session, usage: Usage | None = None) -> dict[str, Any]:
    """The stored meter columns (Session.usage_*) for the session's current counters."""
    usage = usage if usage is not None else session_usage(session)
    tokens, window = usage.tokens, usage.context_window
    return {
        "usage_tokens": tokens,
        "usage_percent": 100.0 * tokens / window if window else 0.0,
        "usage_level": usage_level(tokens=tokens, trigger_tokens=usage.trigger_tokens, context_window=window),
    }


def meter_set(session: Session) -> list[str]:
    """Set the stored meter columns on the instance; the update_fields to save them."""
    for name, value in meter_fields(session).items():
        setattr(session, name, value)
    return list(METER_FIELDS)


def session_meter_refresh(*, sessions: Any = None) -> int:  # a QuerySet of Session
    """Recompute the stored meter columns (all sessions by default), e.g. after the global
    defaults changed. Returns how many were rewritten."""
    changed = []
    for session in (sessions if sessions is not None else Session.objects.all()).iterator(chunk_size=1000):
        values = meter_fields(session)
        if any(getattr(session, name) != value for name, value in values.items()):
            for name, value in values.items():
                setattr(session, name, value)
            changed.append(session)
    Session.objects.bulk_update(changed, list(METER_FIELDS), batch_size=1000)
    return len(changed)


COUNTER_FIELDS = (
    "last_seq",
    "message_count",
    "total_message_tokens",
    "context_tokens",
    "reported_input_tokens",
    "reported_at_seq",
    "tokens_since_report",
    "calibration_offset",
    "calibration",
    "last_usage",
    "last_activity_at",
    "model",
    "usage_tokens",
    "usage_percent",
    "usage_level",
)


def counters_copy(source: Session, target: Session) -> None:
    """Keep the caller's instance current, so it does not write back stale counters."""
    if source is not target:
        for name in COUNTER_FIELDS:
            setattr(target, name, getattr(source, name))
