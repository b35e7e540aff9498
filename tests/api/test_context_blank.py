"""Whitespace-only text is stored as sent but never served: the Anthropic Messages API rejects
"text content blocks must contain non-whitespace text". Usage figures follow what is served."""

from __future__ import annotations

import pytest

from compaction.core.tokens import count_content, count_text
from sessions import services
from sessions.models import Message

from .helpers import tool_result, tool_use, url
from .test_context import BIG_OUTPUT, activate, append

pytestmark = pytest.mark.django_db

BLANK_REPLY = {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}, {"type": "text", "text": "hi"}]}


def served_reference(body: dict, system: str = "") -> int:
    """Tokens of exactly what the context endpoint served, counted from scratch."""
    return count_text(system) + sum(count_content(m["content"]) for m in body["messages"])


def assert_valid_for_anthropic(messages: list[dict]) -> None:
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            assert content.strip(), m
        else:
            assert content, m
            for block in content:
                if block.get("type") == "text":
                    assert block["text"].strip(), m


def test_blank_text_blocks_and_blank_messages_are_stored_but_not_served(api, session):
    services.session_update(session=session, system_prompt="Be terse.")
    append(
        api,
        session,
        {"role": "user", "content": "hello"},
        BLANK_REPLY,
        {"role": "user", "content": " \n\t "},  # a whitespace-only string: left out
        {"role": "assistant", "content": [{"type": "text", "text": "\n"}]},  # nothing left: left out
        {"role": "user", "content": [{"type": "text", "text": " "}, {"type": "text", "text": "go on"}]},
        tool_use("t1", text="\n\n"),
        tool_result("t1", "a.py"),
        {"role": "assistant", "content": "done"},
    )
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("content", flat=True))
    assert stored[1] == BLANK_REPLY["content"] and stored[2] == " \n\t "  # as sent
    body = api.get(url(session, "context/")).json()
    assert body["messages"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "text", "text": "go on"}]},
        tool_use("t1"),
        tool_result("t1", "a.py"),
        {"role": "assistant", "content": "done"},
    ]
    assert body["seqs"] == [1, 2, 5, 6, 7, 8]
    assert_valid_for_anthropic(body["messages"])
    session.refresh_from_db()
    expected = served_reference(body, "Be terse.")
    assert body["estimated_tokens"] == expected == session.context_tokens  # incremental append
    assert body["breakdown"]["messages"] == expected - count_text("Be terse.")
    services.session_recompute_usage(session=session)
    assert session.context_tokens == expected  # full recompute agrees
    served = services.context_messages(session, served=True)
    assert [m.seq for m in served] == list(range(1, 9))  # left-out messages stay listed, with 0 tokens
    assert [m.tokens for m in served if m.seq in (3, 4)] == [0, 0]


def test_single_appends_count_like_batches(api, session):
    for message in ({"role": "user", "content": "hello"}, BLANK_REPLY, {"role": "user", "content": "\n"}):
        assert api.post(url(session, "messages/"), message, format="json").status_code == 201
    body = api.get(url(session, "context/")).json()
    session.refresh_from_db()
    assert session.context_tokens == body["estimated_tokens"] == served_reference(body)
    assert len(body["messages"]) == 2


def test_usage_report_after_a_blank_reply_counts_what_is_served(api, session):
    append(api, session, {"role": "user", "content": "hello"}, BLANK_REPLY)
    api.post(url(session, "usage/"), {"input_tokens": 1000}, format="json")
    append(
        api,
        session,
        {"role": "user", "content": "  "},
        {"role": "assistant", "content": [{"type": "text", "text": "\n"}]},
    )
    session.refresh_from_db()
    assert session.reported_at_seq == 1
    served_after = count_content([{"type": "text", "text": "hi"}])  # seq 2; seqs 3 and 4 are left out
    assert session.tokens_since_report == served_after
    body = api.get(url(session, "context/")).json()
    assert body["estimated_tokens"] == served_reference(body) == session.context_tokens
    before = session.tokens_since_report
    services.session_recompute_usage(session=session, reset_reported=False)
    assert session.tokens_since_report == before


