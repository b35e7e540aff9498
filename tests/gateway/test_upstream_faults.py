"""An upstream that stalls, resets or cuts its answer after the headers: the client is told, and
no fragment of the reply is stored as an assistant turn."""

from __future__ import annotations

import json

import anthropic
import pytest
from django.test import Client

from sessions.models import Message

URL = "/anthropic/v1/messages"
FAULTS = ("stall", "reset", "cut")
REPLY = "Reply from the upstream in several words that stream one by one."


def _body(stream: bool) -> dict:
    messages = [{"role": "user", "content": "write the parser"}]
    return {"model": "gateway-test-model", "max_tokens": 64, "messages": messages, "stream": stream}


def _post(key: str, stream: bool):
    return Client().post(URL, data=json.dumps(_body(stream)), content_type="application/json", HTTP_X_API_KEY=key)


def _sse_events(raw: bytes) -> list[tuple[str, dict]]:
    events = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))  # every event whole JSON
    return events


@pytest.fixture
def faulty(upstream, settings):
    settings.GATEWAY_UPSTREAM_TIMEOUT = 0.5  # the stall test waits this long
    from tests.gateway.upstream import Reply

    upstream.reply = lambda rec: Reply(text=REPLY)
    return upstream


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
def test_a_broken_stream_ends_with_an_error_event_and_stores_no_reply(faulty, api_key, fault):
    faulty.fault = fault
    response = _post(api_key, stream=True)
    assert response.status_code == 200
    events = _sse_events(b"".join(response.streaming_content))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "message_start" and "message_stop" not in kinds
    assert kinds[-1] == "error"
    error = events[-1][1]
    assert error["type"] == "error"
    assert error["error"]["type"] == ("overloaded_error" if fault == "stall" else "api_error")
    assert error["error"]["message"]
    # The user's turn is stored; nothing of the broken reply is.
    assert list(Message.objects.values_list("role", flat=True)) == ["user"]


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
def test_a_broken_whole_answer_is_a_json_error_with_502_or_504(faulty, api_key, fault):
    faulty.fault = fault
    response = _post(api_key, stream=False)
    assert response.status_code == (504 if fault == "stall" else 502)
    assert response["content-type"] == "application/json"
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] in ("api_error", "overloaded_error")
    assert list(Message.objects.values_list("role", flat=True)) == ["user"]


@pytest.mark.django_db
@pytest.mark.parametrize("stream", [True, False])
def test_an_upstream_silent_past_the_timeout_is_a_504(faulty, api_key, stream):
    faulty.fault = "silent"
    response = _post(api_key, stream=stream)
    assert response.status_code == 504
    assert response.json()["error"]["type"] == "overloaded_error"
    assert list(Message.objects.values_list("role", flat=True)) == ["user"]


@pytest.mark.django_db
def test_without_a_fault_the_same_stream_is_stored_whole(faulty, api_key):
    response = _post(api_key, stream=True)
    kinds = [kind for kind, _ in _sse_events(b"".join(response.streaming_content))]
    assert kinds[-1] == "message_stop" and "error" not in kinds
    reply = Message.objects.get(role="assistant")
    assert reply.content == [{"type": "text", "text": REPLY}]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fault", FAULTS)
def test_the_sdk_raises_instead_of_returning_a_fragment(live_server, faulty, api_key, fault, eager_celery):
    faulty.fault = fault
    client = anthropic.Anthropic(base_url=f"{live_server.url}/anthropic", api_key=api_key, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        with client.messages.stream(**{k: v for k, v in _body(True).items() if k != "stream"}) as stream:
            stream.get_final_message()
    assert caught.value.body["error"]["type"] in ("api_error", "overloaded_error")
    with pytest.raises(anthropic.APIStatusError) as whole:
        client.messages.create(**_body(False))
    assert whole.value.status_code in (502, 504)
    assert not Message.objects.filter(role="assistant").exists()
