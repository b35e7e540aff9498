"""JSON in and out of the gateway: orjson for the megabytes a long history is, the standard
library for what orjson refuses and JSON allows."""

from __future__ import annotations

import json
from typing import Any

import orjson

from .errors import GatewayError
from .resent import Parsed, parse_resent


def parse_json(raw: bytes) -> Any:
    """orjson first: an agent resends its whole history every call, megabytes at a few thousand
    messages, which the standard parser takes ten times longer over. What orjson refuses and JSON
    allows (a lone surrogate escape, NaN) is parsed by the standard parser, so a problem is still
    named by validation, not as bad JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GatewayError(400, "invalid_request_error", f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise GatewayError(400, "invalid_request_error", "body is not valid JSON: nested too deeply") from None


def parse_request(raw: bytes, *, owner: Any, items: str) -> tuple[Parsed, bytes | None]:
    """(the parsed body, the raw bytes when they may be passed on as they are): bytes orjson
    parsed are standard JSON; what only the standard parser takes (NaN, a lone surrogate, an
    integer beyond 64 bits) is re-encoded before it goes anywhere. A history the process parsed
    on the owner's previous call is not parsed again (gateway.resent; `items`: the key of the
    request's list of messages)."""
    try:
        return parse_resent(raw, owner=owner, key=items), raw
    except orjson.JSONDecodeError:
        body = parse_json(raw)
        return Parsed(body=body, fresh=body, fresh_raw=raw), None


def encode_json(payload: Any) -> bytes:
    """UTF-8 JSON of what goes upstream; the standard encoder for what orjson refuses (a lone
    surrogate, an integer beyond 64 bits)."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")
