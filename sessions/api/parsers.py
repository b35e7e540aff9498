"""The API's JSON parser: every body that would later fail as a 500 is a 400 here.

DRF's JSONParser lets three kinds of valid-looking JSON through to code that cannot handle it:
- nesting deep enough for the decoder's RecursionError (an HTML 500 on every JSON endpoint);
- numbers that overflow to ±Infinity (`1e400`): SQLite's JSON_VALID and PostgreSQL's jsonb
  refuse them on insert (NaN/Infinity literals DRF already refuses with STRICT_JSON);
- escaped unpaired surrogates (`"\\ud800"`): not valid UTF-8, so no database can store them
  and no response can echo them;
- integers longer than Python converts (4,300 digits): the decoder's error quoted
  `sys.set_int_max_str_digits()`, a hint for the server's operator, not the client.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser as DRFJSONParser

from sessions import validation

# No API body needs more: a message's content may nest MAX_CONTENT_DEPTH levels, inside a batch.
MAX_BODY_DEPTH = validation.MAX_CONTENT_DEPTH + 36

# A lone surrogate can only arrive as a \uD800-\uDFFF escape (raw UTF-8 cannot encode one), so
# bodies without such an escape skip the walk.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _NonFinite(ValueError):
    pass


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NonFinite(f"number {text[:40]} is out of range (not a finite double)")
    return value


# Python refuses to convert longer digit strings (sys.get_int_max_str_digits()); no API number
# needs more than a handful.
MAX_INT_DIGITS = 4300


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _NonFinite(f"an integer of {digits:,} digits is too long (at most {MAX_INT_DIGITS:,} digits)")
    return int(text)


def _parse_constant(name: str) -> Any:
    raise _NonFinite(f"{name} is not valid JSON; numbers must be finite")


class JSONParser(DRFJSONParser):
    """DRF's JSONParser, answering a 400 for too-deep nesting, non-finite numbers and unpaired surrogates."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - body is not valid {encoding}: {exc}") from None
        try:
            data = json.loads(text, parse_float=_parse_float, parse_int=_parse_int, parse_constant=_parse_constant)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        except _NonFinite as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        # Bounded well below Python's recursion limit, so nothing downstream (DRF's JSONField
        # check, json encoding for the database) can hit a RecursionError.
        deep = validation.find_bad_json(data, "", max_depth=MAX_BODY_DEPTH, check_strings=False)
        if deep is not None:
            raise ValidationError({deep[0]: [deep[1]]})
        if _SURROGATE_ESCAPE.search(text):
            bad = validation.find_bad_json(data, "", check_nul=False)
            if bad is not None:
                raise ValidationError({bad[0]: [bad[1]]})
        return data
