from __future__ import annotations

import pytest

from compaction.core.tokens import count_content
from compaction.models import Compaction
from sessions import services
from sessions.models import Message

from .helpers import snapshot, tool_result, tool_use, url

pytestmark = pytest.mark.django_db


def append(api, session, *messages):
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_hybrid_estimate_after_a_usage_report(api, session):
    append(api, session, {"role": "user", "content": "Fix the parser"}, tool_use("t1"), tool_result("t1", "a.py"))
    response = api.post(
        url(session, "usage/"),
        {
            "input_tokens": 900,
            "output_tokens": 120,
            "cache_read_input_tokens": 40_000,
            "cache_creation_input_tokens": 1_100,
            "stop_reason": "tool_use",
            "model": "claude-sonnet-4-5-20250929",
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    # The newest message is a user message: the provider had seen everything stored.
    assert body["message_seq"] is None
    usage = body["usage"]
    assert usage["source"] == "provider+estimate"
    assert usage["reported_tokens"] == 42_000
    assert usage["reported_at_seq"] == 3
    assert usage["trailing_tokens"] == 0
    assert usage["tokens"] == 42_000
    estimate = usage["estimated_tokens"]
    assert estimate < 42_000  # tool definitions etc. are only in the provider's figure

    # The reply and the next result are added as estimates on top of the report.
    added = append(api, session, tool_use("t2", text="Next"), tool_result("t2", "b.py"))
    trailing = sum(m["token_count"] for m in added["messages"])
    usage = added["usage"]
    assert usage["trailing_tokens"] == trailing
    assert usage["tokens"] == 42_000 + trailing
    assert usage["estimated_tokens"] == estimate + trailing
    context = api.get(url(session, "context/")).json()
    assert context["tokens"] == 42_000 + trailing
    assert context["usage_ratio"] == round((42_000 + trailing) / 200_000, 4)
    session.refresh_from_db()
    assert session.last_usage["stop_reason"] == "tool_use"
    assert session.last_usage["prompt_tokens"] == 42_000


def test_a_report_after_the_reply_attaches_to_it(api, session):
    append(api, session, {"role": "user", "content": "hi"})
    reply = append(api, session, {"role": "assistant", "content": "Hello! How can I help?"})["messages"][0]
    body = api.post(url(session, "usage/"), {"input_tokens": 3000, "output_tokens": 9}, format="json").json()
    assert body["message_seq"] == 2
    # The provider saw message 1 only; the reply is estimated on top.
    assert body["usage"]["reported_at_seq"] == 1
    assert body["usage"]["tokens"] == 3000 + reply["token_count"]
    stored = Message.objects.get(session=session, seq=2)
    assert stored.provider_usage["input_tokens"] == 3000
    assert stored.provider_usage["output_tokens"] == 9


def test_max_tokens_drops_the_truncated_tool_use_from_the_context(api, session):
    append(api, session, {"role": "user", "content": "Write the file"})
    reply = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Writing it now."},
            {"type": "tool_use", "id": "t_cut", "name": "Write", "input": {"path": "a.py", "content": "def f("}},
        ],
    }
    append(api, session, reply)
    session.refresh_from_db()
    before = session.context_tokens
    body = api.post(
        url(session, "usage/"), {"input_tokens": 500, "output_tokens": 4096, "stop_reason": "max_tokens"}, format="json"
    ).json()
    assert body["dropped_tool_use_ids"] == ["t_cut"]
    assert body["message_seq"] == 2
    context = api.get(url(session, "context/")).json()
    assert context["messages"][-1] == {"role": "assistant", "content": [{"type": "text", "text": "Writing it now."}]}
    served = count_content([{"type": "text", "text": "Writing it now."}])
    stored = Message.objects.get(session=session, seq=2)
    assert stored.content == reply["content"]  # stored as sent
    session.refresh_from_db()
    assert session.context_tokens == before - stored.token_count + served == context["estimated_tokens"]


