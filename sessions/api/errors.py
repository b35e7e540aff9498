"""Uniform JSON errors: {"error": "<what is wrong>", "detail": <DRF detail, field → messages>}."""

from __future__ import annotations

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
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    response.data = {"error": _first_message(data), "detail": data}
    return response
