"""API requests: an oversized one is refused with a JSON 413 before anything reads the body, and
every error answer under /api/ is JSON, also where Django would render an HTML page."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from sessions.api import errors


class RequestSizeLimitMiddleware:
    """Checks Content-Length on /api/ paths against settings.MAX_REQUEST_BYTES.

    Django itself would only notice while reading the body (and answer with an HTML 400);
    agents need a JSON answer that says what the limit is.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            raw = request.META.get("CONTENT_LENGTH") or "0"
            try:
                length = int(raw)
            except ValueError:
                return JsonResponse(
                    {"error": "Content-Length: not a number", "detail": {"content_length": raw}}, status=400
                )
            limit = settings.MAX_REQUEST_BYTES
            if length > limit:
                return JsonResponse(
                    {
                        "error": f"request body is {length:,} bytes; the limit is {limit:,} bytes "
                        "(COMPACTOR_MAX_REQUEST_BYTES). Send fewer messages per request.",
                        "detail": {"content_length": length, "max_request_bytes": limit},
                    },
                    status=413,
                )
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
        return response


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