def test_max_tokens_with_only_a_tool_use_serves_a_note(api, session):
    append(api, session, {"role": "user", "content": "Go"}, tool_use("t_cut"))
    body = api.post(url(session, "usage/"), {"input_tokens": 10, "stop_reason": "max_tokens"}, format="json").json()
    assert body["dropped_tool_use_ids"] == ["t_cut"]
    content = api.get(url(session, "context/")).json()["messages"][-1]["content"]
    assert content == [{"type": "text", "text": services.TRUNCATED_NOTE}]


def test_an_answered_tool_use_is_served_again_with_its_result(api, session):
    append(api, session, {"role": "user", "content": "Go"}, tool_use("t_cut"))
    api.post(url(session, "usage/"), {"input_tokens": 10, "stop_reason": "max_tokens"}, format="json")
    append(api, session, tool_result("t_cut", "it ran anyway"))
    context = api.get(url(session, "context/")).json()
    assert context["messages"][1] == tool_use("t_cut")
    session.refresh_from_db()
    assert session.context_tokens == context["estimated_tokens"]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "input_tokens: This field is required."),
        ({"input_tokens": -1}, "input_tokens: Ensure this value is greater than or equal to 0."),
        ({"input_tokens": "many"}, "input_tokens: A valid integer is required."),
        ({"input_tokens": 1, "prompt_tokens": 2}, "prompt_tokens: unknown field"),
        ({"input_tokens": 1, "message_seq": 99}, "message_seq: no message with seq 99 in this session"),
        ({"input_tokens": 1, "message_seq": 1}, "message_seq: message 1 is a user message"),
    ],
)
def test_it_rejects_bad_usage_reports(api, session, body, error):
    append(api, session, {"role": "user", "content": "hi"})
    before = snapshot(session)
    response = api.post(url(session, "usage/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith(error), response.json()
    assert snapshot(session) == before


def test_crossing_the_trigger_returns_the_auto_compaction_job(api, user):
    session = services.session_create(
        owner=user, model="claude-sonnet-4-5", compaction_settings={"auto_compact_token_limit": 2_000}
    )
    small = append(api, session, {"role": "user", "content": "short"})
    assert small["compaction"] is None
    body = api.post(url(session, "usage/"), {"input_tokens": 2_500}, format="json").json()
    job = body["compaction"]
    assert job is not None
    assert job["status"] == "queued"
    assert job["reason"] == "threshold"
    assert Compaction.objects.filter(session=session, pk=job["id"]).exists()
    # A later append reports the same in-flight job rather than a second one.
    again = append(api, session, {"role": "user", "content": "more"})
    assert again["compaction"]["id"] == job["id"]
    assert Compaction.objects.filter(session=session).count() == 1


def test_the_chars_per_4_fallback_is_reported(api, session, monkeypatch):
    from compaction.core.tokens import MESSAGE_OVERHEAD, get_tokenizer

    monkeypatch.setitem(__import__("sys").modules, "tiktoken", None)  # no tokenizer available
    get_tokenizer.cache_clear()
    try:
        body = append(api, session, {"role": "user", "content": "abcdefgh" * 10})
        assert body["messages"][0]["token_count"] == MESSAGE_OVERHEAD + 20
        assert body["usage"]["tokenizer"] == "chars/4"
        assert body["usage"]["exact"] is False
        context = api.get(url(session, "context/")).json()
        assert (context["usage"]["tokenizer"], context["usage"]["exact"]) == ("chars/4", False)
    finally:
        get_tokenizer.cache_clear()


def test_a_reply_appended_with_max_tokens_usage_is_served_truncated(api, session):
    reply = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Editing."},
            {"type": "tool_use", "id": "t_cut", "name": "Edit", "input": {"path": "a.py"}},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 8192, "stop_reason": "max_tokens"},
    }
    body = append(api, session, {"role": "user", "content": "Edit a.py"}, reply)
    assert body["messages"][1]["provider_usage"]["stop_reason"] == "max_tokens"
    context = api.get(url(session, "context/")).json()
    assert context["messages"][1]["content"] == [{"type": "text", "text": "Editing."}]
    session.refresh_from_db()
    assert session.context_tokens == context["estimated_tokens"]
    assert session.total_message_tokens > session.context_tokens


