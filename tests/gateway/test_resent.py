"""A resent history is parsed only past what the previous request held (gateway.resent), and the
result is always exactly what parsing the whole request gives."""

from __future__ import annotations

import json
import random
from collections import OrderedDict

import orjson
import pytest

from gateway import resent
from gateway.resent import parse_resent

OWNER = 7


def forget_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing kept: the module's store replaced by an empty one (the old one back after the test)."""
    monkeypatch.setattr(resent, "_kept", OrderedDict())
    monkeypatch.setattr(resent, "_kept_bytes", 0)


@pytest.fixture(autouse=True)
def nothing_kept(monkeypatch):
    forget_all(monkeypatch)


def _message(rng: random.Random, i: int) -> dict:
    """Messages whose text holds what a boundary search could trip on: escaped quotes and
    brackets, `,{"role":` inside strings, nested lists of objects, unicode."""
    texts = [
        f"step {i}",
        'a string with ,{"role":"user"} inside and \\"quotes\\"',
        "ends with a comma,{",
        "unicode: é ✓ 😀 and a backslash \\",
        "brackets ] } [ { in text",
    ]
    kind = rng.randrange(4)
    if kind == 0:
        return {"role": "user", "content": rng.choice(texts)}
    if kind == 1:
        return {"role": "assistant", "content": [{"type": "text", "text": rng.choice(texts)}]}
    if kind == 2:
        return {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {
                    "type": "tool_use",
                    "id": f"t{i}",
                    "name": "run",
                    "input": {"cmd": rng.choice(texts), "n": [1, {"k": i}]},
                },
            ],
        }
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": [{"type": "text", "text": rng.choice(texts)}]}
        ],
    }


def _encode(body: dict, style: int) -> bytes:
    if style == 0:
        return orjson.dumps(body)  # compact, as JavaScript clients send
    if style == 1:
        return json.dumps(body).encode()  # ", " and ": ", ASCII escapes, as Python's json module sends
    return json.dumps(body, indent=1, ensure_ascii=False).encode()


def _check(raw: bytes, key: str = "messages") -> resent.Parsed:
    parsed = parse_resent(raw, owner=OWNER, key=key)
    resent.keep(parsed)  # as gateway.intake does once the request passed its checks
    assert parsed.body == orjson.loads(raw)
    assert parsed.fresh == orjson.loads(parsed.fresh_raw)
    return parsed


