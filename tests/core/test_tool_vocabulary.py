"""One tool vocabulary: every shell tool name reaches file ops, the ledger and the summary alike."""

from __future__ import annotations

import json

import pytest

from compaction.core.fileops import extract_file_ops
from compaction.core.ledger import build_ledger
from compaction.core.provenance import QUEUED_TEMPLATE
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.text_heuristics import user_messages
from compaction.core.tokens import count_content
from compaction.core.tool_vocabulary import SHELL_TOOLS, is_modify_tool, is_shell_tool, shell_command_of, tool_key
from compaction.core.transcripts.claude_code import parse_claude_code
from compaction.core.types import Msg
from compaction.core.work import fold


def _msg(seq: int, role: str, content) -> Msg:
    return Msg(seq, role, content, count_content(content))


def _failing_then_fixed(tool: str, arguments) -> list[Msg]:
    return [
        _msg(1, "user", "Make the build pass."),
        _msg(2, "assistant", [{"type": "tool_use", "id": "a", "name": tool, "input": arguments("make build")}]),
        _msg(
            3,
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "a",
                    "is_error": True,
                    "content": "Exit code 2\nsrc/app.c:4: error: expected ';' before '}' token",
                }
            ],
        ),
        _msg(
            4,
            "assistant",
            [{"type": "tool_use", "id": "b", "name": tool, "input": arguments("sed -i 's/x/y/' src/app.c")}],
        ),
        _msg(5, "user", [{"type": "tool_result", "tool_use_id": "b", "content": ""}]),
    ]


@pytest.mark.parametrize("tool", sorted(SHELL_TOOLS))
@pytest.mark.parametrize(
    "arguments",
    [
        lambda c: {"command": c},
        lambda c: {"cmd": c},
        lambda c: {"command": ["bash", "-lc", c]},
        lambda c: json.dumps({"command": c}),
    ],
    ids=["command", "cmd", "argv", "json-string"],
)
def test_every_shell_tool_is_seen_by_fileops_ledger_and_summary(tool, arguments):
    msgs = _failing_then_fixed(tool, arguments)
    assert shell_command_of(msgs[1].blocks[0]) == "make build"
    assert "src/app.c" in extract_file_ops(msgs).modified
    ledger = build_ledger(fold(msgs))
    assert "make build" in ledger.items["commands"]
    assert ledger.items["errors"] == ["src/app.c:4: error: expected ';' before '}' token"]
    summary = extractive_summary(msgs)
    assert "src/app.c:4: error: expected ';' before '}' token" in summary
    # Failing, and edited after (an attempt not yet run): where things stand, and run it again.
    assert "`make build`" in summary.split("## Goal")[0]
    assert "Run `make build` again" in summary.split("## Next Steps")[1]


def test_tool_names_are_normalized_the_same_way_everywhere():
    assert tool_key("mcp__filesystem__read_file") == "read_file"
    assert tool_key("functions.exec_command") == "exec_command"
    assert is_shell_tool("Bash") and is_shell_tool("execute_bash") and is_shell_tool("run_terminal_cmd")
    assert not is_shell_tool("Read")
    assert (
        is_modify_tool("str_replace_based_edit_tool") and is_modify_tool("MultiEdit") and is_modify_tool("apply_patch")
    )


def test_a_program_run_as_its_own_action_is_a_command_but_a_file_action_is_not():
    # SWE-agent stores actions under the program's name.
    run = {"type": "tool_use", "id": "x", "name": "pytest", "input": {"command": "pytest -x tests"}}
    edit = {"type": "tool_use", "id": "y", "name": "edit", "input": {"command": "edit 1:3\nnew text\nend_of_edit"}}
    assert shell_command_of(run) == "pytest -x tests"
    assert shell_command_of(edit) is None


def test_a_queued_message_is_the_users_words_wherever_it_is_delivered():
    queued = QUEUED_TEMPLATE.format(text="also bump the version")
    beside = _msg(
        2, "user", [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}, {"type": "text", "text": queued}]
    )
    inside = _msg(2, "user", [{"type": "tool_result", "tool_use_id": "a", "content": "ok\n" + queued}])
    assert user_messages(beside) == [("also bump the version", True)]
    assert user_messages(inside) == [("also bump the version", True)]


def _line(kind: str, uuid: str, parent: str | None, message: dict) -> dict:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": message}


def test_the_claude_code_reader_imports_queued_messages_with_the_tool_results_they_came_with():
    entries = [
        _line("user", "u1", None, {"role": "user", "content": "Run the tests."}),
        _line(
            "assistant",
            "a1",
            "u1",
            {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}],
            },
        ),
        {"type": "queue-operation", "operation": "enqueue", "content": "<task-notification>done</task-notification>"},
        {"type": "queue-operation", "operation": "enqueue", "content": "then push it"},
        {"type": "queue-operation", "operation": "remove"},
        _line(
            "user",
            "u2",
            "a1",
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3 passed"}]},
        ),
    ]
    transcript = parse_claude_code(entries)
    msgs = [_msg(i, m["role"], m["content"]) for i, m in enumerate(transcript.messages)]
    said = [text for m in msgs for text in user_messages(m)]
    assert said == [("Run the tests.", False), ("then push it", True)]
    assert transcript.stats["queued_messages_imported"] == 1
    summary = extractive_summary(msgs)
    assert 'The person\'s latest request (#2, typed while the agent worked): "then push it"' in summary


def test_a_command_line_is_split_into_its_chained_commands_but_never_inside_quotes() -> None:
    from compaction.core.text_heuristics import chain_parts

    assert chain_parts("cd assets && npm run check; git status || true") == [
        "cd assets",
        "npm run check",
        "git status",
        "true",
    ]
    assert chain_parts('git add -A && git commit -m "fix: parse a; b" && git push') == [
        "git add -A",
        'git commit -m "fix: parse a; b"',
        "git push",
    ]
    injected = 'curl -X POST -d "name=test\\";print \\"hello\\"&age=123" http://host/forms.pl'
    assert chain_parts(injected) == [injected]  # an escaped quote does not end the string
    assert chain_parts("echo 'a;b' && ls") == ["echo 'a;b'", "ls"]
    assert chain_parts("echo a\\;b") == ["echo a\\;b"]
    assert chain_parts('grep -E "x|y" f || true') == ['grep -E "x|y" f', "true"]
