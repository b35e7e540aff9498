"""The official openai SDK through /openai/v1/chat/completions on a live server, against the
OpenAI stand-in (tests/gateway/openai_upstream.py). Compaction jobs run in-process (eager Celery)."""

from __future__ import annotations

import json

import httpx2 as httpx
import openai
import pytest

from compaction.models import Compaction, Reason, Status
from gateway.models import MessageExtra
from gateway.openai.chat import map_messages, served_chat
from sessions.models import Message, Session, ToolCall
from sessions.selectors import context_build
from tests.gateway.openai_upstream import KEY, OpenAIReply
from tests.gateway.sdk_clients import closing, settled_http_client

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "gateway-test-model"  # unknown to the registry: the small_window default window applies
TRIGGER = 3000
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
URL = "/openai/v1/chat/completions"


def sdk(live_server, key: str, **headers) -> openai.OpenAI:
    client = openai.OpenAI(
        base_url=f"{live_server.url}/openai/v1",
        api_key=key,
        max_retries=0,
        default_headers=headers or None,
        http_client=settled_http_client(),
    )
    return closing(client)


def user_turn(i: int, size: int = 14) -> str:
    return f"Turn {i}: now update src/module_{i}.py so that " + "the parser accepts nested brackets and " * size


def replies(rec) -> OpenAIReply:
    last = rec.body["messages"][-1]
    if last["role"] == "user" and "RUN" in json.dumps(last["content"]):
        return OpenAIReply(text="", tool_call=("bash", {"command": "pytest -q"}))
    return OpenAIReply(text=f"Updated as asked ({len(rec.body['messages'])} messages seen). " + "All good. " * 10)


