"""/anthropic/v1/messages and /count_tokens: authorize → parse → one service call → render.

Errors use the Messages API's shape, {"type": "error", "error": {"type", "message"}}, so SDKs
and agents report them as they would Anthropic's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from . import services, upstream, wal
from .intake import agent_name, read_request, session_header
from .resent import Parsed
from .services import GatewayError, GatewayResult, error_body

logger = logging.getLogger(__name__)


def _error(status: int, error_type: str, message: str) -> JsonResponse:
    return JsonResponse(error_body(error_type, message), status=status)


def _parse(request: HttpRequest) -> tuple[Any, Parsed, str | None, bytes | None]:
    """(user, the parsed body, session id, the body's bytes if they may go upstream as they are)
    or raises GatewayError."""
    user, parsed, raw = read_request(
        request,
        upstream_key=settings.GATEWAY_UPSTREAM_API_KEY,
        key_variables="COMPACTOR_UPSTREAM_API_KEY (or ANTHROPIC_API_KEY)",
    )
    messages = parsed.body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "invalid_request_error", "messages: required, a non-empty list of messages")
    return user, parsed, session_header(request), raw


class _RecordOnClose:
    """Bookkeeping run when the WSGI server closes the response: after the last byte went out
    (gunicorn writes a stream's closing chunk first), before Django's request_finished handlers
    release the database connection."""

    _after: Callable[[], None] | None = None

    def close(self) -> None:
        after, self._after = self._after, None
        try:
            if after is not None:
                after()
                wal.checkpoint_soon()  # the log copied back now, not in a later call's commit
        finally:
            super().close()  # type: ignore[misc]


class AnswerThenRecord(_RecordOnClose, HttpResponse):
    """A whole answer, recorded once it went out."""

    def __init__(self, content: bytes, *, status: int, after: Callable[[], None]) -> None:
        super().__init__(content, status=status)
        self._after = after


class StreamThenRecord(_RecordOnClose, StreamingHttpResponse):
    """A stream passed through as it arrives, recorded once its body ended: the connection is
    not held open after the last event while the reply is stored."""

    def __init__(self, chunks: Iterator[bytes], *, status: int, after: Callable[[], None] | None) -> None:
        super().__init__(chunks, status=status)
        self._after = after


def render(result: GatewayResult) -> HttpResponse:
    """The upstream's answer as the client gets it: streamed as it arrives, or whole."""
    if result.chunks is not None:
        response: HttpResponse = StreamThenRecord(result.chunks, status=result.status, after=result.after)
        response["X-Accel-Buffering"] = "no"  # proxies (nginx) must not hold the events back
    elif result.after is not None:
        response = AnswerThenRecord(result.body or b"", status=result.status, after=result.after)
    else:
        response = HttpResponse(result.body or b"", status=result.status)
    for name, value in {**result.headers, **result.extra_headers}.items():
        response[name] = value
    return response


@csrf_exempt
def messages_view(request: HttpRequest) -> HttpResponse:
    try:
        user, parsed, session_id, raw = _parse(request)
        result = services.gateway_call(
            user=user,
            body=parsed.body,
            resent=parsed,
            raw=raw,
            session_id=session_id,
            headers=upstream.request_headers(request),
            query=request.META.get("QUERY_STRING", ""),
            agent=agent_name(request),
        )
    except GatewayError as exc:
        return _error(exc.status, exc.error_type, exc.message)
    return render(result)


@csrf_exempt
def count_tokens_view(request: HttpRequest) -> HttpResponse:
    try:
        user, parsed, session_id, _ = _parse(request)
        result = services.gateway_count_tokens(
            user=user,
            body=parsed.body,
            session_id=session_id,
            headers=upstream.request_headers(request),
            query=request.META.get("QUERY_STRING", ""),
        )
    except GatewayError as exc:
        return _error(exc.status, exc.error_type, exc.message)
    return render(result)


def bodiless_on_head(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A HEAD answer is the GET's headers without its body (WSGI servers send what they get)."""
    if request.method == "HEAD":
        response.content = b""
    return response


def root(request: HttpRequest, api: str, serves: list[str]) -> HttpResponse:
    """GET or HEAD on a base URL (`/anthropic`, `/openai`, with or without its slash), which
    agents probe at start-up (Claude Code HEADs its ANTHROPIC_BASE_URL): a 200 as the providers
    answer there, never a redirect; other methods a 405."""
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse(
            error_body("invalid_request_error", f"{request.method} is not allowed on {request.path}"), status=405
        )
        response["Allow"] = "GET, HEAD"
        return response
    return bodiless_on_head(request, JsonResponse({"api": api, "serves": serves}))


@csrf_exempt
def root_view(request: HttpRequest) -> HttpResponse:
    return root(request, "anthropic", ["/v1/messages", "/v1/messages/count_tokens"])


@csrf_exempt
def not_found_view(request: HttpRequest) -> HttpResponse:
    response = _error(
        404, "not_found_error", f"the gateway serves /v1/messages and /v1/messages/count_tokens, not {request.path}"
    )
    return bodiless_on_head(request, response)
