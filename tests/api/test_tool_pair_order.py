"""Appends keep every served context valid for the Messages API: a tool_use's results come in
the user turn right after it, before anything else of that turn. What would break that is a
400 naming the call and how to answer it, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from sessions import services, turns
from sessions.selectors import context_build

from .helpers import snapshot, tool_result, tool_use, url

pytestmark = pytest.mark.django_db


def post(api, session, *messages: dict[str, Any]):
    return api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")


def served_pairs_problems(messages: list[dict[str, Any]]) -> list[str]:
    """What the Messages API would reject in a served context's tool pairs (merging same-role turns)."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        blocks = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
        if turns and turns[-1][0] == m["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((m["role"], list(blocks)))
    problems = []
    for index, (role, blocks) in enumerate(turns):
        if role != "assistant":
            continue
        calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        following = turns[index + 1][1] if index + 1 < len(turns) else None
        if not calls or following is None:
            continue
        if index + 2 == len(turns) and all(b["type"] == "tool_result" for b in following):
            continue  # the last turn, its parallel results still arriving: the agent calls the model after
        leading = []
        for block in following:
            if block["type"] != "tool_result":
                break
            leading.append(block["tool_use_id"])
        if set(calls) - set(leading):
            problems.append(f"turn {index}: calls {calls} answered first by {leading}")
    return problems


def test_it_refuses_user_text_while_a_tool_call_waits(api, session):
    assert post(api, session, {"role": "user", "content": "List files"}, tool_use("t1", "Bash")).status_code == 201
    before = snapshot(session)
    response = api.post(url(session, "messages/"), {"role": "user", "content": "Never mind"}, format="json")
    assert response.status_code == 400
    body = response.json()
    problem = body["detail"]["content"][0]
    assert "tool_use 't1' of the assistant message at seq 2 is waiting for its result" in problem
    assert "\"tool_use_id\": 't1'" in problem and "text and other blocks may follow the results" in problem
    assert snapshot(session) == before


def test_it_names_every_waiting_call_of_a_parallel_turn(api, session):
    parallel = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "Read", "input": {}},
            {"type": "tool_use", "id": "b", "name": "Grep", "input": {}},
        ],
    }
    response = post(
        api, session, {"role": "user", "content": "Go"}, parallel, tool_result("a"), {"role": "user", "content": "hm"}
    )
    assert response.status_code == 400
    assert (
        "tool_use 'b' of the assistant message at messages[1] is waiting"
        in response.json()["detail"]["messages[3].content"][0]
    )
    response = post(api, session, {"role": "user", "content": "Go"}, parallel, {"role": "user", "content": "hm"})
    assert "tool_uses 'a', 'b' of the assistant message at messages[1] are waiting" in response.json()["error"]


def test_results_first_then_text_in_the_same_message_is_accepted_and_served_valid(api, session):
    post(api, session, {"role": "user", "content": "Read a.py"}, tool_use("t1", "Read"))
    answer = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"},
            {"type": "text", "text": "Also check b.py"},
        ],
    }
    assert api.post(url(session, "messages/"), answer, format="json").status_code == 201
    context = api.get(url(session, "context/")).json()
    assert served_pairs_problems(context["messages"]) == []


def test_text_before_the_results_is_refused(api, session):
    post(api, session, {"role": "user", "content": "Read a.py"}, tool_use("t1", "Read"))
    answer = {
        "role": "user",
        "content": [{"type": "text", "text": "Here:"}, {"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
    }
    response = api.post(url(session, "messages/"), answer, format="json")
    assert response.status_code == 400
    assert "tool_use 't1'" in response.json()["detail"]["content"][0]


def test_parallel_results_may_come_in_consecutive_user_messages(api, session):
    parallel = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "Read", "input": {}},
            {"type": "tool_use", "id": "b", "name": "Grep", "input": {}},
        ],
    }
    assert post(api, session, {"role": "user", "content": "Go"}, parallel, tool_result("a")).status_code == 201
    after_b = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "b", "content": "2"}, {"type": "text", "text": "ok?"}],
    }
    assert post(api, session, after_b).status_code == 201
    assert served_pairs_problems(api.get(url(session, "context/")).json()["messages"]) == []


def test_a_late_result_in_the_same_request_is_refused(api, session):
    before = snapshot(session)
    response = post(
        api,
        session,
        {"role": "user", "content": "Go"},
        tool_use("t1"),
        {"role": "user", "content": "wait"},
        tool_result("t1"),
    )
    assert response.status_code == 400
    assert "messages[2].content" in response.json()["detail"]
    assert snapshot(session) == before


