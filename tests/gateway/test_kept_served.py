"""The gateway sends the kept part as the compaction serves it: a client resends its own,
untrimmed copies of the kept messages on every call, and the gateway may forward a client's
bytes only where they equal what is served (gateway.history.merge_served) — a tool result the
kept plan trimmed, or served as a pointer, must never go upstream as the client's full copy."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from compaction import services as compaction_services
from compaction.models import Status
from sessions import services as session_services
from sessions.models import Message
from tests.api.test_context_kept import HOOK, work

pytestmark = pytest.mark.django_db


def test_a_trimmed_kept_result_never_goes_upstream_as_the_clients_copy(upstream, api_key, user):
    session = session_services.session_create(owner=user, title="kept", model="claude-sonnet-4-5")
    history = work()
    session_services.messages_append(session=session, messages=history)
    first = Message.objects.get(session=session, content="Fix render/1 and commit it.").seq
    keep = sum(Message.objects.filter(session=session, seq__gte=first).values_list("token_count", flat=True))
    job = compaction_services.compaction_request(
        session=session, reason="manual", strategy="extractive", overrides={"keep_recent_tokens": keep}
    )
    assert compaction_services.compaction_run(compaction_id=job.pk).status == Status.SUCCEEDED
    messages = [*history, {"role": "user", "content": "Rebuild the PLT, then commit."}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": messages}
    response = Client().post(
        "/anthropic/v1/messages",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_X_COMPACTOR_SESSION=str(session.pk),
    )
    assert response.status_code == 200, response.content
    sent = upstream.message_calls[-1].body["messages"]
    results = {
        block["tool_use_id"]: block["content"]
        for m in sent
        if isinstance(m["content"], list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    }
    assert results["t4"] == HOOK  # the first copy, whole
    for copy in ("t5", "t6", "t7"):
        assert results[copy].startswith("[same Bash output as in message #")  # not the client's dump
    assert "out of date" in results["t1"] and "holds them all" in results["t2"]
    assert sent[-1] == messages[-1]  # the new question, as the client sent it
    assert len(json.dumps(sent)) < len(json.dumps(messages)) - 10_000
