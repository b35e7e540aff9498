"""Reading a gateway request, the same way for every API it speaks: method, the Compactor key,
the server's upstream key, the body's size and JSON, the session header. Raises GatewayError,
which each API's views answer in their own error shape."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from rest_framework import exceptions

from compaction.core.transcripts.base import too_deep
from sessions import validation
from sessions.api.parsers import MAX_BODY_DEPTH

from .auth import authenticate
from .codec import parse_request
from .errors import SESSION_HEADER, GatewayError
from .resent import Parsed, keep

_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def not_configured(key_variables: str) -> GatewayError:
    """This server has no key for the API the call is for: a 503 that says what the operator sets
    (a 500 read as a crash), not an error of the client's request."""
    return GatewayError(
        503,
        "api_error",
        f"this Compactor server is not set up to forward to this API: it has no upstream key "
        f"(the operator sets {key_variables})",
        code="upstream_not_configured",
    )


def read_request(
    request: HttpRequest, *, upstream_key: str | None, key_variables: str, items: str = "messages"
) -> tuple[Any, Parsed, bytes | None]:
    """(the key's owner, the parsed body, its raw bytes when they may go upstream as they are)
    or raises GatewayError. `items`: the key of the body's list of messages."""
    if request.method != "POST":
        raise GatewayError(405, "invalid_request_error", f"{request.method} is not allowed here; use POST")
    try:
        user = authenticate(request)
    except exceptions.AuthenticationFailed as exc:
        raise GatewayError(401, "authentication_error", str(exc.detail)) from None
    if not upstream_key:
        raise not_configured(key_variables)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise GatewayError(400, "invalid_request_error", "Content-Length: not a number") from None
    limit = settings.GATEWAY_MAX_REQUEST_BYTES
    if length > limit:
        raise GatewayError(
            413,
            "request_too_large",
            f"request body is {length:,} bytes; the limit is {limit:,} (COMPACTOR_GATEWAY_MAX_REQUEST_BYTES)",
        )
    # request.read(), not request.body: the REST API's smaller DATA_UPLOAD_MAX_MEMORY_SIZE does not apply.
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise GatewayError(413, "request_too_large", f"request body is over the limit of {limit:,} bytes")
    parsed, verbatim = parse_request(raw, owner=user.pk, items=items)
    if not isinstance(parsed.body, dict):
        raise GatewayError(400, "invalid_request_error", "body must be a JSON object")
    # What was parsed this time: the items reused from the previous call passed these checks then
    # (a request is kept for the next one to reuse only once it passed them).
    _refuse_unstorable(parsed.fresh, parsed.fresh_raw)
    keep(parsed)
    return user, parsed, verbatim


def _refuse_unstorable(body: dict[str, Any], raw: bytes) -> None:
    """A 400 before anything is stored when the body nests deeper than any request needs or
    holds a string no database can store (NUL, a lone surrogate)."""
    bad = None
    if too_deep(body, MAX_BODY_DEPTH):  # the quick walk; then again for the path to name
        bad = validation.find_bad_json(body, "", max_depth=MAX_BODY_DEPTH, check_strings=False)
    # JSON can only carry a NUL or a lone surrogate as a \u escape: the strings are walked only
    # when the raw body holds one (agents resend whole histories; most bodies hold neither).
    if bad is None and _SUSPECT_ESCAPE.search(raw):
        bad = validation.find_bad_json(body, "")
    if bad is not None:
        raise GatewayError(400, "invalid_request_error", f"{bad[0]}: {bad[1]}")


def session_header(request: HttpRequest) -> str | None:
    session_id = request.headers.get(SESSION_HEADER, "").strip() or None
    if session_id is None:
        return None
    try:
        return str(uuid.UUID(session_id))
    except ValueError:
        raise GatewayError(
            404, "not_found_error", f"{SESSION_HEADER}: {session_id[:60]!r} is not a session id"
        ) from None


def agent_name(request: HttpRequest) -> str:
    """'claude-cli/2.0.1 (external, cli)' → 'claude-cli'; the SDK's 'Anthropic/Python 2.14.0' → 'Anthropic/Python'."""
    product = request.headers.get("user-agent", "").split(" ")[0]
    return product.rsplit("/", 1)[0] if product.count("/") else product
