"""Paginations that refuse a bad page size (DRF silently falls back to its default) and say
their bounds in the OpenAPI schema."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination


def _strict_size(request, name: str | None, default: int, maximum: int) -> int:
    if not name or name not in request.query_params:
        return default
    raw = request.query_params[name]
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise ValidationError({name: [f"must be an integer from 1 to {maximum}"]})
    return int(raw)


def _bounded(parameters: list[dict], name: str | None, maximum: int) -> list[dict]:
    for parameter in parameters:
        if parameter.get("name") == name:
            parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1, "maximum": maximum}
        elif parameter.get("name") == "page":
            # Past the last page is a 404 ("Invalid page."), as is anything that is not a page number.
            parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1, "maximum": 2**31 - 1}
    return parameters


class StrictPageNumberPagination(PageNumberPagination):
    def get_page_size(self, request) -> int:
        return _strict_size(request, self.page_size_query_param, self.page_size, self.max_page_size)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return _bounded(super().get_schema_operation_parameters(view), self.page_size_query_param, self.max_page_size)


class StrictCursorPagination(CursorPagination):
    def get_page_size(self, request) -> int:
        return _strict_size(request, self.page_size_query_param, self.page_size, self.max_page_size)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return _bounded(super().get_schema_operation_parameters(view), self.page_size_query_param, self.max_page_size)
