"""What agents call their tools: one vocabulary for file ops, the ledger and the summarizers.

Agents name the same capability differently (Claude Code `Bash`, pi `bash`, OpenHands
`execute_bash`, Codex `exec_command` / `shell`, Cursor `run_terminal_cmd`, Gemini CLI
`run_shell_command`, SWE-agent actions named after the program they run). A name known to
one module and not another means one part of a summary sees an agent's commands and errors
and another does not, so every module asks here.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from compaction.core.blocks import TOOL_CALL_KINDS

# Tools that run a shell command: their output is program output, where an error line is real.
SHELL_TOOLS = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "zsh",
        "run_command",
        "execute_command",
        "run_terminal_cmd",
        "terminal",
        "exec",
        "exec_command",
        "local_shell",
        "run_shell_command",
        "execute_bash",
        "shell_command",
    }
)
# Tools that return the output of a command started earlier (background jobs).
OUTPUT_TOOLS = frozenset({"taskoutput", "bashoutput", "read_output", "get_output", "write_stdin"})
# Tools that stop a command started earlier (a background job): it ends without an outcome.
STOP_TOOLS = frozenset({"killshell", "killbash", "taskstop", "kill_shell", "stop_task"})
READ_TOOLS = frozenset(
    {
        "read",
        "read_file",
        "readfile",
        "read_text_file",
        "view",
        "view_file",
        "open",
        "open_file",
        "notebookread",
        "get_file_contents",
        "read_multiple_files",
        "search_file",
    }
)
WRITE_TOOLS = frozenset(
    {
        "write",
        "write_file",
        "writefile",
        "create",
        "create_file",
        "edit",
        "edit_file",
        "editfile",
        "multiedit",
        "multi_edit",
        "notebookedit",
        "notebook_edit",
        "str_replace",
        "replace",
        "replace_in_file",
        "search_replace",
        "insert",
        "delete_file",
        "move_file",
        "rename_file",
    }
)
# Tools that write a whole file (the content is the file).
CREATE_TOOLS = frozenset({"write", "write_file", "writefile", "create", "create_file"})
# One tool, several sub-commands (view / create / str_replace / insert).
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
EDITOR_READ_COMMANDS = frozenset({"view"})
PATCH_TOOLS = frozenset({"apply_patch", "applypatch", "patch", "apply_diff"})
# Searching a directory is not reading a file; searching one named file is.
SEARCH_TOOLS = frozenset({"grep", "glob", "search", "find_file", "search_dir", "list_dir", "ls"})
TODO_TOOLS = frozenset({"todowrite", "todo_write", "update_plan", "write_todos"})
PLAN_TOOLS = frozenset({"exitplanmode", "exit_plan_mode"})
# Tools that hand the finished work over and end the run (SWE-agent `submit`, Cline
# `attempt_completion`, OpenHands `finish`): after one, nothing is left for the agent to do.
COMPLETION_TOOLS = frozenset({"submit", "finish", "attempt_completion", "task_complete", "complete_task"})
# Argument names that hold the file a tool works on, most specific first.
PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "target_file", "file", "absolute_path", "filepath")


def tool_key(name: Any) -> str:
    """The bare, lower-case tool name: "mcp__filesystem__read_file" → "read_file",
    "functions.bash" → "bash"."""
    key = str(name or "").strip().lower()
    if "__" in key:
        key = key.rsplit("__", 1)[-1]
    if "." in key:
        key = key.rsplit(".", 1)[-1]
    return key


def is_shell_tool(name: Any) -> bool:
    return tool_key(name) in SHELL_TOOLS


def is_output_tool(name: Any) -> bool:
    return tool_key(name) in OUTPUT_TOOLS


def is_modify_tool(name: Any) -> bool:
    key = tool_key(name)
    return key in WRITE_TOOLS or key in EDITOR_TOOLS or key in PATCH_TOOLS


def is_edit_call(name: Any, args: Any) -> bool:
    """Whether one call changes a file: a write tool, or an editor tool given a sub-command
    that writes. An editor's `view` (SWE-agent's and Anthropic's `str_replace_editor`) reads
    the file, like `cat`: counted as an edit, a file only looked at would read "edited"."""
    if not is_modify_tool(name):
        return False
    sub = args.get("command") if isinstance(args, dict) else None
    return not (tool_key(name) in EDITOR_TOOLS and isinstance(sub, str) and sub.strip().lower() in EDITOR_READ_COMMANDS)


def is_create_tool(name: Any) -> bool:
    return tool_key(name) in CREATE_TOOLS


def is_todo_tool(name: Any) -> bool:
    return tool_key(name) in TODO_TOOLS


def is_plan_tool(name: Any) -> bool:
    return tool_key(name) in PLAN_TOOLS


def is_completion_tool(name: Any) -> bool:
    return tool_key(name) in COMPLETION_TOOLS


def tool_input(block: dict[str, Any]) -> Any:
    """A tool call's arguments (Anthropic `input`, pi/OpenAI `arguments`, JSON strings parsed)."""
    raw = block.get("input", block.get("arguments"))
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw if raw is not None else {}


def shell_text(inp: Any) -> str | None:
    """The shell script a shell tool runs, whatever shape its arguments take."""
    if isinstance(inp, str):
        return inp
    if not isinstance(inp, dict):
        return None
    value = inp.get("command", inp.get("cmd", inp.get("script")))
    if isinstance(value, list) and value:
        # Codex-style argv: ["bash", "-lc", "<script>"] → the script; else the joined argv.
        if len(value) >= 3 and value[1] in ("-c", "-lc", "-ic"):
            return str(value[-1])
        return shlex.join(str(v) for v in value)
    return value if isinstance(value, str) else None


def path_argument(inp: Any) -> str | None:
    """The file a tool call works on, when one of the usual argument names holds it."""
    if not isinstance(inp, dict):
        return None
    for key in PATH_KEYS:
        value = inp.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def shell_command_of(block: dict[str, Any]) -> str | None:
    """The shell command of a tool call block, if it runs one.

    Shell tools by name; an action stored whole under its own name (SWE-agent's
    `{"name": "pytest", "input": {"command": "pytest -x"}}`) counts too, unless the name is a
    file tool (`open`, `edit`, `create`), whose "command" is a file operation.
    """
    if block.get("type") not in TOOL_CALL_KINDS:
        return None
    name = tool_key(block.get("name"))
    inp = tool_input(block)
    if name in SHELL_TOOLS:
        text = shell_text(inp)
    elif isinstance(inp, dict) and isinstance(inp.get("command"), str):
        command = inp["command"]
        head = command.split(maxsplit=1)[:1]
        file_tool = name in READ_TOOLS or name in WRITE_TOOLS or name in SEARCH_TOOLS or name in EDITOR_TOOLS
        text = command if head == [name] and not file_tool and name not in COMPLETION_TOOLS else None
    else:
        text = None
    return text.strip() if isinstance(text, str) and text.strip() else None
