"""Which files the agent read and modified, from its tool calls.

Covers Claude Code tools (Read, Write, Edit, MultiEdit, NotebookEdit, Grep/Glob on a file,
Bash), pi tools (read, write, edit, bash), SWE-agent and generic tool names (open, create,
edit, str_replace_editor / str_replace_based_edit_tool, edit_file, write_file, read_file,
view, apply_patch) and shell commands with obvious file arguments (`cat x`, `sed -i … x`,
`> x`, `tee x`, `cp a b`, …).

The lists are cumulative across compactions (`merge_file_ops`): a file that was read and
later modified is listed as modified only. They travel inside each summary as
`<read-files>` / `<modified-files>` sections, one path per line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import Any

from compaction.core.blocks import TOOL_CALL_KINDS, TOOL_RESULT, iter_blocks
from compaction.core.paths import relative
from compaction.core.tool_vocabulary import (
    EDITOR_READ_COMMANDS,
    EDITOR_TOOLS,
    PATCH_TOOLS,
    PATH_KEYS,
    READ_TOOLS,
    SEARCH_TOOLS,
    SHELL_TOOLS,
    WRITE_TOOLS,
    shell_text,
    tool_input,
    tool_key,
)
from compaction.core.types import FileOps, Msg
from compaction.core.vocabulary import NO_SUCH_FILE_RE

SHELL_READ_COMMANDS = {"cat", "head", "tail", "less", "more", "nl", "bat", "batcat", "open", "view"}
SHELL_SEARCH_COMMANDS = {"grep", "egrep", "fgrep", "rg", "ag", "ack"}
SHELL_MODIFY_COMMANDS = {"touch", "rm", "truncate", "tee", "create", "unlink", "shred"}
FLAGS_WITH_VALUE = {
    "head": {"-n", "-c", "--lines", "--bytes"},
    "tail": {"-n", "-c", "--lines", "--bytes", "-s", "--sleep-interval", "--pid"},
    "truncate": {"-s", "--size", "-r", "--reference"},
    "grep": {"-e", "-f", "-m", "-A", "-B", "-C", "--include", "--exclude", "--color"},
    "rg": {"-e", "-f", "-m", "-A", "-B", "-C", "-g", "--glob", "-t", "--type", "-T"},
}
SEPARATORS = {"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"}
REDIRECT_OUT = {">", ">>", ">|", "&>", "&>>"}
KNOWN_BARE_FILES = {
    "makefile",
    "dockerfile",
    "gemfile",
    "rakefile",
    "procfile",
    "justfile",
    "license",
    "readme",
    "changelog",
    "vagrantfile",
    "brewfile",
    "containerfile",
}
_EXTENSION = re.compile(r"[^/.][^/]*\.[A-Za-z0-9_+-]{1,12}$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$|^\*\*\* Move to: (.+?)\s*$", re.MULTILINE)
_DIFF_PLUS = re.compile(r"^\+\+\+ (\S+)", re.MULTILINE)
_DIFF_MINUS = re.compile(r"^--- (\S+)", re.MULTILINE)
_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.MULTILINE)
_SWE_EDIT_RANGE = re.compile(r"^\d+(:\d+)?$")
_SWE_EDIT_LINE = re.compile(r"^\s*edit\s+\d+(:\d+)?\s*$")


def _normalize_path(raw: Any) -> str | None:
    if not isinstance(raw, str):
        return None
    path = raw.strip().strip("\"'`").strip()
    while path.startswith("./") and len(path) > 2:
        path = path[2:]
    if (
        not path
        or len(path) > 1024
        or "\n" in path
        or "\x00" in path
        or "://" in path
        or path in (".", "..", "-", "/", "~")
        or path.startswith("/dev/")
        or path.startswith("-")
        or "<" in path
        or ">" in path
    ):
        return None
    return path


def _looks_like_file(path: str) -> bool:
    """A path that names a file rather than a directory (used where a tool may take either)."""
    if path.endswith("/"):
        return False
    name = path.rsplit("/", 1)[-1]
    return bool(_EXTENSION.search(name)) or name.lower() in KNOWN_BARE_FILES


def _shell_word_is_path(word: str) -> bool:
    return (
        not word.startswith("-")
        and not word.isdigit()
        and not any(ch in word for ch in "$`*?{}[]=")
        and _normalize_path(word) is not None
    )


def _paths_in(inp: dict[str, Any]) -> list[str]:
    found = []
    for key in PATH_KEYS:
        path = _normalize_path(inp.get(key))
        if path:
            found.append(path)
            break
    for key in ("paths", "file_paths", "files"):
        value = inp.get(key)
        if isinstance(value, list):
            found.extend(p for p in (_normalize_path(v) for v in value) if p)
    return found


class _Recorder:
    """Ordered (path, kind) events → FileOps."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.current_file: str | None = None  # SWE-agent's `edit` works on the open file

    def read(self, path: str | None) -> None:
        if path:
            self.events.append((path, "read"))

    def modified(self, path: str | None) -> None:
        if path:
            self.events.append((path, "modified"))

    def result(self) -> FileOps:
        return _ops_from(
            [p for p, kind in self.events if kind == "read"], [p for p, kind in self.events if kind == "modified"]
        )