def test_a_result_for_a_call_of_an_earlier_turn_is_refused(api, session):
    # A max_tokens reply's cut-off call needs no result, so the conversation may go on without one...
    cut = tool_use("t_cut", "Write", text="Writing")
    post(api, session, {"role": "user", "content": "Write a.py"}, cut)
    assert (
        api.post(url(session, "usage/"), {"input_tokens": 500, "stop_reason": "max_tokens"}, format="json").status_code
        == 200
    )
    assert (
        post(api, session, {"role": "user", "content": "Go on"}, {"role": "assistant", "content": "Done."}).status_code
        == 201
    )
    # ...but its result may not arrive later: it would follow other turns.
    before = snapshot(session)
    response = post(api, session, tool_result("t_cut"))
    assert response.status_code == 400
    problem = response.json()["detail"]["messages[0].content[0].tool_use_id"][0]
    assert "tool_use 't_cut' is not a call of the latest assistant turn (at seq 4)" in problem
    assert snapshot(session) == before


def test_a_result_after_other_content_of_the_same_user_turn_is_refused(api, session):
    post(api, session, {"role": "user", "content": "Write a.py"}, tool_use("t_cut", "Write", text="Writing"))
    api.post(url(session, "usage/"), {"input_tokens": 500, "stop_reason": "max_tokens"}, format="json")
    assert post(api, session, {"role": "user", "content": "Go on"}).status_code == 201
    response = post(api, session, tool_result("t_cut"))
    assert response.status_code == 400
    assert "before any other content" in response.json()["detail"]["messages[0].content[0].tool_use_id"][0]
    # Right after the cut-off reply, its hidden call may still be answered.
    post(api, session, tool_use("t2", "Write", text="Again"))
    api.post(url(session, "usage/"), {"input_tokens": 600, "stop_reason": "max_tokens"}, format="json")
    assert post(api, session, tool_result("t2")).status_code == 201


def test_consecutive_assistant_messages_are_one_turn(api, session):
    post(
        api, session, {"role": "user", "content": "Go"}, tool_use("t1"), {"role": "assistant", "content": "Running it."}
    )
    response = api.post(url(session, "messages/"), {"role": "user", "content": "and?"}, format="json")
    assert response.status_code == 400
    assert "tool_use 't1'" in response.json()["detail"]["content"][0]
    assert post(api, session, tool_result("t1")).status_code == 201


# Property: whatever an agent sends, what the append accepts is served as a valid context.
# Each step is one message: user text, an assistant reply with 0-2 calls (sometimes cut off by
# max_tokens), or a user message answering some calls (any stored id, old or new), with text
# before or after the results.
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.just(0), st.booleans()),
        st.tuples(st.just("assistant"), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("results"), st.integers(1, 3), st.sampled_from(["none", "before", "after"])),
        st.tuples(st.just("report"), st.just(0), st.booleans()),
    ),
    min_size=1,
    max_size=10,
)


def _step(kind: str, n, flag, ids: list[str]) -> dict[str, Any] | None:
    if kind == "text":
        return {"role": "user", "content": "carry on"}
    if kind == "assistant":
        new = [f"t{len(ids) + i}" for i in range(n)]
        ids.extend(new)
        blocks = [{"type": "text", "text": "ok"}] + [
            {"type": "tool_use", "id": i, "name": "Read", "input": {}} for i in new
        ]
        return {"role": "assistant", "content": blocks, **({"usage": {"stop_reason": "max_tokens"}} if flag else {})}
    if not ids:
        return None
    chosen = list(dict.fromkeys(ids[-k] for k in range(1, min(n, len(ids)) + 1)))
    results = [{"type": "tool_result", "tool_use_id": i, "content": "x"} for i in chosen]
    text = [{"type": "text", "text": "and then?"}]
    return {"role": "user", "content": {"none": results, "before": text + results, "after": results + text}[flag]}


@hyp_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_whatever_is_accepted_is_served_as_a_valid_context(user, steps):
    session = services.session_create(owner=user)
    ids: list[str] = []
    for kind, n, flag in steps:
        if kind == "report":
            # The provider's usage for the newest reply: max_tokens hides its trailing calls.
            services.usage_report(session=session, input_tokens=10, stop_reason="max_tokens" if flag else "end_turn")
            continue
        message = _step(kind, n, flag, ids)
        if message is None:
            continue
        try:
            services.messages_append(session=session, messages=[message])
        except ValidationError:
            pass  # refused: nothing stored, the conversation goes on
        # The order state the append stored is the one the messages give.
        session.refresh_from_db()
        if session.turn_state is not None:
            assert session.turn_state == turns.stored_form(turns.stored_turn(session.pk), session.last_seq)
    served = context_build(session=session).messages
    assert served_pairs_problems(served) == []


def test_an_assistant_message_waits_for_every_result_of_a_parallel_turn(api, session):
    parallel = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "Read", "input": {}},
            {"type": "tool_use", "id": "b", "name": "Grep", "input": {}},
        ],
    }
    assert post(api, session, {"role": "user", "content": "Go"}, parallel, tool_result("a")).status_code == 201
    before = snapshot(session)
    response = api.post(url(session, "messages/"), {"role": "assistant", "content": "Done."}, format="json")
    assert response.status_code == 400
    problem = response.json()["detail"]["role"][0]
    assert "tool_use 'b' of the assistant message at seq 2 is still waiting for a result" in problem
    assert snapshot(session) == before
    assert post(api, session, tool_result("b"), {"role": "assistant", "content": "Done."}).status_code == 201
