"""Files: created, edited, moved, deleted (by an editor tool or a shell command), or read."""

from __future__ import annotations

import os
import re

from compaction.core.fileops import SHELL_SEARCH_COMMANDS, call_file_ops, without_missing
from compaction.core.paths import outside_repository
from compaction.core.text_heuristics import chain_parts, sentences
from compaction.core.types import FileOps
from compaction.core.vocabulary import DELETE_RE, GIT_MV_RE, MANIFEST_CMD_RE, MANIFESTS, READ_FAILED_RE
from compaction.core.work.events import Call
from compaction.core.work.parse import edit_change, one_line
from compaction.core.work.reducers.git import resolve
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import FileRecord, Quote, WorkState

MAX_PURPOSES = 3
MAX_CHANGES = 6
MAX_NAMES = 8
MAX_EDIT_SEQS = 40
# Scratch space, not the project: a redirect to /tmp is no change to commit.
SCRATCH_RE = re.compile(r"^(?:/dev/|/proc/)|^[^/]*\s")


# An edit announced as "Now add X to Y": what the edit that follows is for.
PURPOSE_RE = re.compile(
    r"(?i)^(?:(?:now|next|then|ok|good|great|first|finally|also)[,.!]?\s+)*"
    r"(?:let me |i'll |i will |i need to |we need to |let's |i'm going to )?(?:also |now |then |first )?"
    r"(add|update|replace|create|remove|fix|extract|rewrite|write|implement|change|rename|move|wire|register|rebuild|"
    r"refactor|make|use|switch|convert|delete|drop|introduce|split|handle|apply|modify|adjust|correct|exclude|include|"
    r"allow|restrict|guard|skip|insert|set|patch|extend|simplify|clean|port)\b"
)
# Too vague to say what an edit was for, unless it names code.
VAGUE_RE = re.compile(
    r"(?i)\b(both|all|these|those|everything|remaining|the changes|the rest|it all|in parallel|one batch|at once)\b"
)
MAX_PURPOSE_CHARS = 200
# A sentence naming a file, NAME standing for its name or stem (escaped): a word of its own, not
# part of a longer name (`message_id`, `AnnotationMessageRef`, `messages.ts` do not name `message.ex`).
NAMED_FILE_RE = re.compile(r"(?<![\w.-])NAME(?![\w-]|\.\w)")
_FILLER_RE = re.compile(
    r"(?i)^(?:(?:now|next|then|ok|good|great|first|finally|also|so)[,.!]?\s+|let me |i'll |i will |i need to |let's |we need to )+"
)


def _vague(sentence: str) -> bool:
    if "`" in sentence:
        return False
    return bool(VAGUE_RE.search(sentence)) or len(_FILLER_RE.sub("", sentence).split()) < 4


def purpose_of(text: str, path: str, *, alone: bool = True) -> str:
    """The sentence of the agent's words before an edit that says what the edit is for: one
    naming the file, else (when the edit was the message's only call) the last that announces
    a change; "" when none does."""
    name = path.rsplit("/", 1)[-1]
    stem = name.split(".")[0]
    said = [
        s.replace("**", "").strip() for s in sentences(text) if 10 <= len(s) <= 400 and not s.rstrip().endswith("?")
    ]
    # Named as a word: `message.ex` is not named by `message_id` nor by `AnnotationMessageRef`.
    names = re.escape(name) + (f"|{re.escape(stem)}" if len(stem) > 3 else "")
    named = re.compile(NAMED_FILE_RE.pattern.replace("NAME", f"(?:{names})"))
    naming = [s for s in said if named.search(s)]
    announcing = [s for s in said if PURPOSE_RE.search(s)] if alone else []
    for sentence in [*naming[-1:], *reversed(announcing)]:
        if not _vague(sentence):
            return one_line(sentence.rstrip(":"), MAX_PURPOSE_CHARS)
    return ""


def in_repository(state: WorkState, path: str) -> bool:
    """Whether a commit of the project can hold `path`: not the agent's own files nor scratch
    space, unless git's output showed a repository there."""
    return not outside_repository(path) or any(path.startswith(root + "/") for root in state.git.roots)


def record(state: WorkState, path: str, seq: int) -> FileRecord:
    found = state.files.get(path)
    if found is None:
        found = state.files[path] = FileRecord(path, seq, seq)
    return found


def _changed(state: WorkState, path: str, seq: int, change: str) -> FileRecord:
    rec = record(state, path, seq)
    if rec.state == "read":
        rec.first = seq
    rec.edits += 1
    rec.last = seq
    rec.edit_seqs = [*rec.edit_seqs, seq][-MAX_EDIT_SEQS:]
    rec.state = "edited"
    rec.dirty = in_repository(state, path)
    rec.change = change
    if change:
        rec.changes = [*rec.changes, Quote(seq, change)][-MAX_CHANGES:]
    return rec


def _edited_by_tool(state: WorkState, call: Call, outcome: Outcome, ops: FileOps) -> None:
    if not outcome.ok:
        return  # a failed or refused edit changed nothing
    change = edit_change(call.name, call.args, call.path or (ops.modified[0] if ops.modified else ""))
    for path in ops.modified:
        if call.name == "delete_file":
            _deleted(state, path, call.seq)
            continue
        rec = _changed(state, path, call.seq, change.summary)
        rec.tool_edits += 1
        rec.empty = change.empty
        if rec.edits == 1 and change.empty:
            rec.created = True  # an editor's `create`: it refuses a file that exists
        elif rec.edits == 1 and ("created" in call.output.lower() or change.summary.startswith("written")):
            rec.created = "updated" not in call.output.lower()
        purpose = purpose_of(call.purpose, path, alone=call.alone) if call.purpose else ""
        if purpose and all(q.text != purpose for q in rec.purposes):
            rec.purposes = [*rec.purposes, Quote(call.seq, purpose)][-MAX_PURPOSES:]
        known = {q.text for q in rec.added}
        rec.added = [*rec.added, *(Quote(call.seq, n) for n in dict.fromkeys(change.names) if n not in known)][
            -MAX_NAMES:
        ]


