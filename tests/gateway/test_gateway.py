"""The gateway through Django's test client: auth, sessions, what goes upstream, errors, overflow."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from compaction.models import Compaction, Reason
from gateway.models import Conversation
from sessions import services as session_services
from sessions.models import ApiKey, Message, Session
from tests.gateway.upstream import Reply

pytestmark = pytest.mark.django_db

URL = "/anthropic/v1/messages"


def call(body: dict, *, key: str | None, session: str | None = None, path: str = URL, **headers):
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    if key is not None:
        extra["HTTP_X_API_KEY"] = key
    if session is not None:
        extra["HTTP_X_COMPACTOR_SESSION"] = session
    return Client().post(path, data=json.dumps(body), content_type="application/json", **extra)


def body(*texts: str, **params) -> dict:
    """A conversation whose user turns are `texts`, with the assistant's "Done." between them."""
    messages = []
    for i, text in enumerate(texts):
        if i:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
        messages.append({"role": "user", "content": text})
    return {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": messages, **params}


# --- authentication ---------------------------------------------------------------------------


def test_no_key_is_a_401_in_the_messages_api_shape(upstream):
    response = call(body("hi"), key=None)
    assert response.status_code == 401
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "authentication_error"
    assert upstream.requests == []
    assert Session.objects.count() == 0


def test_a_wrong_or_revoked_key_is_a_401(upstream, user):
    assert call(body("hi"), key="not-a-key").status_code == 401
    api_key, key = ApiKey.objects.create_key(owner=user, name="old")
    api_key.revoked = True
    api_key.save()
    response = call(body("hi"), key=key)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_bearer_works_and_the_compactor_key_never_goes_upstream(upstream, api_key):
    response = Client().post(
        URL, data=json.dumps(body("hi")), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_key}"
    )
    assert response.status_code == 200
    sent = upstream.requests[0]
    assert sent.headers["x-api-key"] == "upstream-secret"
    assert "authorization" not in sent.headers
    assert api_key not in json.dumps(sent.headers) and api_key not in json.dumps(sent.body)


def test_without_an_upstream_key_it_says_which_setting_is_missing(upstream, api_key, settings):
    settings.GATEWAY_UPSTREAM_API_KEY = ""
    response = call(body("hi"), key=api_key)
    assert response.status_code == 503  # not a crash: the operator has not configured it
    assert "COMPACTOR_UPSTREAM_API_KEY" in response.json()["error"]["message"]


# --- which session --------------------------------------------------------------------------


def test_a_conversation_without_the_header_lands_in_one_session(upstream, api_key):
    turns = ["Write a parser", "Add tests", "Now the docs"]
    for n in range(1, len(turns) + 1):
        response = call(body(*turns[:n]), key=api_key)
        assert response.status_code == 200
    session = Session.objects.get()
    assert session.title == "Write a parser"
    assert response["x-compactor-session"] == str(session.pk)
    assert list(Message.objects.filter(session=session).values_list("role", flat=True)) == ["user", "assistant"] * 3
    # Another conversation of the same key is another session.
    call(body("Something else"), key=api_key)
    assert Session.objects.count() == 2


def test_the_header_picks_the_session_and_only_the_new_tail_is_appended(upstream, api_key, user):
    session = session_services.session_create(owner=user, title="mine")
    session_services.messages_append(
        session=session,
        messages=[{"role": "user", "content": "Write a parser"}, {"role": "assistant", "content": "Done."}],
    )
    response = call(body("Write a parser", "Add tests"), key=api_key, session=str(session.pk))
    assert response.status_code == 200
    assert Session.objects.count() == 1
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert stored[2] == ("user", "Add tests")
    assert stored[3][0] == "assistant"
    assert Conversation.objects.get(session=session).message_count == 4


def test_another_owners_session_is_a_404(upstream, api_key, other_user):
    theirs = session_services.session_create(owner=other_user, title="theirs")
    response = call(body("hi"), key=api_key, session=str(theirs.pk))
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"
    assert call(body("hi"), key=api_key, session="not-a-uuid").status_code == 404
    assert Message.objects.count() == 0


def test_messages_that_do_not_continue_the_header_session_are_refused(upstream, api_key, user):
    session = session_services.session_create(owner=user)
    session_services.messages_append(session=session, messages=[{"role": "user", "content": "first"}])
    response = call(body("something else"), key=api_key, session=str(session.pk))
    assert response.status_code == 400
    assert "do not continue" in response.json()["error"]["message"]
    assert Message.objects.filter(session=session).count() == 1


# --- validation -------------------------------------------------------------------------------


