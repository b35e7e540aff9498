"""The Responses API through /openai/v1/responses, as Codex uses it (store: false, the whole
input every call, reasoning items resent), with the official openai SDK on a live server."""

from __future__ import annotations

import json

import openai
import pytest

from sessions.models import Message, Session, ToolCall
from tests.gateway.openai_upstream import OpenAIReply
from tests.gateway.sdk_clients import closing, settled_http_client

pytestmark = pytest.mark.django_db(transaction=True)

INSTRUCTIONS = "You are Codex, a coding agent."


def sdk(live_server, key: str) -> openai.OpenAI:
    client = openai.OpenAI(
        base_url=f"{live_server.url}/openai/v1", api_key=key, max_retries=0, http_client=settled_http_client()
    )
    return closing(client)


def test_five_turns_without_a_header_are_one_session_of_ten_messages(live_server, api_key, openai_upstream):
    def replies(rec) -> OpenAIReply:
        last = rec.body["input"][-1]
        if last.get("role") == "user" and "RUN" in json.dumps(last):
            return OpenAIReply(text="", tool_call=("shell", {"command": ["pytest", "-q"]}))
        return OpenAIReply(text=f"Done with {len(rec.body['input'])} items.")

    openai_upstream.reply = replies
    client = sdk(live_server, api_key)
    history: list[dict] = []
    for turn in range(5):
        calls = [i for i in history if i.get("type") == "function_call"]
        if history and calls and calls[-1] is history[-1]:
            history.append({"type": "function_call_output", "call_id": calls[-1]["call_id"], "output": "3 passed"})
        else:
            history.append({"role": "user", "content": f"Turn {turn}" + (" RUN the tests" if turn == 1 else "")})
        params = {"model": "gpt-5-codex", "instructions": INSTRUCTIONS, "input": history, "store": False}
        if turn % 2:
            with client.responses.stream(**params) as stream:
                response = stream.get_final_response()
        else:
            response = client.responses.create(**params)
        assert response.status == "completed"
        # As Codex does: every output item (reasoning included) goes back into the input.
        history += [item.model_dump(exclude_none=True) for item in response.output]

    session = Session.objects.get()
    assert session.message_count == 10 and session.system_prompt == INSTRUCTIONS
    roles = list(Message.objects.filter(session=session).order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant"] * 5
    assert ToolCall.objects.get(session=session).result_seq is not None
    # Reasoning went back upstream as the client resent it, encrypted content and all.
    last = openai_upstream.calls("/v1/responses")[-1].body
    assert last["instructions"] == INSTRUCTIONS
    assert [i for i in last["input"] if i.get("type") == "reasoning"] == [
        i for i in history[:-3] if i.get("type") == "reasoning"
    ]


def test_previous_response_id_is_refused_with_a_clear_400(live_server, api_key, openai_upstream):
    with pytest.raises(openai.BadRequestError) as caught:
        sdk(live_server, api_key).responses.create(model="gpt-5", input="hi", previous_response_id="resp_123")
    assert caught.value.body["param"] == "previous_response_id"
    assert "store: false" in caught.value.body["message"]
    assert openai_upstream.requests == [] and Session.objects.count() == 0


def test_a_cut_responses_stream_ends_with_an_error_event(live_server, api_key, openai_upstream):
    openai_upstream.cut_stream = True
    with pytest.raises(openai.APIError):
        with sdk(live_server, api_key).responses.stream(model="gpt-5", input="Explain the parser") as stream:
            stream.get_final_response()
    assert Message.objects.filter(role="assistant").count() == 0


def test_a_resent_input_is_mapped_only_past_what_the_previous_call_held_and_goes_as_its_bytes(
    api_key, openai_upstream, monkeypatch
):
    """Codex resends its whole input every call: the Responses route reuses the previous call's
    mapping for the items it shares (only the new ones are mapped) and sends the client's bytes
    upstream unchanged when nothing is compacted (at 2,000 items it mapped and re-encoded them all)."""
    from django.test import Client

    from gateway.openai import responses_map
    from tests.gateway.test_resent import forget_all

    forget_all(monkeypatch)
    mapped_from: list[int] = []
    real = responses_map._group

    def counting(items, start):
        if len(items) == len(current):  # the request's input (not a reply's output, mapped when recorded)
            mapped_from.append(start)
        return real(items, start)

    monkeypatch.setattr(responses_map, "_group", counting)
    # As Codex's: the input opens with its long developer message (a kept request is named by its
    # first 512 bytes), then the person's request.
    developer = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules. " * 200}]}
    request = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]}
    items = current = [developer, request]
    for turn in range(4):
        current = items
        body = {"model": "gpt-5", "input": items, "stream": False, "prompt_cache_key": "codex-thread-1"}
        raw = json.dumps(body).encode()
        mapped_from.clear()
        response = Client().post(
            "/openai/v1/responses", data=raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_key}"
        )
        assert response.status_code == 200, response.content
        assert openai_upstream.requests[-1].raw == raw  # the client's own bytes
        if turn >= 2:  # the first call, and the second (which shares only the system item), map all
            assert mapped_from and min(mapped_from) >= len(items) - 4, (mapped_from, len(items))  # the tail only
        items = items + [
            {"type": "function_call", "call_id": f"call_{turn}", "name": "exec_command", "arguments": '{"cmd":"ls"}'},
            {"type": "function_call_output", "call_id": f"call_{turn}", "output": f"file_{turn}.txt"},
        ]
