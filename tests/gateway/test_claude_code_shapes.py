"""What Claude Code sends, replayed through the gateway: a real Claude Code session's first turns
in the request shape Claude Code uses (recorded below), against the fake upstream answering each
call with the reply Claude Code got at that point.

Claude Code (ANTHROPIC_BASE_URL=<server>/anthropic, ANTHROPIC_API_KEY=<Compactor key>) sends:
- POST /v1/messages?beta=true, `stream: true`, with x-api-key, anthropic-version, anthropic-beta
  and its x-stainless-* / x-app headers;
- `system` as text blocks with cache_control, `tools` with input schemas, `metadata.user_id`;
- the whole history every call, cache_control on the newest user messages' last blocks (the
  Messages API allows four breakpoints per request, system included);
- POST /v1/messages/count_tokens?beta=true to size tool definitions (a one-message "foo" body).
"""

from __future__ import annotations

import copy
import json

import httpx2 as httpx
import pytest

from compaction.core.provenance import user_words, without_provenance
from compaction.core.transcripts import read_claude_code
from compaction.core.types import Msg
from compaction.models import Compaction
from gateway.history import strip_transport
from sessions.models import Message, Session
from tests.corpus import TRANSCRIPTS, corpus
from tests.gateway.upstream import Reply

pytestmark = [corpus, pytest.mark.django_db(transaction=True)]

TRANSCRIPT = TRANSCRIPTS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
MODEL = "claude-sonnet-4-5-20250929"
EPHEMERAL = {"type": "ephemeral"}

HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14",
    "anthropic-dangerous-direct-browser-access": "true",
    "user-agent": "claude-cli/2.0.14 (external, cli)",
    "x-app": "cli",
    "x-stainless-lang": "js",
    "x-stainless-retry-count": "0",
    "x-stainless-timeout": "600",
    "content-type": "application/json",
    "accept": "application/json",
}
SYSTEM = [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": EPHEMERAL},
    {
        "type": "text",
        "text": "You are an interactive CLI tool that helps users with software engineering tasks.\n"
        "# Tone and style\n...",
        "cache_control": EPHEMERAL,
    },
]
TOOLS = [
    {
        "name": name,
        "description": f"{name} tool",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": []},
    }
    for name in ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite", "Task")
]


REMINDER = {"type": "text", "text": "<system-reminder>\nThe file src/app.py was modified.\n</system-reminder>"}


def claude_code_body(history: list[dict], *, reminder: bool = True) -> dict:
    """The request body Claude Code builds: a reminder attached to the newest user message for
    this call only, breakpoints on the two newest user messages."""
    messages = [
        {"role": m["role"], "content": copy.deepcopy(m["content"])}
        if isinstance(m["content"], list)
        else {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
        for m in history
    ]
    if reminder and messages[-1]["role"] == "user":
        messages[-1]["content"].append(dict(REMINDER))
    marked = 0
    for message in reversed(messages):
        if message["role"] == "user" and marked < 2:
            message["content"][-1]["cache_control"] = EPHEMERAL
            marked += 1
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "messages": messages,
        "system": SYSTEM,
        "tools": TOOLS,
        "metadata": {"user_id": "user_0123_account__session_4567"},
        "temperature": 1,
        "stream": True,
    }


def breakpoints(body: dict) -> int:
    return json.dumps(body.get("system")).count("cache_control") + json.dumps(body["messages"]).count("cache_control")


def test_a_claude_code_session_through_the_gateway(live_server, api_key, upstream, eager_celery, settings):
    settings.COMPACTOR = {**settings.COMPACTOR, "AUTO_COMPACT_TOKEN_LIMIT": 6000, "KEEP_RECENT_TOKENS": 2000}
    transcript = [{"role": m["role"], "content": m["content"]} for m in read_claude_code(TRANSCRIPT).messages[:60]]
    replies = iter([m for m in transcript if m["role"] == "assistant"])
    upstream.reply = lambda rec: Reply(content=next(replies)["content"])
    http = httpx.Client(base_url=f"{live_server.url}/anthropic", headers={**HEADERS, "x-api-key": api_key}, timeout=60)

    # Claude Code sizes its tools first: counted upstream, no session for it.
    counted = http.post(
        "/v1/messages/count_tokens?beta=true",
        json={"model": MODEL, "messages": [{"role": "user", "content": "foo"}], "tools": TOOLS},
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert Session.objects.count() == 0

    for i, message in enumerate(transcript):
        if message["role"] != "assistant":
            continue
        body = claude_code_body(transcript[:i])
        with http.stream("POST", "/v1/messages?beta=true", json=body) as response:
            assert response.status_code == 200, response.read()
            events = [line for line in response.iter_lines() if line.startswith("event: ")]
        assert events[0] == "event: message_start" and events[-1] == "event: message_stop"
        sent = upstream.message_calls[-1]
        assert sent.query == "beta=true"
        assert sent.headers["x-api-key"] == "upstream-secret"
        assert sent.headers["anthropic-beta"] == HEADERS["anthropic-beta"]
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert {k: v for k, v in sent.body.items() if k != "messages"} == {
            k: v for k, v in body.items() if k != "messages"
        }
        assert breakpoints(sent.body) <= 4
        # The newest user message goes up exactly as Claude Code sent it, breakpoint included.
        assert sent.body["messages"][-1] == body["messages"][-1]
        # Whose words a block carries is the store's: the provider never sees the field.
        assert '"provenance": ' not in json.dumps(sent.body)

    session = Session.objects.get()
    assert session.agent == "claude-cli"
    assert session.model == MODEL
    rows = Message.objects.filter(session=session).order_by("seq").values_list("role", "content", "provenance")
    stored = [{"role": r, "content": without_provenance(c)} for r, c, _p in rows]
    # The reminder Claude Code added to each user message is marked the harness's: on its block
    # beside the person's words, on the message where it is the only text (beside tool results).
    users = [(c, p) for r, c, p in rows if r == "user"]
    assert users[0][1] == "person" and users[0][0][-1] == {**REMINDER, "provenance": "harness"}
    assert [words for words, _kind in user_words(Msg(1, "user", users[0][0], 0, provenance=users[0][1]))] == [
        transcript[0]["content"]
    ]
    assert {p for c, p in users[1:] if all(b["type"] != "text" for b in c[:-1])} == {"harness"}
    assert {p for r, _c, p in rows if r == "assistant"} == {""}
    # As first sent: each user message with the reminder it carried in its own call.
    expected = [strip_transport(m) for m in claude_code_body(transcript, reminder=False)["messages"]]
    for message in expected:
        if message["role"] == "user":
            message["content"].append(REMINDER)
    assert len(stored) == len(transcript) == 60
    assert stored == expected  # every message stored, without the request-scoped cache_control
    # The session compacted along the way, and what went upstream shrank accordingly.
    assert Compaction.objects.filter(session=session, status="succeeded").exists()
    calls = upstream.message_calls
    assert any("<summary>" in json.dumps(c.body["messages"][0]) for c in calls)
    assert len(calls[-1].body["messages"]) < 59
    # count_tokens for the ongoing conversation is counted on what the gateway would send.
    body = claude_code_body(transcript, reminder=False)
    body.pop("stream")
    counted = http.post("/v1/messages/count_tokens?beta=true", json=body)
    assert counted.status_code == 200
    assert len(upstream.requests[-1].body["messages"]) == len(calls[-1].body["messages"]) + 1
    assert Message.objects.filter(session=session).count() == 60