def test_it_rejects_token_counts_beyond_the_database_range(api, session):
    response = api.post(url(session, "usage/"), {"input_tokens": 3_000_000_000}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("input_tokens: Ensure this value is less than or equal to")


def test_a_usage_report_locks_only_the_columns_it_needs(user):
    """Like an append: no full-row locked read (the system prompt can be large), and the active
    compaction is joined for its boundaries, not locked."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions import services

    session = services.session_create(owner=user, system_prompt="You are a careful agent. " * 200)
    services.messages_append(session=session, messages=[{"role": "user", "content": "hello"}])
    with CaptureQueriesContext(connection) as queries:
        result = services.usage_report(session=session, input_tokens=3_000, cache_read_input_tokens=20_000)
    if connection.vendor == "postgresql":  # SQLite has no row locks (FOR UPDATE): its write lock serializes
        locked = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
        assert len(locked) == 1 and '"system_prompt"' not in locked[0] and '"last_usage"' not in locked[0]
    assert result.usage.tokens == 23_000 and result.usage.implausible is None
    session.refresh_from_db()
    assert session.last_usage["prompt_tokens"] == 23_000 and session.usage_tokens == 23_000


def test_a_flagged_max_tokens_report_still_hides_the_cut_off_tool_call_from_the_meter(user):
    from sessions import services

    session = services.session_create(owner=user)
    services.messages_append(session=session, messages=[{"role": "user", "content": "word " * 400}])
    basis = services.usage_report(session=session, input_tokens=30_000).usage
    assert basis.implausible is None and basis.tokens == 30_000
    reply = tool_use("toolu_cut", command="x " * 300, text="let me look")
    services.messages_append(session=session, messages=[reply])
    # A client that drops the cache figures: 2 input tokens for a ~400-token context.
    result = services.usage_report(session=session, input_tokens=2, stop_reason="max_tokens")
    assert result.usage.implausible["code"] == "below_served" and result.dropped_tool_use_ids == ["toolu_cut"]
    session.refresh_from_db()
    # The meter keeps its basis (the plausible report) plus the reply as served now: cut down.
    assert session.tokens_since_report == session.context_tokens - basis.estimated_tokens
    assert session.tokens_since_report < count_content(reply["content"])
    assert result.usage.tokens == 30_000 + session.tokens_since_report


def test_another_sessions_numbers_are_flagged_until_a_second_report_confirms_a_change(api, user):
    from sessions import services

    session = services.session_create(owner=user, model="claude-sonnet-4-5")

    def turn(i: int, reported_on_top: int) -> dict:
        services.messages_append(session=session, messages=[{"role": "user", "content": f"step {i} " * 300}])
        session.refresh_from_db()
        body = {"input_tokens": session.context_tokens + reported_on_top}
        response = api.post(url(session, "usage/"), body, format="json")
        assert response.status_code == 200, response.json()
        return response.json()["usage"]

    for i in range(4):
        assert turn(i, 26_000)["implausible"] is None  # 26k of tools and system prompt we never see
    meter_before = services.session_usage(session).tokens
    odd = turn(4, 150_000)  # another session's figure: far above the calibrated prediction
    assert (
        odd["implausible"]["code"] == "above_expected"
        and odd["reported_tokens"] != odd["implausible"]["reported_tokens"]
    )
    assert odd["tokens"] < 150_000 and odd["tokens"] >= meter_before
    # The agent really added ~124k of tools: the next report agrees with the flagged one.
    confirmed = turn(5, 150_000)
    assert confirmed["implausible"] is None and confirmed["reported_tokens"] > 150_000
    assert confirmed["tokens"] == confirmed["reported_tokens"]
