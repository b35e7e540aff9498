"""File-op tracking from tool calls, cumulative merging, and the summary's file tags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.core.fileops import call_file_ops, extract_file_ops, merge_file_ops, render_file_tags
from compaction.core.types import FileOps, Msg
from tests.corpus import TRANSCRIPTS, corpus

DATA = TRANSCRIPTS


def call(name: str, inp, *, block_type: str = "tool_use") -> Msg:
    key = "arguments" if block_type == "toolCall" else "input"
    return Msg(1, "assistant", [{"type": block_type, "id": "t", "name": name, key: inp}], 10)


def ops(*messages: Msg) -> FileOps:
    return extract_file_ops(list(messages))


def extract_shell_file_ops(command: str) -> FileOps:
    """The file ops of one shell command, as a bash call's."""
    return call_file_ops("bash", {"command": command})[0]


def test_claude_code_tools() -> None:
    result = ops(
        call("Read", {"file_path": "/repo/a.py"}),
        call("Write", {"file_path": "/repo/new.py", "content": "x"}),
        call("Edit", {"file_path": "/repo/b.py", "old_string": "a", "new_string": "b"}),
        call("MultiEdit", {"file_path": "/repo/c.py", "edits": []}),
        call("NotebookEdit", {"notebook_path": "/repo/nb.ipynb", "new_source": ""}),
        call("Grep", {"pattern": "x", "path": "/repo/mix.exs"}),
        call("Grep", {"pattern": "x", "path": "/repo/.github"}),  # a directory: not a file read
        call("Glob", {"pattern": "**/*.py"}),
        call("WebFetch", {"url": "https://example.com/a.py", "prompt": "x"}),
        call("TodoWrite", {"todos": [{"content": "edit /repo/zzz.py"}]}),
    )
    assert result.read == ["/repo/a.py", "/repo/mix.exs"]
    assert result.modified == ["/repo/new.py", "/repo/b.py", "/repo/c.py", "/repo/nb.ipynb"]


def test_pi_tools_including_tool_call_blocks() -> None:
    result = ops(
        call("read", {"path": "packages/tui/src/tui.ts", "offset": 10}, block_type="toolCall"),
        call("edit", {"path": "packages/tui/src/theme.ts", "oldText": "a", "newText": "b"}, block_type="toolCall"),
        call("write", {"path": "~/.pi/agent/themes/nord.json", "content": "{}"}),
        call("bash", {"command": "cat packages/ai/README.md | head -20", "timeout": 60}),
    )
    assert result.read == ["packages/tui/src/tui.ts", "packages/ai/README.md"]
    assert result.modified == ["packages/tui/src/theme.ts", "~/.pi/agent/themes/nord.json"]


def test_swe_agent_and_generic_tools() -> None:
    result = ops(
        call("open", {"path": "/repo/tests/missing_colon.py"}),
        call("edit", {"search": "def f()", "replace": "def f():"}),  # edits the open file
        call("create", {"filename": "reproduce.py"}),
        call("str_replace_editor", {"command": "view", "path": "/testbed/setup.cfg"}),
        call("str_replace_editor", {"command": "view", "path": "/testbed"}),  # directory listing
        call("str_replace_editor", {"command": "str_replace", "path": "/testbed/pkg/mod.py", "old_str": "a"}),
        call("str_replace_based_edit_tool", {"command": "insert", "path": "/testbed/pkg/ins.py", "insert_line": 3}),
        call("edit_file", {"target_file": "src/app.ts", "instructions": "x"}),
        call("write_file", {"path": "out/data.json", "content": "{}"}),
        call("mcp__filesystem__read_file", {"path": "docs/guide.md"}),
        call("read_multiple_files", {"paths": ["docs/a.md", "docs/b.md"]}),
        call("view", {"path": "notes.txt"}),
        call("find_file", {"file_name": "missing_colon.py"}),  # a search, not a read
    )
    assert result.read == ["/testbed/setup.cfg", "docs/guide.md", "docs/a.md", "docs/b.md", "notes.txt"]
    assert result.modified == [
        "/repo/tests/missing_colon.py",
        "reproduce.py",
        "/testbed/pkg/mod.py",
        "/testbed/pkg/ins.py",
        "src/app.ts",
        "out/data.json",
    ]


def test_string_arguments_are_parsed_as_json() -> None:
    result = ops(call("open", json.dumps({"path": "/repo/x.py", "line_number": 3})))
    assert result.read == ["/repo/x.py"]


