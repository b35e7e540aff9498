"""pi and SWE-agent transcript readers on the real files and on hand-built ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.core.fileops import extract_file_ops
from compaction.core.transcripts import read_pi, read_swe_agent
from compaction.core.transcripts.base import MISSING_RESULT_TEXT
from compaction.core.types import Msg
from tests.core.test_transcripts_claude_code import assert_tool_pairs_intact
from tests.corpus import TRANSCRIPTS, corpus

DATA = TRANSCRIPTS
SWE_FILES = sorted((DATA / "swe-agent").glob("*.traj"))


@corpus
def test_real_pi_session() -> None:
    t = read_pi(DATA / "pi" / "large-session.jsonl")
    assert t.source == "pi"
    assert t.session_id == "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
    assert t.model == "claude-sonnet-4-5"
    assert t.title.startswith("read packages/coding-agent/docs/theme.md")
    assert len(t.messages) > 800
    # Aborted turns: the empty ones are skipped (and reported); those with text or calls are
    # kept, their never-run calls answered with an error result.
    assert t.stats["skipped_empty_failed_assistant"] == 14
    assert t.stats["failed_assistant_turns_kept"] == 8
    assert t.stats["orphan_tool_results_dropped"] == 0
    assert t.stats["unanswered_tool_uses_repaired"] == 18
    assert_tool_pairs_intact(t)
    # toolCall → tool_use with its arguments as input, toolResult → tool_result.
    first_use = next(b for m in t.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use")
    assert first_use["name"] == "read" and first_use["input"]["path"] == "packages/coding-agent/docs/theme.md"
    reported = [r for r in t.reported_context_tokens if r is not None]
    assert len(reported) > 300 and max(reported) > 100_000
    usage = next(m["usage"] for m in t.messages if m["role"] == "assistant" and m["usage"])
    assert set(usage) == {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
    ops = extract_file_ops([Msg(i, m["role"], m["content"], 1) for i, m in enumerate(t.messages)])
    assert "packages/coding-agent/src/tui/user-message-selector.ts" in ops.modified


def test_pi_compaction_bash_execution_and_failed_turns(tmp_path: Path) -> None:
    entries = [
        {"type": "session", "id": "s1", "cwd": "/w", "modelId": "m"},
        {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "fix the bug"}]}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a.ts"}}],
                "model": "claude-x",
                "usage": {"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 1},
                "stopReason": "toolUse",
            },
        },
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "read",
                "content": [{"type": "text", "text": "x"}],
                "isError": False,
            },
        },
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c2", "name": "edit", "arguments": {"path": "a.ts"}}],
                "stopReason": "aborted",
            },
        },
        {"type": "message", "message": {"role": "bashExecution", "command": "ls", "output": "a.ts\n", "exitCode": 0}},
        {"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "go on"}]}},
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}], "stopReason": "stop"},
        },
        {"type": "compaction", "summary": "## Goal\nfix", "firstKeptEntryIndex": 5, "tokensBefore": 5000},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    t = read_pi(path)
    assert_tool_pairs_intact(t)
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant", "user", "user", "assistant"]
    assert t.messages[5]["content"][0]["text"].startswith("Ran `ls`")
    # The person ran `!ls`, but its output is not their words; "go on" is.
    assert t.messages[5]["provenance"] == "person"
    assert t.messages[5]["content"][0]["provenance"] == "harness"
    assert "provenance" not in t.messages[5]["content"][1]
    assert [m["provenance"] for m in t.messages if m["role"] == "assistant"] == ["", "", ""]
    assert t.reported_context_tokens[1] == 111
    assert t.compactions == [
        {"trigger": None, "pre_tokens": 5000, "before_message_index": 5, "summary": "## Goal\nfix"}
    ]
    # The aborted turn's call is kept; it never ran, so its result says so.
    assert t.messages[3]["content"][0]["id"] == "c2"
    assert t.messages[4]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": MISSING_RESULT_TEXT,
        "is_error": True,
    }


@corpus
@pytest.mark.parametrize("path", SWE_FILES, ids=lambda p: p.name)
def test_real_swe_agent_trajectories(path: Path) -> None:
    t = read_swe_agent(path)
    assert t.source == "swe-agent"
    assert t.messages and t.messages[0]["role"] == "user"
    assert t.system_prompt
    assert t.title
    assert not t.title.startswith("TimeDelta serialization")  # not the demonstration's issue
    assert t.stats["orphan_tool_results_dropped"] == 0
    assert_tool_pairs_intact(t)
    uses = [b for m in t.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert uses, "actions become tool_use blocks"


@corpus
def test_swe_agent_function_calls_keep_their_ids() -> None:
    t = read_swe_agent(DATA / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj")
    assert t.model == "gpt-4o"
    uses = [b for m in t.messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert uses[0]["id"] == "call_fJuazlMUN5fQDQ73G6XSpYpx" and uses[0]["name"] == "find_file"
    assert uses[1]["input"] == {"path": "/SWE-agent__test-repo/tests/missing_colon.py"}


@corpus
def test_swe_agent_text_actions_pair_with_observations() -> None:
    t = read_swe_agent(DATA / "swe-agent" / "pydicom__pydicom-1458.traj")
    assert t.stats["text_actions_as_tool_calls"] == 12
    first = next(m for m in t.messages if m["role"] == "assistant")
    use = next(b for b in first["content"] if b["type"] == "tool_use")
    assert use["name"] == "create" and use["input"]["command"] == "create reproduce_bug.py"
    ops = extract_file_ops([Msg(i, m["role"], m["content"], 1) for i, m in enumerate(t.messages)])
    assert "reproduce_bug.py" in ops.modified
