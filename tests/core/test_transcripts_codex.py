"""The Codex CLI rollout reader on generated rollouts (tests/codex_rollouts.py) and edge cases."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.fileops import extract_file_ops
from compaction.core.provenance import HARNESS, PERSON, user_words
from compaction.core.transcripts import TranscriptError, detect_format, parse_codex, read_codex, read_transcript
from compaction.core.transcripts.base import MISSING_RESULT_TEXT
from compaction.core.types import Msg
from tests import codex_rollouts as cr
from tests.core.test_transcripts_claude_code import assert_tool_pairs_intact

CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")


@pytest.fixture(scope="module")
def rollout() -> cr.Rollout:
    return cr.long_rollout()


@pytest.fixture(scope="module")
def transcript(rollout, tmp_path_factory):
    return read_transcript(rollout.write(tmp_path_factory.mktemp("codex") / "rollout.jsonl"))


def items(rollout: cr.Rollout, *kinds: str) -> list[dict]:
    return [x["payload"] for x in rollout.lines if x["type"] == "response_item" and x["payload"]["type"] in kinds]


def blocks(transcript, role: str, kind: str) -> list[dict]:
    return [
        b
        for m in transcript.messages
        if m["role"] == role and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == kind
    ]


def test_the_committed_sample_is_the_generators_output(rollout) -> None:
    assert cr.SAMPLE.read_text(encoding="utf-8") == rollout.text()
    assert detect_format(cr.SAMPLE) == "codex"


def test_every_call_is_paired_and_counted_once(rollout, transcript) -> None:
    assert_tool_pairs_intact(transcript)
    calls = items(rollout, *CALL_ITEMS)
    assert len(calls) == 42 and transcript.tool_calls == 42
    uses = {b["id"]: b for b in blocks(transcript, "assistant", "tool_use")}
    assert {c["call_id"] for c in calls if "call_id" in c} <= uses.keys()
    results = {b["tool_use_id"]: b for b in blocks(transcript, "user", "tool_result")}
    assert results.keys() == uses.keys()
    assert MISSING_RESULT_TEXT not in json.dumps(transcript.messages)
    # The shell call's JSON arguments are parsed; apply_patch's input stays the patch text.
    assert uses["call_1_rg"]["name"] == "shell" and uses["call_1_rg"]["input"]["command"][0] == "bash"
    patch = uses["call_3_patch"]
    assert patch["name"] == "apply_patch" and patch["input"]["input"].startswith("*** Begin Patch\n*** Update File")
    assert uses["call_7_local"]["name"] == "local_shell" and uses["call_7_local"]["input"]["command"][-1] == "make test"
    search = next(b for b in uses.values() if b["name"] == "web_search")
    assert search["input"]["query"] == "python decimal sum start parameter"
    assert "does not record them" in results[search["id"]]["content"] and not results[search["id"]].get("is_error")
    # The patch's files count as modified for the summaries; the shell commands' as read.
    ops = extract_file_ops([Msg(i, m["role"], m["content"], 1) for i, m in enumerate(transcript.messages)])
    assert "src/ledger/module_3.py" in ops.modified and "src/ledger/module_1.py" in ops.read
    # A command that exited non-zero is an error result; the others are not.
    assert [i for i, r in results.items() if r.get("is_error")] == ["call_4_rg", "call_13_rg", "call_22_rg"]


def test_no_message_is_stored_twice(rollout, transcript) -> None:
    said = [p["content"][0]["text"] for p in items(rollout, "message") if p["role"] == "assistant"]
    stored = [b["text"] for b in blocks(transcript, "assistant", "text")]
    assert stored == said  # the agent_message events that mirror them are not read
    typed = [p["content"][0]["text"] for p in items(rollout, "message") if p["role"] == "user"]
    texts = [b["text"] for b in blocks(transcript, "user", "text")]
    assert sorted(texts) == sorted([*typed, cr.PERMISSIONS])
    reasoning = [p["summary"][0]["text"] for p in items(rollout, "reasoning")]
    assert [b["thinking"] for b in blocks(transcript, "assistant", "thinking")] == reasoning
    assert transcript.stats["skipped_event_user_message_mirrors"] == 30
    assert transcript.stats["skipped_event_agent_message_mirrors"] == len(said)


def test_every_usage_report_is_attached_to_the_reply_it_reports(rollout, transcript) -> None:
    # Walk the file: each token_count with new totals reports the assistant items just before it.
    expected: list[int] = []
    seen_total = None
    pending = False
    for line in rollout.lines:
        payload = line["payload"]
        if line["type"] == "response_item" and payload["type"] in ("message", "reasoning", *CALL_ITEMS):
            pending = pending or payload.get("role", "assistant") == "assistant"
        if line["type"] == "event_msg" and payload["type"] == "token_count" and payload["info"]:
            if payload["info"]["total_token_usage"] != seen_total and pending:
                expected.append(payload["info"]["last_token_usage"]["input_tokens"])
                pending = False
            seen_total = payload["info"]["total_token_usage"]
    assert len(expected) == 71
    assert [t for _i, t in transcript.assistant_context_tokens] == expected
    assert transcript.usage_reports == 71
    first = next(m for m in transcript.messages if m["role"] == "assistant")
    # OpenAI's input_tokens include the cached ones: uncached + cache read is the prompt.
    assert first["usage"] == {
        "input_tokens": 1500,
        "cache_read_input_tokens": 4500,
        "cache_creation_input_tokens": 0,
        "output_tokens": 180,
    }
    assert transcript.stats["repeated_token_counts_dropped"] == 6
    assert transcript.stats["skipped_token_counts_without_usage"] == 1


def test_codexs_compaction_is_recorded_with_the_replaced_messages_kept(rollout, transcript) -> None:
    assert len(transcript.compactions) == 1
    compaction = transcript.compactions[0]
    line = next(x["payload"] for x in rollout.lines if x["type"] == "compacted")
    assert compaction["summary"] == line["message"]
    # Tokens before: the usage of Codex's summarization call, reported just before the line.
    before = [
        x for x in rollout.lines[: rollout.lines.index(next(x for x in rollout.lines if x["type"] == "compacted"))]
    ]
    last_count = next(x["payload"] for x in reversed(before) if x["payload"].get("type") == "token_count")
    assert compaction["pre_tokens"] == last_count["info"]["last_token_usage"]["input_tokens"]
    index = compaction["before_message_index"]
    earlier = json.dumps(transcript.messages[:index])
    later = json.dumps(transcript.messages[index:])
    assert "Turn 1: make balance()" in earlier and "module_20: balance() now sums" in earlier
    assert "Turn 21: make balance()" in later and "Turn 20:" not in later
    assert transcript.stats["replacement_history_items_not_imported_again"] == len(line["replacement_history"])
    assert transcript.stats["token_counts_read_as_tokens_before_a_compaction"] == 1


def test_model_session_and_whose_words(transcript) -> None:
    assert transcript.source == "codex" and transcript.model == "gpt-5-codex"
    assert transcript.session_id == cr.SESSION_ID
    assert transcript.title.startswith("Turn 1: make balance() in module_1")
    first = transcript.messages[0]
    assert first["provenance"] == PERSON
    marked = [(b["text"].split()[0], b.get("provenance")) for b in first["content"]]
    assert marked[:3] == [("<permissions", HARNESS), ("#", HARNESS), ("<environment_context>", HARNESS)]
    words = user_words(Msg(seq=1, role="user", content=first["content"], tokens=0, provenance=first["provenance"]))
    assert words == [("Turn 1: make balance() in module_1 exact with Decimal and keep the tests green", "")]


def write_lines(tmp_path: Path, lines: list, name: str = "rollout.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def short_rollout() -> cr.Rollout:
    rollout = cr.Rollout()
    rollout.session_meta().turn_context().user("run the tests")
    rollout.shell("call_1", "make test").token_count(3000, 50)
    rollout.output("call_1", "3 passed")
    rollout.say("All three pass.").token_count(3100, 20)
    return rollout


def test_a_cut_off_last_line_is_reported_and_the_rest_read(tmp_path: Path) -> None:
    text = short_rollout().text() + '{"timestamp":"2025-10-02T09:20:00.000Z","type":"response_item","payl'
    path = tmp_path / "cut.jsonl"
    path.write_text(text)
    transcript = read_transcript(path)
    assert transcript.skipped["skipped_truncated_last_line"] == 1
    assert transcript.messages[-1]["content"][0]["text"] == "All three pass."
    broken = text.replace('"type": "event_msg"', "{broken", 1)
    path.write_text(broken)
    with pytest.raises(TranscriptError, match=r"^line \d+: not JSON"):
        read_transcript(path)


def test_an_unknown_item_type_is_reported_and_skipped(tmp_path: Path) -> None:
    rollout = short_rollout()
    rollout.item({"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"})
    rollout.add("future_line_kind", {"anything": 1})
    rollout.item({"type": "ghost_snapshot", "ghost_commit": {"id": "abc", "parent": None}})
    transcript = read_transcript(rollout.write(tmp_path / "r.jsonl"))
    assert transcript.skipped["skipped_item_image_generation_call"] == 1
    assert transcript.skipped["skipped_future_line_kind"] == 1
    assert transcript.skipped["skipped_item_ghost_snapshot"] == 1
    assert len(transcript.messages) == 4


def test_a_call_with_no_output_gets_an_error_result_unless_still_running(tmp_path: Path) -> None:
    rollout = short_rollout()
    rollout.user("and lint it")
    rollout.shell("call_lint", "make lint").token_count(3300, 40)  # no output line: interrupted
    rollout.user("never mind, deploy")
    rollout.shell("call_deploy", "make deploy").token_count(3400, 40)  # still running at the end
    transcript = read_transcript(rollout.write(tmp_path / "r.jsonl"))
    assert_tool_pairs_intact(transcript)
    results = {b["tool_use_id"]: b for b in blocks(transcript, "user", "tool_result")}
    assert results["call_lint"] == {
        "type": "tool_result",
        "tool_use_id": "call_lint",
        "content": MISSING_RESULT_TEXT,
        "is_error": True,
    }
    assert "call_deploy" not in results and transcript.messages[-1]["role"] == "assistant"
    assert transcript.stats["unanswered_tool_uses_repaired"] == 1


def test_an_older_rollout_without_typed_lines(tmp_path: Path) -> None:
    path = write_lines(tmp_path, cr.legacy_rollout())
    assert detect_format(path) == "codex"
    transcript = read_transcript(path)
    assert transcript.session_id == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert [m["role"] for m in transcript.messages] == ["user", "assistant", "user", "assistant"]
    assert transcript.messages[1]["content"][0] == {"type": "thinking", "thinking": "Listing tests."}
    assert transcript.messages[1]["content"][1]["input"] == {"command": ["ls", "tests"]}
    assert transcript.messages[2]["content"][0]["content"] == "test_ledger.py\ntest_money.py"
    assert transcript.skipped == {"skipped_state_lines": 2}
    assert transcript.title == "list the tests"


def test_compactions_whose_summary_is_in_the_history_or_unreadable(tmp_path: Path) -> None:
    rollout = short_rollout()
    summary = cr.SUMMARY_PREFIX + "\nThe tests pass."
    history = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]}]
    rollout.compacted("", history)
    rollout.user("now the docs").say("Docs done.").token_count(1200, 10)
    # A remote compaction: the summary is encrypted, only the provider can read it.
    rollout.item({"type": "compaction", "encrypted_content": "gAAAA"})
    rollout.compacted("", [{"type": "compaction", "encrypted_content": "gAAAA"}])
    transcript = read_transcript(rollout.write(tmp_path / "r.jsonl"))
    assert [c["summary"] for c in transcript.compactions] == [summary]
    assert transcript.compactions[0]["pre_tokens"] == 3100  # the last usage reported before it
    assert transcript.skipped["skipped_compactions_without_a_readable_summary"] == 1
    assert transcript.skipped["skipped_encrypted_compaction_items"] == 1


def test_output_shapes_and_images(tmp_path: Path) -> None:
    rollout = cr.Rollout().session_meta()
    image = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    rollout.item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what is this"}, image]}
    )
    rollout.item({"type": "function_call", "name": "view", "arguments": "not json", "call_id": "c1"})
    rollout.item({"type": "function_call", "name": "mcp__fs__list", "arguments": "[1, 2]", "call_id": "c2"})
    rollout.item({"type": "function_call_output", "call_id": "c1", "output": {"content": "denied", "success": False}})
    items_output = [{"type": "input_text", "text": "a.txt"}, {"type": "input_image", "image_url": "https://x/y.png"}]
    rollout.item({"type": "function_call_output", "call_id": "c2", "output": items_output})
    rollout.item({"type": "function_call_output", "call_id": "c9", "output": "for a call never made"})
    transcript = read_codex(rollout.write(tmp_path / "r.jsonl"))
    assert transcript.messages[0]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "iVBORw0KGgo=",
    }
    uses = transcript.messages[1]["content"]
    assert uses[0]["input"] == {"raw": "not json"} and uses[1]["input"] == {"value": [1, 2]}
    results = transcript.messages[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "c1", "content": "denied", "is_error": True}
    assert results[1]["content"][1] == {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
    assert transcript.stats["orphan_tool_results_dropped"] == 1


def test_arguments_and_outputs_nested_too_deep_are_kept_as_text(tmp_path: Path) -> None:
    # The line itself is shallow: the nesting hides inside a string, where the line check cannot see.
    very_deep = "[" * 5000 + "]" * 5000
    too_deep = json.dumps(json.loads("[" * 150 + "]" * 150))
    deep_output = '{"metadata": ' * 5000 + "1" + "}" * 5000
    rollout = cr.Rollout().session_meta().user("go")
    rollout.item({"type": "function_call", "name": "a", "arguments": very_deep, "call_id": "c1"})
    rollout.item({"type": "function_call", "name": "b", "arguments": too_deep, "call_id": "c2"})
    rollout.item({"type": "function_call_output", "call_id": "c1", "output": deep_output})
    rollout.item({"type": "function_call_output", "call_id": "c2", "output": "ok"})
    transcript = read_transcript(rollout.write(tmp_path / "r.jsonl"))
    uses = blocks(transcript, "assistant", "tool_use")
    assert [u["input"] for u in uses] == [{"raw": very_deep}, {"raw": too_deep}]
    results = {b["tool_use_id"]: b for b in blocks(transcript, "user", "tool_result")}
    assert results["c1"]["content"] == deep_output and not results["c1"].get("is_error")


def test_the_error_for_an_unknown_jsonl_names_codex_too(tmp_path: Path) -> None:
    path = write_lines(tmp_path, [{"type": "mystery", "payload": {}}, {"type": "mystery"}])
    with pytest.raises(TranscriptError, match="not a Claude Code, pi or Codex log"):
        detect_format(path)
    assert Counter(read_codex(write_lines(tmp_path, [{"type": "mystery"}], "m.jsonl")).stats)["skipped_mystery"] == 1


def test_exit_codes_in_every_output_shape_and_the_early_usage_event(tmp_path: Path) -> None:
    rollout = cr.Rollout().session_meta().user("build it")
    outputs = {
        "c1": "Exit code: 2\nWall time: 0.3 seconds\nOutput:\nmake: *** [all] Error 2",
        "c2": "Chunk ID: 9f1c\nWall time: 1.2 seconds\nProcess exited with code 0\nOutput:\nok",
        "c3": "Chunk ID: 9f1d\nWall time: 0.1 seconds\nProcess exited with code 127\nOutput:\nrg: not found",
        "c4": "Output:\nExit code: 1 is what the test prints",
    }
    for call_id, text in outputs.items():
        arguments = json.dumps({"cmd": "make", "workdir": "/repo"})
        rollout.item({"type": "function_call", "name": "exec_command", "arguments": arguments, "call_id": call_id})
        # Early Codex: the usage is the event's own fields.
        rollout.event({"type": "token_count", "input_tokens": 900, "cached_input_tokens": 800, "output_tokens": 9})
        rollout.item({"type": "function_call_output", "call_id": call_id, "output": text})
    transcript = read_codex(rollout.write(tmp_path / "r.jsonl"))
    errors = {b["tool_use_id"]: bool(b.get("is_error")) for b in blocks(transcript, "user", "tool_result")}
    assert errors == {"c1": True, "c2": False, "c3": True, "c4": False}
    assert transcript.usage_reports == 4 and transcript.reported_context_tokens[1] == 900
    assert transcript.messages[1]["usage"]["cache_read_input_tokens"] == 800


@st.composite
def rollout_lines(draw) -> list[tuple[int, dict]]:
    """Rollout lines in any order Codex could write them (or a damaged file could hold them)."""
    rollout = cr.Rollout().session_meta()
    calls: list[str] = []
    for number in range(draw(st.integers(min_value=0, max_value=30))):
        kind = draw(
            st.sampled_from(
                ["user", "say", "reason", "call", "patch", "search", "output", "count", "repeat", "compact"]
            )
        )
        if kind == "user":
            rollout.user(f"request {number}")
        elif kind == "say":
            rollout.say(f"answer {number}")
        elif kind == "reason":
            rollout.reasoning(f"thinking {number}")
        elif kind == "call":
            calls.append(f"c{number}")
            rollout.shell(f"c{number}", "ls")
        elif kind == "patch":
            calls.append(f"p{number}")
            rollout.apply_patch(f"p{number}", "*** Begin Patch\n*** End Patch")
        elif kind == "search":
            rollout.web_search("q")
        elif kind == "output":
            call_id = draw(st.sampled_from(calls)) if calls and draw(st.booleans()) else f"gone{number}"
            rollout.output(call_id, f"output {number}")
        elif kind == "count":
            rollout.token_count(1000 + number, 5)
        elif kind == "repeat" and any(x["payload"].get("type") == "token_count" for x in rollout.lines):
            rollout.repeat_token_count()
        elif kind == "compact":
            rollout.compacted(f"summary {number}", None)
    return list(enumerate(rollout.lines, start=1))


@settings(max_examples=200, deadline=None)
@given(rows=rollout_lines())
def test_any_rollout_reads_into_a_valid_history(rows) -> None:
    transcript = parse_codex(rows)
    assert_tool_pairs_intact(transcript)
    said = [x["payload"]["content"][0]["text"] for _n, x in rows if x["payload"].get("role") == "assistant"]
    assert [b["text"] for b in blocks(transcript, "assistant", "text")] == said
    counts = sum(1 for _n, x in rows if x["payload"].get("type") == "token_count")
    assert transcript.usage_reports <= counts
    summaries = [x["payload"]["message"] for _n, x in rows if x["type"] == "compacted"]
    assert [c["summary"] for c in transcript.compactions] == summaries
    indexes = [c["before_message_index"] for c in transcript.compactions]
    assert indexes == sorted(indexes) and all(0 <= i <= len(transcript.messages) for i in indexes)


def test_the_base_instructions_are_the_system_prompt_and_a_fork_keeps_its_own_id(tmp_path: Path) -> None:
    rollout = short_rollout()
    rollout.lines[0]["payload"]["base_instructions"] = {"text": "You are Codex, a coding agent."}
    # A forked session's file copies its parent's lines, session_meta included, after its own.
    parent = dict(rollout.lines[0], payload={**rollout.lines[0]["payload"], "id": "parent-id"})
    rollout.lines.insert(1, parent)
    transcript = read_codex(rollout.write(tmp_path / "r.jsonl"))
    assert transcript.system_prompt == "You are Codex, a coding agent."
    assert transcript.session_id == cr.SESSION_ID
    assert transcript.stats["session_meta_lines_after_the_first"] == 1
