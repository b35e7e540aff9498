"""Claude Code transcript reader, on the real sessions and on hand-built edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.core.cutpoint import plan_cut
from compaction.core.provenance import QUEUED_TEMPLATE
from compaction.core.transcripts import ImportedTranscript, TranscriptError, parse_claude_code, read_claude_code
from compaction.core.transcripts.base import MISSING_RESULT_TEXT
from compaction.core.types import Msg
from tests.core.test_cutpoint import assert_plan_invariants
from tests.corpus import TRANSCRIPTS, corpus

CC = TRANSCRIPTS / "claude-code"
BIG = {
    "258c7280-ae70-4798-800f-63464d01a85d.jsonl": 167_094,
    "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": 167_731,
}
ALL_FILES = sorted(CC.rglob("*.jsonl"))


def assert_tool_pairs_intact(t: ImportedTranscript) -> None:
    """Every tool_result answers a tool_use of the assistant message right before it, and
    every tool_use is answered in the next message (except a final pending call)."""
    messages = t.messages
    seen_results: set[str] = set()
    for index, message in enumerate(messages):
        assert message["role"] in ("user", "assistant")
        content = message["content"]
        assert content, f"empty message at {index}"
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if message["role"] == "assistant":
            uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            assert not any(b.get("type") == "tool_result" for b in blocks)
            if uses and index + 1 < len(messages):
                following = messages[index + 1]
                assert following["role"] == "user"
                answered = {b["tool_use_id"] for b in following["content"] if b.get("type") == "tool_result"}
                assert set(uses) <= answered, f"unanswered tool_use after message {index}"
        else:
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            if results:
                assert index > 0 and messages[index - 1]["role"] == "assistant"
                previous_uses = {b["id"] for b in messages[index - 1]["content"] if b.get("type") == "tool_use"}
                assert set(results) <= previous_uses, f"orphan tool_result at {index}"
                assert len(results) == len(set(results)), f"duplicate tool_result at {index}"
                assert not (set(results) & seen_results)
                seen_results.update(results)
                # tool_result blocks come first in a user message, as the API requires.
                kinds = [b.get("type") for b in blocks]
                assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
    assert len(t.reported_context_tokens) == len(messages)
    for message, reported in zip(messages, t.reported_context_tokens, strict=True):
        if message["role"] == "user":
            assert reported is None and message["usage"] is None


@corpus
@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_every_real_file_imports_with_pairs_intact(path: Path) -> None:
    t = read_claude_code(path)
    assert t.source == "claude-code"
    assert t.messages, path
    assert t.messages[0]["role"] == "user"
    assert t.model and t.model.startswith("claude-")
    assert t.title
    assert t.stats["malformed_lines"] == 0
    assert t.stats["orphan_tool_results_dropped"] == 0
    assert_tool_pairs_intact(t)
    # No two assistant messages share an API response id: split lines were merged.
    raw_ids = set()
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "assistant" and (entry.get("isSidechain") is False or path.name.startswith("agent-")):
            raw_ids.add(entry["message"]["id"])
    assistant_count = sum(1 for m in t.messages if m["role"] == "assistant")
    assert assistant_count <= len(raw_ids)


@corpus
@pytest.mark.parametrize(("name", "pre_tokens"), sorted(BIG.items()))
def test_big_sessions_report_their_compaction(name: str, pre_tokens: int) -> None:
    t = read_claude_code(CC / name)
    assert len(t.compactions) == 1
    compaction = t.compactions[0]
    assert compaction["trigger"] == "auto"
    assert compaction["pre_tokens"] == pre_tokens
    assert abs(compaction["pre_tokens"] - 167_000) < 1_500
    assert compaction["summary"].startswith("This session is being continued from a previous conversation")
    assert len(compaction["summary"]) > 10_000
    index = compaction["before_message_index"]
    assert 50 < index < len(t.messages) - 10
    # The summary itself is not imported as a message.
    assert not any(
        isinstance(m["content"], str) and m["content"].startswith("This session is being continued") for m in t.messages
    )
    # Reported context sizes: ~26k at the start (system prompt + tools), close to preTokens
    # just before the compaction, small again right after it.
    reported = [(i, r) for i, r in t.assistant_context_tokens]
    assert 20_000 < reported[0][1] < 35_000
    before = [r for i, r in reported if i < index]
    after = [r for i, r in reported if i >= index]
    assert abs(max(before) - pre_tokens) < 5_000
    assert after[0] < 70_000
    assert len(t.messages) > 250


@corpus
def test_reported_context_is_input_plus_cache_tokens() -> None:
    path = CC / "tool_heavy.jsonl"
    t = read_claude_code(path)
    usage = next(m["usage"] for m in t.messages if m["role"] == "assistant")
    expected = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert t.reported_context_tokens[1] == expected


@corpus
def test_parallel_tool_calls_off_the_chain_are_kept_together() -> None:
    # In tool_heavy.jsonl, WebSearch and Glob are one response split over two lines, and the
    # Glob result hangs off the second line, which is not on the parentUuid chain.
    t = read_claude_code(CC / "tool_heavy.jsonl")
    for index, message in enumerate(t.messages):
        names = (
            [b.get("name") for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
            if message["role"] == "assistant"
            else []
        )
        if "WebSearch" in names:
            assert "Glob" in names
            results = [b for b in t.messages[index + 1]["content"] if b.get("type") == "tool_result"]
            assert len(results) == 2
            break
    else:
        pytest.fail("parallel WebSearch/Glob response not found")
    # Read and WebFetch share one message.id although their results were interleaved.
    read_message = next(
        m for m in t.messages if m["role"] == "assistant" and any(b.get("name") == "Read" for b in m["content"])
    )
    assert [b.get("name") for b in read_message["content"] if b.get("type") == "tool_use"] == ["Read", "WebFetch"]


@corpus
def test_imported_history_cuts_cleanly() -> None:
    from compaction.core.tokens import count_content

    t = read_claude_code(CC / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl")
    messages = [Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(t.messages)]
    for keep in (2_000, 20_000, 60_000):
        plan = plan_cut(messages, keep_recent_tokens=keep)
        assert not plan.nothing_to_compact
        kept_uses = {i for m in plan.kept for i in m.tool_use_ids}
        assert all(i in kept_uses for m in plan.kept for i in m.tool_result_ids)
        assert plan.kept_tokens >= keep
    # Every budget, forced or not, on the real history keeps the plan's invariants.
    for keep in range(0, 200_000, 3_000):
        for force in (False, True):
            plan = plan_cut(messages, keep_recent_tokens=keep, force=force, context_window=keep * 5 or None)
            assert_plan_invariants(plan, messages)
            if not plan.nothing_to_compact and not force:
                assert plan.kept_tokens >= keep


# --- hand-built lines --------------------------------------------------------------------


def line(uuid: str, parent: str | None, kind: str, content, **extra) -> dict:
    entry = {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s1"}
    if kind in ("user", "assistant"):
        message = {"role": kind, "content": content}
        if kind == "assistant":
            message["id"] = extra.pop("message_id", f"msg_{uuid}")
            message["model"] = extra.pop("model", "claude-test")
            message["usage"] = extra.pop(
                "usage", {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5}
            )
        entry["message"] = message
    entry.update(extra)
    return entry


def tool_use(tool_id: str, name: str = "Bash") -> dict:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"command": "ls"}}


def tool_result(tool_id: str) -> dict:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def test_orphan_results_are_dropped_and_counted() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "hi"),
            line("a1", "u1", "assistant", [{"type": "text", "text": "hello"}]),
            line("u2", "a1", "user", [tool_result("toolu_missing"), {"type": "text", "text": "and this"}]),
            line("a2", "u2", "assistant", [{"type": "text", "text": "ok"}]),
        ]
    )
    assert t.stats["orphan_tool_results_dropped"] == 1
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert t.messages[2]["content"] == [{"type": "text", "text": "and this"}]
    assert_tool_pairs_intact(t)


def test_unanswered_tool_use_is_repaired_unless_pending_at_the_end() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "go"),
            line("a1", "u1", "assistant", [tool_use("t1")]),
            line("u2", "a1", "user", "[Request interrupted by user for tool use]"),
            line("a2", "u2", "assistant", [tool_use("t2")]),
        ]
    )
    assert t.stats["unanswered_tool_uses_repaired"] == 1
    repaired = t.messages[2]["content"][0]
    assert repaired["tool_use_id"] == "t1" and repaired["is_error"] and repaired["content"] == MISSING_RESULT_TEXT
    assert t.messages[-1]["content"] == [tool_use("t2")]  # the agent was still waiting: left as is
    assert_tool_pairs_intact(t)


def test_split_assistant_lines_merge_and_results_follow() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "read two files"),
            line("a1", "u1", "assistant", [{"type": "thinking", "thinking": "hmm"}], message_id="m1"),
            line("a2", "a1", "assistant", [tool_use("t1", "Read")], message_id="m1"),
            line("r1", "a2", "user", [tool_result("t1")]),
            line("a3", "r1", "assistant", [tool_use("t2", "Read")], message_id="m1"),
            line("p1", "a3", "progress", None),
            line("r2", "a3", "user", [tool_result("t2")]),
            line("a4", "r2", "assistant", [{"type": "text", "text": "done"}], message_id="m2"),
        ]
    )
    assert [m["role"] for m in t.messages] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in t.messages[1]["content"]] == ["thinking", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in t.messages[2]["content"]] == ["t1", "t2"]
    assert t.reported_context_tokens == [None, 115, None, 115]
    assert t.stats["assistant_lines_merged"] == 2


def test_sidechains_and_branches_are_skipped_meta_lines_kept() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "first"),
            line("a1", "u1", "assistant", [{"type": "text", "text": "abandoned answer"}]),
            line("s1", "u1", "assistant", [{"type": "text", "text": "sidechain"}], isSidechain=True),
            line("u2", None, "user", "first, edited"),  # the user edited the first message: a new branch
            line("m1", "u2", "user", "<local-command-caveat>x</local-command-caveat>", isMeta=True),
            line("a2", "m1", "assistant", [{"type": "text", "text": "kept answer"}]),
            line("sys", "a2", "system", None, subtype="turn_duration"),
        ]
    )
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in t.messages]
    assert texts == ["first, edited", "kept answer"]
    assert "abandoned answer" not in json.dumps(t.messages)
    assert "sidechain" not in json.dumps(t.messages)
    # isMeta lines are hidden in Claude Code's UI but sent to the model: imported.
    assert "<local-command-caveat>x</local-command-caveat>" in json.dumps(t.messages)
    assert t.stats["meta_user_lines_imported"] == 1
    # ...as the harness's words beside the person's, in the one message they are merged into.
    assert t.messages[0]["provenance"] == "person"
    assert t.messages[0]["content"][1] == {
        "type": "text",
        "text": "<local-command-caveat>x</local-command-caveat>",
        "provenance": "harness",
    }
    assert t.skipped == {"skipped_off_chain": 2, "skipped_system_turn_duration": 1}
    # The sidechain is a subagent's conversation: read as one of its own, not dropped.
    assert [m["content"][0]["text"] for s in t.subagents for m in s.messages] == ["sidechain"]
    assert t.stats["sidechain_lines_read_as_subagents"] == 1


def test_compaction_boundary_and_summary_are_recorded() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "start"),
            line("a1", "u1", "assistant", [{"type": "text", "text": "working"}]),
            line(
                "b1",
                None,
                "system",
                None,
                subtype="compact_boundary",
                logicalParentUuid="a1",
                compactMetadata={"trigger": "manual", "preTokens": 1234},
            ),
            line("s1", "b1", "user", "This session is being continued... summary", isCompactSummary=True),
            line("u2", "s1", "user", "continue"),
            line("a2", "u2", "assistant", [{"type": "text", "text": "continuing"}]),
        ]
    )
    assert len(t.messages) == 4
    assert t.compactions == [
        {
            "trigger": "manual",
            "pre_tokens": 1234,
            "before_message_index": 2,
            "summary": "This session is being continued... summary",
        }
    ]


@corpus
def test_a_subagent_file_is_read_from_its_sidechain() -> None:
    t = read_claude_code(CC / "agent-a0294d5.jsonl")
    assert len(t.messages) > 10
    assert_tool_pairs_intact(t)


def test_malformed_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    entries = [line("u1", None, "user", "hi"), line("a1", "u1", "assistant", [{"type": "text", "text": "yo"}])]
    path.write_text(json.dumps(entries[0]) + "\n{not json\n\n[1,2]\n" + json.dumps(entries[1]) + "\n")
    t = read_claude_code(path)
    assert t.stats["skipped_malformed_lines"] == 2
    assert len(t.messages) == 2
    assert t.title == "hi" and t.model == "claude-test" and t.session_id == "s1"
    # An import reads strictly: the first bad line is named, with why.
    with pytest.raises(TranscriptError, match=r"^line 2: not JSON \(Expecting property name"):
        read_claude_code(path, strict=True)


def test_a_truncated_last_line_is_skipped_and_reported_even_when_strict(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    entries = [line("u1", None, "user", "hi"), line("a1", "u1", "assistant", [{"type": "text", "text": "yo"}])]
    path.write_text(json.dumps(entries[0]) + "\n" + json.dumps(entries[1]) + '\n{"type": "user", "mess')
    t = read_claude_code(path, strict=True)
    assert len(t.messages) == 2
    assert t.skipped == {"skipped_truncated_last_line": 1}


def test_empty_input() -> None:
    t = parse_claude_code([])
    assert t.messages == [] and t.compactions == [] and t.reported_context_tokens == []


def test_whitespace_only_text_blocks_are_dropped() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "hi"),
            line("a1", "u1", "assistant", [{"type": "thinking", "thinking": "x"}], message_id="m1"),
            line("a2", "a1", "assistant", [{"type": "text", "text": "\n\n"}], message_id="m1"),
            line("a3", "a2", "assistant", [{"type": "text", "text": "answer"}], message_id="m1"),
            line("u2", "a3", "user", "   "),
            line("u3", "u2", "user", "next"),
        ]
    )
    assert t.messages[1]["content"] == [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "answer"}]
    assert [m["content"] for m in t.messages if m["role"] == "user"] == ["hi", "next"]
    assert t.stats["blank_text_blocks_dropped"] == 2


@corpus
@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_real_files_have_no_blank_text(path: Path) -> None:
    for message in read_claude_code(path).messages:
        content = message["content"]
        if isinstance(content, str):
            assert content.strip()
        else:
            assert all(str(b.get("text", "")).strip() for b in content if b.get("type") == "text")


def test_summary_line_gives_the_title() -> None:
    t = parse_claude_code(
        [
            {"type": "summary", "summary": "Fix the login redirect loop", "leafUuid": "a1"},
            line("u1", None, "user", "<command-name>/clear</command-name>"),
            line("a1", "u1", "assistant", [{"type": "text", "text": "ok"}]),
        ]
    )
    assert t.title == "Fix the login redirect loop"
    untitled = parse_claude_code(
        [line("u1", None, "user", "<command-name>/clear</command-name>"), line("u2", "u1", "user", "make it fast")]
    )
    assert untitled.title == "make it fast"


def call_line(uuid: str, parent: str, tool_id: str) -> dict:
    return line(uuid, parent, "assistant", [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}])


def result_line(uuid: str, parent: str, tool_id: str) -> dict:
    return line(uuid, parent, "user", [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}])


def test_queued_messages_arrive_with_the_tool_result_they_were_typed_during() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "run the tests"),
            call_line("a1", "u1", "t1"),
            {"type": "queue-operation", "operation": "enqueue", "content": "also check the linter"},
            {"type": "queue-operation", "operation": "enqueue", "content": "and then push"},
            {"type": "queue-operation", "operation": "remove"},
            result_line("r1", "a1", "t1"),
            call_line("a2", "r1", "t2"),
            {"type": "queue-operation", "operation": "remove"},
            result_line("r2", "a2", "t2"),
            line("a3", "r2", "assistant", [{"type": "text", "text": "done"}]),
            # Typed at the end and sent as a prompt of its own: imported once, from its line.
            {"type": "queue-operation", "operation": "enqueue", "content": "thanks"},
            line("u2", "a3", "user", "thanks"),
            {"type": "queue-operation", "operation": "enqueue", "content": "one more thing"},
        ]
    )
    assert_tool_pairs_intact(t)
    # Delivered with the tool result in Claude Code's reminder, so summaries know it was queued.
    assert t.messages[2]["content"][-1] == {
        "type": "text",
        "text": QUEUED_TEMPLATE.format(text="also check the linter"),
    }
    assert t.messages[4]["content"][-1] == {"type": "text", "text": QUEUED_TEMPLATE.format(text="and then push")}
    dumped = json.dumps(t.messages)
    assert dumped.count("thanks") == 1
    # Still queued when the log ends: the user's latest words are kept, at the end.
    assert t.messages[-1]["content"][-1]["text"] == "one more thing"
    assert t.stats["queued_messages_imported"] == 3 and t.stats["queued_messages_pending_at_end"] == 1


def test_newer_queued_command_attachments_are_imported_once() -> None:
    attachment = {
        "type": "attachment",
        "uuid": "q1",
        "parentUuid": "a1",
        "isSidechain": False,
        "attachment": {"type": "queued_command", "commandMode": "prompt", "prompt": "use the staging db"},
    }
    t = parse_claude_code(
        [
            line("u1", None, "user", "migrate"),
            call_line("a1", "u1", "t1"),
            {"type": "queue-operation", "operation": "enqueue", "content": "use the staging db"},
            attachment,
            {"type": "queue-operation", "operation": "remove"},
            result_line("r1", "q1", "t1"),
            line("a2", "r1", "assistant", [{"type": "text", "text": "ok"}]),
            {
                "type": "attachment",
                "uuid": "n1",
                "parentUuid": "a2",
                "attachment": {"type": "edited_text_file", "filename": "x"},
            },
        ]
    )
    assert_tool_pairs_intact(t)
    assert json.dumps(t.messages).count("use the staging db") == 1
    assert t.messages[2]["content"][-1] == {"type": "text", "text": QUEUED_TEMPLATE.format(text="use the staging db")}
    # The remove that follows the attachment has no waiting message of its own: a line without one.
    assert t.skipped == {"skipped_attachment_edited_text_file": 1, "skipped_queue_operations_without_a_message": 1}


def test_a_missing_parent_continues_in_file_order() -> None:
    t = parse_claude_code(
        [
            line("u1", None, "user", "first"),
            line("a1", "u1", "assistant", [{"type": "text", "text": "one"}]),
            line("u2", "gone", "user", "second"),  # its parent was cut out of the file
            line("a2", "u2", "assistant", [{"type": "text", "text": "two"}]),
            line("b1", None, "system", None, subtype="compact_boundary", logicalParentUuid="also-gone"),
            line("s1", "b1", "user", "summary of it all", isCompactSummary=True),
            line("a3", "s1", "assistant", [{"type": "text", "text": "three"}]),
        ]
    )
    texts = [b["text"] for m in t.messages for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert texts == ["one", "two", "three"] and t.messages[0]["content"] == "first"
    assert t.stats["parent_links_broken"] == 2 and t.skipped == {}
    assert t.compactions[0]["before_message_index"] == 4


def test_each_message_says_whose_words_it_carries() -> None:
    command = (
        "<command-message>create-beads</command-message>\n<command-name>/create-beads</command-name>\n"
        "<command-args>for the linter setup</command-args>"
    )
    skill = "Create beads with a structured preview before execution.\n\nDo NOT enter plan mode."
    t = parse_claude_code(
        [
            line("u1", None, "user", command),
            line("m1", "u1", "user", [{"type": "text", "text": skill}], isMeta=True),
            call_line("a1", "m1", "t1"),
            {"type": "queue-operation", "operation": "enqueue", "content": "use the staging db"},
            {"type": "queue-operation", "operation": "remove"},
            result_line("r1", "a1", "t1"),
            line("a2", "r1", "assistant", [{"type": "text", "text": "done"}]),
            line("h1", "a2", "user", "Stop hook feedback:\n[stop.sh]: Cannot exit with unstaged changes.", isMeta=True),
            line("a3", "h1", "assistant", [{"type": "text", "text": "committing"}]),
            line("n1", "a3", "user", "<task-notification>\n<status>completed</status>\n</task-notification>"),
        ]
    )
    assert_tool_pairs_intact(t)
    said = [(m["role"], m["provenance"]) for m in t.messages]
    assert said == [
        ("user", "person"),  # the slash command, with its expansion marked as the harness's
        ("assistant", ""),
        ("user", "person"),  # a tool result with the message queued meanwhile
        ("assistant", ""),
        ("user", "harness"),  # the Stop hook's output
        ("assistant", ""),
        ("user", "harness"),  # a background task's notification, by its shape
    ]
    assert t.messages[0]["content"] == [
        {"type": "text", "text": command},
        {"type": "text", "text": skill, "provenance": "harness"},
    ]
    assert t.messages[2]["content"][-1] == {"type": "text", "text": QUEUED_TEMPLATE.format(text="use the staging db")}