def _deleted(state: WorkState, path: str, seq: int) -> None:
    rec = record(state, path, seq)
    rec.state, rec.last = "deleted", seq
    rec.edit_seqs = [*rec.edit_seqs, seq][-MAX_EDIT_SEQS:]
    # A file written in this history and removed again leaves nothing behind to commit.
    rec.dirty = not rec.created and in_repository(state, path)


def _matches(path: str, word: str) -> bool:
    word = word.strip("\"'")
    return bool(word) and (path == word or path.endswith("/" + word.lstrip("./")))


def _changed_by_shell(state: WorkState, call: Call, outcome: Outcome, ops: FileOps) -> None:
    command = call.command or ""
    moves = [(resolve(state, a.strip("\"'")), resolve(state, b.strip("\"'"))) for a, b in GIT_MV_RE.findall(command)]
    removed = [w for m in DELETE_RE.finditer(command) for w in m.group(1).split() if not w.startswith("-")]
    for source, target in moves:
        moved = record(state, source, call.seq)
        moved.state, moved.moved_to, moved.last, moved.dirty = "moved", target, call.seq, True
        moved.edit_seqs = [*moved.edit_seqs, call.seq][-MAX_EDIT_SEQS:]
        _changed(state, target, call.seq, f"moved here from `{source.rsplit('/', 1)[-1]}`")
    for shown in ops.modified:
        if SCRATCH_RE.search(shown) or any(c in shown for c in "*?$`{}[]<>"):
            continue
        path = resolve(state, shown)
        if any(path in pair for pair in moves):
            continue
        if any(_matches(path, w) for w in removed):
            _deleted(state, path, call.seq)
        else:
            _changed(state, path, call.seq, f"changed by `{one_line(outcome.command, 80)}`")
    # A directory removed whole (`rm -r tests/`): it and every file known under it are gone.
    for match in DELETE_RE.finditer(command):
        words = match.group(1).split()
        if not any(w.startswith("-") and "r" in w.lower() for w in words):
            continue
        for word in words:
            if word.startswith("-") or SCRATCH_RE.search(word) or any(c in word for c in "*?$`{}[]<>"):
                continue
            folder = resolve(state, word.strip("\"'").rstrip("/"))
            if not folder or folder in (".", "/"):
                continue
            if not folder.startswith("/"):
                # Relative to a shell directory not seen: the known files name where it is.
                marker = "/" + folder.rstrip("/") + "/"
                found = next((p for p in state.files if marker in p), "")
                folder = found[: found.index(marker) + len(marker) - 1] if found else folder
            under = [p for p in state.files if p.startswith(folder.rstrip("/") + "/")]
            for path in under:
                _deleted(state, path, call.seq)
            if folder not in state.files and not any(_matches(p, word) for p in ops.modified):
                _deleted(state, folder.rstrip("/") + "/", call.seq)
    for match in MANIFEST_CMD_RE.finditer(command):
        if any(not word.startswith("-") for word in match.group(2).split()):
            for name in MANIFESTS[match.group(1).split()[0]]:
                path = os.path.join(state.git.cwd, name) if state.git.cwd else name
                _changed(state, path, call.seq, f"changed by `{one_line(match.group(0).strip(' ;&|'), 80)}`")


def _read(state: WorkState, call: Call, ops: FileOps) -> None:
    for path in ops.read:
        if SCRATCH_RE.search(path) or state.absent.get(path) == call.seq:
            continue
        rec = record(state, path, call.seq)
        rec.reads += 1
        if rec.state == "read":
            rec.last = call.seq


def _absent(state: WorkState, call: Call) -> None:
    """A file tool answered that the file does not exist ("File does not exist."): the other
    calls of the same message, run at the same moment, did not read it either (`cat x 2>/dev/null`
    printed nothing). Their reads of it are undone and later ones in that message not counted."""
    ops, _ = call_file_ops(call.name, call.args, state.open_file or None)
    state.absent = {path: seq for path, seq in state.absent.items() if seq == call.seq}
    for path in ops.read:
        state.absent[path] = call.seq
        rec = state.files.get(path)
        if rec is not None and rec.state == "read" and rec.first == call.seq:
            del state.files[path]


def _searches(command: str) -> bool:
    """Whether a command line only searches (`grep -n x a.py`, `rg x src | head`)."""
    parts = chain_parts(command)
    firsts = [part.split()[0] for part in parts if part.split() and part.split()[0] != "cd"]
    return bool(firsts) and all(word in SHELL_SEARCH_COMMANDS for word in firsts)


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if outcome.ok is None or call.kind not in ("edit", "shell", "read", "search"):
        return
    if call.kind != "edit" and not outcome.ok:
        if call.kind == "read" and READ_FAILED_RE.search(call.output[:300]):
            _absent(state, call)
        return
    ops, open_file = call_file_ops(call.name, call.args, state.open_file or None)
    state.open_file = open_file or ""
    if call.kind == "edit":
        _edited_by_tool(state, call, outcome, ops)
        return
    if call.kind == "shell" and not outcome.probe:
        _changed_by_shell(state, call, outcome, ops)
    if call.kind == "search" or (call.kind == "shell" and _searches(call.command or "")):
        return  # a search shows the lines that match, not the file: no file was read
    # A read tool, or `cat x`, `sed -n 1,20p x`; not a path the program said does not exist.
    _read(state, call, without_missing(ops, call.output))
