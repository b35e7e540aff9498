"""Reading what tools printed and what calls did: run outcomes, tracker listings, git's view
of the working tree, what an edit changed. Pure functions over strings."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compaction.core.paths import is_prose
from compaction.core.text_heuristics import error_lines_of, strip_ansi
from compaction.core.tool_vocabulary import is_create_tool
from compaction.core.vocabulary import (
    EXIT_CODE_RE,
    FAILED_COUNT_RE,
    GIT_DIFF_STAT_RE,
    GIT_STATUS_RE,
    RUN_FAILED_RE,
    TALLY_RE,
)

MAX_OUTPUT_SCAN = 20_000


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line, cut at `limit` characters (at a word) with an ellipsis."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit * 0.6 else cut).rstrip(" ,;:") + "…"


# --- runs -------------------------------------------------------------------------------

_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
_VERDICT_RE = re.compile(r"(?i)\b(ok|failed|passed|success|failure)\b(?=[.:;])")


def _tally(lines: list[tuple[str, str]]) -> str:
    """The tally of a whole run. A runner that reports suite after suite (cargo: unit tests,
    then doc-tests) prints a tally line per suite: same-shaped lines are summed, so the total
    is the run's; differently shaped ones (Jest's "Test Suites:" and "Tests:") are not."""
    last = lines[-1][1]

    def shape(lead: str, line: str) -> str:
        return _VERDICT_RE.sub("V", _NUMBER_RE.sub("N", lead.strip() + line))

    same = [line for lead, line in lines if shape(lead, line) == shape(*lines[-1]) and _NUMBER_RE.search(line)]
    columns = [[float(n) for n in _NUMBER_RE.findall(line)] for line in same]
    if len(same) < 2 or len({len(c) for c in columns}) != 1:
        return last
    numbers = iter(sum(column) for column in zip(*columns, strict=True))

    def total(match: re.Match[str]) -> str:
        value = next(numbers)
        return f"{value:.2f}" if "." in match.group(0) else str(int(value))

    return _NUMBER_RE.sub(total, last) + f" (summed over {len(same)} suites)"


def run_outcome(output: str, is_error: bool) -> tuple[bool, str, str]:
    """(ok, tally, first error line) of one command from its output."""
    text = strip_ansi(output[-MAX_OUTPUT_SCAN:] if len(output) > MAX_OUTPUT_SCAN else output)
    found = [
        (text[text.rfind("\n", 0, m.start()) + 1 : m.start()], m.group(0).strip().rstrip("= "))
        for m in TALLY_RE.finditer(text)
    ]
    tally = one_line(_tally(found), 160) if found else ""
    failed = (
        is_error
        or bool(EXIT_CODE_RE.search(text) or RUN_FAILED_RE.search(text))
        or bool(tally and FAILED_COUNT_RE.search(tally))
    )
    if not failed:
        return True, tally, ""
    errors = [line for line in error_lines_of(text, is_error=True) if not EXIT_CODE_RE.search(line)]
    first = next((line for line in text.splitlines() if line.strip() and not EXIT_CODE_RE.search(line)), "")
    return False, tally, (errors[0] if errors else first).strip()[:300]


# --- runs whose outcome the output does not show ------------------------------------------

# A harness's answer that it started the command in the background, where it runs on: no outcome
# yet (Claude Code's Bash with run_in_background or past its timeout; Codex's exec_command that
# outlived its wait). Group 1: the job's id, which a later poll or notification names.
BACKGROUND_RE = re.compile(
    r"(?im)^\W*(?:command (?:is )?running in (?:the )?background|process (?:is )?(?:still )?running)"
    r" with (?:session |task |shell )?id:?\s*`?(\w+)"
)
# A poll of a background job (TaskOutput, BashOutput) or the harness's notice that one ended:
# its id, its status, its exit code, what it printed so far.
_JOB_ID_RE = re.compile(r"<(task[_-]id|shell_id|bash_id)>\s*(\w+)\s*</\1>")
_JOB_STATUS_RE = re.compile(r"<status>\s*(\w+)\s*</status>")
_JOB_EXIT_RE = re.compile(r"<exit_code>\s*(-?\d+)\s*</exit_code>|\bcompleted \(exit code (-?\d+)\)")
_JOB_OUTPUT_RE = re.compile(r"<(output|stdout|stderr)>\n?(.*?)\n?</\1>", re.S)
_JOB_TIMEOUT_RE = re.compile(r"<retrieval_status>\s*timeout\s*</retrieval_status>")
# Codex's header of a unified exec session's chunk: the process ended (its code) or runs on (its
# session id), then "Output:" and what it printed.
_SESSION_ENDED_RE = re.compile(r"^Process exited with code (-?\d+)\s*$", re.M)
_SESSION_OUTPUT_RE = re.compile(r"^Output:\n?", re.M)
# Statuses a poll gives a job that has not ended.
RUNNING_STATUSES = frozenset({"running", "pending", "started", "in_progress"})
# The last stage of a pipeline that counts lines (`| wc -l`, `| grep -c x`): what it prints is a
# count, whatever the command before it said; the exit status is the counter's.
COUNT_STAGE_RE = re.compile(r"\|\s*(?:wc\s+-l|grep\s+(?:-\w*c\w*|--count)\b[^|]*)\s*$")
# A grep stage's pattern (`grep -v "x"`, `grep -E 'a|b'`, `grep error`): what the lines counted say.
_GREP_PATTERN_RE = re.compile(r"""\bgrep((?:\s+-[\w-]+)*)\s+(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s|'"-][^\s|]*))""")
_BARE_COUNT_RE = re.compile(r"^\s*(\d+)\s*$")


@dataclass(frozen=True)
class JobReport:
    """What a poll of a background job, or the harness's notice that it ended, showed."""

    job: str  # its id ("" when the text names none)
    status: str  # running | completed | failed | killed …, lowercased
    exit: int | None = None
    output: str = ""
    timed_out: bool = False  # the poll's wait ran out while the job still ran

    @property
    def running(self) -> bool:
        return self.status in RUNNING_STATUSES


def job_report(text: str) -> JobReport | None:
    """The report a poll's result or a notification gives of a background job, or None when the
    text is none (it names no status)."""
    head = text[:MAX_OUTPUT_SCAN]
    status = _JOB_STATUS_RE.search(head)
    if not status:
        return _session_report(text)
    job = _JOB_ID_RE.search(head)
    code = _JOB_EXIT_RE.search(text)
    exit_code = next((int(g) for g in code.groups() if g is not None), None) if code else None
    printed = "\n".join(m.group(2) for m in _JOB_OUTPUT_RE.finditer(text))
    return JobReport(
        job.group(2) if job else "", status.group(1).lower(), exit_code, printed, bool(_JOB_TIMEOUT_RE.search(head))
    )


def _session_report(text: str) -> JobReport | None:
    """A Codex exec session's chunk, as a poll (write_stdin) returns it: ended with its code, or
    still running under its session id; None when the header says neither."""
    parts = _SESSION_OUTPUT_RE.split(text, maxsplit=1)
    header, printed = parts[0][:2000], parts[1] if len(parts) > 1 else ""
    ended = _SESSION_ENDED_RE.search(header)
    if ended:
        return JobReport("", "completed", int(ended.group(1)), printed)
    running = BACKGROUND_RE.search(header)
    return JobReport(running.group(1), "running", None, printed) if running else None


def counted(command: str, output: str) -> str:
    """What a pipeline that ends counting lines printed, as "11 (a count of `error TS` lines)";
    "" when the command does not end in a count or its output is no bare number."""
    first = command.strip().splitlines()[0] if command.strip() else ""
    stage = COUNT_STAGE_RE.search(first)
    number = _BARE_COUNT_RE.match(strip_ansi(output).strip().splitlines()[-1]) if output.strip() else None
    if not stage or not number:
        return ""
    kept: list[str] = []
    dropped: list[str] = []
    for match in _GREP_PATTERN_RE.finditer(first):
        flags = " ".join(w for w in (match.group(1) or "").split() if not w.startswith("--"))
        (dropped if "v" in flags else kept).append(f"`{match.group(2) or match.group(3) or match.group(4)}`")
    what = "the lines it printed"
    if kept or dropped:
        what = "the lines " + (f"matching {' and '.join(kept)}" if kept else "")
        what += (" but not " if kept else "not matching ") + " or ".join(dropped) if dropped else ""
    return f"{number.group(1)} (a count of {what})"


# --- trackers ---------------------------------------------------------------------------

# An item header: "○ proj-abc.4 · Add lifecycle state   [● P2 · OPEN]".
_HEADER_RE = re.compile(
    r"^\W{0,3}\s*([A-Za-z][\w-]*[-.][\w.]+)\s+(?:\[[A-Z]+\]\s+)?·\s+(.+?)(?:\s{2,}\[(.*?)\])?\s*$", re.M
)
# The description of an item `bd show` prints: up to the next all-capitals section (PARENT, DEPENDS ON…).
_DESCRIPTION_RE = re.compile(r"\nDESCRIPTION\n(.+?)(?=\n\n+[A-Z][A-Z ]{3,}\n|\Z)", re.S)
MAX_NOTE_CHARS = 4_000
# A row of a listing: `bd list` ("○ proj-gqc.7 [● P2] [task] - Title (blocked by: …)"), children
# under `bd show` ("↳ ✓ proj-fum.1: Title ● P2"), `bd ready` ("3. [● P2] [task] proj-fum.2: Title").
_ROW_RE = re.compile(
    r"^\s*(?:[↳↑→←]\s*)?([○◐●✓✔])\s+([A-Za-z][\w-]*-[\w.]+)(?::\s+|(?:\s+\[[^\]]*\])+\s+-\s+)(.+?)\s*$", re.M
)
_READY_RE = re.compile(r"^\s*\d+\.\s+(?:\[[^\]]*\]\s+)+([A-Za-z][\w-]*-[\w.]+):\s+(.+?)\s*$", re.M)
_ROW_STATUS = {"○": "open", "◐": "in_progress", "●": "blocked", "✓": "closed", "✔": "closed"}
_BLOCKED_BY_RE = re.compile(r"\(blocked by:\s*([^)]*?)(?:,\s*blocks:[^)]*)?\)")
# What a tracker prints after a task's title: a parenthesis, or bd's priority ("● P2").
_TITLE_TAIL_RE = re.compile(r"\s*(?:\([^)]*\)|●\s*P\d)\s*$")
# A file a description lists as one to create ("- `test/x_test.exs` (new)").
_NEW_FILE_RE = re.compile(r"(?im)^\s*[-*]\s+`?([\w./-]+\.\w+)`?\s*\((?:new|create|created|to create|add|added)\)")
_MODIFY_FILE_RE = re.compile(
    r"(?im)^\s*[-*]\s+`?([\w./-]+\.\w+)`?\s*\((?:(?:new|create) or )?(?:modify|modified|change|edit|update)\)"
)
# `bd show`'s sections of an item's dependencies: "DEPENDS ON" (what blocks it) and "BLOCKS"
# (what it blocks), each a block of indented rows ("  → ○ proj-gqc.1: Title ● P2").
_DEPENDENCY_SECTION_RE = re.compile(r"^(DEPENDS ON|BLOCKS)[ \t]*\n((?:[ \t]+\S[^\n]*(?:\n|\Z))+)", re.M)
# `gh issue view`: "title:\tFix it\nstate:\tOPEN\n…\nnumber:\t12".
_GH_VIEW_RE = re.compile(r"^title:\t(.+)\nstate:\t(\w+)(?:\n.*?)*?\nnumber:\t(\d+)", re.M)


@dataclass
class TrackerItem:
    key: str
    title: str = ""
    status: str = ""  # "" when the output does not show it
    note: str = ""
    outputs: list[str] = field(default_factory=list)
    touches: list[str] = field(default_factory=list)  # files it says to modify
    blocked_by: list[str] | None = None
    blocks: list[str] = field(default_factory=list)  # items its `bd show` says it blocks
    listed: bool = False  # a row of a listing (not an item shown whole)


def _header_items(head: str) -> list[TrackerItem]:
    items = []
    for match in _HEADER_RE.finditer(head):
        shown = (match.group(3) or "").upper().replace(" ", "_")
        status = next(
            (s for w, s in (("IN_PROGRESS", "in_progress"), ("CLOSED", "closed"), ("OPEN", "open")) if w in shown), ""
        )
        item = TrackerItem(match.group(1), one_line(match.group(2), 100), status)
        following = _HEADER_RE.search(head, match.end())
        shown_text = head[match.end() : following.start() if following else len(head)]
        description = _DESCRIPTION_RE.search(shown_text)
        if description:
            item.note = description.group(1).strip()[:MAX_NOTE_CHARS]
        item.outputs = list(dict.fromkeys(_NEW_FILE_RE.findall(shown_text)))[:8]
        item.touches = list(dict.fromkeys(_MODIFY_FILE_RE.findall(shown_text)))[:8]
        for section in _DEPENDENCY_SECTION_RE.finditer(shown_text):
            keys = [row.group(2) for row in _ROW_RE.finditer(section.group(2))]
            if section.group(1) == "BLOCKS":
                item.blocks = keys
            else:
                item.blocked_by = keys
        items.append(item)
    return items


def tracker_items(output: str) -> list[TrackerItem]:
    """The items a tracker's output shows: whole items (`bd show`, `gh issue view`) and rows
    of listings (`bd list`, `bd ready`, the children under `bd show`)."""
    head = strip_ansi(output[:MAX_OUTPUT_SCAN])
    items = _header_items(head)
    for match in _GH_VIEW_RE.finditer(head):
        status = "closed" if match.group(2).upper() == "CLOSED" else "open"
        items.append(TrackerItem(f"#{match.group(3)}", one_line(match.group(1), 100), status))
    for match in _ROW_RE.finditer(head):
        rest = match.group(3)
        blocked = _BLOCKED_BY_RE.search(rest)
        title = one_line(_TITLE_TAIL_RE.sub("", _BLOCKED_BY_RE.sub("", rest)).strip(), 100)
        by = [b.strip() for b in blocked.group(1).split(",") if b.strip()] if blocked else None
        items.append(TrackerItem(match.group(2), title, _ROW_STATUS[match.group(1)], blocked_by=by, listed=True))
    for match in _READY_RE.finditer(head):
        items.append(TrackerItem(match.group(1), one_line(match.group(2), 100), "", listed=True))
    return items


# --- git ----------------------------------------------------------------------------------

_STATUS_HEADER_RE = re.compile(
    r"^(Changes to be committed|Changes not staged for commit|Untracked files|Unmerged paths):\s*$"
)
_STATUS_ENTRY_RE = re.compile(r"^\s+(?:(modified|new file|deleted|renamed|typechange|both modified):\s+)?(\S.*?)\s*$")
_SHORT_STATUS_RE = re.compile(r"^([ MADRCU?!]{2}) (\S.*?)\s*$")
_DIFF_STAT_RE = re.compile(r"^\s*(\S[^|]*?)\s+\|\s+(?:\d+|Bin\b)")
_STAT_TOTAL_RE = re.compile(r"^\d+ files? changed")  # the stat's last line, not a file's
# `git status` options that print the short format (-s, -sb, --short, --porcelain[=v2]).
_SHORT_STATUS_FLAG_RE = re.compile(r"(?:^|\s)(?:-\w*s\w*|--short|--porcelain\S*)\b")
_STAGED_FLAG_RE = re.compile(r"--(?:cached|staged)\b")  # `git diff` of the index
_SECTION_STATE = {
    "Untracked files": "untracked",
    "Changes to be committed": "staged",
    "Changes not staged for commit": "modified",
    "Unmerged paths": "modified",
}


def _short_state(code: str) -> str:
    if code == "??":
        return "untracked"
    if "D" in code:
        return "deleted"
    return "staged" if code[1] == " " else "modified"


def _long_entry(line: str, section: str, resolve: Callable[[str, bool], str]) -> tuple[str, str] | None:
    entry = _STATUS_ENTRY_RE.match(line)
    if not entry:
        return None
    label, shown = entry.group(1) or "", entry.group(2).split(" -> ")[-1]
    state = "deleted" if label == "deleted" and section != "Changes to be committed" else _SECTION_STATE[section]
    return resolve(shown, False), state


def git_tree(command: str, output: str, resolve: Callable[[str, bool], str]) -> dict[str, str] | None:
    """What `git status` or `git diff --stat` printed about the working tree (path -> staged |
    modified | deleted | untracked), or None when the command printed neither. `resolve(shown,
    from_root)` maps a path as git printed it to the file the editor calls named."""
    status = GIT_STATUS_RE.search(command)
    diff = GIT_DIFF_STAT_RE.search(command)
    stat = bool(diff and "--stat" in diff.group(1))
    if not status and not stat:
        return None
    short = bool(status and _SHORT_STATUS_FLAG_RE.search(status.group(1)))
    porcelain = bool(status and "--porcelain" in status.group(1))
    staged = bool(diff and _STAGED_FLAG_RE.search(diff.group(1)))
    entries: dict[str, str] = {}
    section = ""
    for line in strip_ansi(output[:MAX_OUTPUT_SCAN]).splitlines():
        header = _STATUS_HEADER_RE.match(line.strip())
        if header:
            section = header.group(1)
            continue
        if not line.strip():
            continue
        if section and line[:1] in ("\t", " ") and not line.strip().startswith("("):
            entry = _long_entry(line, section, resolve)
            if entry:
                entries[entry[0]] = entry[1]
                continue
        section = section if line[:1].isspace() else ""
        short_entry = _SHORT_STATUS_RE.match(line) if short else None
        if short_entry and short_entry.group(1) != "!!":
            shown = short_entry.group(2).split(" -> ")[-1]
            entries[resolve(shown, porcelain)] = _short_state(short_entry.group(1))
            continue
        stat_entry = _DIFF_STAT_RE.match(line) if stat and not status else None
        if stat_entry and not _STAT_TOTAL_RE.match(line.strip()):
            entries[resolve(stat_entry.group(1), True)] = "staged" if staged else "modified"
    return entries


# --- edits --------------------------------------------------------------------------------

CODE_IDENT_RE = re.compile(r"[:@]?[A-Za-z_][\w]*(?:[.:][A-Za-z_]\w*)*[?!]?")
# Names a new file defines (module, class, function), to say what a written file is.
DEFINES_RE = re.compile(
    r"^\s*(?:(?:pub(?:\([\w:]+\))?|export|default|async|public|private|protected|static|abstract|final)\s+)*"
    r"(?:defmodule|class|def|defp|function|func|fn|interface|struct|enum|trait|type|"
    r"create table|CREATE TABLE)\s+([\w.:]+)",
    re.M,
)
_DO_END_RE = re.compile(r"\s+do$")  # the `do` that opens an Elixir or Ruby definition's body
_EDITOR_BODY_RE = re.compile(r"^edit\s+(\d+:\d+)\s*\n(.*?)\n?end_of_edit\s*$", re.S)
_NEW_KEYS = ("new_string", "newText", "new_str", "replace", "new_text")
_COMMENT_ONLY_RE = re.compile(r"^(?:#|//|/\*|\*|--|<!--)|^[\])}>;,]+$")
_OLD_KEYS = ("old_string", "oldText", "old_str", "search", "old_text")


@dataclass
class Change:
    """What one edit or write did to a file."""

    summary: str  # "written, 40 lines, defining `Foo`" / "3 new lines (`bar`, `baz`)"
    names: list[str] = field(default_factory=list)  # names it introduced
    empty: bool = False  # left the file empty


def _is_code_ident(token: str) -> bool:
    bare = token.lstrip(":@")
    return len(bare) >= 4 and (
        "_" in bare or "." in bare or ":" in bare or any(c.isupper() for c in bare[1:]) or token[0] in ":@"
    )


def added_names(old: str, new: str) -> list[str]:
    """Names an edit introduced: in the new text, not in the old one."""
    before = set(CODE_IDENT_RE.findall(old or ""))
    out: list[str] = []
    for token in CODE_IDENT_RE.findall(new or ""):
        if token not in before and _is_code_ident(token) and token not in out:
            out.append(token)
    return out


# A name as code spells it and prose does not: camelCase, PascalCase with two humps or more,
# snake_case or SCREAMING_CASE (`toolText`, `EditorTheme`, `message_id`, `MAX_FILES`).
CODE_NAME_RE = re.compile(
    r"\b(?=\w{4})(?:[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|"
    r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+)\b"
)