def streamed_message(stream) -> dict:
    """What an agent keeps of a streamed reply: the content and the tool calls from the deltas."""
    content, calls = [], {}
    for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            content.append(delta.content or "")
            for call in delta.tool_calls or []:
                slot = calls.setdefault(
                    call.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = call.id or slot["id"]
                if call.function:
                    slot["function"]["name"] += call.function.name or ""
                    slot["function"]["arguments"] += call.function.arguments or ""
    message = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def converse(client: openai.OpenAI, turns: int, *, tool_turn: int | None = None, size: int = 14) -> list[dict]:
    history: list[dict] = [SYSTEM]
    for i in range(turns):
        pending = history[-1].get("tool_calls")
        if pending:
            history.append({"role": "tool", "tool_call_id": pending[0]["id"], "content": "12 passed"})
        else:
            history.append(
                {"role": "user", "content": user_turn(i, size) + (" RUN the tests." if i == tool_turn else "")}
            )
        if i % 3 == 2:
            options = {"stream_options": {"include_usage": True}} if i % 2 else {}
            message = streamed_message(
                client.chat.completions.create(model=MODEL, messages=history, stream=True, **options)
            )
        else:
            completion = client.chat.completions.create(model=MODEL, messages=history)
            # As SDK users do: the response's message goes straight back into the history.
            message = completion.choices[0].message.model_dump(exclude_none=True)
        assert message.get("content") or message.get("tool_calls")
        history.append(message)
    return history


def test_twenty_four_turns_are_answered_stored_and_compacted(
    live_server, api_key, openai_upstream, eager_celery, small_window
):
    openai_upstream.reply = replies
    history = converse(sdk(live_server, api_key), 24, tool_turn=10)

    session = Session.objects.get()  # no session header: the whole conversation is one session
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert len(stored) == len(history) - 1 == 48  # the system message is the session's system prompt
    assert session.system_prompt == SYSTEM["content"]
    calls = openai_upstream.calls()
    assert len(calls) == 24 and all(c.status == 200 for c in calls)

    # The tool call round trip is stored as a tool_use / tool_result pair.
    pair = ToolCall.objects.get(session=session)
    assert pair.name == "bash" and pair.result_seq == pair.use_seq + 1
    use = stored[pair.use_seq - 1].content
    assert use == [{"type": "tool_use", "id": pair.tool_use_id, "name": "bash", "input": {"command": "pytest -q"}}]
    assert stored[pair.result_seq - 1].content == [
        {"type": "tool_result", "tool_use_id": pair.tool_use_id, "content": "12 passed"}
    ]

    # Usage fed the meter: every reply carries the prompt size the upstream counted.
    replies_ = [m for m in stored if m.role == "assistant"]
    assert [m.provider_usage["input_tokens"] for m in replies_] == [c.prompt_tokens for c in calls]

    # Compacted once over the trigger; the upstream got the compacted context from then on.
    assert Compaction.objects.filter(session=session, reason=Reason.THRESHOLD, status=Status.SUCCEEDED).exists()
    first = next(i for i, c in enumerate(calls) if "<summary>" in json.dumps(c.body["messages"][:3]))
    assert calls[first - 1].prompt_tokens > TRIGGER * 0.8
    assert max(c.prompt_tokens for c in calls[first:]) < TRIGGER * 1.5
    assert calls[-1].body["messages"][0] == SYSTEM and len(calls[-1].body["messages"]) < len(history) - 1
    # The client's own copies go upstream for what it still holds: the newest messages as sent.
    assert calls[-1].body["messages"][-1] == history[-2]

    # Never the Compactor key: the server's own, and nothing else of the client's credentials.
    assert all(c.headers["authorization"] == f"Bearer {KEY}" for c in calls)
    assert not any(api_key in json.dumps(c.headers) + json.dumps(c.body) for c in openai_upstream.requests)


def test_a_stream_ends_with_done_and_the_usage_chunk_only_when_asked(live_server, api_key, openai_upstream):
    openai_upstream.reply = lambda rec: OpenAIReply(text="", tool_call=("read", {"path": "src/app.py"}))
    headers = {"authorization": f"Bearer {api_key}"}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Read app.py"}], "stream": True}
    plain = httpx.post(f"{live_server.url}{URL}", json=body, headers=headers, timeout=30)
    assert plain.status_code == 200 and plain.text.endswith("data: [DONE]\n\n")
    assert '"usage": {' not in plain.text  # the gateway asked for it, the client did not
    assert openai_upstream.calls()[-1].body["stream_options"] == {"include_usage": True}
    # Tool-call deltas went through as they came; the assembled call was stored with its usage.
    assert '"arguments": ""' in plain.text
    session = Session.objects.get(pk=plain.headers["x-compactor-session"])
    reply = Message.objects.get(session=session, seq=2)
    assert reply.content[0]["name"] == "read" and reply.content[0]["input"] == {"path": "src/app.py"}
    assert reply.provider_usage["input_tokens"] > 0

    asked = {**body, "stream_options": {"include_usage": True}}
    with_usage = httpx.post(f"{live_server.url}{URL}", json=asked, headers=headers, timeout=30)
    assert '"usage": {' in with_usage.text and with_usage.text.endswith("data: [DONE]\n\n")


def test_a_cut_stream_ends_with_an_error_and_stores_nothing(live_server, api_key, openai_upstream):
    openai_upstream.cut_stream = True
    client = sdk(live_server, api_key)
    with pytest.raises(openai.APIError):
        for _ in client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Explain the parser"}], stream=True
        ):
            pass
    session = Session.objects.get()
    assert Message.objects.filter(session=session, role="assistant").count() == 0


def test_a_stalled_stream_ends_with_an_error_naming_the_timeout(live_server, api_key, openai_upstream, settings):
    settings.GATEWAY_UPSTREAM_TIMEOUT = 0.5
    openai_upstream.stall_stream = 1.5
    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "Explain the parser"}]}
    answer = httpx.post(
        f"{live_server.url}{URL}", json=body, headers={"Authorization": f"Bearer {api_key}"}, timeout=30
    )
    assert "COMPACTOR_UPSTREAM_TIMEOUT" in answer.text and "data: [DONE]" not in answer.text
    assert Message.objects.filter(role="assistant").count() == 0


