"""A tool call still waiting for its result when a compaction cuts.

A history stored before appends kept tool pairs in order (sessions.turns) can hold a slow
tool's call, talk while it ran, then its result. A compaction cutting such a history must
never serve that result without its tool_use (the Anthropic API rejects it), and an overlay
already stored that way (one the cut did not place) is served valid too. Such histories can no
longer be appended (tests/api/test_tool_pair_order.py); here they are stored as they were.
"""

from __future__ import annotations

import pytest

from compaction.core.orphans import ORPHAN_RESULT_HEADER
from compaction.models import Compaction
from sessions import services, turns

from .factories import make_session, orphan_tool_results

pytestmark = pytest.mark.django_db

SLOW = "toolu_slow_build"


@pytest.fixture(autouse=True)
def stored_before_the_order_rule(monkeypatch):
    """Appends as they were before the order check: a late result was accepted."""
    monkeypatch.setattr(turns, "check_batch", lambda state, batch, first_seq=None: {})


def url(session, tail: str) -> str:
    return f"/api/v1/sessions/{session.pk}/{tail}"


def post_messages(api, session, *messages) -> None:
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()


def slow_call_then_conversation(api, session) -> None:
    post_messages(
        api,
        session,
        {"role": "user", "content": "Build the project and tell me when it is done."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Starting the build; it takes a while."},
                {"type": "tool_use", "id": SLOW, "name": "Bash", "input": {"command": "make all"}},
            ],
        },
    )
    for i in range(20):
        post_messages(
            api,
            session,
            {"role": "user", "content": f"Meanwhile, question {i}: what does parser rule {i} accept?"},
            {"role": "assistant", "content": f"Rule {i} accepts identifiers followed by {i} commas, then a colon."},
        )


def the_result() -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": SLOW, "content": "build finished: 0 errors"}],
    }


def test_a_compaction_keeps_a_tool_call_waiting_for_its_result(
    api, user, eager_celery, django_capture_on_commit_callbacks
):
    session = make_session(user)
    slow_call_then_conversation(api, session)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            url(session, "compactions/"), {"keep_recent_tokens": 300, "strategy": "extractive"}, format="json"
        )
    assert response.status_code == 202, response.json()
    job = Compaction.objects.get(pk=response.json()["id"])
    assert job.status == "succeeded", job.error
    # Only the request before the call could be summarized: the call stays verbatim.
    assert job.first_kept_seq == 2
    post_messages(api, session, the_result())
    context = api.get(url(session, "context/")).json()
    assert orphan_tool_results(context["messages"]) == []
    assert any(
        b.get("type") == "tool_use" and b["id"] == SLOW
        for m in context["messages"]
        for b in m["content"]
        if isinstance(m["content"], list)
    )
    assert context["messages"][-1]["content"][0]["type"] == "tool_result"


def test_a_result_whose_call_was_summarized_is_served_as_text(api, user):
    # Data compacted before the rule: the tool_use is in the summary, its result is kept.
    session = make_session(user)
    slow_call_then_conversation(api, session)
    post_messages(api, session, the_result())
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="## Goal\nBuild the project.", first_kept_seq=30
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)

    context = api.get(url(session, "context/")).json()
    assert orphan_tool_results(context["messages"]) == []
    last = context["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0] == {
        "type": "text",
        "text": ORPHAN_RESULT_HEADER.format(tool_use_id=SLOW, error="") + "\nbuild finished: 0 errors",
    }
    # Served tokens are those of what is served, and the meter agrees with the context.
    session.refresh_from_db()
    assert session.context_tokens == context["estimated_tokens"]


def test_a_max_tokens_replys_dropped_tool_call_does_not_hold_the_cut_back(
    api, user, eager_celery, django_capture_on_commit_callbacks
):
    # Its incomplete tool_use never gets a result (and is not served): not a call waiting.
    session = make_session(user)
    post_messages(
        api,
        session,
        {"role": "user", "content": "Write a.py"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Writing it now."},
                {"type": "tool_use", "id": "t_cut", "name": "Write", "input": {"path": "a.py", "content": "def f("}},
            ],
        },
    )
    body = api.post(url(session, "usage/"), {"input_tokens": 500, "stop_reason": "max_tokens"}, format="json").json()
    assert body["dropped_tool_use_ids"] == ["t_cut"]
    for i in range(20):
        post_messages(
            api,
            session,
            {"role": "user", "content": f"Question {i}: what does parser rule {i} accept?"},
            {"role": "assistant", "content": f"Rule {i} accepts identifiers followed by {i} commas, then a colon."},
        )
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            url(session, "compactions/"), {"keep_recent_tokens": 300, "strategy": "extractive"}, format="json"
        )
    job = Compaction.objects.get(pk=response.json()["id"])
    assert job.status == "succeeded", job.error
    assert job.first_kept_seq > 3  # the truncated reply (seq 2) is summarized like any other
