"""A streamed answer's body ends right after its last event; the reply is stored when the server
closes the response, not while the client waits for the end of the body (the connection stayed
open ~10 ms after the last event while the reply and its usage were written)."""

from __future__ import annotations

import json

import pytest
from django.core import signals
from django.db import close_old_connections
from django.test import RequestFactory

from gateway import views
from gateway.openai import views as openai_views
from sessions.models import Message

pytestmark = pytest.mark.django_db


def server_closes(response) -> None:
    """What the WSGI server does once the body is out. Django's request_finished handler, which
    releases the thread's database connection, is held off as Django's test client does: the
    test's own transaction lives on that connection."""
    signals.request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        signals.request_finished.connect(close_old_connections)


def test_an_anthropic_stream_ends_before_its_reply_is_stored(upstream, api_key):
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = RequestFactory().post(
        "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=api_key
    )
    response = views.messages_view(request)
    raw = b"".join(response.streaming_content)  # what the server writes, to the body's end
    assert raw.rstrip().endswith(b'data: {"type": "message_stop"}')
    assert list(Message.objects.values_list("role", flat=True)) == ["user"]  # not yet: the body ended first
    server_closes(response)
    assert list(Message.objects.order_by("seq").values_list("role", flat=True)) == ["user", "assistant"]


def test_an_openai_stream_ends_before_its_reply_is_stored(openai_upstream, api_key):
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = RequestFactory().post(
        "/openai/v1/chat/completions",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key}",
    )
    response = openai_views.chat_completions_view(request)
    raw = b"".join(response.streaming_content)
    assert raw.rstrip().endswith(b"data: [DONE]")
    assert Message.objects.count() == 1
    server_closes(response)
    assert Message.objects.count() == 2


def test_a_stream_the_client_left_stores_nothing(upstream, api_key):
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    request = RequestFactory().post(
        "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=api_key
    )
    response = views.messages_view(request)
    next(iter(response.streaming_content))  # the client went away after the first event
    server_closes(response)
    assert Message.objects.count() == 1
