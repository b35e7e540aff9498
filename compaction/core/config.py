"""Compaction settings: global defaults, per-session overrides, per-request overrides.

Trigger = the lowest of (window − reserve), ratio × window and the absolute token limit.
Small windows scale the defaults down, unless a value was set explicitly: reserve ≤ 25 % and
keep ≤ 35 % of the window, so a default sized for a large window never leaves a small one with
no room for new turns or a trigger that fires on every message.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

RESERVE_MAX_SHARE = 0.25
KEEP_MAX_SHARE = 0.35

# Keys a session or a request may override, with their types and bounds; the API
# validates against this table so a typo is a 400, not a silently ignored setting.
# Every integer has an upper bound: token figures end up in 32-bit database columns.
MAX_WINDOW_TOKENS = 10_000_000
MAX_PRESERVE_MESSAGES = 1_000_000
OVERRIDABLE: dict[str, tuple[type, float | None, float | None]] = {
    "reserve_tokens": (int, 0, MAX_WINDOW_TOKENS),
    "keep_recent_tokens": (int, 0, MAX_WINDOW_TOKENS),
    "auto_compact_ratio": (float, 0.05, 1.0),
    "auto_compact_token_limit": (int, 1, MAX_WINDOW_TOKENS),
    "preserve_messages": (int, 1, MAX_PRESERVE_MESSAGES),
    "auto_compact": (bool, None, None),
    "summarizer_model": (str, None, None),
    "summary_max_tokens": (int, 256, 64_000),
    "compact_prompt": (str, None, None),
    "prune_tool_outputs": (bool, None, None),
    # compaction.core.policy: land at or below target_ratio × trigger; a prune alone only when
    # it relieves at least prune_min_relief × trigger (Anthropic's clear_at_least).
    "target_ratio": (float, 0.1, 0.9),
    "prune_min_relief": (float, 0.0, 1.0),
}


@dataclass(frozen=True)
class CompactionConfig:
    context_window: int
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 10_000
    auto_compact_ratio: float | None = None
    auto_compact_token_limit: int | None = None
    preserve_messages: int | None = None
    auto_compact: bool = True
    summarizer_model: str = "claude-haiku-4-5"
    summary_max_tokens: int | None = None
    compact_prompt: str | None = None
    prune_tool_outputs: bool = True
    target_ratio: float = 0.5
    prune_min_relief: float = 0.5

    @property
    def trigger_tokens(self) -> int:
        candidates = [self.context_window - self.reserve_tokens]
        if self.auto_compact_ratio is not None:
            candidates.append(int(self.auto_compact_ratio * self.context_window))
        if self.auto_compact_token_limit is not None:
            candidates.append(self.auto_compact_token_limit)
        return max(1, min(candidates))

    @property
    def summary_budget(self) -> int:
        """Output tokens for the summarizer: about 0.8 × reserve unless set."""
        if self.summary_max_tokens:
            return self.summary_max_tokens
        return max(1024, int(0.8 * self.reserve_tokens))


# "near": within this share of the window below the trigger (the dashboard's amber).
NEAR_TRIGGER_SHARE = 0.1


def usage_level(*, tokens: int, trigger_tokens: int, context_window: int) -> str:
    """ok / near (within NEAR_TRIGGER_SHARE of the window below the trigger) / over (at or past it)."""
    if tokens >= trigger_tokens:
        return "over"
    if tokens >= trigger_tokens - NEAR_TRIGGER_SHARE * context_window:
        return "near"
    return "ok"


def validate_overrides(overrides: dict[str, Any]) -> dict[str, str]:
    """Field → problem for every bad key or value (empty when all is well)."""
    errors: dict[str, str] = {}
    for key, value in overrides.items():
        if key not in OVERRIDABLE:
            errors[key] = f"unknown setting; allowed: {', '.join(sorted(OVERRIDABLE))}"
            continue
        if value is None:
            continue
        kind, low, high = OVERRIDABLE[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            errors[key] = f"must be {kind.__name__}, got {type(value).__name__}"
            continue
        number = float(value) if isinstance(value, (int, float)) else 0.0  # the bounds below are numbers
        if low is not None and number < low:
            errors[key] = f"must be at least {low}, got {value}"
        elif high is not None and number > high:
            errors[key] = f"must be at most {high}, got {value}"
    return errors


def window_errors(config: CompactionConfig) -> dict[str, str]:
    """Settings that leave the trigger meaningless for this window, after resolution.

    A reserve or a kept tail as large as the window would put the trigger at (or below) zero
    tokens, so every append would compact, or a compaction could never get under it.
    """
    errors: dict[str, str] = {}
    window = config.context_window
    if config.reserve_tokens >= window:
        errors["reserve_tokens"] = (
            f"must be less than the context window ({window:,} tokens), got {config.reserve_tokens:,}"
        )
    if config.keep_recent_tokens >= window:
        errors["keep_recent_tokens"] = (
            f"must be less than the context window ({window:,} tokens), got {config.keep_recent_tokens:,}"
        )
    return errors


def resolve_config(
    *,
    context_window: int,
    defaults: dict[str, Any],
    session_overrides: dict[str, Any] | None = None,
    request_overrides: dict[str, Any] | None = None,
) -> CompactionConfig:
    """Merge the three layers; later layers win. `None` in a layer means "not set"."""
    names = {f.name for f in fields(CompactionConfig)} - {"context_window"}
    explicit: set[str] = set()
    values: dict[str, Any] = {}
    for layer_index, layer in enumerate((defaults, session_overrides or {}, request_overrides or {})):
        for key, value in layer.items():
            key = key.lower()
            if key in names and value is not None:
                values[key] = value
                if layer_index > 0:
                    explicit.add(key)
    config = CompactionConfig(context_window=context_window, **values)
    # Scale down for small windows, but never override what a session or request set.
    scaled: dict[str, Any] = {}
    if "reserve_tokens" not in explicit:
        scaled["reserve_tokens"] = min(config.reserve_tokens, int(context_window * RESERVE_MAX_SHARE))
    if "keep_recent_tokens" not in explicit:
        scaled["keep_recent_tokens"] = min(config.keep_recent_tokens, int(context_window * KEEP_MAX_SHARE))
    return replace(config, **scaled)
