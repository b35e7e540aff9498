"""The work state as JSON (stored on the compaction) and back, versioned."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

from compaction.core.work.state import STATE_VERSION, WorkState


def to_json(state: WorkState) -> dict[str, Any]:
    return dataclasses.asdict(state)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return _build(inner[0], value) if len(inner) == 1 else value
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _hints(kind)
        known = {f.name for f in dataclasses.fields(kind)}
        return kind(**{k: _build(hints[k], v) for k, v in value.items() if k in known})
    if origin is list:
        return [_build(args[0], v) for v in value] if args else list(value)
    if origin is dict:
        return {k: _build(args[1], v) for k, v in value.items()} if args else dict(value)
    if origin is tuple:
        return tuple(value)
    return value


def from_json(data: Any) -> WorkState | None:
    """The state stored as `data`, or None when there is none or it is of another version."""
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        return None
    if isinstance(data.get("messages"), int) and "folded" not in data:
        data = {**data, "folded": data["messages"]}  # the count's name before it was `folded`
    try:
        state: WorkState = _build(WorkState, data)
        return state
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
