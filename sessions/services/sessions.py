"""Create, change and delete sessions.

A change that touches a session's counters locks its row (`select_for_update`), like an append
does, so the two never interleave their updates of the cached usage.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from ..models import Session
from ..trash import session_trash
from .config import model_key, session_tokenizer, settings_check, system_tokens, window_check
from .meter import meter_set

_UNSET: Any = object()


def session_create(
    *,
    owner: Any,  # the user (Django's auth model: untyped without django-stubs)
    title: str = "",
    agent: str = "",
    model: str = "",
    system_prompt: str = "",
    context_window: int | None = None,
    compaction_settings: dict[str, Any] | None = None,
) -> Session:
    settings_dict = {k: v for k, v in (compaction_settings or {}).items() if v is not None}
    settings_check(settings_dict)
    session = Session(
        owner=owner,
        title=title,
        agent=agent,
        model=model,
        system_prompt=system_prompt,
        context_window_override=context_window,
        compaction_settings=settings_dict,
    )
    window_check(session)
    session.system_prompt_tokens = session.context_tokens = system_tokens(system_prompt, session_tokenizer(session))
    meter_set(session)
    session.save(force_insert=True)
    return session


def session_update(
    *,
    session: Session,
    title: str = _UNSET,
    agent: str = _UNSET,
    model: str = _UNSET,
    system_prompt: str = _UNSET,
    context_window: int | None = _UNSET,
    compaction_settings: dict[str, Any] = _UNSET,
) -> Session:
    """Change what was given. `compaction_settings` is merged key by key; a null value removes a key.
    `context_window=None` clears the override (back to the model registry's window)."""
    with transaction.atomic():
        locked: Session = Session.objects.select_for_update().get(pk=session.pk)
        old_model = locked.model
        changed: list[str] = []
        for name, value in (("title", title), ("agent", agent), ("model", model)):
            if value is not _UNSET:
                setattr(locked, name, value)
                changed.append(name)
        if model is not _UNSET and model_key(model) != model_key(old_model) and locked.is_calibrated:
            # Another model counts with another tokenizer (and another hidden prompt): the
            # calibration measured on the old one says nothing about it.
            changed += locked.calibration_reset()
        if context_window is not _UNSET:
            locked.context_window_override = context_window
            changed.append("context_window_override")
        if compaction_settings is not _UNSET:
            changed += _settings_merge(locked, compaction_settings)
        if {"model", "context_window_override", "compaction_settings"} & set(changed):
            # Also when only the window or the model changed: explicit settings may no longer fit.
            what = ", ".join(n.replace("_override", "") for n in changed if n in ("model", "context_window_override"))
            window_check(locked, changed=what if "compaction_settings" not in changed else None)
        if system_prompt is not _UNSET and system_prompt != locked.system_prompt:
            changed += _system_prompt_set(locked, system_prompt)
        if changed:
            locked.save(update_fields=[*changed, *meter_set(locked), "updated_at"])
    return locked


def _settings_merge(locked: Session, compaction_settings: Any) -> list[str]:
    if not isinstance(compaction_settings, dict):
        raise ValidationError({"compaction_settings": ["must be an object of setting → value"]})
    merged = dict(locked.compaction_settings or {})
    for key, value in compaction_settings.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    settings_check(merged)
    locked.compaction_settings = merged
    return ["compaction_settings"]


def _system_prompt_set(locked: Session, system_prompt: str) -> list[str]:
    new_tokens = system_tokens(system_prompt, session_tokenizer(locked))
    delta = new_tokens - locked.system_prompt_tokens
    # The system prompt is part of the served context: shift the cached usage by the delta.
    locked.context_tokens = max(0, locked.context_tokens + delta)
    locked.system_prompt = system_prompt
    locked.system_prompt_tokens = new_tokens
    changed = ["system_prompt", "system_prompt_tokens", "context_tokens"]
    if locked.reported_input_tokens is not None:
        # The provider's last figure holds the old prompt: the change counts on top of it.
        locked.tokens_since_report += delta
        changed.append("tokens_since_report")
    return changed


def session_delete(*, session: Session) -> None:
    """Moves the session to the trash (restorable until purged): one call must not destroy a history."""
    session_trash(session=session)
