"""Paginations that refuse a bad page size (DRF silently falls back to its default), a page
number that is not one and a cursor they did not write (DRF answers both with a 404), and say
their bounds in the OpenAPI schema."""

from __future__ import annotations

import re

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination, PageNumberPagination

MAX_INT32 = 2**31 - 1
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def bounded_int(raw: str | None, minimum: int, maximum: int) -> int | None:
    """`raw` as an int when it is plain ASCII digits within [minimum, maximum], else None; never
    converts a string longer than the bound's (a 5,000-digit one is refused before int() sees it)."""
    if raw is None or not (raw.isascii() and raw.isdigit()) or len(raw.lstrip("0")) > len(str(maximum)):
        return None
    value = int(raw)
    return value if minimum <= value <= maximum else None


def _strict_size(request, name: str | None, default: int, maximum: int) -> int:
    if not name or name not in request.query_params:
        return default
    value = bounded_int(request.query_params[name], 1, maximum)
    if value is None:
        raise ValidationError({name: [f"must be an integer from 1 to {maximum}"]})
    return value


def _bounded(parameters: list[dict], name: str | None, maximum: int) -> list[dict]:
    for parameter in parameters:
        if parameter.get("name") == name:
            parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1, "maximum": maximum}
        elif parameter.get("name") == "page":
            # Past the last page is a 404 ("Invalid page."); anything that is not a page number a 400.
            parameter["schema"] = {**parameter.get("schema", {}), "minimum": 1, "maximum": 2**31 - 1}
    return parameters


class StrictPageNumberPagination(PageNumberPagination):
    def get_page_size(self, request) -> int:
        return _strict_size(request, self.page_size_query_param, self.page_size, self.max_page_size)

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if raw is not None and raw not in self.last_page_strings and bounded_int(raw, 1, MAX_INT32) is None:
            raise ValidationError(
                {self.page_query_param: [f"must be a page number (an integer from 1) or 'last', got {raw[:40]!r}"]}
            )
        return super().get_page_number(request, paginator)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return _bounded(super().get_schema_operation_parameters(view), self.page_size_query_param, self.max_page_size)


class StrictCursorPagination(CursorPagination):
    """`position_is_int`: the ordering field is an integer (a cursor's position must be one)."""

    position_is_int = False

    def get_page_size(self, request) -> int:
        return _strict_size(request, self.page_size_query_param, self.page_size, self.max_page_size)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return _bounded(super().get_schema_operation_parameters(view), self.page_size_query_param, self.max_page_size)

    def decode_cursor(self, request):
        problem = "is not a cursor this endpoint wrote: pass the `next` or `previous` link of a page as it is"
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is not None and not _BASE64.fullmatch(encoded):  # DRF's decoder skips what is not base64
            raise ValidationError({self.cursor_query_param: [problem]})
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: [problem]}) from None
        if cursor is not None and cursor.position is not None and self.position_is_int:
            if bounded_int(cursor.position, 0, 2**63 - 1) is None:
                raise ValidationError({self.cursor_query_param: [problem]})
        return cursor
