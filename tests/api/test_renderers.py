"""The transcript responses' renderer writes what DRF's JSONRenderer writes, only faster."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest
from rest_framework.renderers import JSONRenderer

from sessions.api.renderers import TranscriptJSONRenderer

BODIES = [
    {"role": "user", "content": 'Déjà vu — 日本語 📁 "quoted" \\ back\nslash \x00 \t'},
    {"content": "line\u2028separator\u2029paragraph"},  # raw here, escaped by DRF: same JSON
    {"messages": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}]}]},
    {"usage_ratio": 0.1234567890123, "tokens": 2**63 - 1, "negative": -(2**63), "none": None, "flag": True},
    {"created_at": dt.datetime(2026, 11, 26, 14, 0, 5, 123456, tzinfo=dt.UTC), "day": dt.date(2026, 11, 26)},
    {"id": uuid.UUID("12345678-1234-5678-1234-567812345678"), "cost": Decimal("1.50")},
    [1.0, 1e16, 1.5e-7, 0.1, 123456789.125],
    "just a string",
    [],
]


@pytest.mark.parametrize("data", BODIES, ids=range(len(BODIES)))
def test_the_same_json_as_drf_writes(data):
    ours = TranscriptJSONRenderer().render(data)
    assert json.loads(ours) == json.loads(JSONRenderer().render(data))
    # Same text where both encoders agree on the number format (orjson writes 1e16 as 1e16).
    if not isinstance(data, list) and "\u2028" not in json.dumps(data, default=str, ensure_ascii=False):
        assert ours == JSONRenderer().render(data)


def test_what_orjson_cannot_encode_falls_back_to_drf():
    data = {"huge": 2**70, 1: "int key"}  # JSON from a client may hold integers beyond 64 bits
    assert TranscriptJSONRenderer().render(data) == JSONRenderer().render(data)


def test_indented_output_is_drfs():
    context = {"indent": 2}
    data = {"a": [1, {"b": "ü"}]}
    assert TranscriptJSONRenderer().render(data, renderer_context=context) == JSONRenderer().render(
        data, renderer_context=context
    )


def test_none_renders_an_empty_body():
    assert TranscriptJSONRenderer().render(None) == b""