def _dedupe(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))


def _ops_from(read: Iterable[str], modified: Iterable[str]) -> FileOps:
    modified_list = _dedupe(modified)
    modified_set = set(modified_list)
    return FileOps(read=[p for p in _dedupe(read) if p not in modified_set], modified=modified_list)


# --- shell commands ---------------------------------------------------------------------


def _strip_heredocs(command: str) -> list[str]:
    """Command lines with heredoc bodies removed (their content is data, not commands)."""
    lines = command.replace("\\\n", " ").split("\n")
    kept: list[str] = []
    delimiter: str | None = None
    for line in lines:
        if delimiter is not None:
            if line.strip() == delimiter:
                delimiter = None
            continue
        kept.append(line)
        match = _HEREDOC.search(line)
        if match:
            delimiter = match.group(2)
        elif _SWE_EDIT_LINE.match(line):
            delimiter = "end_of_edit"  # SWE-agent's multi-line edit: the body is file content
    return kept


def _unquoted_newlines_to_separators(text: str) -> str:
    """Newlines end commands only outside quotes (a quoted argument may span lines)."""
    out: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "\n":
            out.append(" ; ")
            continue
        out.append(ch)
    return "".join(out)


def _split_words(text: str) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:
        return []  # unbalanced quotes: guessing at words would invent paths


def _simple_commands(line: str, recorder: _Recorder) -> list[list[str]]:
    """Split a line into commands; record redirect targets on the way."""
    words = _split_words(line)
    commands: list[list[str]] = []
    current: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in SEPARATORS:
            if current:
                commands.append(current)
            current = []
        elif word in REDIRECT_OUT or word in ("<", "<<", "<<<", ">&", "<&", "<>"):
            if current and current[-1].isdigit():
                current.pop()  # the fd number of "2>file"
            target = words[i + 1] if i + 1 < len(words) else ""
            i += 1
            if word in REDIRECT_OUT and not target.startswith("&") and _shell_word_is_path(target):
                recorder.modified(_normalize_path(target))
            elif word == "<" and _shell_word_is_path(target):
                recorder.read(_normalize_path(target))
        else:
            current.append(word)
        i += 1
    if current:
        commands.append(current)
    return commands


def _args(command: str, words: list[str]) -> list[str]:
    """Positional arguments, skipping flags and the values of flags that take one."""
    takes_value = FLAGS_WITH_VALUE.get(command, set())
    args: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word.startswith("-") and word != "-":
            if word in takes_value:
                skip = True
            continue
        args.append(word)
    return args


def _shell_command(words: list[str], recorder: _Recorder) -> None:
    while words and (
        "=" in words[0] and not words[0].startswith("-") or words[0] in ("sudo", "time", "command", "nohup")
    ):
        words = words[1:]  # env assignments and wrappers
    if not words:
        return
    command = words[0].rsplit("/", 1)[-1]
    rest = words[1:]
    if command in SHELL_READ_COMMANDS:
        for arg in _args(command, rest):
            if _shell_word_is_path(arg):
                recorder.read(_normalize_path(arg))
                if command == "open":
                    recorder.current_file = _normalize_path(arg)
                    break  # `open file.py 120`: the rest is a line number
    elif command in SHELL_MODIFY_COMMANDS:
        paths = [a for a in _args(command, rest) if _shell_word_is_path(a)]
        if command == "rm":
            paths = [p for p in paths if _looks_like_file(p)]
        for path in paths:
            recorder.modified(_normalize_path(path))
        if command == "create" and paths:
            recorder.current_file = _normalize_path(paths[0])
    elif command == "edit" and rest and _SWE_EDIT_RANGE.match(rest[0]):
        recorder.modified(recorder.current_file)  # SWE-agent: `edit 10:12` on the open file
    elif command in ("sed", "perl"):
        _sed_like(command, rest, recorder)
    elif command in ("cp", "mv", "install"):
        paths = [a for a in _args(command, rest) if _shell_word_is_path(a)]
        if len(paths) >= 2:
            for source in paths[:-1]:
                (recorder.modified if command == "mv" else recorder.read)(_normalize_path(source))
            if _looks_like_file(paths[-1]):
                recorder.modified(_normalize_path(paths[-1]))
    elif command in SHELL_SEARCH_COMMANDS:
        args = _args(command, rest)
        explicit_pattern = any(w in ("-e", "-f", "--regexp") for w in rest)
        for arg in args if explicit_pattern else args[1:]:
            if _shell_word_is_path(arg) and _looks_like_file(arg):
                recorder.read(_normalize_path(arg))


