"""Chat Completions messages and Responses API items ↔ Compactor's blocks, without loss
(gateway.openai.chat_map, gateway.openai.responses_map)."""

from __future__ import annotations

import pytest

from gateway.openai import responses_map
from gateway.openai.chat_map import MappingError, to_blocks, to_chat
from sessions.validation import Errors, check_message

CONVERSATION = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "developer", "content": [{"type": "text", "text": "Prefer small diffs."}]},
    {"role": "user", "content": "Fix the failing test.", "name": "alice"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Here is the screenshot:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"pytest -q"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": '{ "path": "a.py" }'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "1 failed"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "def f(): ..."}]},
    {"role": "developer", "content": "The user switched to plan mode."},
    {"role": "assistant", "content": "", "refusal": "I can't run that."},
    {"role": "assistant", "content": "Fixed: the off-by-one in f.", "name": "coder", "audio": {"id": "audio_1"}},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    {"role": "assistant", "content": None},
    {"role": "tool", "tool_call_id": "call_3", "content": ""},
]


def test_every_message_maps_to_valid_blocks_and_back_exactly():
    mapped = to_blocks(CONVERSATION)
    assert mapped.system == CONVERSATION[:2]
    assert mapped.system_text() == "You are a coding agent.\n\nPrefer small diffs."
    back = list(mapped.system)
    for message, extras in zip(mapped.messages, mapped.extras, strict=True):
        back += to_chat(message, extras)
    assert back == CONVERSATION


def test_the_blocks_are_what_compactor_stores():
    mapped = to_blocks(CONVERSATION[:7])
    assert mapped.messages[2] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_1", "name": "bash", "input": {"cmd": "pytest -q"}},
            {"type": "tool_use", "id": "call_2", "name": "read", "input": {"path": "a.py"}},
        ],
    }
    # The run of tool messages is one user message of results, paired by id.
    assert mapped.messages[3] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": "1 failed"},
            {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "def f(): ..."}]},
        ],
    }
    assert mapped.sources[3] == CONVERSATION[5:7]
    image = mapped.messages[1]["content"][1]
    assert image == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    errors = Errors()
    for i, message in enumerate(to_blocks(CONVERSATION).messages):
        check_message(message, f"messages[{i}]", errors)
    assert errors.items == {}


def test_a_stored_message_without_extras_still_reads_as_chat():
    assert to_chat({"role": "user", "content": "Summary of the conversation so far"}) == [
        {"role": "user", "content": "Summary of the conversation so far"}
    ]
    pruned = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "[pruned]"}]}
    assert to_chat(pruned) == [{"role": "tool", "tool_call_id": "call_1", "content": "[pruned]"}]


@pytest.mark.parametrize(
    ("messages", "path"),
    [
        ([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}], "messages[1].tool_call_id"),
        ([{"role": "critic", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "assistant", "tool_calls": [{"type": "function"}]}], "messages[0].tool_calls[0]"),
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], "messages[0].content[0]"),
    ],
)
def test_an_unreadable_message_is_named_by_its_path(messages, path):
    with pytest.raises(MappingError) as raised:
        to_blocks(messages)
    assert raised.value.path == path


RESPONSES_ITEMS = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: workspace-write"}]},
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "<environment_context>cwd</environment_context>"}],
    },
    {"role": "user", "content": "Fix the failing test."},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB-opaque"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Running the tests.", "annotations": []}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "shell",
        "arguments": '{"command":["pytest"]}',
    },
    {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
    {"type": "function_call_output", "call_id": "call_1", "output": "1 failed"},
    {"type": "custom_tool_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "Done!"}]},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "And this screenshot"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
        ],
    },
]


