"""A session's resolved compaction settings, their validation, and its tokenizer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from compaction.core import registry
from compaction.core import tokens as core_tokens
from compaction.core.config import CompactionConfig, resolve_config, validate_overrides, window_errors
from compaction.core.prompts import validate_custom_prompt

from .. import validation
from ..models import Session

SETTINGS_MAX_DEPTH = 8


def session_config(session: Session, request_overrides: Mapping[str, Any] | None = None) -> CompactionConfig:
    """Global defaults ← session overrides ← request overrides."""
    return resolve_config(
        context_window=session.context_window,
        defaults=settings.COMPACTOR,
        session_overrides=session.compaction_settings or {},
        request_overrides=dict(request_overrides or {}),
    )


def compaction_settings_errors(overrides: Any) -> dict[str, str]:
    """Problems with a compaction settings dict, keyed by setting name."""
    if not isinstance(overrides, dict):
        return {"": "must be an object of setting → value"}
    errors = validate_overrides(overrides)
    for key, value in overrides.items():
        safe_key = validation.safe_text(str(key))
        bad = validation.find_bad_json({key: value}, "", max_depth=SETTINGS_MAX_DEPTH)
        if bad is not None:
            errors.pop(key, None)
            errors[safe_key] = bad[1]
    prompt = overrides.get("compact_prompt")
    if isinstance(prompt, str) and "compact_prompt" not in errors:
        problems = validate_custom_prompt(prompt)
        if problems:
            errors["compact_prompt"] = "; ".join(problems)
    return errors


def settings_check(overrides: Any, prefix: str = "compaction_settings") -> None:
    """ValidationError naming every bad setting, as `compaction_settings.<name>`."""
    errors = compaction_settings_errors(overrides)
    if errors:
        raise ValidationError({(f"{prefix}.{k}" if k else prefix): [v] for k, v in errors.items()})


def window_check(session: Session, *, changed: str | None = None) -> None:
    """The resolved settings must leave a meaningful trigger for the (possibly new) window."""
    errors = window_errors(session_config(session))
    if errors:
        why = f" (after the change of {changed})" if changed else ""
        raise ValidationError({f"compaction_settings.{k}": [f"{v}{why}"] for k, v in errors.items()})


def session_tokenizer(session: Session) -> core_tokens.Tokenizer:
    """The tokenizer for this session's model (o200k for OpenAI's current models when cached)."""
    return core_tokens.tokenizer_for_model(session.model)


def system_tokens(system_prompt: str, tokenizer: core_tokens.Tokenizer) -> int:
    return core_tokens.count_text(system_prompt, tokenizer) if system_prompt else 0


def model_key(model: str | None) -> str:
    """The model a calibration belongs to: dated snapshots and routing prefixes of one model
    ("claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5") count alike."""
    return registry.lookup(model).name