def test_an_upstream_far_below_the_session_window_costs_at_most_two_refusals(
    live_server, api_key, openai_upstream, eager_celery
):
    openai_upstream.window = 3000  # gpt-4o's registry window is 128k: the provider's real one is far below
    openai_upstream.reply = replies
    client = sdk(live_server, api_key)
    history: list[dict] = [SYSTEM]
    for i in range(12):
        history.append({"role": "user", "content": user_turn(i, size=40)})
        completion = client.chat.completions.create(model="gpt-4o", messages=history)
        history.append(completion.choices[0].message.model_dump(exclude_none=True))
    calls = openai_upstream.calls()
    refused = [c for c in calls if c.status == 400]
    assert 1 <= len(refused) <= 2, [c.prompt_tokens for c in calls]
    assert len(calls) - len(refused) == 12
    session = Session.objects.get()
    assert session.context_window == 3000  # learned from "maximum context length is 3000 tokens"
    assert Message.objects.filter(session=session).count() == 24


def test_errors_come_in_openai_shape(live_server, api_key, openai_upstream, settings):
    client = sdk(live_server, "not-a-key")
    with pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "invalid_api_key" and openai_upstream.requests == []

    client = sdk(live_server, api_key)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user"}, {"role": "tool", "content": "x"}])
    assert caught.value.body["param"] == "messages[1].tool_call_id"

    settings.OPENAI_GATEWAY_UPSTREAM_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "COMPACTOR_OPENAI_UPSTREAM_URL" in caught.value.body["message"]

    settings.OPENAI_GATEWAY_UPSTREAM_API_KEY = ""
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert "COMPACTOR_OPENAI_UPSTREAM_API_KEY" in caught.value.body["message"]


def test_what_blocks_cannot_hold_goes_back_upstream_as_the_client_wrote_it(live_server, api_key, openai_upstream):
    """Messages served from the store (after a compaction, or pruned) are mapped back with their
    extras: the name, the arguments as sent, the image's detail are what the client sent."""
    odd = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {"type": "image_url", "image_url": {"url": "https://example.com/x.png", "detail": "low"}},
            ],
            "name": "alice",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_x", "type": "function", "function": {"name": "read", "arguments": '{ "path" : "a" }'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "content": "file a"},
    ]
    sdk(live_server, api_key).chat.completions.create(model="gpt-4o", messages=[SYSTEM, *odd])
    session = Session.objects.get()
    assert MessageExtra.objects.filter(session=session).count() == 2  # the name and detail; the arguments

    # Served from the store (as after a compaction, when the client's copies stop at the summary):
    # everything but the newest message comes from the store.
    mapped = map_messages([SYSTEM, {"role": "user", "content": "not stored"}])
    served = served_chat(session=session, mapped=mapped, served=context_build(session=session).messages)
    assert served[:4] == [SYSTEM, *odd]
    assert served[4]["role"] == "assistant" and served[4]["content"] == "Done."


def test_the_session_header_picks_the_session_and_a_wrong_one_is_a_404(live_server, api_key, openai_upstream, user):
    from sessions.services import session_create

    session = session_create(owner=user, title="picked by header", model="gpt-4o")
    client = sdk(live_server, api_key, **{"x-compactor-session": str(session.pk)})
    completion = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hello"}]
    )
    assert completion.headers["x-compactor-session"] == str(session.pk)
    assert Session.objects.count() == 1 and Message.objects.filter(session=session).count() == 2

    other = sdk(live_server, api_key, **{"x-compactor-session": "00000000-0000-0000-0000-000000000000"})
    with pytest.raises(openai.NotFoundError) as caught:
        other.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hello"}])
    assert caught.value.body["type"] == "invalid_request_error" and caught.value.body["code"] == "not_found"


def test_the_model_list_comes_from_the_upstream_with_the_servers_key(live_server, api_key, openai_upstream):
    client = sdk(live_server, api_key)
    assert [m.id for m in client.models.list()] == ["gpt-4o"]
    assert client.models.retrieve("gpt-4o").id == "gpt-4o"
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in openai_upstream.requests)
    with pytest.raises(openai.AuthenticationError):
        sdk(live_server, "wrong").models.list()