def _sed_like(command: str, rest: list[str], recorder: _Recorder) -> None:
    in_place = any(
        w.startswith("-i") or w == "--in-place" or (w.startswith("-") and not w.startswith("--") and "i" in w[1:])
        for w in rest
    )
    has_script_flag = any(
        w in ("--expression", "--file") or (w.startswith("-") and not w.startswith("--") and w[-1:] in ("e", "f"))
        for w in rest
    )
    files: list[str] = []
    skip = False
    script_seen = has_script_flag
    for word in rest:
        if skip:
            skip = False
            continue
        if word in ("--expression", "--file") or (
            word.startswith("-") and not word.startswith("--") and len(word) > 1 and word[-1] in "ef"
        ):
            skip = True  # -e SCRIPT, -f SCRIPTFILE, and clusters like perl's -pe / -pie
            script_seen = True
            continue
        if word.startswith("-") or not word:
            continue  # an option, or BSD sed's empty backup suffix (`sed -i '' 's/a/b/' x`)
        if not script_seen:
            script_seen = True
            continue
        files.append(word)
    for word in files:
        if _shell_word_is_path(word):
            (recorder.modified if in_place else recorder.read)(_normalize_path(word))


def _shell(command: str, recorder: _Recorder) -> None:
    text = _unquoted_newlines_to_separators("\n".join(_strip_heredocs(command)))
    for words in _simple_commands(text, recorder):
        _shell_command(words, recorder)


# --- patches ---------------------------------------------------------------------------


def _patch_paths(text: str) -> list[str]:
    paths: list[str] = []
    for match in _PATCH_HEADER.finditer(text):
        paths.append(match.group(1) or match.group(2))
    if paths:
        return [p for p in (_normalize_path(x) for x in paths) if p]
    for a, b in _DIFF_GIT.findall(text):
        paths.extend([a, b] if a != b else [b])
    plus = _DIFF_PLUS.findall(text)
    minus = _DIFF_MINUS.findall(text)
    for index, target in enumerate(plus):
        if target == "/dev/null" and index < len(minus):
            target = minus[index]  # a deletion: the old name is the file touched
        if target.startswith(("a/", "b/")):
            target = target[2:]
        paths.append(target)
    return [p for p in (_normalize_path(x) for x in paths) if p]


def _patch_text(inp: Any) -> str:
    if isinstance(inp, str):
        return inp
    if isinstance(inp, dict):
        for key in ("patch", "input", "diff", "content", "patch_text"):
            if isinstance(text := inp.get(key), str):
                return text
    return ""


# --- tool calls ------------------------------------------------------------------------


def _tool_call(name: str, inp: Any, recorder: _Recorder) -> None:
    key = tool_key(name)
    if key in SHELL_TOOLS:
        text = shell_text(inp)
        if text:
            _shell(text, recorder)
        return
    if key in PATCH_TOOLS:
        for path in _patch_paths(_patch_text(inp)):
            recorder.modified(path)
        return
    if not isinstance(inp, dict):
        if key in ("open", "create", "edit") and isinstance(inp, str):
            _shell(f"{key} {inp}", recorder)  # SWE-agent action arguments as plain text
        return
    paths = _paths_in(inp)
    command = inp.get("command")
    if not paths and isinstance(command, str) and command.split(maxsplit=1)[:1] == [name]:
        _shell(command, recorder)  # a text-format action stored whole (SWE-agent `create x.py`)
        return
    if key in EDITOR_TOOLS:
        sub = str(inp.get("command", "")).lower()
        for path in paths:
            if sub in EDITOR_READ_COMMANDS:
                if _looks_like_file(path):
                    recorder.read(path)
                    recorder.current_file = path
            else:
                recorder.modified(path)
        return
    if key in ("move_file", "rename_file"):
        for source_key in ("source", "src", "old_path", "from"):
            recorder.modified(_normalize_path(inp.get(source_key)))
        for dest_key in ("destination", "dest", "new_path", "to"):
            recorder.modified(_normalize_path(inp.get(dest_key)))
    if key in READ_TOOLS:
        for path in paths:
            recorder.read(path)
        if paths and key in ("open", "view", "open_file"):
            recorder.current_file = paths[0]
    elif key in WRITE_TOOLS:
        if not paths and key == "edit":
            recorder.modified(recorder.current_file)  # SWE-agent edit: the open file
        for path in paths:
            recorder.modified(path)
            if key in ("create", "create_file"):
                recorder.current_file = path
    elif key in SEARCH_TOOLS:
        for path in paths:
            if _looks_like_file(path):
                recorder.read(path)


