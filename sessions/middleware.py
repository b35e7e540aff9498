"""API requests: an oversized one is refused with a JSON 413 before anything reads the body, and
every error answer under /api/ is JSON, also where Django would render an HTML page (under
/anthropic/ and /openai/ in the Messages API's and OpenAI's error shapes)."""

from __future__ import annotations

import io

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse, JsonResponse

from sessions.api import errors

# The gateway's paths have their own body limit (agents resend whole histories, images included:
# COMPACTOR_GATEWAY_MAX_REQUEST_BYTES) and answer in the Messages API's error shape.
GATEWAY_PREFIXES = ("/anthropic/",)


def _is_gateway(request: HttpRequest) -> bool:
    return request.path.startswith(GATEWAY_PREFIXES)


def _gateway_error(status: int, error_type: str, message: str) -> JsonResponse:
    return JsonResponse({"type": "error", "error": {"type": error_type, "message": message}}, status=status)


def _too_large(request: HttpRequest, length: int | None, limit: int) -> HttpResponse:
    size = f"{length:,} bytes" if length is not None else f"more than {limit:,} bytes"
    if _is_gateway(request):
        return _gateway_error(
            413,
            "request_too_large",
            f"request body is {size}; the limit is {limit:,} bytes (COMPACTOR_GATEWAY_MAX_REQUEST_BYTES)",
        )
    error = f"request body is {size}; the limit is {limit:,} bytes (COMPACTOR_MAX_REQUEST_BYTES)."
    if not request.path.startswith("/api/"):
        return HttpResponse(error, status=413, content_type="text/plain; charset=utf-8")
    return JsonResponse(
        {
            "error": f"{error} Send fewer messages per request.",
            "detail": {"content_length": length, "max_request_bytes": limit},
        },
        status=413,
    )


def read_chunked_body(request: HttpRequest) -> HttpResponse | None:
    """A `Transfer-Encoding: chunked` body, made readable like one with a Content-Length.

    Django sizes the body by CONTENT_LENGTH only, so a chunked request (no Content-Length)
    reads as empty: a valid message became a 400 "unknown role null", and the size limit was
    never checked. Servers that de-chunk (gunicorn, uWSGI) mark their input
    `wsgi.input_terminated`: it is read here, at most limit + 1 bytes, and handed back to
    Django as a sized stream. A server that does not (the development server) would hand the
    raw chunk framing over, so that is a 411 asking for a Content-Length. Returns the error
    response, or None when the request may go on.
    """
    meta = request.META
    if "chunked" not in meta.get("HTTP_TRANSFER_ENCODING", "").lower() or meta.get("CONTENT_LENGTH"):
        return None
    limit = settings.GATEWAY_MAX_REQUEST_BYTES if _is_gateway(request) else settings.MAX_REQUEST_BYTES
    if not meta.get("wsgi.input_terminated"):
        message = "Transfer-Encoding: chunked is not supported by this server; send a Content-Length"
        if _is_gateway(request):
            return _gateway_error(411, "invalid_request_error", message)
        if request.path.startswith("/api/"):
            return JsonResponse({"error": message, "detail": {"transfer_encoding": "chunked"}}, status=411)
        return HttpResponse(message, status=411, content_type="text/plain; charset=utf-8")
    stream = meta["wsgi.input"]
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        part = stream.read(min(64 * 1024, limit + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > limit:
        return _too_large(request, None, limit)
    body = b"".join(parts)
    meta["CONTENT_LENGTH"] = str(len(body))
    request._stream = LimitedStream(io.BytesIO(body), len(body))
    return None


class RequestSizeLimitMiddleware:
    """Checks the body size against settings.MAX_REQUEST_BYTES before anything parses it:
    Content-Length on /api/ paths, and the de-chunked size of a chunked body on every path.

    Django itself would only notice while reading the body (and answer with an HTML 400);
    agents need a JSON answer that says what the limit is.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refused = read_chunked_body(request)
        if refused is not None:
            return refused
        if request.path.startswith("/api/"):
            raw = request.META.get("CONTENT_LENGTH") or "0"
            try:
                length = int(raw)
            except ValueError:
                return JsonResponse(
                    {"error": "Content-Length: not a number", "detail": {"content_length": raw}}, status=400
                )
            if length > settings.MAX_REQUEST_BYTES:
                return _too_large(request, length, settings.MAX_REQUEST_BYTES)
        return self.get_response(request)


class JsonApiErrorsMiddleware:
    """Turns Django's HTML error pages under /api/ into the API's JSON errors (`json_errors`).

    Listed first in MIDDLEWARE (outermost), so it sees the page Django rendered for an
    exception anywhere inside.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path.startswith("/api/"):
            return json_errors(request, response)
        if request.path.startswith(("/anthropic/", "/openai/")):
            return _gateway_json_errors(request, response)
        return response


# A Django error page's status as the Messages API's error type (OpenAI's routes use its `type`).
_GATEWAY_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                        413: "request_too_large"}  # fmt: skip


def _gateway_json_errors(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """An HTML error page on the gateway's paths (a Host not allowed, a crash the views did not
    answer) in the calling API's own error shape: agents parse it, and a 500 page shows nothing."""
    if response.status_code < 400 or not response.get("Content-Type", "").startswith("text/html"):
        return response
    status = response.status_code
    if status >= 500:
        kind, message = "api_error", "internal server error; the failure was logged"
    else:
        kind = _GATEWAY_ERROR_TYPES.get(status, "invalid_request_error")
        message = f"{(response.reason_phrase or 'error').lower()}: {request.path}"
    if request.path.startswith("/openai/"):
        openai_kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {"error": {"message": message, "type": openai_kind, "param": None, "code": None}}
        return JsonResponse(body, status=status)
    return _gateway_error(status, kind, message)


def json_errors(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """An HTML error page under /api/ becomes the API's JSON error.

    handler404/handler500 only apply with DEBUG off; with DEBUG on (`make run`) Django answers an
    unknown URL or a crash with its HTML technical page, which agents cannot parse (and a 500
    page would show the traceback and settings). This runs outermost, after Django has turned
    the exception into that page, so both modes give the same JSON body.
    """
    if response.status_code < 400 or not response.get("Content-Type", "").startswith("text/html"):
        return response
    if response.status_code == 404:
        return errors.handler404(request)
    if response.status_code >= 500:
        return errors.handler500(request)
    reason = response.reason_phrase or "error"
    return JsonResponse(
        {"error": f"{reason.lower()}: {request.path}", "detail": {"status": response.status_code}},
        status=response.status_code,
    )
