"""The official anthropic SDK through the gateway on a live server, against the fake upstream.

Compaction jobs run in-process when their transaction commits (eager Celery), in the server's
request thread: the worker's stand-in.
"""

from __future__ import annotations

import json

import anthropic
import pytest

from compaction.models import Compaction, Reason, Status
from sessions.models import Message, Session
from tests.gateway.sdk_clients import closing, settled_http_client
from tests.gateway.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gateway-test-model"  # unknown to the registry: the small_window default window applies
TRIGGER = 3000
WINDOW = 8000


def sdk(live_server, key: str, **headers) -> anthropic.Anthropic:
    return closing(
        anthropic.Anthropic(
            base_url=f"{live_server.url}/anthropic",
            api_key=key,
            max_retries=0,
            default_headers=headers or None,
            http_client=settled_http_client(),
        )
    )


def user_turn(i: int) -> str:
    # ~150 tokens each: the 8k window is crossed after about 20 turns without compaction.
    return f"Turn {i}: now update src/module_{i}.py so that " + "the parser accepts nested brackets and " * 14


def tooling(rec) -> Reply:
    """Every fifth user turn asks to run something: the reply is a tool call, the client answers it."""
    last = rec.body["messages"][-1]["content"]
    text = last if isinstance(last, str) else json.dumps(last)
    if "RUN" in text:
        return Reply(text="Running it.", tool_use=("Bash", {"command": "pytest -q"}))
    return Reply(text=f"Updated as asked ({len(rec.body['messages'])} messages seen). " + "All good. " * 10)


def converse(client: anthropic.Anthropic, turns: int, *, on_turn=None) -> list[dict]:
    history: list[dict] = []
    for i in range(turns):
        if on_turn:
            on_turn(i)
        last = history[-1] if history else None
        pending = [b for b in (last["content"] if last else []) if getattr(b, "type", None) == "tool_use"]
        if pending:
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": pending[0].id, "content": "12 passed"}],
                }
            )
        else:
            text = user_turn(i) + (" RUN the tests." if i % 5 == 4 else "")
            history.append({"role": "user", "content": text})
        params = {"model": MODEL, "max_tokens": 512, "system": "You are a careful coding agent.", "messages": history}
        if i % 3 == 2:
            with client.messages.stream(**params) as stream:
                reply = stream.get_final_message()
        else:
            reply = client.messages.create(**params)
        assert reply.type == "message"
        # As SDK users do: the response's content blocks go straight back into the history.
        history.append({"role": "assistant", "content": reply.content})
    return history


def test_thirty_turns_every_third_streamed_stay_near_the_trigger(
    live_server, api_key, upstream, eager_celery, small_window
):
    upstream.window = WINDOW
    upstream.reply = tooling
    history = converse(sdk(live_server, api_key), 30)

    session = Session.objects.get()  # no session header: the whole conversation is one session
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert len(stored) == len(history) == 60
    assert [m.role for m in stored] == [m["role"] for m in history]
    # Every reply's usage was recorded on it.
    replies = [m for m in stored if m.role == "assistant"]
    calls = upstream.message_calls
    assert len(calls) == 30 and all(c.status == 200 for c in calls)
    assert all(m.provider_usage and m.provider_usage["input_tokens"] > 0 for m in replies)
    assert [m.provider_usage["input_tokens"] for m in replies] == [c.prompt_tokens for c in calls]

    # Compacted in the background once over the trigger; upstream got the compacted context.
    jobs = Compaction.objects.filter(session=session, reason=Reason.THRESHOLD, status=Status.SUCCEEDED)
    assert jobs.exists()
    first_compacted = next(i for i, c in enumerate(calls) if "<summary>" in json.dumps(c.body["messages"][0]))
    assert calls[first_compacted - 1].prompt_tokens > TRIGGER * 0.8
    later = [c.prompt_tokens for c in calls[first_compacted:]]
    assert max(later) < TRIGGER * 1.5, later
    assert max(c.prompt_tokens for c in calls[:first_compacted]) < WINDOW
    # What the client sent grew the whole time; what went upstream did not.
    assert len(calls[-1].body["messages"]) < len(history) - 1
    print(f"prompt tokens after the first compaction: max {max(later)}, last {later[-1]} (trigger {TRIGGER})")


def test_an_overflow_mid_conversation_is_invisible_to_the_client(
    live_server, api_key, upstream, eager_celery, small_window, settings
):
    settings.COMPACTOR = {**settings.COMPACTOR, "AUTO_COMPACT": False}  # only the overflow compacts
    upstream.window = 2500  # the provider's real limit is below what the session believes
    history = converse(sdk(live_server, api_key), 30)  # reaches ~4.5k tokens without compaction
    calls = upstream.message_calls
    refused = [i for i, c in enumerate(calls) if c.status == 400]
    assert refused, "the conversation never overflowed the fake's window"
    assert all(calls[i + 1].status == 200 for i in refused)  # one transparent retry each
    assert Compaction.objects.filter(reason=Reason.OVERFLOW, status=Status.SUCCEEDED).count() == len(refused)
    assert Message.objects.count() == len(history) == 60


def test_the_session_header_and_a_forced_overflow_with_the_sdk(live_server, api_key, upstream, user):
    from sessions.services import session_create

    session = session_create(owner=user, title="picked by header")
    client = sdk(live_server, api_key, **{"x-compactor-session": str(session.pk)})
    history = converse(client, 6)
    upstream.overflow_next = 1
    history.append({"role": "user", "content": "one more"})
    reply = client.messages.create(model=MODEL, max_tokens=64, messages=history)
    assert reply.content[0].type == "text"
    assert Session.objects.count() == 1
    assert Message.objects.filter(session=session).count() == 14


def test_no_key_is_a_401_for_the_sdk(live_server, upstream):
    with pytest.raises(anthropic.AuthenticationError) as caught:
        sdk(live_server, "wrong").messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 401
    assert caught.value.body["error"]["type"] == "authentication_error"
    assert upstream.requests == []