def test_responses_input_items_map_to_blocks_and_back_exactly():
    mapped = responses_map.to_blocks(RESPONSES_ITEMS)
    assert mapped.system == RESPONSES_ITEMS[:1]
    assert [m["role"] for m in mapped.messages] == ["user", "user", "assistant", "user", "user"]
    assistant = mapped.messages[2]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use", "tool_use"]
    assert assistant[2] == {
        "type": "tool_use",
        "id": "call_2",
        "name": "apply_patch",
        "input": {"input": "*** Begin Patch"},
    }
    assert [b["tool_use_id"] for b in mapped.messages[3]["content"]] == ["call_1", "call_2"]
    back = list(mapped.system)
    for message, extras in zip(mapped.messages, mapped.extras, strict=True):
        back += responses_map.to_items(message, extras)
    assert back == RESPONSES_ITEMS


def test_a_summary_reads_as_a_user_message_item_of_the_responses_api():
    assert responses_map.to_items({"role": "user", "content": "<summary>so far</summary>"}) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<summary>so far</summary>"}]}
    ]


def test_the_relay_passes_whole_events_as_they_complete_and_drops_only_what_it_is_told():
    from gateway.openai.stream import ChatAssembler, EventRelay

    assembler = ChatAssembler(drop_usage_chunk=True)
    relay = EventRelay(assembler.on_event)
    first = b'data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n'
    assert relay.feed(first) == b""  # not complete until its blank line
    assert relay.feed(b"\n") == first + b"\n"
    calls = (
        b'data: {"choices":[{"index":0,"delta":{"content":"lo","tool_calls":[{"index":0,"id":"call_1",'
        b'"type":"function","function":{"name":"bash","arguments":"{\\"cmd\\""}}]}}]}\r\n\r\n'
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\\"ls\\"}"}}]},'
        b'"finish_reason":"tool_calls"}]}\n\n'
    )
    assert relay.feed(calls) == calls
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}\n\n'
    assert relay.feed(usage) == b""  # asked for by the gateway, not by the client
    assert relay.feed(b"data: [DONE]") == b""
    assert relay.finish() == b"data: [DONE]\n\n"  # the upstream closed without the blank line
    assert assembler.ended and assembler.usage == {"prompt_tokens": 10, "completion_tokens": 2}
    assert assembler.completion()["choices"][0] == {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": "Hello",
            "tool_calls": [
                {"type": "function", "function": {"arguments": '{"cmd":"ls"}', "name": "bash"}, "id": "call_1"}
            ],
        },
        "finish_reason": "tool_calls",
    }


def test_a_stream_without_its_end_is_not_a_reply():
    from gateway.openai.stream import ChatAssembler, EventRelay, ResponsesAssembler

    chat = ChatAssembler()
    EventRelay(chat.on_event).feed(b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n')
    assert not chat.ended and chat.completion() is None
    responses = ResponsesAssembler()
    relay = EventRelay(responses.on_event)
    relay.feed(b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n')
    assert not responses.ended
    relay.feed(b'event: response.completed\ndata: {"type":"response.completed","response":{"id":"r","output":[]}}\n\n')
    assert responses.ended and responses.completion() == {"id": "r", "output": []}


def test_a_resent_history_maps_as_it_would_from_scratch_when_its_prefix_is_reused():
    """to_blocks with the previous request's mapping (Reuse) gives what a fresh mapping gives,
    whichever message the shared part ends at: after a system message, inside a run of tool
    messages that the new request continues, after an assistant turn."""
    from gateway.openai.chat_map import Reuse

    tool_run = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}} for i in range(3)
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "content": "one"},
        {"role": "tool", "tool_call_id": "c1", "content": "two"},
    ]
    full = [
        *CONVERSATION,
        *tool_run,
        {"role": "tool", "tool_call_id": "c2", "content": "three"},
        {"role": "user", "content": "next"},
    ]
    for cut in range(1, len(full)):
        before = full[:cut]
        previous = to_blocks(before)
        for shared in range(1, cut + 1):
            reused = to_blocks(full, Reuse(mapped=previous, shared=shared))
            fresh = to_blocks(full)
            assert (reused.system, reused.messages, reused.extras, reused.sources) == (
                fresh.system,
                fresh.messages,
                fresh.extras,
                fresh.sources,
            ), (cut, shared)
        # The earlier mapping is not changed by being reused.
        assert to_blocks(before).messages == previous.messages