def test_a_resent_history_reuses_the_previous_parse_and_parses_only_the_rest():
    rng = random.Random(1)
    history = [_message(rng, i) for i in range(200)]
    first = _check(orjson.dumps({"model": "m", "max_tokens": 100, "messages": history}))
    assert first.reused == 0
    # The client moves its cache_control marker to the new last message, as Claude Code does.
    moved = [
        *history[:-1],
        {**history[-1]},
        {"role": "user", "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]},
    ]
    second = _check(orjson.dumps({"model": "m", "max_tokens": 100, "messages": moved, "system": "s"}))
    assert 190 <= second.reused < 200
    assert all(a is b for a, b in zip(second.body["messages"], first.body["messages"][: second.reused], strict=False))
    assert len(second.fresh["messages"]) == len(moved) - second.reused
    # Other bytes before the list: the list may not be where it was; the request is parsed whole.
    third = _check(
        orjson.dumps({"model": "m", "max_tokens": 200, "messages": [*moved, {"role": "user", "content": "x"}]})
    )
    assert third.reused == 0


def test_random_histories_and_edits_always_parse_as_the_whole_request():
    """Appends, an edited last message, an edited or dropped middle message, a history that
    starts over or is sent again, other keys before and after the list, three encodings: every
    parse equals orjson's parse of the whole request."""
    rng = random.Random(20261127)
    reused_somewhere = 0
    for _round in range(40):
        style = rng.randrange(3)
        history = [_message(rng, i) for i in range(rng.randrange(1, 30))]
        for step in range(12):
            edit = rng.randrange(6)
            if edit <= 2:
                history += [_message(rng, 100 + step * 3 + j) for j in range(rng.randrange(1, 4))]
            elif edit == 3 and history:
                history[-1] = _message(rng, 999)
            elif edit == 4 and len(history) > 2:
                history.pop(rng.randrange(len(history) - 1))
            else:
                history = history[: rng.randrange(1, len(history) + 1)]
            tools = [{"name": name, "input_schema": {"messages": []}} for name in ("run", "read")]
            body = {"model": "m", "messages": history, "tools": tools}
            if rng.random() < 0.5:
                body = {"tools": body.pop("tools"), **body}  # the list after another key
            reused_somewhere += _check(_encode(body, style)).reused
    assert reused_somewhere > 0


def test_a_request_sent_again_as_it_was_parses_as_itself(monkeypatch):
    """A retry (the SDKs resend a 529'd or timed-out call byte for byte) holds the whole kept
    request: past the end of the list, objects after commas in the fields that follow (system
    blocks, tools) are not items of the list."""
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    history.append({"role": "user", "content": "again"})
    system = [{"type": "text", "text": "You are a helper."}, {"type": "text", "text": "Be brief."}]
    tools = [{"name": name, "input_schema": {"type": "object"}} for name in ("Bash", "Read")]
    for style in range(3):
        forget_all(monkeypatch)
        raw = _encode({"max_tokens": 100, "messages": history, "system": system, "tools": tools}, style)
        _check(raw)
        _check(raw)
        # The same list, then fields that differ only after their first objects.
        _check(_encode({"max_tokens": 100, "messages": history, "system": system, "tools": tools[:1]}, style))


def test_a_responses_request_sent_again_parses_as_itself():
    """The same for `input`: the tools after it must not become its last items."""
    items = [{"type": "message", "role": "user", "content": f"turn {i}"} for i in range(3)]
    tools = [{"type": "function", "name": name, "parameters": {}} for name in ("shell", "read")]
    raw = json.dumps({"input": items, "instructions": "x", "model": "m", "tools": tools}).encode()
    _check(raw, key="input")
    assert _check(raw, key="input").reused > 0


def test_the_responses_input_list_is_reused_the_same_way():
    items = [{"type": "message", "role": "user", "content": f"turn {i}"} for i in range(20)]
    _check(orjson.dumps({"model": "m", "instructions": "x", "input": items}), key="input")
    items += [{"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"}]
    assert _check(orjson.dumps({"model": "m", "instructions": "x", "input": items}), key="input").reused > 0


def test_bad_json_after_the_shared_part_is_refused_like_bad_json_anywhere():
    history = [{"role": "user", "content": f"turn {i}"} for i in range(50)]
    _check(orjson.dumps({"messages": history}))
    broken = orjson.dumps({"messages": history})[:-10] + b',{"role": }]}'
    with pytest.raises(orjson.JSONDecodeError):
        parse_resent(broken, owner=OWNER, key="messages")


def test_another_owner_never_reuses_a_parse():
    raw = orjson.dumps({"messages": [{"role": "user", "content": f"turn {i}"} for i in range(30)]})
    _check(raw)
    assert parse_resent(raw + b" ", owner=OWNER + 1, key="messages").reused == 0
    assert parse_resent(raw + b" ", owner=OWNER, key="messages").reused > 0


@pytest.mark.django_db
def test_the_gateway_never_changes_a_kept_parse(upstream, api_key):
    """The items a request's parse keeps are the next request's: a gateway call that changed one
    in place (stripping cache_control, marking provenance, storing) would corrupt what the next
    call reuses. After a Claude-Code-shaped conversation, every kept parse is still its bytes'."""
    from django.test import Client

    from tests.gateway.upstream import Reply

    upstream.reply = lambda rec: Reply(text="Done.")
    client = Client()
    skill = "<command-name>/review</command-name>\nBase directory for this skill: /x\n\nReview the diff."
    history: list[dict] = []
    for turn in range(6):
        text = skill if turn == 2 else f"Turn {turn}: go on."
        history.append(
            {"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}
        )
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": history}
        response = client.post(
            "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=api_key
        )
        assert response.status_code == 200
        # The marker moves to the newest message, as Claude Code sends it.
        history[-1] = {"role": "user", "content": [{"type": "text", "text": text}]}
        history.append({"role": "assistant", "content": response.json()["content"]})
    kept = list(resent._kept.values())
    assert kept and any(len(k.items) > 8 for k in kept)
    for entry in kept:
        key = "messages"
        assert orjson.loads(entry.raw)[key] == entry.items


@pytest.mark.django_db
def test_a_refused_request_sent_again_is_refused_again(upstream, api_key):
    """The checks before anything is stored (NUL, lone surrogates, depth) read only what a request
    does not share with the kept one: a refused request must not become the kept one, or its
    retry would pass them with the offending item in the shared part."""
    from django.test import Client

    from tests.gateway.upstream import Reply

    upstream.reply = lambda rec: (
        Reply(tool_use=("Bash", {"command": "ls"})) if len(rec.body["messages"]) == 1 else Reply()
    )
    client = Client()

    def post(messages: list[dict]):
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
        return client.post(
            "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=api_key
        )

    history: list[dict] = [{"role": "user", "content": "list the files"}]
    content = post(history).json()["content"]
    call = next(block["id"] for block in content if block["type"] == "tool_use")
    history += [{"role": "assistant", "content": content}]
    history += [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": "a.txt"}]}]
    history += [{"role": "assistant", "content": post(history).json()["content"]}]
    # The stored tool result resent with a NUL in it (its content is not part of its identity).
    history[2] = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": "a\u0000"}]}
    history += [{"role": "user", "content": "and now?"}]
    for _attempt in range(2):
        response = post(history)
        assert response.status_code == 400
        assert "NUL" in response.json()["error"]["message"]


def test_a_second_list_of_the_same_name_is_parsed_as_the_parser_takes_it():
    """JSON parsers keep the last of two fields of one name; the reused list is the first."""
    history = [{"role": "user", "content": f"turn {i}"} for i in range(40)]
    _check(orjson.dumps({"model": "m", "messages": history}))
    again = orjson.dumps({"model": "m", "messages": [*history, {"role": "user", "content": "new"}]})
    twice = again[:-1] + b',"messages":[{"role":"user","content":"the last one"}]}'
    parsed = _check(twice)
    assert parsed.body["messages"] == [{"role": "user", "content": "the last one"}]


def test_a_request_is_reused_only_once_it_was_kept():
    """gateway.intake keeps a request after its checks pass: one they refused (or one in
    between, for a concurrent request) is never the base of another's reuse."""
    history = [{"role": "user", "content": f"turn {i}"} for i in range(30)]
    raw = orjson.dumps({"messages": history})
    parse_resent(raw, owner=OWNER, key="messages")  # parsed, not kept
    again = orjson.dumps({"messages": [*history, {"role": "user", "content": "next"}]})
    assert parse_resent(again, owner=OWNER, key="messages").reused == 0