def code_names(text: str) -> Counter[str]:
    """The code names in `text`, each with how often it occurs."""
    return Counter(CODE_NAME_RE.findall(text or ""))


def edit_texts(args: Any) -> tuple[list[tuple[str, str]], str | None]:
    """What an edit or write call replaced: its (old, new) text pairs, and the whole content a
    write gave (None for a replacement)."""
    if not isinstance(args, dict):
        return [], None
    content = args.get("content", args.get("file_text"))
    if isinstance(content, str):
        return [], content
    return _replacements(args), None


def _replacements(args: dict[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    edits = args.get("edits")
    for edit in edits if isinstance(edits, list) else [args]:
        if not isinstance(edit, dict):
            continue
        new = next((edit[k] for k in _NEW_KEYS if k in edit), None)
        old = next((edit[k] for k in _OLD_KEYS if k in edit), None)
        if isinstance(new, str):
            pairs.append((old if isinstance(old, str) else "", new))
    return pairs


# How a change told by some of its new lines (no definition, too long to quote) begins: the
# agent's own words say more of such a change, where it gave any.
EXCERPT_LEAD = "its new lines include"


def edit_change(name: str, args: Any, path: str = "") -> Change:
    """What an edit or write call changed: a whole file's size and definitions, or the lines
    and names a replacement added. A document's (`path` is prose: a plan, a README) code
    blocks define nothing."""
    if not isinstance(args, dict):
        return Change("")
    source = not is_prose(path)
    content = args.get("content", args.get("file_text"))
    if isinstance(content, str):
        if not content.strip():
            return Change("", empty=True)
        lines = content.splitlines()  # every line, blank ones too: the file's length as written
        defined = list(dict.fromkeys(DEFINES_RE.findall(content[:50_000])))[:4] if source else []
        defining = f", defining {', '.join(f'`{n}`' for n in defined[:3])}" if defined else ""
        return Change(f"written, {len(lines)} line{'' if len(lines) == 1 else 's'}{defining}", defined)
    raw = raw if isinstance(raw := args.get("command"), str) else ""
    body = _EDITOR_BODY_RE.match(raw.strip()) if raw else None
    span = [int(n) for n in body.group(1).split(":")] if body else []
    replaced = "\n" * (span[1] - span[0] + 1) if len(span) == 2 and span[1] >= span[0] else ""
    # `edit 4:4` writes its lines over that range: as many lines replaced, their text unknown.
    pairs = _replacements(args) + ([(replaced, body.group(2))] if body else [])
    if is_create_tool(name) and not pairs:
        return Change("", empty=True)  # an editor's `create x.py`: the content is still to come
    old_lines = {line.strip() for old, _new in pairs for line in old.splitlines()}
    added = [line.strip() for _old, new in pairs for line in new.splitlines() if line.strip()]
    added = [line for line in added if line not in old_lines]
    if not added:
        return Change("removed lines" if pairs else "")
    definitions = [line for line in added if DEFINES_RE.match(line)] if source else []
    names = [n for n in added_names("\n".join(old_lines), "\n".join(added)) if len(n) >= 5][:4]
    # No line count ("32 lines in place of 1"): a reader cannot check it against an edit shown
    # shortened, and it says nothing of what the edit did; the definitions and lines say that.
    if definitions:
        # What a reader wants of an edit that adds code: the definitions, as written; the others
        # by name.
        head = _DO_END_RE.sub("", definitions[0].rstrip("{ "))
        others = list(dict.fromkeys(n.rstrip(":") for n in DEFINES_RE.findall("\n".join(definitions[1:]))))
        also = f", and defines {', '.join(f'`{n}`' for n in others[:3])}" if others else ""
        also += f" and {len(others) - 3} more" if len(others) > 3 else ""
        return Change(f"adds `{one_line(head, 100).replace('`', chr(39))}`{also}", names)
    if len(" ".join(added)) <= 90:
        return Change("adds `" + one_line(" ".join(added), 90).replace("`", "'") + "`", names)
    # The code itself says what an edit built: some of its new lines with substance.
    shown = [line for line in added if len(line) >= 12 and not _COMMENT_ONLY_RE.match(line)][:2]
    excerpt = " … ".join(f"`{one_line(line, 90).replace('`', chr(39))}`" for line in shown)
    return Change(f"{EXCERPT_LEAD} {excerpt}" if excerpt else "", names)


# --- commits, todos, plans ---------------------------------------------------------------

_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\1\b", re.S)
_COMMIT_MSG_RE = re.compile(r"""(?:^|\s)-[a-z]*m\s+(?:"([^"$][^"]*)"|'([^']+)')""")


# Trailers and signatures a commit message ends with: not what the commit did.
_TRAILER_RE = re.compile(
    r"(?i)^\s*(?:[\w-]+-by:|🤖|generated with\b|\[?claude code\]?\(|change-id:|refs?:\s*#?\d+\s*$)"
)
MAX_COMMIT_BODY_CHARS = 700
_BULLET_MARK_RE = re.compile(r"^[-*•]\s+")  # a commit body's list item


_CLOSE_REASON_RE = re.compile(
    r"""\bclose\b[^|;&]*?(?:--reason|--comment|-[rcm])(?:=|\s+)(?:"((?:[^"\\]|\\.)*)"|'([^']*)')"""
)


def close_reason(command: str) -> str:
    """The reason a tracker's close command gives (`bd close X --reason="…"`, `gh issue close 3
    --comment "…"`)."""
    match = _CLOSE_REASON_RE.search(command)
    return one_line((match.group(1) or match.group(2) or "").replace('\\"', '"'), 500) if match else ""


def commit_body(command: str) -> str:
    """What the body of the message a `git commit` command gives says the commit did: its
    lines after the subject (heredoc, or a second -m), trailers left out, bullets joined by
    "; ", at most MAX_COMMIT_BODY_CHARS."""
    heredoc = _HEREDOC_RE.search(command)
    if heredoc:
        lines = heredoc.group(2).splitlines()
        first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
        body = lines[first + 1 :]
    else:
        messages = [a or b for a, b in _COMMIT_MSG_RE.findall(command)]
        body = "\n".join(messages[1:]).splitlines()
    parts: list[str] = []
    for line in body:
        text = line.strip()
        if not text or text == "-" or _TRAILER_RE.match(text):
            continue
        if _BULLET_MARK_RE.match(text) or not parts:
            parts.append(_BULLET_MARK_RE.sub("", text))
        elif parts[-1].endswith((".", ":")) and text[:1].isupper():
            parts.append(text)
        else:
            parts[-1] += " " + text
    joined = ""
    for part in parts:
        part = part.rstrip(";")
        joined += part if not joined else (" " if joined.endswith((".", ":")) else "; ") + part
    return one_line(joined, MAX_COMMIT_BODY_CHARS)


def todos_of(args: Any) -> list[tuple[str, str]] | None:
    """(status, text) of each item a todo tool wrote (TodoWrite, update_plan), or None."""
    if not isinstance(args, dict):
        return None
    items = items if isinstance(items := args.get("todos"), list) else args.get("plan")
    if not isinstance(items, list):
        return None
    todos = []
    for item in items:
        if not isinstance(item, dict):
            continue
        content = item.get("content") or item.get("step") or item.get("title") or item.get("description")
        if isinstance(content, str) and content.strip():
            todos.append((str(item.get("status") or "pending").lower(), one_line(content, 200)))
    return todos


_EMPHASIS_RE = re.compile(r"\*\*|__")  # markdown bold
_HEADING_MARK_RE = re.compile(r"^#+\s*")
# A plan's step: a numbered or bulleted line with words after its marker.
_PLAN_POINT_RE = re.compile(r"^(\d+[.)]|[-*])\s+(?=\S)")


def plan_of(text: str) -> tuple[str, list[str]]:
    """(title, lines that state choices or steps) of a plan the agent proposed."""
    lines = [_EMPHASIS_RE.sub("", line).strip() for line in text.splitlines() if line.strip()]
    title = next((_HEADING_MARK_RE.sub("", line) for line in lines if line.startswith("#")), lines[0] if lines else "")
    points = [
        one_line(_PLAN_POINT_RE.sub("", line), 200) for line in lines if _PLAN_POINT_RE.match(line) and len(line) > 12
    ]
    return one_line(title, 160), points