def test_a_bad_message_is_a_400_naming_it_and_nothing_is_stored(upstream, api_key):
    bad = body("Write a parser")
    bad["messages"].append(
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    )
    bad["messages"].append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope"}]})
    response = call(bad, key=api_key)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("messages[2].content[0].tool_use_id: no earlier tool_use")
    assert Message.objects.count() == 0
    assert upstream.requests == []


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"model": "m"}', "messages: required"),
        ('{"model": "m", "messages": ["hi"]}', "messages[0]: must be an object"),
        # A role the store does not model is the provider's to judge (tests/gateway/test_transparent.py);
        # none at all is refused, as the provider refuses it.
        ('{"model": "m", "messages": [{"content": "x"}]}', "messages[0].role: unknown role null"),
        (
            '{"model": "m", "system": [{"type": "text", "text": 5}], "messages": [{"role": "user"}]}',
            "messages[0].content",
        ),
    ],
)
def test_a_malformed_body_is_a_400(upstream, api_key, raw, fragment):
    response = Client().post(URL, data=raw, content_type="application/json", HTTP_X_API_KEY=api_key)
    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
    assert Session.objects.count() == 0  # the session made for it was rolled back with the append


def test_an_oversized_body_is_a_413(upstream, api_key, settings):
    settings.GATEWAY_MAX_REQUEST_BYTES = 2048
    response = call(body("x" * 5000), key=api_key)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"


# --- what goes upstream, what comes back ------------------------------------------------------


