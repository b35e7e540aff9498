"""Hostile input is a 400 in each API's own shape before anything is stored: JSON nested too deep,
NUL and lone surrogates; the gateway's chunked bodies have its own limit; imports are linear in
the file's size and stop at their time budget."""

from __future__ import annotations

import io
import json
import time
from collections import Counter

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from compaction.core.transcripts.base import assemble
from sessions.models import Message, Session
from tests.gateway.upstream import FakeUpstream

pytestmark = pytest.mark.django_db

DEEP = "[" * 10_000 + "]" * 10_000
GATEWAY = "/anthropic/v1/messages"


@pytest.fixture
def upstream(settings):
    fake = FakeUpstream().start()
    settings.GATEWAY_UPSTREAM_URL, settings.GATEWAY_UPSTREAM_API_KEY = fake.url, "upstream-secret"
    yield fake
    fake.stop()


def _gateway(api_key: str, raw: str | bytes, **extra):
    return Client().post(GATEWAY, data=raw, content_type="application/json", HTTP_X_API_KEY=api_key, **extra)


def _messages_body(**fields) -> dict:
    return {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}], **fields}


def test_ten_thousand_deep_json_is_a_400_on_the_gateway(upstream, api_key):
    body = json.dumps(_messages_body())[:-1] + f', "metadata": {DEEP}}}'
    response = _gateway(api_key, body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert "nested" in response.json()["error"]["message"]
    assert not Session.objects.exists() and upstream.requests == []


def test_moderately_deep_json_over_the_limit_names_where(upstream, api_key):
    deep: object = "x"
    for _ in range(120):
        deep = [deep]
    response = _gateway(api_key, json.dumps(_messages_body(metadata={"tags": deep})))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("metadata.tags")


@pytest.mark.parametrize(
    "field,value",
    [
        ("messages", [{"role": "user", "content": "a\u0000b"}]),
        ("messages", [{"role": "user", "content": [{"type": "text", "text": "\ud800"}]}]),
        ("system", "You are \u0000 careful"),
        ("system", [{"type": "text", "text": "lone \udfff"}]),
    ],
)
def test_nul_or_a_lone_surrogate_is_a_400_before_a_session_exists(upstream, api_key, field, value):
    raw = json.dumps(_messages_body(**{field: value}))  # ensure_ascii: the surrogate travels escaped
    response = _gateway(api_key, raw)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(field)
    assert not Session.objects.exists() and upstream.requests == []


def _chunked(api_key: str, body: bytes) -> dict:
    return {
        "CONTENT_LENGTH": "",
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_X_API_KEY": api_key,
        "wsgi.input": io.BytesIO(body),
        "wsgi.input_terminated": True,
    }


@override_settings(MAX_REQUEST_BYTES=4096, GATEWAY_MAX_REQUEST_BYTES=64 * 1024)
def test_a_chunked_gateway_body_has_the_gateway_limit_and_its_413_shape(upstream, api_key):
    # Over the REST limit, under the gateway's: accepted.
    body = json.dumps(_messages_body(messages=[{"role": "user", "content": "word " * 2000}])).encode()
    assert 4096 < len(body) < 64 * 1024
    assert Client().generic("POST", GATEWAY, **_chunked(api_key, body)).status_code == 200
    # Over the gateway's: a 413 in the Messages API's shape naming its own setting.
    huge = json.dumps(_messages_body(messages=[{"role": "user", "content": "word " * 20_000}])).encode()
    response = Client().generic("POST", GATEWAY, **_chunked(api_key, huge))
    assert response.status_code == 413
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "request_too_large"
    assert "COMPACTOR_GATEWAY_MAX_REQUEST_BYTES" in response.json()["error"]["message"]


def test_ten_thousand_deep_json_is_a_400_on_the_rest_api(api, session):
    before = Message.objects.filter(session=session).count()
    response = api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        '{"role": "user", "content": ' + DEEP + "}",
        content_type="application/json",
    )
    assert response.status_code == 400 and "error" in response.json()
    assert Message.objects.filter(session=session).count() == before


@pytest.mark.parametrize(
    "name,content",
    [
        ("deep.jsonl", '{"type": "user", "uuid": "u1", "message": ' + DEEP + "}\n"),
        ("deep.json", '{"messages": ' + DEEP + "}"),
        ("nested.json", '{"messages": [{"role": "user", "content": ' + "[" * 150 + "]" * 150 + "}]}"),
    ],
)
def test_deep_json_in_an_import_is_a_400_naming_the_line(api, name, content):
    upload = SimpleUploadedFile(name, content.encode())
    response = api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 400, response.content
    assert "nested more than" in response.json()["error"] and "line 1" in response.json()["error"]
    assert not Session.objects.exists()


def _chained_user_lines(n: int) -> list[dict]:
    return [{"role": "user", "content": f"line {i} of the chained log"} for i in range(n)]


def test_assembling_chained_user_lines_is_linear():
    # CPU time of this process, not the wall clock: on a machine shared with other work (the
    # suite's other worker, other jobs) the wall clock of the longer run grew 9x for 4x the lines.
    timings = {}
    for n in (5_000, 20_000):
        started = time.process_time()
        messages, _, _, _ = assemble(_chained_user_lines(n), Counter())
        timings[n] = time.process_time() - started
        assert len(messages) == 1 and len(messages[0]["content"]) == n
    # Four times the lines: about four times the time (quadratic was sixteen; 20k took 50 s).
    assert timings[20_000] < 8 * timings[5_000] + 0.5, timings


def test_an_import_past_its_time_budget_is_a_422_and_stores_nothing(api, settings):
    settings.IMPORT_TIME_BUDGET = 1e-6
    lines = [
        json.dumps({"type": "user", "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None, "sessionId": "s",
                    "message": {"role": "user", "content": f"line {i}"}})
        for i in range(5000)
    ]  # fmt: skip
    upload = SimpleUploadedFile("long.jsonl", "\n".join(lines).encode())
    response = api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 422, response.content
    assert "COMPACTOR_IMPORT_TIME_BUDGET" in response.json()["error"]
    assert not Session.objects.exists() and not Message.objects.exists()
