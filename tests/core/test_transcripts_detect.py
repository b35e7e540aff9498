"""Format detection, the Anthropic / OpenAI chat JSON readers, and errors that name the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.core.transcripts import FORMATS, TranscriptError, detect_format, read_transcript
from compaction.core.transcripts.base import MISSING_RESULT_TEXT
from tests import codex_rollouts
from tests.core.test_transcripts_claude_code import assert_tool_pairs_intact
from tests.corpus import TRANSCRIPTS, corpus

DATA = TRANSCRIPTS
EXPECTED = {"claude-code": "claude-code/**/*.jsonl", "pi": "pi/*.jsonl", "swe-agent": "swe-agent/*.traj"}


@corpus
@pytest.mark.parametrize("fmt", sorted(EXPECTED))
def test_every_shared_file_is_detected(fmt: str) -> None:
    files = sorted(DATA.glob(EXPECTED[fmt]))
    assert files
    for path in files:
        assert detect_format(path) == fmt, path


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are terse."}],
    "messages": [
        {"role": "user", "content": "List the files in src please"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls src"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls tests"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "test_a.py"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "two files", "signature": "x"},
                {"type": "text", "text": "a.py"},
            ],
            "usage": {"input_tokens": 100, "output_tokens": 5, "cache_read_input_tokens": 900},
        },
    ],
}


def test_anthropic_request_body(tmp_path: Path) -> None:
    path = write(tmp_path, "body.json", ANTHROPIC_BODY)
    assert detect_format(path) == "anthropic-messages"
    t = read_transcript(path)
    assert_tool_pairs_intact(t)
    assert t.source == "anthropic-messages" and t.model == "claude-sonnet-4-5"
    assert t.system_prompt == "You are terse."
    assert t.title == "List the files in src please"
    # The two results, on separate lines in the file, are one message after their calls.
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["t1", "t2"]
    assert t.messages[3]["content"][0]["type"] == "thinking"
    assert t.reported_context_tokens[3] == 1000 and t.usage_reports == 1 and t.tool_calls == 2


def test_anthropic_list_of_messages(tmp_path: Path) -> None:
    path = write(tmp_path, "list.json", ANTHROPIC_BODY["messages"][:2])
    assert detect_format(path) == "anthropic-messages"
    t = read_transcript(path)
    # The last message's calls were still pending: no made-up result.
    assert [m["role"] for m in t.messages] == ["user", "assistant"]


def test_a_claude_code_request_body_marks_what_the_harness_added(tmp_path: Path) -> None:
    # Claude Code's own requests put reminders and the person's words in one user message.
    reminder = "<system-reminder>\nThe TodoWrite tool hasn't been used recently.\n</system-reminder>"
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": reminder}, {"type": "text", "text": "rename the module"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Renamed."}]},
            {"role": "user", "content": "[Request interrupted by user]"},
        ],
    }
    t = read_transcript(write(tmp_path, "claude-code-request.json", body))
    assert [m["provenance"] for m in t.messages] == ["person", "", "harness"]
    assert t.messages[0]["content"] == [
        {"type": "text", "text": reminder, "provenance": "harness"},
        {"type": "text", "text": "rename the module"},
    ]
    assert t.messages[2]["content"] == "[Request interrupted by user]"


OPENAI_BODY = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "What is in README.md?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "README.md"}'},
                },
                {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "# Title"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "missing"}]},
        {"role": "assistant", "content": "It has a title.", "usage": {"prompt_tokens": 300, "completion_tokens": 4}},
        {"role": "user", "content": "thanks"},
    ],
}


def test_openai_chat_with_tool_calls(tmp_path: Path) -> None:
    path = write(tmp_path, "chat.json", OPENAI_BODY)
    assert detect_format(path) == "openai-chat"
    t = read_transcript(path)
    assert_tool_pairs_intact(t)
    assert t.system_prompt == "You are a coding agent." and t.model == "gpt-4o"
    uses = t.messages[1]["content"]
    assert uses[0] == {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "README.md"}}
    assert uses[1]["input"] == {"raw": "not json"}
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["call_1", "call_2"]
    assert t.messages[3]["content"] == [{"type": "text", "text": "It has a title."}]
    assert t.reported_context_tokens[3] == 300
    # A list of messages without the body is detected the same way.
    assert detect_format(write(tmp_path, "list.json", OPENAI_BODY["messages"])) == "openai-chat"


def test_openai_call_arguments_nested_too_deep_are_kept_as_text(tmp_path: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": deep}}
    body = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ]
    t = read_transcript(write(tmp_path, "deep.json", body), format="openai-chat")
    assert t.messages[1]["content"][0]["input"] == {"raw": deep}


def test_openai_legacy_function_call_and_unanswered_call(tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": "{}"}},
        {"role": "function", "name": "weather", "content": "sunny"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c9", "function": {"name": "x", "arguments": ""}}],
        },
        {"role": "user", "content": "never mind"},
    ]
    t = read_transcript(write(tmp_path, "legacy.json", messages), format="openai-chat")
    assert_tool_pairs_intact(t)
    assert t.messages[2]["content"][0]["content"] == [{"type": "text", "text": "sunny"}]
    assert t.messages[4]["content"][0]["content"] == MISSING_RESULT_TEXT


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"^line 1: the file is empty$"),
        ("\n\n", r"^line 1: the file is empty$"),
        ("name,age\nbob,3\n", r"^line 1: not JSON; a transcript is JSON or JSON lines$"),
        ('{"a": 1}\n', r"^line 1: a JSON object with neither `history` \(SWE-agent\) nor `messages`"),
        ("42\n", r"^line 1: a JSON number, not a transcript$"),
        (
            '{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}\n{oops\n{"type": "user"}\n',
            r"^line 2: not JSON \(Expecting property name",
        ),
        ('{"kind": "x"}\n{"kind": "y"}\n', r"^line 1: JSON lines, but the first has no known `type` \(None\)"),
        ('{\n  "messages": [\n    {"role": "user",\n     "content": "hi"\n  ]\n}\n', r"^line 5: not JSON"),
        ('[{"role": "robot", "content": "beep"}]', r"^messages\[0\]\.role: 'robot' is not one of"),
        ('{"messages": [{"role": "user", "content": 3}]}', r"^messages\[0\]\.content: expected a string"),
        ('{"history": []}', r"^holds no swe-agent conversation messages$"),
        (
            '{"type": "progress", "uuid": "p1"}\n',
            r"^holds no claude-code conversation messages \(skipped: skipped_progress 1\)$",
        ),
    ],
)
def test_a_file_that_is_not_a_transcript_is_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TranscriptError, match=message):
        read_transcript(write(tmp_path, "bad.txt", text))


@corpus
def test_binary_and_forced_formats(tmp_path: Path) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    with pytest.raises(TranscriptError, match=r"^line 1: not UTF-8 text"):
        read_transcript(binary)
    with pytest.raises(TranscriptError, match=r"unknown format 'csv'; one of claude-code, pi"):
        read_transcript(binary, format="csv")
    # Forcing the wrong reader finds nothing it can read, and says so.
    pi_file = DATA / "pi" / "large-session.jsonl"
    with pytest.raises(TranscriptError, match=r"^holds no claude-code conversation messages"):
        read_transcript(pi_file, format="claude-code")
    assert read_transcript(pi_file, format="pi").source == "pi"
    assert set(FORMATS) == {"claude-code", "pi", "codex", "swe-agent", "anthropic-messages", "openai-chat"}


def test_a_file_saved_with_a_utf8_byte_order_mark_reads_like_one_without(tmp_path: Path) -> None:
    # Windows editors and PowerShell's redirection write one; the text is the same.
    plain = write(tmp_path, "chat.json", OPENAI_BODY)
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert detect_format(marked) == "openai-chat"
    assert read_transcript(marked).messages == read_transcript(plain).messages
    lines = tmp_path / "marked.jsonl"
    lines.write_bytes(b"\xef\xbb\xbf" + codex_rollouts.SAMPLE.read_bytes())
    assert detect_format(lines) == "codex" and len(read_transcript(lines).messages) == 143
