"""Refuse oversized API requests with a JSON 413 before anything reads the body."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse


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