def test_everything_but_the_messages_goes_upstream_unchanged(upstream, api_key):
    request = body(
        "hi",
        system=[{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        tools=[{"name": "Bash", "description": "Run", "input_schema": {"type": "object", "properties": {}}}],
        temperature=0.2,
        metadata={"user_id": "u1"},
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    response = call(
        request, key=api_key, path=URL + "?beta=true", **{"anthropic-beta": "interleaved-thinking-2025-05-14"}
    )
    assert response.status_code == 200
    sent = upstream.requests[0]
    assert sent.query == "beta=true"
    assert sent.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert {k: v for k, v in sent.body.items() if k != "messages"} == {
        k: v for k, v in request.items() if k != "messages"
    }
    assert sent.body["messages"] == request["messages"]


def test_the_response_comes_back_unchanged_and_its_usage_is_recorded(upstream, api_key):
    upstream.reply = lambda rec: Reply(text="Let me run it.", tool_use=("Bash", {"command": "pytest"}))
    response = call(body("Run the tests"), key=api_key)
    reply = response.json()
    assert reply["content"][1]["name"] == "Bash"
    session = Session.objects.get()
    stored = Message.objects.get(session=session, seq=2)
    assert stored.content == reply["content"]
    assert stored.provider_usage["input_tokens"] == reply["usage"]["input_tokens"]
    assert session.reported_input_tokens == reply["usage"]["input_tokens"]
    assert session.last_usage["stop_reason"] == "tool_use"


def test_a_streamed_reply_is_passed_through_and_stored(upstream, api_key):
    upstream.reply = lambda rec: Reply(text="Streaming works fine", thinking="hmm")
    response = call(body("hi", stream=True), key=api_key)
    assert response.status_code == 200
    assert response["content-type"].startswith("text/event-stream")
    raw = b"".join(response.streaming_content).decode()
    assert raw.count("event: content_block_delta") >= 4
    reply = Message.objects.get(seq=2)
    assert reply.content[0]["type"] == "thinking" and reply.content[0]["signature"].startswith("sig-")
    assert reply.content[1] == {"type": "text", "text": "Streaming works fine"}
    assert Session.objects.get().last_usage["output_tokens"] > 1


def test_other_upstream_errors_come_back_with_their_status_and_body(upstream, api_key, settings):
    # The fake refuses a wrong server key: the client sees exactly its answer, once.
    settings.GATEWAY_UPSTREAM_API_KEY = "wrong"
    response = call(body("hi"), key=api_key)
    assert response.status_code == 401
    assert response.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    assert response["request-id"].startswith("req_")
    assert len(upstream.message_calls) == 1  # no retry for a non-overflow error
    assert Compaction.objects.count() == 0


def test_an_unreachable_upstream_is_a_502_api_error(upstream, api_key, settings):
    settings.GATEWAY_UPSTREAM_URL = "http://127.0.0.1:9"
    response = call(body("hi"), key=api_key)
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "api_error"
    assert "COMPACTOR_UPSTREAM_URL" in response.json()["error"]["message"]


# --- overflow -----------------------------------------------------------------------------------


def _long_history(n: int) -> list[str]:
    return [f"Step {i}: change module_{i}.py so that " + "the parser handles nested input " * 20 for i in range(n)]


def test_an_upstream_overflow_is_compacted_and_retried_once_without_the_client_noticing(upstream, api_key):
    turns = _long_history(12)
    for n in range(1, 12):
        assert call(body(*turns[:n]), key=api_key).status_code == 200
    upstream.overflow_next = 1
    before = len(upstream.message_calls)
    response = call(body(*turns), key=api_key)
    assert response.status_code == 200
    assert response.json()["type"] == "message"
    calls = upstream.message_calls[before:]
    assert [c.status for c in calls] == [400, 200]
    assert len(calls[1].body["messages"]) < len(calls[0].body["messages"])
    assert "summary" in json.dumps(calls[1].body["messages"][0]).lower()
    assert calls[1].body["messages"][-1]["content"] == turns[-1]  # the new question is still there
    job = Compaction.objects.get(reason=Reason.OVERFLOW)
    assert job.status == "succeeded"
    session = Session.objects.get()
    assert session.active_compaction_id == job.pk
    assert Message.objects.filter(session=session).count() == 24  # nothing lost


def test_an_overflow_with_nothing_to_compact_returns_the_error(upstream, api_key):
    upstream.overflow_next = 5
    response = call(body("hi"), key=api_key)
    assert response.status_code == 400
    assert "prompt is too long" in response.json()["error"]["message"]


# --- count_tokens -------------------------------------------------------------------------------


def test_count_tokens_counts_the_served_context_and_creates_nothing(upstream, api_key):
    response = call(body("just counting"), key=api_key, path=URL + "/count_tokens")
    assert response.status_code == 200
    assert response.json()["input_tokens"] > 0
    assert Session.objects.count() == 0
    turns = _long_history(8)
    for n in range(1, 8):
        call(body(*turns[:n]), key=api_key)
    upstream.overflow_next = 1
    call(body(*turns), key=api_key)  # compacts
    full = call(body(*turns), key="x", path=URL + "/count_tokens")
    assert full.status_code == 401
    counted = call(body(*turns, "and one more"), key=api_key, path=URL + "/count_tokens")
    sent = upstream.requests[-1]
    assert sent.path == "/v1/messages/count_tokens"
    assert len(sent.body["messages"]) < 17
    assert sent.body["messages"][-1]["content"] == "and one more"
    assert counted.json()["input_tokens"] == sent.prompt_tokens
    assert Message.objects.count() == 16  # counting appended nothing


def test_unknown_gateway_paths_are_a_404_in_the_api_shape(api_key):
    response = Client().get("/anthropic/v1/models", HTTP_X_API_KEY=api_key)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


# --- waiting for a summary --------------------------------------------------------------------


def _stored_history(session: Session) -> list[dict]:
    return [
        {"role": role, "content": content}
        for role, content in Message.objects.filter(session=session).order_by("seq").values_list("role", "content")
    ]


@pytest.mark.parametrize("over_the_window", [False, True])
def test_a_call_waits_for_the_queued_summary_only_when_the_context_cannot_fit(
    upstream, api_key, user, monkeypatch, over_the_window
):
    from compaction.services import compaction_run, messages_append_then_compact

    session = session_services.session_create(
        owner=user,
        context_window=2048,
        compaction_settings={"keep_recent_tokens": 300, "auto_compact_token_limit": 1000},
    )
    turns = _long_history(20 if over_the_window else 12)  # ~2.5k or ~1.5k tokens: over/under 2048
    for i, text in enumerate(turns):
        messages_append_then_compact(
            session=session, messages=[{"role": "user", "content": text}, {"role": "assistant", "content": f"ok {i}"}]
        )
    job = Compaction.objects.get(session=session, status="queued")  # no worker runs it in this test
    polls: list[float] = []

    def worker_runs_meanwhile(seconds: float) -> None:
        polls.append(seconds)
        compaction_run(compaction_id=job.pk)

    monkeypatch.setattr("gateway.services.time.sleep", worker_runs_meanwhile)
    history = _stored_history(session) + [{"role": "user", "content": "and now?"}]
    response = call({"model": "m", "max_tokens": 100, "messages": history}, key=api_key, session=str(session.pk))
    assert response.status_code == 200
    sent = upstream.message_calls[-1].body["messages"]
    if over_the_window:
        assert len(polls) == 1  # waited for the worker, once
        assert "<summary>" in json.dumps(sent[0]) and len(sent) < len(history)
    else:
        assert polls == []  # fits: the summary finishes in the background
        assert sent == history


def test_a_failure_to_record_the_reply_still_answers_and_the_next_call_catches_up(upstream, api_key, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr("gateway.services.gateway_record_reply", broken)
    first = call(body("Write a parser"), key=api_key)
    assert first.status_code == 200 and first.json()["content"][0]["text"] == "Done."
    monkeypatch.undo()
    # The client resends the reply it got: it is appended with the next question.
    response = call(body("Write a parser", "Add tests"), key=api_key)
    assert response.status_code == 200
    session = Session.objects.get()
    assert [m.role for m in Message.objects.filter(session=session).order_by("seq")] == ["user", "assistant"] * 2