def test_blank_text_next_to_pruned_outputs_after_a_compaction(api, session):
    append(
        api,
        session,
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "read it"},
        tool_use("t1", "Read", text="\n"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": BIG_OUTPUT},
                {"type": "text", "text": "\n\n"},
            ],
        },
        {"role": "user", "content": "\n"},
        tool_use("t2", "Read"),
        tool_result("t2", BIG_OUTPUT),
    )
    activate(session, summary="## Goal\nRead it.", first_kept_seq=3, prune_before_seq=7)
    session.refresh_from_db()
    body = api.get(url(session, "context/")).json()
    assert body["seqs"] == [None, 3, 4, 5, 7, 8]
    assert_valid_for_anthropic(body["messages"])
    pruned = body["messages"][3]["content"]
    assert len(pruned) == 1 and "output trimmed: " in pruned[0]["content"]
    assert body["estimated_tokens"] == served_reference(body) == session.context_tokens


def assert_counts_match(api, session, system: str = "", final_unstripped=None) -> dict:
    """Cached usage (incremental) == what is served == a full recompute. A final assistant reply
    served without its trailing whitespace is counted as served once the conversation goes on
    (`final_unstripped`), so that an append does not have to recount it."""
    body = api.get(url(session, "context/")).json()
    session.refresh_from_db()
    counted = [dict(m) for m in body["messages"]]
    if final_unstripped is not None:
        assert counted[-1]["role"] == "assistant"
        assert counted[-1]["content"] != final_unstripped
        counted[-1]["content"] = final_unstripped
    expected = served_reference({"messages": counted}, system)
    assert body["estimated_tokens"] == expected == session.context_tokens
    since = session.tokens_since_report
    services.session_recompute_usage(session=session, reset_reported=False)
    assert (session.context_tokens, session.tokens_since_report) == (expected, since)
    return body


def test_the_final_assistant_reply_is_served_without_trailing_whitespace(api, session):
    append(api, session, {"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi there.\n\n"})
    body = assert_counts_match(api, session, final_unstripped="Hi there.\n\n")
    assert body["messages"][-1] == {"role": "assistant", "content": "Hi there."}
    api.post(url(session, "usage/"), {"input_tokens": 500}, format="json")
    # No longer final: served as sent (trailing whitespace is fine mid-conversation).
    append(api, session, {"role": "user", "content": "and?"})
    body = assert_counts_match(api, session)
    assert body["messages"][1] == {"role": "assistant", "content": "Hi there.\n\n"}
    assert session.tokens_since_report == count_content("Hi there.\n\n") + count_content("and?")
    # A final reply whose last text block ends in whitespace, followed by left-out messages.
    append(
        api,
        session,
        {"role": "assistant", "content": [{"type": "text", "text": "Done. "}, {"type": "text", "text": "Bye \n"}]},
        {"role": "user", "content": "\n"},
        {"role": "assistant", "content": [{"type": "text", "text": " "}]},
    )
    body = assert_counts_match(
        api, session, final_unstripped=[{"type": "text", "text": "Done. "}, {"type": "text", "text": "Bye \n"}]
    )
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Done. "}, {"type": "text", "text": "Bye"}]
    assert_valid_for_anthropic(body["messages"])
    append(api, session, {"role": "user", "content": "thanks"})
    body = assert_counts_match(api, session)
    assert body["messages"][-2]["content"][-1] == {"type": "text", "text": "Bye \n"}


def test_a_max_tokens_report_on_a_final_reply_keeps_counts_consistent(api, session):
    append(
        api,
        session,
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running it \n"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
    )
    assert_counts_match(api, session)
    response = api.post(url(session, "usage/"), {"input_tokens": 500, "stop_reason": "max_tokens"}, format="json")
    assert response.json()["dropped_tool_use_ids"] == ["t1"]
    body = assert_counts_match(api, session, final_unstripped=[{"type": "text", "text": "Running it \n"}])
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Running it"}]
    assert session.tokens_since_report == count_content([{"type": "text", "text": "Running it \n"}])
    # Cut off with only blank text before the tool call: the reply is left out entirely.
    append(
        api,
        session,
        {"role": "user", "content": "again, please \n"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "\n"}, {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}],
        },
    )
    api.post(url(session, "usage/"), {"input_tokens": 600, "stop_reason": "max_tokens"}, format="json")
    body = assert_counts_match(api, session)
    assert body["seqs"] == [1, 2, 3]
    assert body["messages"][-1] == {"role": "user", "content": "again, please \n"}  # a user turn: as sent