def test_apply_patch_headers() -> None:
    codex = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: src/new.py\n+z\n*** Delete File: old.py\n*** Update File: src/b.py\n*** Move to: src/c.py\n*** End Patch"
    unified = "diff --git a/lib/x.rb b/lib/x.rb\n--- a/lib/x.rb\n+++ b/lib/x.rb\n@@ -1 +1 @@\n-a\n+b\n--- a/gone.txt\n+++ /dev/null\n"
    result = ops(call("apply_patch", {"input": codex}), call("apply_patch", {"patch": unified}))
    assert result.modified == ["src/a.py", "src/new.py", "old.py", "src/b.py", "src/c.py", "lib/x.rb", "gone.txt"]
    assert result.read == []


@pytest.mark.parametrize(
    ("command", "read", "modified"),
    [
        ("cat src/main.py", ["src/main.py"], []),
        ("head -n 50 lib/a.ex && tail -f log/dev.log", ["lib/a.ex", "log/dev.log"], []),
        ("sed -i 's/foo/bar/g' config/app.exs", [], ["config/app.exs"]),
        ("sed -n '1,20p' README.md", ["README.md"], []),
        ("perl -pi -e 's/a/b/' conf.ini", [], ["conf.ini"]),
        ("echo hello > out.txt 2>/dev/null", [], ["out.txt"]),
        ("npm test >> test.log 2>&1", [], ["test.log"]),
        ("mix test 2>&1 | tee results.txt", [], ["results.txt"]),
        ("cp a.py b.py; mv c.py d.py", ["a.py"], ["b.py", "c.py", "d.py"]),
        ("rm -rf build/ old.log", [], ["old.log"]),
        ("touch new_file.md", [], ["new_file.md"]),
        ("grep -rn TODO src/ lib/util.py", ["lib/util.py"], []),
        ("cat > script.sh << 'EOF'\necho 'x' > not_a_target.txt\nEOF\nchmod +x script.sh", [], ["script.sh"]),
        ("FOO=1 sudo cat /etc/hosts", ["/etc/hosts"], []),
        ("python manage.py test < input.txt", ["input.txt"], []),
        ("cat *.py $HOME/x", [], []),
        ("ls -la && git status", [], []),
        ("echo 'unterminated", [], []),
        ("open reproduce.py 30", ["reproduce.py"], []),
        ("create reproduce_bug.py", [], ["reproduce_bug.py"]),
    ],
)
def test_shell_commands(command: str, read: list[str], modified: list[str]) -> None:
    result = extract_shell_file_ops(command)
    assert result.read == read
    assert result.modified == modified


def test_swe_agent_text_edit_uses_the_open_file_and_ignores_its_body() -> None:
    result = ops(
        call("bash", {"command": "open src/app.py"}),
        call("bash", {"command": "edit 3:5\nimport os > fake.txt\nend_of_edit"}),
    )
    assert result.read == [] and result.modified == ["src/app.py"]


def test_codex_style_argv_commands() -> None:
    result = ops(call("shell", {"command": ["bash", "-lc", "cat Cargo.toml"]}))
    assert result.read == ["Cargo.toml"]


def test_read_then_modified_is_modified_only_and_order_is_kept() -> None:
    result = ops(
        call("Read", {"file_path": "b.py"}),
        call("Read", {"file_path": "a.py"}),
        call("Edit", {"file_path": "b.py"}),
        call("Read", {"file_path": "a.py"}),
        call("Read", {"file_path": "./c.py"}),
        call("Read", {"file_path": "c.py"}),
    )
    assert result.read == ["a.py", "c.py"]
    assert result.modified == ["b.py"]


def _answered(call_msg: Msg, *, is_error: bool, text: str = "") -> list[Msg]:
    result = {"type": "tool_result", "tool_use_id": "t", "content": text, "is_error": is_error}
    return [call_msg, Msg(2, "user", [result], 5)]


def test_a_file_tool_call_that_failed_read_or_changed_nothing() -> None:
    # A read of a file that does not exist, an edit whose old string was not found: nothing happened.
    assert extract_file_ops(_answered(call("Read", {"file_path": "src/editor.ts"}), is_error=True)) == FileOps()
    edit = call("Edit", {"file_path": "a.py", "old_string": "x", "new_string": "y"})
    assert extract_file_ops(_answered(edit, is_error=True, text="String to replace not found")) == FileOps()
    assert extract_file_ops(_answered(edit, is_error=False)).modified == ["a.py"]
    # A path the program answered "No such file or directory" for was not read; the others were.
    grep = call("Bash", {"command": "grep -n border src/editor.ts src/components/editor.ts"})
    text = "grep: src/editor.ts: No such file or directory\nsrc/components/editor.ts:12: borderColor"
    assert extract_file_ops(_answered(grep, is_error=True, text=text)).read == ["src/components/editor.ts"]
    # A shell chain that failed may still have written a file before the part that failed.
    chain = call("Bash", {"command": "sed -i 's/a/b/' a.py && npm test"})
    assert extract_file_ops(_answered(chain, is_error=True, text="1 failed")).modified == ["a.py"]