def call_file_ops(name: str, inp: Any, open_file: str | None = None) -> tuple[FileOps, str | None]:
    """The files one tool call reads and modifies, and the file it leaves open (SWE-agent's
    `edit` works on the file opened last, so a caller folding calls one by one carries it)."""
    recorder = _Recorder()
    recorder.current_file = open_file
    _tool_call(name, inp, recorder)
    return recorder.result(), recorder.current_file


def _is_file_tool(name: Any) -> bool:
    key = tool_key(name)
    return any(key in tools for tools in (READ_TOOLS, WRITE_TOOLS, EDITOR_TOOLS, PATCH_TOOLS, SEARCH_TOOLS))


def _results(messages: Iterable[Msg]) -> dict[str, tuple[bool, str]]:
    """Per call id, whether its result was flagged as an error, and the result's text."""
    out: dict[str, tuple[bool, str]] = {}
    for message in messages:
        if message.role != "user" or isinstance(message.content, str):
            continue
        for block in iter_blocks(message.content):
            if block.get("type") == TOOL_RESULT:
                content = block.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "\n".join(
                        str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"
                    )
                )
                out[str(block.get("tool_use_id"))] = (bool(block.get("is_error")), text)
    return out


def extract_file_ops(messages: list[Msg]) -> FileOps:
    """Files read and modified by the tool calls in `messages`, in first-seen order, deduped; a
    file both read and modified is listed as modified only. What a call's result shows did not
    happen is left out: a file tool's call flagged as failed ("File does not exist", "String to
    replace not found") read or changed nothing, and a path a program answered "No such file or
    directory" for was not read. A shell command's failure is only its exit status, which says
    nothing of the files an earlier part of the chain wrote (`sed -i … && npm test`)."""
    recorder = _Recorder()
    results = _results(messages)
    for message in messages:
        if message.role != "assistant":
            continue
        for block in iter_blocks(message.content):
            name = block.get("name")
            if block.get("type") not in TOOL_CALL_KINDS or not isinstance(name, str):
                continue
            failed, text = results.get(str(block.get("id")), (False, ""))
            if failed and _is_file_tool(name):
                continue
            start = len(recorder.events)
            _tool_call(name, tool_input(block), recorder)
            missing = missing_paths(text)
            recorder.events[start:] = [
                (path, kind) for path, kind in recorder.events[start:] if kind != "read" or path not in missing
            ]
    return recorder.result()


def missing_paths(output: str) -> set[str]:
    """The paths a program's output says do not exist ("grep: src/a.ts: No such file or
    directory"): a command given them did not read them."""
    if "No such file or directory" not in output:
        return set()
    return {path for m in NO_SUCH_FILE_RE.finditer(output) if (path := _normalize_path(m.group(1)))}


def without_missing(ops: FileOps, output: str) -> FileOps:
    """`ops` without the reads of paths the call's output says do not exist."""
    missing = missing_paths(output)
    return FileOps(read=[p for p in ops.read if p not in missing], modified=ops.modified) if missing else ops


def merge_file_ops(previous: FileOps, current: FileOps) -> FileOps:
    """Cumulative file ops across compactions: previous first, then new paths; a path read
    before (or now) and modified now (or before) ends up in `modified` only."""
    return _ops_from([*previous.read, *current.read], [*previous.modified, *current.modified])


def render_file_tags(ops: FileOps, root: str = "") -> str:
    """The two sections, one path per line (relative to `root` when inside it); a section with
    no paths is left out ("" when both are)."""
    clean = _ops_from(
        [p for p in (_normalize_path(x) for x in ops.read) if p],
        [p for p in (_normalize_path(x) for x in ops.modified) if p],
    )
    parts = []
    if clean.read:
        parts.append("<read-files>\n" + "\n".join(relative(p, root) for p in clean.read) + "\n</read-files>")
    if clean.modified:
        parts.append(
            "<modified-files>\n" + "\n".join(relative(p, root) for p in clean.modified) + "\n</modified-files>"
        )
    return "\n\n".join(parts)
