"""gateway.sse: the reply is reassembled from SSE bytes however they are split."""

from __future__ import annotations

import json

import pytest

from gateway.sse import EventFramer, StreamAssembler


def _events(*events: tuple[str, dict]) -> bytes:
    return b"".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode() for kind, data in events)


STREAM = _events(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "model": "x",
                "content": [],
                "usage": {"input_tokens": 120, "cache_read_input_tokens": 30, "output_tokens": 1},
            },
        },
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "look."}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Héllo "}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "wörld"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 1}),
    (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
        },
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"comm'}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'and": "ls"}'},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 2}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
    ("message_stop", {"type": "message_stop"}),
)

EXPECTED = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
        {"type": "text", "text": "Héllo wörld"},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
    ],
}


@pytest.mark.parametrize("size", [1, 7, 64, len(STREAM)])
def test_it_reassembles_the_reply_from_any_chunking(size):
    assembler = StreamAssembler()
    for start in range(0, len(STREAM), size):
        assembler.feed(STREAM[start : start + size])
    assert assembler.assistant_message() == EXPECTED
    response = assembler.response_message()
    assert response["stop_reason"] == "tool_use"
    assert response["usage"] == {"input_tokens": 120, "cache_read_input_tokens": 30, "output_tokens": 42}


def test_crlf_line_endings_work_too():
    assembler = StreamAssembler()
    assembler.feed(STREAM.replace(b"\n", b"\r\n"))
    assert assembler.assistant_message() == EXPECTED


def test_an_unfinished_or_failed_stream_gives_no_reply():
    cut = StreamAssembler()
    cut.feed(STREAM[: len(STREAM) // 2])
    assert cut.assistant_message() is None
    failed = StreamAssembler()
    failed.feed(STREAM[: STREAM.index(b"\n\n", len(STREAM) // 2) + 2])  # up to an event boundary
    failed.feed(_events(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
    failed.feed(_events(("message_stop", {"type": "message_stop"})))
    assert failed.assistant_message() is None
    assert failed.error["type"] == "overloaded_error"


# --- the one framer every wire format goes through (gateway.sse.EventFramer) ------------------

FRAMED = [
    b'event: message_start\ndata: {"type": "message_start"}\n\n',  # the Messages API
    b": keep-alive\r\n\r\n",  # a comment, CRLF line ends
    b'data: {"choices": []}\r\n\n',  # mixed line ends
    b'event: response.completed\ndata: {"type":\ndata:  "x"}\n\n',  # two data lines
    b"data: [DONE]\n\n",
]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 1000])
def test_the_framer_gives_whole_events_with_their_bytes_however_they_are_split(size):

    raw = b"".join(FRAMED)
    framer = EventFramer()
    events = [e for i in range(0, len(raw), size) for e in framer.feed(raw[i : i + size])]
    assert [e.raw for e in events] == FRAMED
    assert [e.name for e in events] == ["message_start", "", "", "response.completed", ""]
    assert events[0].json() == {"type": "message_start"} and events[1].data == ""
    assert events[3].data == '{"type":\n "x"}' and events[4].data == "[DONE]"
    assert framer.finish() is None


def test_a_last_event_without_its_blank_line_is_completed_at_the_end():

    framer = EventFramer()
    assert framer.feed(b"data: [DONE]") == [] and framer.pending == b"data: [DONE]"
    last = framer.finish()
    assert last is not None and last.raw == b"data: [DONE]\n\n" and last.data == "[DONE]"


@pytest.mark.parametrize("event", ["error", None])
def test_an_encoded_event_frames_back_to_itself(event):
    from gateway.sse import encode_event, parse_event

    data = {"type": "error", "error": {"message": "overloaded\nline two", "type": "overloaded_error"}}
    wire = encode_event(data, event)
    assert wire == (f"event: {event}\n" if event else "").encode() + f"data: {json.dumps(data)}\n\n".encode()
    framer = EventFramer()
    (framed,) = framer.feed(wire[:7]) + framer.feed(wire[7:])  # split mid-line
    assert (framed.name or None, json.loads(framed.data)) == (event, data)
    assert parse_event(wire).data == framed.data
