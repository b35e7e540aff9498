"""Claude Code's conversation identity through the gateway: every call carrying one
metadata.user_id session uuid belongs to one Compactor session; the small calls beside the
conversation (quota, title, topic and command checks) are answered as they came and recorded as
that session's side calls, never as sessions or messages of their own."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from compaction.core.provenance import without_provenance
from gateway.history import strip_transport
from gateway.identity import client_conversation_id
from gateway.sse import StreamAssembler
from sessions.models import Message, Session, SideCall
from tests.gateway.upstream import Reply

pytestmark = pytest.mark.django_db

URL = "/anthropic/v1/messages"
MODEL = "claude-sonnet-4-5-20250929"
SMALL_MODEL = "claude-haiku-4-5-20251001"
MAIN_SYSTEM = [
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
    {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks."},
]
TOOLS = [
    {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {}}},
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}},
]


def user_id(session_uuid: str) -> str:
    return f"user_{'ab' * 32}_account_{uuid.uuid4()}_session_{session_uuid}"


def call(api_key: str, body: dict) -> tuple[int, dict | None, bytes]:
    """POST like Claude Code; (status, the reply as the non-streaming API would give it, raw bytes)."""
    response = Client().post(
        URL + "?beta=true",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_USER_AGENT="claude-cli/2.0.14 (external, cli)",
    )
    if not body.get("stream"):
        return response.status_code, response.json(), response.content
    raw = b"".join(response.streaming_content)
    assembler = StreamAssembler()
    assembler.feed(raw)
    return response.status_code, assembler.response_message(), raw


def main_body(history: list[dict], meta: dict, *, stream: bool) -> dict:
    return {
        "model": MODEL,
        "max_tokens": 32000,
        "system": MAIN_SYSTEM,
        "tools": TOOLS,
        "metadata": meta,
        "messages": history,
        "stream": stream,
    }


def side_body(system: str, text: str, meta: dict, *, stream: bool = False, max_tokens: int = 512) -> dict:
    return {
        "model": SMALL_MODEL,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": system}],
        "metadata": meta,
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
    }


def side_replies(rec) -> Reply:
    """The stand-in answers tool calls on turns 2 and 5 of the main conversation."""
    if rec.body.get("model") == SMALL_MODEL:
        return Reply(text='{"isNewTopic": true, "title": "Fix tests"}')
    users = sum(1 for m in rec.body["messages"] if m["role"] == "user")
    if users in (2, 5):
        return Reply(text="Let me look.", tool_use=("Bash", {"command": f"pytest -q -k turn{users}"}))
    return Reply(text=f"Answer to turn {users}.")


def next_user_message(reply: dict, turn: int) -> dict:
    uses = [b for b in reply["content"] if b["type"] == "tool_use"]
    if uses:
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": uses[0]["id"], "content": f"{turn} passed"}],
        }
    return {"role": "user", "content": [{"type": "text", "text": f"Turn {turn}: please continue with step {turn}."}]}


def test_a_conversation_with_side_calls_is_one_session_holding_exactly_its_messages(upstream, api_key, client, user):
    upstream.reply = side_replies
    meta = {"user_id": user_id(str(uuid.uuid4()))}
    history: list[dict] = []
    side_calls = {
        0: side_body("Check the quota.", "quota", meta, max_tokens=1),
        1: side_body("Analyze if this message indicates a new conversation topic.", "Fix the tests", meta),
        5: side_body("Extract the command prefix of this bash command.", "git status --short", meta, stream=True),
    }
    for turn in range(8):
        if turn in side_calls:
            status, reply, _ = call(api_key, side_calls[turn])
            assert status == 200 and reply["content"][0]["text"].startswith('{"isNewTopic"')
            # Forwarded as it came: its own system prompt and its single message, nothing of the history.
            assert upstream.message_calls[-1].body["messages"] == side_calls[turn]["messages"]
            assert upstream.message_calls[-1].body["system"] == side_calls[turn]["system"]
        if turn == 0:
            history.append({"role": "user", "content": [{"type": "text", "text": "Fix the failing tests."}]})
        else:
            history.append(next_user_message(history[-1], turn))
        status, reply, raw = call(api_key, main_body(history, meta, stream=turn % 2 == 1))
        assert status == 200, raw[:300]
        history.append({"role": "assistant", "content": reply["content"]})

    session = Session.objects.get()
    stored = [
        {"role": m.role, "content": without_provenance(m.content)}
        for m in Message.objects.filter(session=session).order_by("seq")
    ]
    assert stored == [strip_transport(m) for m in history]
    assert session.message_count == 16 and not session.one_off
    assert session.system_prompt.startswith("You are Claude Code")
    assert session.model == MODEL and session.title == "Fix the failing tests."

    session.refresh_from_db()
    assert session.side_call_count == 3
    calls = list(SideCall.objects.filter(session=session).order_by("created_at", "id"))
    assert [c.summary for c in calls] == ["quota", "Fix the tests", "git status --short"]
    assert all(c.status == 200 and c.input_tokens > 0 and c.output_tokens > 0 for c in calls)
    assert [c.streamed for c in calls] == [False, False, True]

    listed = Client().get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {api_key}").json()
    assert [s["id"] for s in listed["results"]] == [str(session.pk)]
    assert listed["results"][0]["side_call_count"] == 3
    side = Client().get(f"/api/v1/sessions/{session.pk}/side-calls/", HTTP_AUTHORIZATION=f"Bearer {api_key}")
    assert [c["summary"] for c in side.json()["results"]] == ["git status --short", "Fix the tests", "quota"]
    assert side.json()["results"][0]["model"] == SMALL_MODEL

    client.force_login(user)
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Side calls" in page and "git status --short" in page


def test_a_subagent_with_the_same_id_gets_its_own_session_under_the_conversation(upstream, api_key):
    meta = {"user_id": user_id(str(uuid.uuid4()))}
    first = [{"role": "user", "content": "Refactor the parser."}]
    status, reply, _ = call(api_key, main_body(first, meta, stream=False))
    assert status == 200
    root = Session.objects.get()
    # The Task tool's subagent: its own system prompt, a history of its own.
    sub = {
        **main_body([{"role": "user", "content": "Find every parser call."}], meta, stream=False),
        "system": "You are a search agent.",
    }
    _, sub_reply, _ = call(api_key, sub)  # its first call: one user message, but its tools (a side call has none)
    assert SideCall.objects.count() == 0
    child = Session.objects.exclude(pk=root.pk).get()  # its own session from the first call on
    assert child.parent_id == root.pk and child.title == "Find every parser call."
    sub["messages"] = sub["messages"] + [
        {"role": "assistant", "content": sub_reply["content"]},
        {"role": "user", "content": "Go on."},
    ]
    status, _, _ = call(api_key, sub)
    assert status == 200
    child = Session.objects.exclude(pk=root.pk).get()
    assert child.parent_id == root.pk and child.message_count == 4
    # The main conversation goes on in its own session.
    history = first + [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "Thanks."}]
    call(api_key, main_body(history, meta, stream=False))
    root.refresh_from_db()
    assert root.message_count == 4 and Session.objects.count() == 2


def test_a_lone_call_without_an_id_is_kept_out_of_the_list_until_continued(upstream, api_key):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key}"}
    lone = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "What is 2+2?"}]}
    status, reply, _ = call(api_key, lone)
    assert status == 200
    session = Session.objects.get()
    assert session.one_off
    assert Client().get("/api/v1/sessions/", **auth).json()["results"] == []
    shown = Client().get("/api/v1/sessions/?one_off=true", **auth).json()["results"]
    assert [s["id"] for s in shown] == [str(session.pk)] and shown[0]["one_off"] is True
    assert Client().get("/api/v1/sessions/?one_off=maybe", **auth).status_code == 400

    lone["messages"] += [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "And 3+3?"}]
    call(api_key, lone)
    session.refresh_from_db()
    assert not session.one_off and session.message_count == 4 and Session.objects.count() == 1
    assert [s["id"] for s in Client().get("/api/v1/sessions/", **auth).json()["results"]] == [str(session.pk)]


def test_the_dashboard_lists_lone_calls_only_when_asked(upstream, api_key, client, user):
    call(api_key, {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "ping-lone"}]})
    client.force_login(user)
    assert "ping-lone" not in client.get("/").content.decode()
    assert "ping-lone" in client.get("/?single=on").content.decode()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"metadata": {"user_id": "user_ab12_account_4f0c_session_9B1DEB4D-3B7D-4BAD-9BDD-2B0D7B3DCB6D"}},
            "claude-code:9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d",
        ),
        ({"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "abc-123"})}}, "claude-code:abc-123"),
        ({"metadata": {"user_id": "someone@example.com"}}, None),
        ({"prompt_cache_key": "019a-conv"}, "prompt-cache:019a-conv"),
        ({}, None),
    ],
)
def test_the_client_conversation_id_is_read_from_what_each_client_sends(body, expected):
    assert client_conversation_id(body) == expected


def test_a_side_call_joins_the_fullest_session_of_its_conversation(upstream, api_key, user):
    """Two first calls of one id that raced each other left an empty session beside the real one:
    later side calls join the one holding the conversation."""
    from gateway.models import Conversation
    from sessions.services import session_create

    session_uuid = str(uuid.uuid4())
    meta = {"user_id": user_id(session_uuid)}
    empty = session_create(owner=user, title="")
    Conversation.objects.create(session=empty, owner=user, head_digest="", client_session=f"claude-code:{session_uuid}")
    status, _, _ = call(api_key, main_body([{"role": "user", "content": "Start."}], meta, stream=False))
    assert status == 200
    main = Session.objects.get(pk=empty.pk)  # the first turn went into the empty session
    assert main.message_count == 2
    other = session_create(owner=user, title="raced")
    Conversation.objects.create(session=other, owner=user, head_digest="", client_session=f"claude-code:{session_uuid}")
    call(api_key, side_body("Write a title.", "Start.", meta))
    assert SideCall.objects.get().session_id == main.pk