def test_only_assistant_tool_uses_count() -> None:
    user_text = Msg(1, "user", "please cat secrets.txt", 5)
    result_msg = Msg(2, "user", [{"type": "tool_result", "tool_use_id": "t", "content": "Read a.py"}], 5)
    assert extract_file_ops([user_text, result_msg]) == FileOps()


def test_merge_is_cumulative_and_promotes_reads() -> None:
    previous = FileOps(read=["a.py", "b.py"], modified=["c.py"])
    current = FileOps(read=["d.py", "c.py"], modified=["b.py", "e.py"])
    merged = merge_file_ops(previous, current)
    assert merged.read == ["a.py", "d.py"]
    assert merged.modified == ["c.py", "b.py", "e.py"]
    assert merge_file_ops(FileOps(), FileOps()) == FileOps()


def test_render_and_parse_round_trip() -> None:
    original = FileOps(read=["src/a.py", "docs/read me.md"], modified=["src/b.py"])
    text = render_file_tags(original)
    assert (
        text
        == "<read-files>\nsrc/a.py\ndocs/read me.md\n</read-files>\n\n<modified-files>\nsrc/b.py\n</modified-files>"
    )
    assert render_file_tags(FileOps()) == ""
    assert render_file_tags(FileOps(modified=["x.py"])) == "<modified-files>\nx.py\n</modified-files>"


def _claude_code_tool_uses(path: Path) -> list[Msg]:
    messages = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message.get("content"), list):
            messages.append(Msg(len(messages), "assistant", message["content"], 1))
    return messages


@corpus
def test_real_claude_code_tool_heavy_session() -> None:
    result = extract_file_ops(_claude_code_tool_uses(DATA / "claude-code" / "tool_heavy.jsonl"))
    # The session reads the terminal LiveView hook and nothing else is written.
    assert result.read, result
    assert all(p.startswith("/") for p in result.read)
    assert result.modified == [] or all("/" in p for p in result.modified)
    raw = (DATA / "claude-code" / "tool_heavy.jsonl").read_text()
    for path in result.read:
        assert path in raw


@corpus
def test_real_reliability_sessions_find_written_files() -> None:
    result = extract_file_ops(_claude_code_tool_uses(DATA / "claude-code" / "reliability-hello-world-script.jsonl"))
    assert any(p.endswith("hello.sh") for p in result.modified)
    port = extract_file_ops(_claude_code_tool_uses(DATA / "claude-code" / "reliability-python-to-rust-port.jsonl"))
    assert any(p.endswith(".rs") for p in port.modified)
    assert not set(port.read) & set(port.modified)


@corpus
def test_real_pi_session() -> None:
    messages = []
    for line in (DATA / "pi" / "large-session.jsonl").read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "assistant":
            messages.append(Msg(len(messages), "assistant", message["content"], 1))
    result = extract_file_ops(messages)
    assert "packages/coding-agent/src/tui/user-message-selector.ts" in result.modified
    assert (
        "packages/coding-agent/docs/theme.md" in result.read or "packages/coding-agent/docs/theme.md" in result.modified
    )
    assert len(result.modified) >= 10
    assert not set(result.read) & set(result.modified)


@corpus
def test_real_swe_agent_function_calls() -> None:
    traj = json.loads((DATA / "swe-agent" / "6e44b9__sweagenttestrepo-1c2844.traj").read_text())
    messages = []
    for item in traj["history"]:
        for tool_call in item.get("tool_calls") or []:
            function = tool_call["function"]
            messages.append(call(function["name"], function["arguments"]))
    result = extract_file_ops(messages)
    assert result.modified == ["/SWE-agent__test-repo/tests/missing_colon.py"]


def test_quoted_arguments_spanning_lines_are_not_commands() -> None:
    command = 'bd create --title="x" --description="Deps:\n{:credo, \\"~> 1.7\\", only: [:dev]}\n> not_a_file.txt\n" && cat mix.exs\nhead -5 lib/a.ex'
    result = extract_shell_file_ops(command)
    assert result.read == ["mix.exs", "lib/a.ex"]
    assert result.modified == []


def test_text_action_stored_whole_as_command() -> None:
    result = ops(
        call("create", {"command": "create reproduce_bug.py"}),
        call("open", {"command": "open src/pkg/mod.py 120"}),
        call("edit", {"command": "edit 3:4\n    return 1\nend_of_edit"}),
    )
    assert result.modified == ["reproduce_bug.py", "src/pkg/mod.py"]
    assert result.read == []
