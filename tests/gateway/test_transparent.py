"""The gateway is a transparent proxy: roles, block types and fields the store does not model go
upstream as the client sent them and are stored (as harness text / without the unknown fields,
the rest kept beside the message), never refused, never dropped. The REST API stays strict.

Claude Code 2.1.197 with its default model sends `{"role": "system"}` messages inside
`messages` (beta mid-conversation-system-2026-04-07): the gateway answered them with
`400 messages[1].role: unknown role 'system'`, and Claude Code gave up after three tries.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client

from compaction.models import Reason
from compaction.services import compaction_request, compaction_run
from gateway.anthropic_map import for_store, plain, restore, to_stored
from gateway.models import MessageExtra
from sessions.models import Message, Session
from tests.gateway.upstream import Reply

pytestmark = pytest.mark.django_db

BETAS = "claude-code-20250219,mid-conversation-system-2026-04-07,a-beta-from-next-year-2027-01-01"
AGENTS = {"role": "system", "content": "Available agent types for the Agent tool: - claude: Catch-all."}
REMINDER = {"type": "text", "text": "<system-reminder>\ntoday is 2026-11-28\n</system-reminder>"}
SEARCH = [  # a server tool's pair: block types the store does not know, in the assistant's message
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "sqlite wal"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": [{"type": "web_search_result", "url": "https://example.org/wal", "title": "WAL"}],
    },
]


def post(api_key: str, body: dict[str, Any], **headers: str):
    return Client().post(
        "/anthropic/v1/messages?beta=true",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_ANTHROPIC_BETA=BETAS,
        **headers,
    )


def turn_messages(n: int) -> list[dict[str, Any]]:
    """Claude Code's history after n tool turns: its system message after the first request,
    a web search, then Bash calls (each reply a tool_use whose result follows)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [REMINDER, {"type": "text", "text": "Count the lines of every file in src/."}]},
        copy.deepcopy(AGENTS),
        {"role": "assistant", "content": [*copy.deepcopy(SEARCH), {"type": "text", "text": "Searching done."}]},
        {"role": "user", "content": "go on", "x_new_field": {"kept": True}},
    ]
    for i in range(n):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Counting file {i}: " + "lines " * 60},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash",
                        "input": {"command": f"wc -l src/f{i}.py"},
                        "a_field_of_a_newer_beta": i,
                    },
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} src"}]}
        )
        if i == n - 2:
            messages.append({"role": "system", "content": f"The user switched to plan mode after file {i}."})
    return messages


def test_claude_codes_mid_conversation_system_message_goes_upstream_unchanged_and_is_stored(upstream, api_key):
    body = {
        "model": "claude-opus-4-8",
        "max_tokens": 1000,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "context_management": {"edits": []},
        "messages": [{"role": "user", "content": [REMINDER, {"type": "text", "text": "hello"}]}, AGENTS],
    }
    raw = json.dumps(body).encode()
    response = Client().post(
        "/anthropic/v1/messages?beta=true",
        data=raw,
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_ANTHROPIC_BETA=BETAS,
    )
    assert response.status_code == 200, response.content
    b"".join(response.streaming_content)
    call = upstream.message_calls[-1]
    assert call.raw == raw  # the client's bytes, as they came
    assert call.headers["anthropic-beta"] == BETAS  # a beta the gateway has never heard of passes too
    session = Session.objects.get()
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content", "provenance"))
    assert stored[1] == ("user", AGENTS["content"], "harness")  # the harness's words, counted and summarized
    assert stored[2][0] == "assistant"
    assert MessageExtra.objects.filter(session=session).count() == 1


def test_unknown_roles_blocks_and_fields_are_stored_and_served_back_as_they_came_after_a_compaction(
    upstream, api_key, settings
):
    upstream.reply = lambda rec: Reply(text="Counted.")
    settings.COMPACTOR = {**settings.COMPACTOR, "DEFAULT_CONTEXT_WINDOW": 200_000}
    messages = turn_messages(14)
    first = {"model": "m", "max_tokens": 100, "messages": messages}
    assert post(api_key, first).status_code == 200
    session = Session.objects.get()
    assert session.message_count == len(messages) + 1  # every message stored, and the reply
    job = compaction_request(
        session=session, reason=Reason.MANUAL, overrides={"keep_recent_tokens": 900}, strategy="extractive"
    )
    compaction_run(compaction_id=job.pk)  # the summarizer reads the mapped messages without a hitch
    session.refresh_from_db()
    assert session.active_compaction_id is not None

    history = messages + [{"role": "assistant", "content": [{"type": "text", "text": "Counted."}]}]
    history.append({"role": "user", "content": "and the tests?"})
    response = post(api_key, {**first, "messages": history})
    assert response.status_code == 200, response.content
    sent = upstream.message_calls[-1].body["messages"]
    assert len(sent) < len(history)  # compacted
    # Every kept message goes as the client sent it (its unknown fields included), the rest summarized.
    kept = sent[1:]
    assert kept == history[len(history) - len(kept) :]
    assert {"role": "system", "content": "The user switched to plan mode after file 12."} in kept
    assert "<summary>" in json.dumps(sent[0]) and AGENTS not in sent
    blocks = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
    ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    assert ids and ids == {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}  # pairs whole


def test_a_system_message_in_the_kept_part_served_from_the_store_comes_back_as_it_came(upstream, api_key, user):
    """Pruned or stored copies (not the client's) get what the mapping left out put back."""
    original = {"role": "system", "content": [{"type": "text", "text": "mid-conversation note", "x": 1}], "name": "n"}
    stored, extras = for_store(original)
    assert stored == {
        "role": "user",
        "content": [{"type": "text", "text": "mid-conversation note"}],
        "provenance": "harness",
    }
    served = {"role": "user", "content": [{"type": "text", "text": "mid-conversation note"}]}
    assert restore(served, extras) == original
    # Unknown blocks: their words stored; put back only where the served copy is still the mapping's.
    assistant = {"role": "assistant", "content": copy.deepcopy(SEARCH)}
    stored, extras = for_store(assistant)
    assert stored["content"][0]["type"] == "text" and "sqlite wal" in stored["content"][0]["text"]
    assert restore({"role": "assistant", "content": stored["content"]}, extras) == assistant
    truncated = [{"type": "text", "text": "[truncated]"}, stored["content"][1]]
    assert restore({"role": "assistant", "content": truncated}, extras)["content"][0] == truncated[0]
    assert plain({"role": "user", "content": [REMINDER]}) and to_stored(AGENTS)[1] == {"role": "system"}


def test_the_rest_api_stays_strict_about_roles(api, user):
    session_id = api.post("/api/v1/sessions/", {"model": "m"}, format="json").json()["id"]
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", AGENTS, format="json")
    assert response.status_code == 400
    assert "unknown role 'system'" in json.dumps(response.json())


def test_what_the_provider_would_refuse_is_still_refused(upstream, api_key):
    bad = {"role": "assistant", "content": [{"type": "tool_use", "id": "", "name": "Bash", "input": {}}]}
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}, bad]}
    response = post(api_key, body)
    assert response.status_code == 400
    assert "messages[1].content[0].id" in response.json()["error"]["message"]
    assert upstream.message_calls == []
