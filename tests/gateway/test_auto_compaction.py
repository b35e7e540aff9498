"""Auto-compaction through the gateway decides as the REST API does: the same figure (the usage
the stand-in upstream reported, plus what was appended since), on the same turn; once the job is
active, the next request upstream carries the summary."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import pytest
from django.test import Client

from compaction.models import Compaction, Reason, Status
from compaction.services import compaction_run
from gateway.sse import StreamAssembler
from sessions import services as session_services
from sessions.models import Message, Session
from tests.gateway.conftest import UPSTREAM_KEY
from tests.gateway.upstream import Reply

pytestmark = pytest.mark.django_db

MODEL = "claude-sonnet-4-5"  # a 200,000-token window: only the token limit triggers
TRIGGER = 20_000
SETTINGS = {"auto_compact_token_limit": TRIGGER, "keep_recent_tokens": 6_000}
REPLY = "Done: the module is refactored and its tests pass."
MAX_TURNS = 20


def user_text(turn: int) -> str:
    """About 1,550 tokens of a distinct request (cl100k, what the stand-in counts)."""
    return f"Step {turn}: refactor src/module_{turn}.py. " + " ".join(
        f"Function f{turn}_{j} must handle nested input." for j in range(150)
    )


def gateway_post(api_key: str, session: Session, messages: list[dict[str, Any]], *, stream: bool):
    body = {"model": MODEL, "max_tokens": 256, "messages": messages, "stream": stream}
    return Client().post(
        "/anthropic/v1/messages",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_X_COMPACTOR_SESSION=str(session.pk),
    )


def gateway_turn(api_key: str, session: Session, messages: list[dict[str, Any]], *, stream: bool) -> dict[str, Any]:
    """One call as an SDK makes it; the assistant message the client received."""
    response = gateway_post(api_key, session, messages, stream=stream)
    assert response.status_code == 200
    if not stream:
        return {"role": "assistant", "content": response.json()["content"]}
    assembler = StreamAssembler()
    for chunk in response.streaming_content:  # to the end of the body, as the SDKs read it
        assembler.feed(chunk)
    message = assembler.assistant_message()
    assert message is not None
    return message


def stream_until_stop(api_key: str, session: Session, messages: list[dict[str, Any]]):
    """A streamed call read up to its message_stop, its body not yet ended (the reply not yet
    recorded): (the rest of the body, the assembler holding the reply)."""
    chunks = iter(gateway_post(api_key, session, messages, stream=True).streaming_content)
    assembler = StreamAssembler()
    while not assembler.finished:
        assembler.feed(next(chunks))
    return chunks, assembler


def threshold_job(session_id) -> Compaction | None:
    return Compaction.objects.filter(session_id=session_id, reason=Reason.THRESHOLD).first()


def rest_conversation(api, upstream) -> tuple[int, list[int]]:
    """The same turns by a REST agent (append, context, model call, append the reply, report its
    usage): (the turn whose calls answered with a queued job, the meter after each turn)."""
    session_id = api.post("/api/v1/sessions/", {"model": MODEL, "compaction_settings": SETTINGS}, format="json").json()[
        "id"
    ]
    base = f"/api/v1/sessions/{session_id}"
    model_api = httpx.Client(base_url=upstream.url, headers={"x-api-key": UPSTREAM_KEY})
    meters: list[int] = []
    for turn in range(1, MAX_TURNS + 1):
        answers = [api.post(f"{base}/messages/", {"role": "user", "content": user_text(turn)}, format="json").json()]
        context = api.get(f"{base}/context/").json()
        reply = model_api.post(
            "/v1/messages", json={"model": MODEL, "max_tokens": 256, "messages": context["messages"]}
        )
        reply = reply.json()
        answers.append(
            api.post(f"{base}/messages/", {"role": "assistant", "content": reply["content"]}, format="json").json()
        )
        answers.append(
            api.post(f"{base}/usage/", {**reply["usage"], "stop_reason": reply["stop_reason"]}, format="json").json()
        )
        meters.append(answers[-1]["usage"]["tokens"])
        if any(answer["compaction"] for answer in answers):
            return turn, meters
    raise AssertionError(f"REST: no compaction queued in {MAX_TURNS} turns; meters {meters}")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_job_is_queued_on_the_turn_rest_queues_it_and_the_next_call_after_it_is_active_is_compacted(
    upstream, api, api_key, user, stream
):
    upstream.reply = lambda record: Reply(text=REPLY)
    rest_turn, rest_meters = rest_conversation(api, upstream)

    session = session_services.session_create(owner=user, model=MODEL, compaction_settings=SETTINGS)
    history: list[dict[str, Any]] = []
    meters: list[int] = []
    queued_turn = None
    for turn in range(1, MAX_TURNS + 1):
        history.append({"role": "user", "content": user_text(turn)})
        history.append(gateway_turn(api_key, session, history, stream=stream))
        session.refresh_from_db()
        # The recorded usage is the stand-in's report for this turn's call, plus the reply.
        assert session.last_usage["prompt_tokens"] == upstream.message_calls[-1].prompt_tokens
        meters.append(session.usage_tokens)
        if threshold_job(session.pk) is not None:
            queued_turn = turn
            break
    first_over = next((i for i, tokens in enumerate(meters, 1) if tokens > TRIGGER), None)
    assert first_over is not None and first_over > 5, meters
    assert queued_turn == first_over  # not one turn later
    assert queued_turn == rest_turn
    assert meters == rest_meters  # the same figure, turn by turn

    # No request so far carried a summary; the worker (this test) activates the job now.
    assert not any("<summary>" in json.dumps(call.body["messages"]) for call in upstream.message_calls)
    job = threshold_job(session.pk)
    assert job.status == Status.QUEUED
    compaction_run(compaction_id=job.pk)
    job.refresh_from_db()
    assert job.status == Status.SUCCEEDED

    before = len(upstream.message_calls)
    history.append({"role": "user", "content": user_text(queued_turn + 1)})
    gateway_turn(api_key, session, history, stream=stream)
    sent = upstream.message_calls[before]
    assert "<summary>" in json.dumps(sent.body["messages"][0])
    assert len(sent.body["messages"]) < len(history)
    assert sent.body["messages"][-1]["content"] == user_text(queued_turn + 1)
    assert sent.prompt_tokens < TRIGGER < upstream.message_calls[before - 1].prompt_tokens


def test_a_streamed_reply_the_next_call_stored_first_is_stored_once_with_its_usage(upstream, api_key, user):
    """A client that sends its next call as soon as message_stop arrives (before the stream's
    body ends): that call stores the reply it resends; the reply's own recording, just after,
    stores nothing twice and attaches the call's usage to that copy."""
    session = session_services.session_create(owner=user, model=MODEL)
    history: list[dict[str, Any]] = [{"role": "user", "content": user_text(1)}]
    chunks, assembler = stream_until_stop(api_key, session, history)
    history += [assembler.assistant_message(), {"role": "user", "content": user_text(2)}]
    assert gateway_turn(api_key, session, history, stream=False)["content"][0]["text"] == "Done."
    for _ in chunks:  # the first stream ends: its reply is recorded now
        pass

    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "provider_usage"))
    assert [role for _, role, _ in stored] == ["user", "assistant", "user", "assistant"]
    first_call, second_call = upstream.message_calls
    assert stored[1][2]["input_tokens"] == first_call.prompt_tokens  # the first reply carries its own usage
    assert stored[3][2]["input_tokens"] == second_call.prompt_tokens
    session.refresh_from_db()
    # Whichever report is the meter's basis, it counts every stored message once.
    assert session.usage_tokens == second_call.prompt_tokens + Message.objects.get(session=session, seq=4).token_count


def test_a_reply_the_client_changed_before_its_next_call_is_not_appended_after_it(upstream, api_key, user):
    """The next call arrives before the first reply is recorded, carrying the reply as the client
    kept it (edited): the history is the client's; the original reply is not appended after the
    next call's messages, and the first call's usage is still recorded."""
    session = session_services.session_create(owner=user, model=MODEL)
    history: list[dict[str, Any]] = [{"role": "user", "content": user_text(1)}]
    chunks, assembler = stream_until_stop(api_key, session, history)
    edited = {"role": "assistant", "content": [{"type": "text", "text": "Done (as the client kept it)."}]}
    history += [edited, {"role": "user", "content": user_text(2)}]
    assert gateway_turn(api_key, session, history, stream=False)["content"][0]["text"] == "Done."
    for _ in chunks:  # the first stream ends: its reply is recorded now
        pass

    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert [role for role, _ in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[1][1] == edited["content"]
    session.refresh_from_db()
    assert session.last_usage is not None
