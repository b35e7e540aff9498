"""/anthropic/v1/messages and /count_tokens: authorize → parse → one service call → render.

Errors use the Messages API's shape, {"type": "error", "error": {"type", "message"}}, so SDKs
and agents report them as they would Anthropic's own.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions

from compaction.core.transcripts.base import too_deep
from sessions import validation
from sessions.api.parsers import MAX_BODY_DEPTH

from . import services, upstream
from .auth import authenticate
from .services import SESSION_HEADER, GatewayError, GatewayResult, error_body

logger = logging.getLogger(__name__)

_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def _error(status: int, error_type: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(error_type, message), status=status)


def _parse(request: HttpRequest) -> tuple[Any, dict[str, Any], str | None]:
    """(user, body, session id) or raises GatewayError."""
    if request.method != "POST":
        raise GatewayError(405, "invalid_request_error", f"{request.method} is not allowed here; use POST")
    try:
        user = authenticate(request)
    except exceptions.AuthenticationFailed as exc:
        raise GatewayError(401, "authentication_error", str(exc.detail)) from None
    if not settings.GATEWAY_UPSTREAM_API_KEY:
        raise GatewayError(
            500, "api_error", "the gateway has no upstream key: set COMPACTOR_UPSTREAM_API_KEY (or ANTHROPIC_API_KEY)"
        )
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
    body = _decode(raw)
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise GatewayError(400, "invalid_request_error", "messages: required, a non-empty list of messages")
    session_id = request.headers.get(SESSION_HEADER, "").strip() or None
    if session_id is not None:
        try:
            session_id = str(uuid.UUID(session_id))
        except ValueError:
            raise GatewayError(
                404, "not_found_error", f"{SESSION_HEADER}: {session_id[:60]!r} is not a session id"
            ) from None
    return user, body, session_id


def _decode(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, refused (400) before anything is stored when it nests deeper
    than any request needs or holds a string no database can store (NUL, a lone surrogate)."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GatewayError(400, "invalid_request_error", f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise GatewayError(400, "invalid_request_error", "body is not valid JSON: nested too deeply") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "invalid_request_error", "body must be a JSON object")
    bad = None
    if too_deep(body, MAX_BODY_DEPTH):  # the quick walk; then again for the path to name
        bad = validation.find_bad_json(body, "", max_depth=MAX_BODY_DEPTH, check_strings=False)
    # JSON can only carry a NUL or a lone surrogate as a \u escape: the strings are walked only
    # when the raw body holds one (agents resend whole histories; most bodies hold neither).
    if bad is None and _SUSPECT_ESCAPE.search(raw):
        bad = validation.find_bad_json(body, "")
    if bad is not None:
        raise GatewayError(400, "invalid_request_error", f"{bad[0]}: {bad[1]}")
    return body


def _agent(request: HttpRequest) -> str:
    """'claude-cli/2.0.1 (external, cli)' → 'claude-cli'; the SDK's 'Anthropic/Python 2.14.0' → 'Anthropic/Python'."""
    product = request.headers.get("user-agent", "").split(" ")[0]
    return product.rsplit("/", 1)[0] if product.count("/") else product


def _render(result: GatewayResult) -> HttpResponse:
    if result.chunks is not None:
        response: HttpResponse = StreamingHttpResponse(result.chunks, status=result.status)
        response["X-Accel-Buffering"] = "no"  # proxies (nginx) must not hold the events back
    else:
        response = HttpResponse(result.body or b"", status=result.status)
    for name, value in {**result.headers, **result.extra_headers}.items():
        response[name] = value
    return response


@csrf_exempt
def messages_view(request: HttpRequest) -> HttpResponse:
    try:
        user, body, session_id = _parse(request)
        result = services.gateway_call(
            user=user,
            body=body,
            session_id=session_id,
            headers=upstream.request_headers(request),
            query=request.META.get("QUERY_STRING", ""),
            agent=_agent(request),
        )
    except GatewayError as exc:
        return _error(exc.status, exc.error_type, exc.message)
    return _render(result)


@csrf_exempt
def count_tokens_view(request: HttpRequest) -> HttpResponse:
    try:
        user, body, session_id = _parse(request)
        result = services.gateway_count_tokens(
            user=user,
            body=body,
            session_id=session_id,
            headers=upstream.request_headers(request),
            query=request.META.get("QUERY_STRING", ""),
        )
    except GatewayError as exc:
        return _error(exc.status, exc.error_type, exc.message)
    return _render(result)


@csrf_exempt
def not_found_view(request: HttpRequest) -> HttpResponse:
    return _error(
        404, "not_found_error", f"the gateway serves /v1/messages and /v1/messages/count_tokens, not {request.path}"
    )
