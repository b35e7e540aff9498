"""Uniform JSON errors: {"error": "<what is wrong>"}, with "detail" (field path → problems) when
fields are at fault, e.g. a 400. A 404 is {"error": "session <id> not found"}, not the line twice.

Services raise Django's ValidationError with {field path: [problem]}; it is answered as a
400 in the same shape, e.g. {"error": "messages[2].content[1].tool_use_id: no earlier ...",
"detail": {"messages[2].content[1].tool_use_id": ["no earlier ..."]}}.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework.exceptions import ValidationError
from rest_framework.views import exception_handler as drf_exception_handler


def _first_message(detail) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        inner = _first_message(value)
        return inner if key in ("non_field_errors", "detail") else f"{key}: {inner}"
    return str(detail)


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(detail=exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and set(data) == {"detail"} and not isinstance(data["detail"], dict | list):
        # A problem that is not a field's (not found, not authenticated...): its one line says it all.
        response.data = {"error": str(data["detail"])}
    else:
        response.data = {"error": _first_message(data), "detail": data}
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """project.urls.handler404: JSON under /api/ (agents parse it), Django's HTML page elsewhere."""
    if _is_api(request):
        return JsonResponse(
            {
                "error": f"not found: no API endpoint at {request.path} (session ids are full UUIDs; "
                "GET /api/v1/sessions/?id_prefix=<first 8 characters> finds one from its short id)",
                "detail": {"path": request.path},
            },
            status=404,
        )
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """project.urls.handler500: a JSON 500 under /api/ (no traceback or request data in it)."""
    if _is_api(request):
        return JsonResponse(
            {"error": "internal server error; the failure was logged", "detail": {"status": 500}}, status=500
        )
    return defaults.server_error(request)
