"""One pass over the messages that tracks the state of the work, not a log of it.

Each source of evidence has its own handler: the user's messages, the assistant's own
words, tool calls and tool results. `analyze` feeds every block to its handler, then
`_reconcile` settles each item on the latest event seen for it: a failure followed by a
success of the same command is fixed (and says how), an issue closed after being started is
closed, work committed is no longer pending. The sections are written from that state.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from compaction.core.fileops import extract_file_ops
from compaction.core.prompts import text_of
from compaction.core.summarizers.extractive.patterns import (
    ANCHOR_RE,
    APPROVAL_RE,
    BRANCH_CMD_RE,
    CLOSE_RE,
    CODE_IDENT_RE,
    COMMIT_MSG_RE,
    DECISION_REASON_RE,
    DEFINES_RE,
    DIAGNOSIS_RE,
    DONE_START_RE,
    EDIT_REJECTED_RE,
    ENV_RE,
    EXIT_CODE_RE,
    FAILED_COUNT_RE,
    HEREDOC_RE,
    IDENT_RE,
    INTENT_RE,
    ISSUE_DESC_RE,
    ISSUE_TITLE_RE,
    JUNK_INTENT_RE,
    LEANS_ON_EARLIER_RE,
    NEXT_RE,
    PURPOSE_RE,
    REOPEN_RE,
    SPECULATION_RE,
    STATUS_RE,
    TEST_OUTCOME_RE,
    TEST_RE,
    TRACKER_CMD_RE,
    URL_RE,
    VAGUE_PURPOSE_RE,
)
from compaction.core.text_heuristics import (
    DECISION_RE,
    GIT_COMMIT_RE,
    chain_parts,
    classify_user_text,
    clean_command,
    command_error_lines,
    command_of,
    command_signature,
    command_signatures,
    commits_in_output,
    error_lines_of,
    is_probe_command,
    is_tool_rejection,
    lower_first,
    normalize,
    paths_in,
    pushes_in_output,
    run_covers,
    sentences,
    strip_ansi,
    strip_error_tags,
    tool_result_text,
    user_messages,
)
from compaction.core.tool_vocabulary import (
    is_completion_tool,
    is_create_tool,
    is_edit_call,
    is_plan_tool,
    is_todo_tool,
    path_argument,
    tool_input,
    tool_key,
)
from compaction.core.types import FileOps, Msg

MAX_ITEM_CHARS = 300
# A user message this short is read together with the assistant message it answers.
SHORT_REPLY_CHARS = 60
# An intent followed by more tool calls than this was acted on: not "next" any more.
STALE_INTENT_TOOL_CALLS = 4
NOTE_MIN_CHARS = 25
NOTE_MAX_CHARS = 400


def one_line(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if cut.count("`") % 2 and len(cut) - cut.rfind("`") < limit // 2:
        # Never end inside a code span ("During theme switch (`…"): stop before it opens.
        cut = cut[: cut.rfind("`")].rstrip(" (,:;")
    return cut.rstrip() + "…"


def content_words(text: str) -> set[str]:
    return {w.strip("./-") for w in re.findall(r"[a-z0-9_./-]{4,}", text.lower())} - {""}


def similar(a: str, b: str, threshold: float = 0.6) -> bool:
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= threshold


@dataclass
class UserMessage:
    text: str
    queued: bool
    event: int
    reply_to: str = ""  # what the assistant had just said, for short replies
    after_interrupt: bool = False
    calls_after: int = 0  # tool calls the assistant made before the user's next typed message

    @property
    def kind(self) -> str:
        return classify_user_text(self.text)

    @property
    def hook(self) -> str:
        """The hook whose output this is ("Stop"), when the harness sent it in the user's place."""
        match = HOOK_FEEDBACK_RE.match(self.text)
        return match.group(1) if match else ""

    def hook_asks(self, limit: int) -> str:
        """A hook's demand, as the hook's: "the Stop hook demands (sent by the harness, not
        the user): Uncommitted Changes Detected…; it asks: Run `git status`…"."""
        demand = hook_demand(self.text) or self.text
        return f"the {self.hook} hook demands (sent by the harness, not the user): {one_line(demand, limit)}"


# Claude Code delivers a hook's verdict as a user message ("Stop hook feedback:\n[cmd]: …"):
# an order from the user's own setup, not words the user typed.
HOOK_FEEDBACK_RE = re.compile(r"^(\w+) hook (?:feedback|error|blocking error)\b", re.IGNORECASE)
_HOOK_ITEM_RE = re.compile(r"^(?:\d+[.)]|[-*•])\s+(.+)$")
_HOOK_VERDICT_RE = re.compile(r"(?i)\b(cannot|can't|must|not allowed|blocked|failed|please)\b")


def hook_demand(text: str) -> str:
    """What a hook's report asks of the agent, in its own words: what it found (its first
    heading, its "Cannot exit with unstaged changes"), then the steps it lists ("Run `git
    status`…; Commit with a descriptive message…"). Its escape hatch after a `---` rule
    ("If you've hit a problem you cannot solve…") and the file lists it prints are left out."""
    head, _, body = text.partition("]:")
    if not body or not head.rsplit("\n", 1)[-1].startswith("["):
        body = text.split("\n", 1)[1] if "\n" in text else ""
    found: list[str] = []
    steps: list[str] = []
    for line in (line.strip() for line in body.splitlines()):
        if line.startswith("---"):
            break
        if re.match(r"(?i)^if\b.*:$", line):
            steps.append(line)  # "If you have NOT completed the task:": the steps below are its
            continue
        heading = re.match(r"^#+\s*(.+?)\s*$", line)
        if heading:
            title = heading.group(1).rstrip(":")
            if not title.endswith("...") and not found:
                found.append(title)
            continue
        item = _HOOK_ITEM_RE.match(line)
        if item and steps and steps[-1].endswith(":"):
            steps[-1] += " " + item.group(1).rstrip(".")
        elif item:
            steps.append(item.group(1).rstrip("."))
        elif line and not line.endswith(":") and _HOOK_VERDICT_RE.search(line):
            found.append(line.rstrip("."))
    said = ". ".join(found)
    if steps:
        said = f"{said}; it asks: {'; '.join(steps)}" if said else "; ".join(steps)
    return one_line(said, 360)


@dataclass
class Command:
    command: str  # first line, output plumbing (2>&1, | tail -5) removed
    full: str
    ok: bool
    detail: str
    index: int
    event: int
    description: str = ""
    errors: list[str] = field(default_factory=list)
    fixed_by: Command | None = None
    fix_notes: list[str] = field(default_factory=list)
    diagnosis: str = ""
    unit: int = 0  # the piece of work (commit) it belongs to
    output_head: str = ""  # the first lines of its output (exit code, first error)

    @property
    def shown(self) -> str:
        return command_shown(self.command, self.full)


def command_shown(command: str, full: str) -> str:
    """How to name a command to a reader: a commit by its message, never a cut heredoc."""
    message = commit_message(full) if GIT_COMMIT_RE.search(full) else ""
    if message:
        return f'git commit -m "{message}"'
    first = command
    if "<<" in first or "$(cat" in first:
        first = re.split(r"\s*(?:\$\(cat\s*)?<<", first)[0].rstrip(" ($\"'") or first
    return first


@dataclass
class Step:
    """A tool call made since the user's latest request, with what came back: the work a range
    that ends inside a turn has done already, so the handoff reports it instead of asking for it
    again."""

    call: str  # as a reader recognises it: "edit `theme.ts`", "bash `npm run build`"
    kind: str  # "change" (a file edited or written), "run" (a command), "look" (a read, a search)
    event: int
    path: str = ""
    ok: bool | None = None  # None: its result is not in the range
    check: bool = False  # a test, build or lint run
    empty: bool = False  # a file created with nothing in it yet (SWE-agent's `create x.py`)
    what: str = ""  # what an edit changed, what a check reported, what a run printed
    purpose: str = ""  # an edit's reason in the agent's words before it ("Add the hook to app.js")

    @property
    def shown(self) -> str:
        if self.ok is None:
            return f"{self.call} (no result in this range)"
        if not self.ok:
            return f"{self.call} (failed{': ' + self.what if self.what else ''})"
        if self.kind == "change":
            state = "created, still empty" if self.empty else "applied"
            return f"{self.call} ({state}{': ' + self.what if self.what else ''})"
        if self.kind == "run":
            verb = "passed" if self.check else "succeeded"
            return f"{self.call} ({verb}{': ' + self.what if self.what else ''})"
        return self.call


@dataclass
class Note:
    """A sentence of the agent worth handing over: a report, a diagnosis, a plan."""

    text: str
    event: int
    kind: str  # "report" | "diagnosis" | "plan"
    unit: int


@dataclass
class Intent:
    """A choice stated before acting ("I need to use `:auto` mode"), waiting for the next change
    or run: a decision when that call carries it out (names what the sentence names), else
    what the call did instead is the decision."""

    said: str  # the decision as stated, with its reason
    action: str  # what it said it would do
    reason: str
    names: list[str]  # the code the sentence names: what a call carrying it out contains


@dataclass
class Commit:
    hash: str
    subject: str
    branch: str
    event: int
    unit: int
    pushed_to: str = ""


MAX_QUOTED_CODE_CHARS = 160


@dataclass
class FileWork:
    path: str
    edits: int = 0
    written: bool = False
    added: list[str] = field(default_factory=list)
    purposes: list[str] = field(default_factory=list)
    units: set[int] = field(default_factory=set)
    last_event: int = 0
    rejected: int = 0  # attempts the tool refused (the file stayed as it was)
    deleted: bool = False  # removed after the edits (and not written again)
    latest_code: str = ""  # the latest edit's new lines, when short enough to quote whole


@dataclass
class ErrorRecord:
    line: str
    event: int
    command: Command | None
    tool: str
    resolved: bool = False
    how: str = ""
    context: str = ""


@dataclass
class Issue:
    id: str
    status: str
    event: int
    title: str = ""
    description: str = ""
    unit: int = -1  # the commit unit in which it was closed
    blocked_by: list[str] = field(default_factory=list)  # as the tracker's latest listing said
    outputs: list[str] = field(default_factory=list)  # files its description says to create


@dataclass
class Analysis:
    users: list[UserMessage] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    intended: list[Intent] = field(default_factory=list)  # stated choices not yet acted on
    commands: list[Command] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    files: dict[str, FileWork] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    pushes: list[tuple[str, int]] = field(default_factory=list)  # (destination, event)
    branch: str = ""
    issues: dict[str, Issue] = field(default_factory=dict)
    todos: list[tuple[str, str]] = field(default_factory=list)
    plan_title: str = ""
    plan_steps: list[str] = field(default_factory=list)
    rejections: list[str] = field(default_factory=list)
    interruptions: int = 0
    identifiers: Counter[str] = field(default_factory=Counter)
    user_paths: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    last_tools: list[str] = field(default_factory=list)
    tool_ok: dict[str, int] = field(default_factory=dict)  # tool -> event of its latest success
    read_purposes: dict[str, str] = field(default_factory=dict)  # file read -> why, in the agent's words
    look: str = ""  # the latest "let me check X to understand Y" of the agent
    intents: list[tuple[str, int]] = field(default_factory=list)  # (sentence, tool calls made before it)
    last_intents: list[str] = field(default_factory=list)
    final_text: str = ""  # the assistant's last words in the range
    activity_after_latest: int = 0  # assistant texts and tool calls after the latest user message
    edits_since_test: list[str] = field(default_factory=list)
    edits_since_commit: list[str] = field(default_factory=list)
    open_file: str = ""  # a text-format editor's open file (SWE-agent's `edit 10:12` works on it)
    tests_seen: bool = False
    modified: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    root: str = ""
    # Parsing state
    clock: int = 0
    unit: int = 0
    # Since the last commit nothing new began (no edit, no issue started): closing the issue
    # and pushing still belong to that commit's piece of work.
    wrapping_up: bool = False
    pending: dict[str, tuple[str, str | None, str | None, str, dict[str, Any]]] = field(default_factory=dict)
    texts: list[tuple[str, int, int]] = field(default_factory=list)  # (text, event, tool calls before) this turn
    # What the agent said its next change is for ("Now add X to Y"), until it speaks again.
    purpose: str = ""
    # A call of another kind (a todo list, a run) came after those words: they were said of it.
    purpose_spent: bool = False
    call_purposes: dict[str, str] = field(default_factory=dict)  # edit call id -> its purpose
    note_keys: list[set[str]] = field(default_factory=list)
    seen_sentences: set[str] = field(default_factory=set)
    file_mentions: dict[str, str] = field(default_factory=dict)  # basename -> latest statement naming it
    # What a refused edit was for: the retry that goes through changes the same thing, and its
    # own words are usually about the retry ("I will correct the syntax and try again").
    retry_purposes: dict[str, str] = field(default_factory=dict)
    deleted: list[tuple[str, int]] = field(default_factory=list)  # (file, event): removed, not edited here
    # The work handed over with a completion tool (`submit`): (call as shown, its answer or "").
    submitted: tuple[str, str] | None = None
    # The range ends on an assistant message without tool calls: the agent ended its turn.
    turn_ended: bool = False
    git_seen: bool = False
    # The working tree as git last printed it (`git status`, `git diff --stat`), path -> state
    # ("modified", "staged", "untracked", "deleted"), less what commits since took: git's word
    # on what is pending, which editor calls alone miss (`npm install` changing package.json).
    tree: dict[str, str] | None = None
    tree_event: int = 0
    tree_source: str = ""  # the command that printed it: "git status" or "git diff --stat"
    # Files a package manager rewrote (`npm install x` → package.json, its lock file): (path,
    # event, command). No editor call names them; git shows them as modified.
    command_changes: list[tuple[str, int, str]] = field(default_factory=list)
    # What each `git stash` put away, newest last: (edited files, tracked tree entries).
    stashed: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    cwd: str = ""  # the shell's directory, as the latest `cd` left it (the shell keeps it between calls)
    # Tool calls since the latest typed user message: where the work stood when the range
    # ends inside a turn.
    calls_since_request: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)  # the same calls, with their outcomes
    pending_steps: dict[str, Step] = field(default_factory=dict)
    # The range ends inside a turn whose work for the latest request looks finished.
    request_done: bool = False

    def rel(self, path: str) -> str:
        """A path relative to the project root shared by the touched files (shorter, same file)."""
        if self.root and path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return path

    @property
    def requests(self) -> list[str]:
        return [u.text for u in self.users]


# ---------------------------------------------------------------------------- helpers


def commit_message(command: str) -> str:
    heredoc = HEREDOC_RE.search(command)
    if heredoc:
        first = next((line.strip() for line in heredoc.group(2).splitlines() if line.strip()), "")
        return one_line(first, 150)
    match = COMMIT_MSG_RE.search(command)
    return one_line(match.group(1) or match.group(2), 150) if match else ""


def _outcome(output: str, is_error: bool) -> tuple[bool, str]:
    """(ok, detail) of one command from its output."""
    output = strip_ansi(output)
    # (the line's start, the tally): "Tests:" and "Test Suites:" are tallies of different things.
    outcome_lines = [
        (output[output.rfind("\n", 0, m.start()) + 1 : m.start()], m.group(0).strip().rstrip("= "))
        for m in TEST_OUTCOME_RE.finditer(output)
    ]
    # pytest frames its tally in "=====": the rule is no part of the outcome.
    detail = one_line(_run_tally(outcome_lines), 160) if outcome_lines else ""
    failed = is_error or bool(EXIT_CODE_RE.search(output)) or bool(detail and FAILED_COUNT_RE.search(detail))
    if failed:
        # With no error line, the first line stands in (with the line its ":" announces).
        errors = [line for line in error_lines_of(output, is_error=True) if not EXIT_CODE_RE.search(line)]
        first = next((line for line in output.splitlines() if line.strip() and not EXIT_CODE_RE.search(line)), "")
        detail = detail or one_line(errors[0] if errors else first, 200)
    return not failed, detail


_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
# What differs between two suites' tallies of one kind: their counts and their verdict.
_VERDICT_RE = re.compile(r"(?i)\b(ok|failed|passed|success|failure)\b(?=[.:;])")


def _run_tally(lines: list[tuple[str, str]]) -> str:
    """The tally of a whole run. A runner that reports one suite after another (`cargo test`:
    the unit tests, then "5 passed" for the doc-tests) prints one tally line per suite: the
    lines of the same shape as the last are summed ("34 passed; … (the sum of 2 tallies)"), so the total
    is the run's, not its last suite's. Tallies of different shapes (Jest's "Test Suites:"
    and "Tests:") are not added up."""
    last = lines[-1][1]

    def shape(lead: str, line: str) -> str:
        return _VERDICT_RE.sub("V", _NUMBER_RE.sub("N", lead.strip() + line))

    same = [line for lead, line in lines if shape(lead, line) == shape(*lines[-1]) and _NUMBER_RE.search(line)]
    if len(same) < 2:
        return last
    columns = [[float(n) for n in _NUMBER_RE.findall(line)] for line in same]
    if len({len(c) for c in columns}) != 1:
        return last
    totals = [sum(column) for column in zip(*columns, strict=True)]
    numbers = iter(totals)

    def total(match: re.Match[str]) -> str:
        value = next(numbers)
        return f"{value:.2f}" if "." in match.group(0) else str(int(value))

    summed = _NUMBER_RE.sub(total, last)
    return f"{summed} (the sum of {len(same)} tallies)"


def _is_code_ident(token: str) -> bool:
    bare = token.lstrip(":@")
    return len(bare) >= 4 and (
        "_" in bare or "." in bare or ":" in bare or any(c.isupper() for c in bare[1:]) or token[0] in ":@"
    )


def _added_identifiers(old: str, new: str) -> list[str]:
    """Names that an edit introduced: in the new text, not in the old one."""
    before = set(CODE_IDENT_RE.findall(old or ""))
    out: list[str] = []
    for token in CODE_IDENT_RE.findall(new or ""):
        if token not in before and _is_code_ident(token) and token not in out:
            out.append(token)
    return out


def _todos_of(args: dict[str, Any]) -> list[tuple[str, str]] | None:
    items = args.get("todos") if isinstance(args.get("todos"), list) else args.get("plan")
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


def _plan_of(text: str) -> tuple[str, list[str], list[str]]:
    """(title, steps, choices with reasons) of a plan the user approved."""
    lines = [re.sub(r"\*\*|__", "", line).strip() for line in text.splitlines() if line.strip()]
    title = next((re.sub(r"^#+\s*", "", line) for line in lines if line.startswith("#")), lines[0] if lines else "")
    steps = [
        one_line(re.sub(r"^(#+\s*)?(\d+[.)]|[-*])\s+", "", line), 160)
        for line in lines
        if re.match(r"^(#+\s*)?\d+[.)]\s+", line)
    ]
    choices = [
        one_line(sentence, 240)
        for sentence in condense(text)
        if DECISION_REASON_RE.search(sentence) and 30 <= len(sentence) <= 400 and not sentence.startswith("|")
    ]
    strategy = [
        re.sub(r"^#+\s*", "", line) for line in lines if re.match(r"^#+\s*(strategy|approach|design)\b.*:", line, re.I)
    ]
    title = re.sub(r"(?i)^plan:\s*", "", title)
    return one_line(title, 200), steps[:8], [*strategy, *choices][:4]


def condense(text: str) -> list[str]:
    """Sentences of an assistant message, with a list folded into the line that introduces it
    ("The dependency chain is: a → b; c"), markdown emphasis and headings removed."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    # A blockquote ("> - No fixing existing code") quotes a plan or the user; it reports nothing.
    text = re.sub(r"(?m)^[ \t]*>.*$", "", text)
    # A table row reads as its cells ("spotter-0p7.1: Install the tools: -"), its rule as nothing.
    text = re.sub(r"(?m)^[ \t]*\|[ \t|:-]*\|[ \t]*$", "", text)
    text = re.sub(
        r"(?m)^[ \t]*\|(.*)\|[ \t]*$",
        lambda m: ": ".join(c.strip() for c in m.group(1).split("|") if c.strip()) + ".",
        text,
    )
    lines = [re.sub(r"\*\*|__|^#+\s*", "", line).strip() for line in text.splitlines()]
    out: list[str] = []
    intro: str | None = None
    items: list[str] = []

    def flush() -> None:
        nonlocal intro, items
        if intro is not None:
            out.append(intro + (" " + "; ".join(items) if items else ""))
        intro, items = None, []

    for line in lines:
        bullet = re.match(r"^(?:[-*•]|\d+[.)])\s+(.*)$", line)
        if bullet and intro is not None:
            items.append(bullet.group(1).rstrip("."))
            continue
        if not line:
            if intro is not None and not items:
                continue  # the list of an intro may follow a blank line
            flush()
            continue
        flush()
        if line.endswith(":") and len(line) >= 12:
            parts = sentences(line)
            out.extend(parts[:-1])
            intro = parts[-1] if parts else line
        else:
            out.extend(sentences(line))
    flush()
    return [s.strip() for s in out if s.strip()]


def _is_statement(sentence: str) -> bool:
    """A complete, declarative sentence (not narration of the next look-around, not a question)."""
    words = re.findall(r"[A-Za-z]{2,}", sentence)
    report = bool(DONE_START_RE.search(sentence) and ANCHOR_RE.search(sentence))
    return (
        (NOTE_MIN_CHARS <= len(sentence) or (report and len(sentence) >= 15))
        and len(sentence) <= NOTE_MAX_CHARS
        and (len(words) >= 5 or report and len(words) >= 3)
        and not sentence.endswith("?")
        and not (sentence.endswith(":") and ";" not in sentence)
        and not JUNK_INTENT_RE.search(sentence)
        and not SPECULATION_RE.match(sentence)
        and not INTENT_RE.search(sentence)
        and not INTERJECTION_RE.match(sentence)
        and not TABLE_ROW_RE.match(sentence)
        and not (is_sign_off(sentence) and not ANCHOR_RE.search(sentence))
    )


# "Everything should be working smoothly now." "Ready for the new release whenever you are!"
# Said to the user at the end of a turn; it names nothing a successor could check or continue.
SIGN_OFF_RE = re.compile(
    r"(?i)\b(let me know|whenever you(?:'re| are)|ready (?:for|to go|when)|feel free|happy to|hope (?:this|that)|"
    r"enjoy|you(?:'re| are) all set|should (?:now )?(?:be )?(?:work(?:ing)?|eliminate|fix|resolve|solve)|"
    r"(?:will|won't) never\b.*\bagain)\b"
)


def is_sign_off(sentence: str) -> bool:
    """A closing remark to the user (an exclamation or a reassurance), not a finding."""
    return sentence.rstrip().endswith("!") or bool(SIGN_OFF_RE.search(sentence))


# "`mdLink`: `#81a2be` (blue)", "Here's a bare URL: …": a row of a listing or a sample shown
# to the user; out of its list it states nothing.
TABLE_ROW_RE = re.compile(r"(?i)^(?:`[^`]+`\s*[:=]\s*(?:`|#|\d|\"|')|here(?:'s| is| are)\b)")


# "I see that…", "There is a typo…": what the agent noticed, not what it chose.
OBSERVATION_RE = re.compile(
    r"(?i)^(i see|i notice|i noticed|there is|there's|there are|it seems|it looks|looks like)\b"
)


# "instead of" alone is a comparison ("it now takes a function instead of an RGB object",
# "Fixed the tests to use themes instead of chalk"): a choice needs someone choosing.
_COMPARISON_ONLY = frozenset({"instead of", "rather than"})
CHOICE_VERB_RE = re.compile(
    r"(?i)\b(i'll|i will|we'll|we will|let's|i'm going to|we're going to|use[sd]?|using|switch(?:ed)?|chose|choose|"
    r"decided|prefer(?:red)?|opt(?:ed)?|went with|going with|keep(?:ing)?|kept)\b"
)


def _states_choice(sentence: str) -> bool:
    """A decision, not a comparison: evidence beyond "instead of", or someone choosing in a
    sentence that is not a report of finished work."""
    found = {m.group(0).lower() for pattern in (DECISION_RE, DECISION_REASON_RE) for m in pattern.finditer(sentence)}
    if not found <= _COMPARISON_ONLY:
        return True
    # The chosen side comes before "instead of": "…with chalk instead of using themes" chose nothing.
    chosen = re.split(r"(?i)\b(?:instead of|rather than)\b", sentence, maxsplit=1)[0]
    return bool(CHOICE_VERB_RE.search(chosen)) and not DONE_START_RE.search(sentence)


# A guess about a cause, not a choice that was made.
HYPOTHESIS_RE = re.compile(r"(?i)\b(might|would explain|probably|perhaps|maybe|possibly|i suspect|i guess)\b")


# "Expected — …", "Right — …", "Hmm, …": a reaction to the last output, not a finding.
INTERJECTION_RE = re.compile(
    r"(?i)^(expected|right|hmm+|oh|ah|ok(ay)?|good|great|perfect|interesting|wait)\b\s*[—–,:!-]"
)


def _add_note(a: Analysis, text: str, kind: str) -> None:
    if LEANS_ON_EARLIER_RE.match(text):
        return  # its subject was in the sentence before, which is not kept
    text = one_line(text, NOTE_MAX_CHARS)
    keys = content_words(text)
    if not keys:
        return
    for seen in a.note_keys:
        if len(keys & seen) / min(len(keys), len(seen)) >= 0.7:
            return
    a.note_keys.append(keys)
    a.notes.append(Note(text, a.clock, kind, a.unit))


def _find_root(a: Analysis) -> str:
    # The project root: the common directory of the touched files in the most common
    # top-level tree (a plan file under ~/.claude must not defeat it).
    absolute = [p for p in [*a.modified, *a.read] if p.startswith("/") and p.count("/") >= 4]
    if not absolute:
        return ""
    trees = Counter("/".join(p.split("/")[:4]) for p in absolute)
    tree = trees.most_common(1)[0][0]
    members = [p for p in absolute if p.startswith(tree + "/")]
    root = os.path.commonpath(members) if len(members) > 1 else os.path.dirname(members[0])
    if all(os.path.dirname(p) == root for p in members):
        root = os.path.dirname(root)  # keep the file's own directory: "api/views.py", not "views.py"
    return root if root.count("/") >= 2 else ""


# ---------------------------------------------------------------------------- per source


def _close_turn(a: Analysis) -> None:
    """The assistant's last text of a turn is its report to the user: keep its statements."""
    if not a.texts:
        return
    text, _event, _tools = a.texts[-1]
    for sentence in condense(text):
        if _is_statement(sentence):
            _add_note(a, sentence, "report")


def on_user_message(a: Analysis, msg: Msg) -> None:
    interrupted = False
    for block in msg.blocks:
        if block.get("type") == "text" and "[request interrupted by user" in text_of(block, "text").lower():
            a.interruptions += 1
            interrupted = True
    found = user_messages(msg)
    if not found:
        return
    typed = [t for t, queued in found if not queued]
    words = [t for t in typed if not BARE_COMMAND_RE.match(t)]
    if len(words) > 1:
        # One message typed in several blocks (a pasted log, then the question about it) is one
        # message: read apart, each block would seem to answer what the assistant said last.
        # A bare harness command beside them ("/mode") stays apart: it is no part of the words.
        first_typed = next(i for i, (t, queued) in enumerate(found) if not queued and t in words)
        found = [(t, queued) for t, queued in found if queued or t not in words]
        found.insert(first_typed, ("\n\n".join(words), False))
    if typed:
        _close_turn(a)
        _count_calls(a)
    for text, queued in found:
        reply_to = ""
        if a.texts and len(text) <= SHORT_REPLY_CHARS and not queued:
            said = [x for x in condense(a.texts[-1][0]) if not JUNK_INTENT_RE.search(x)]
            reply_to = one_line(" ".join(said[-2:]), 240) if said else ""
        user = UserMessage(text, queued, a.clock, reply_to, interrupted or a.interruptions > 0 and not a.texts)
        a.users.append(user)
        if not user.hook:
            a.user_paths.extend(paths_in(text))
        a.urls.extend(URL_RE.findall(text))
        if reply_to and APPROVAL_RE.match(text) and ("?" in reply_to or "should i" in reply_to.lower()):
            a.decisions.append(f'The user approved ("{one_line(text, 80)}") what the assistant proposed: "{reply_to}"')
    a.activity_after_latest = 0
    if typed:
        a.texts = []  # a new user turn: intents before it are stale
        a.calls_since_request = []
        a.steps = []


BARE_COMMAND_RE = re.compile(r"^/[\w:-]*$")


def _count_calls(a: Analysis) -> None:
    """The work a typed request set going: the tool calls made until the next one."""
    previous = next((u for u in reversed(a.users) if not u.queued), None)
    if previous is not None:
        previous.calls_after = len(a.calls_since_request)


def _code_named(text: str) -> list[str]:
    """The code a sentence names in backticks: what a call carrying it out must contain."""
    return [span.strip() for span in re.findall(r"`([^`\n]{2,})`", text) if span.strip()]


def _intend(a: Analysis, said: str, action: str, reason: str) -> None:
    """A choice stated before acting: settled by the next change or run (`_settle_intents`).
    One that names no code cannot be checked against the call, and stands as said."""
    names = _code_named(action)
    if names:
        a.intended.append(Intent(said, action, reason, names))
    else:
        a.decisions.append(said)


def _carries(names: list[str], call_text: str) -> bool:
    """Whether a call contains a name the sentence gave, word for word: `<pre><code>` is
    carried by `<pre class="x"><code>`, `:auto` is not by `{:shared, self()}`."""
    words = {w for name in names for w in re.findall(r"[:@$]?[A-Za-z_][\w.!?]*", name) if len(w.strip(":@$")) >= 3}
    return any(re.search(rf"(?<![\w:@$]){re.escape(w)}(?![\w])", call_text) for w in words)


def _call_text(command: str | None, path: str, args: dict[str, Any]) -> str:
    """What a change or run puts in place: the command line, or the edit's new text (its old
    text is what it replaced, not what it did)."""
    if command:
        return command
    new_keys = ("new_string", "newText", "new_str", "content", "file_text", "replace")
    edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
    texts = [e[k] for e in edits if isinstance(e, dict) for k in new_keys if isinstance(e.get(k), str)]
    return "\n".join([path, *texts])


def _settle_intents(a: Analysis, did: str, call_text: str) -> None:
    """The next change or run after stated choices: each carried out is a decision; one it did
    not carry out ("use `:auto` mode", then an edit to `{:shared, self()}`) gives way to what
    the call did, with the reason the agent gave."""
    for intent in a.intended:
        if _carries(intent.names, call_text):
            a.decisions.append(intent.said)
            continue
        because = f", because {intent.reason}" if intent.reason else ""
        stated = lower_first(intent.action.rstrip("."))
        a.decisions.append(one_line(f'{did} instead of the stated "{stated}"{because}', 400))
    a.intended = []


def on_assistant_text(a: Analysis, text: str) -> None:
    a.texts.append((text, a.clock, len(a.last_tools)))
    a.activity_after_latest += 1
    a.urls.extend(URL_RE.findall(text))
    a.purpose = ""
    a.purpose_spent = False
    a.look = ""
    for ident in IDENT_RE.findall(text):
        a.identifiers[ident.strip()] += 1
    previous_diagnosis = ""
    purpose_set = False
    said = condense(text)
    for index, sentence in enumerate(said):
        key = sentence.lower()
        if key in a.seen_sentences:
            continue  # said before: recorded then (and re-reading it costs a long turn dearly)
        a.seen_sentences.add(key)
        purpose = PURPOSE_RE.match(sentence.rstrip("."))
        if (INTENT_RE.search(sentence) or purpose) and 10 <= len(sentence) <= 400:
            a.intents.append((one_line(sentence), len(a.last_tools)))
            if (
                DECISION_RE.search(sentence)
                and DECISION_REASON_RE.search(sentence)
                and len(sentence) >= 30
                and not sentence.endswith(":")  # "Let me fix it by X instead of Y:" leads into a code block
            ):
                _intend(a, one_line(sentence), sentence, "")  # "I'll use X instead of Y because Z"
            look = LOOK_RE.match(sentence.rstrip("."))
            if look and re.search(
                r"(?i)\b(to understand|for (the )?patterns?|to see how|to learn|to find out)\b", sentence
            ):
                a.look = one_line(look.group(1), 160)
            if purpose and not JUNK_INTENT_RE.search(sentence):
                body = purpose.group(1)
                body = re.split(r"(?i)\s+(?:since|because)\s+", body)[0].rstrip(":").strip()
                deictic = re.search(r"(?i)\b(this|that|it|them)\b", body) and len(body.split()) <= 5
                if (
                    not _vague_purpose(body)
                    and len(body) >= 12
                    and not deictic
                    and not (purpose_set and re.search(r"(?i)\b(this|that|these|it)\b", body))
                ):
                    # "We need to exclude X when Y. Let's edit the code to implement this
                    # logic.": the first says what the edit is for; the second points back at it.
                    a.purpose = one_line(body[0].upper() + body[1:], 160)
                    purpose_set = True
                    if previous_diagnosis:
                        # "X doesn't support Y. I need to rewrite Z": a choice with its reason.
                        reason = lower_first(previous_diagnosis)
                        _intend(a, f"{a.purpose}, because {reason}", a.purpose, reason)
            previous_diagnosis = ""
            continue
        previous_diagnosis = ""
        if not _is_statement(sentence):
            continue
        for name in FILE_NAME_RE.findall(sentence):
            if not LEANS_ON_EARLIER_RE.match(sentence):
                a.file_mentions[name.lower()] = one_line(sentence, 240)
        if DECISION_RE.search(sentence) and DECISION_REASON_RE.search(sentence) and len(sentence) >= 30:
            # Alternatives and reasons are listed as decisions, once; a hypothesis ("If X, it
            # might be loading Y instead of Z") or an observation ("I see that X is used
            # instead of Y") chose nothing and stays a diagnosis.
            if not HYPOTHESIS_RE.search(sentence) and not OBSERVATION_RE.match(sentence) and _states_choice(sentence):
                a.decisions.append(one_line(sentence))
                continue
        if ACCEPTED_RE.search(sentence) and not sentence.endswith("?"):
            # "We have 100% line coverage (which is what matters here)": the agent settled for
            # something, and why; the sentence after it often carries the rest of the reason.
            following = said[index + 1] if index + 1 < len(said) else ""
            reason = following if re.search(r"(?i)\b(because|since|so that|can'?t|cannot)\b", following) else ""
            a.decisions.append(one_line(f"{sentence} {reason}".strip(), 400))
            continue
        if DONE_START_RE.search(sentence) and ANCHOR_RE.search(sentence):
            _add_note(a, sentence, "report")
        elif DIAGNOSIS_RE.search(sentence) and (ANCHOR_RE.search(sentence) or len(sentence) >= 60):
            _add_note(a, sentence, "diagnosis")
            if not re.search(r"(?i)\b(likely|probably|maybe|might|perhaps|seems|guess)\b", sentence):
                previous_diagnosis = sentence.rstrip(".")  # a finding, not a guess: a reason to act on


# The agent settling for something short of what it aimed at, with its reason.
ACCEPTED_RE = re.compile(
    r"(?i)\b(?:which|that|this) is what matters\b|\bis (?:good|close) enough\b|\b(?:is|are) sufficient\b"
    r"|\bis an acceptable\b|\bsettle for\b|\bsettled for\b|\bwe can live with\b"
)


LOOK_RE = re.compile(
    r"(?i)^(?:now,? |ok,? |good\.? )?(?:let me|i'll|let's)\s+(?:also |first |now )?"
    r"((?:check|read|look at|look for|look into|examine|inspect|review|explore|find)\b.{8,})$"
)


FILE_NAME_RE = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)*([\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,5})\b")


def _editor_path(a: Analysis, key: str, args: dict[str, Any]) -> str | None:
    """The file of a text-format editor action (SWE-agent): `open x.py 40` and `create x.py`
    name it, `edit 10:12` works on the file opened last — the change the work is about."""
    words = args.get("command").split(maxsplit=2) if isinstance(args.get("command"), str) else []
    if key == "edit" and not words and a.open_file and isinstance(args.get("replace"), str):
        return a.open_file  # the function-calling form: {"search": …, "replace": …} on the open file
    if words[:1] != [key]:
        return None
    if key in ("open", "open_file", "create") and len(words) > 1:
        a.open_file = words[1].strip("\"'")
        return a.open_file
    return a.open_file if key == "edit" and a.open_file else None


def on_tool_use(a: Analysis, block: dict[str, Any]) -> None:
    a.activity_after_latest += 1
    name = str(block.get("name", "tool"))
    key = tool_key(name)
    args = tool_input(block)
    args = args if isinstance(args, dict) else {}
    path = path_argument(args) or _editor_path(a, key, args)
    if path and key in ("open", "open_file"):
        a.open_file = path
    if is_todo_tool(key):
        todos = _todos_of(args)
        if todos is not None:
            a.todos = todos
    elif is_plan_tool(key) and isinstance(args.get("plan"), str):
        a.plan_title, a.plan_steps, plan_choices = _plan_of(args["plan"])
        a.decisions.extend(f"From the approved plan: {choice}" for choice in plan_choices)
    command = command_of(block)
    if is_completion_tool(key):
        a.submitted = (_completion_call(name, command, args), "")
    if command:
        a.env.update(dict(ENV_RE.findall(command.splitlines()[0])))
        branch = BRANCH_CMD_RE.search(command)
        if branch:
            a.branch = branch.group(1)
    shown = a.rel(path) if path else ""
    call = _call_shown(name, command, shown, args)
    a.last_tools.append(call)
    a.calls_since_request.append(call)
    if path and is_edit_call(name, args):
        kind = "change"
    elif command and not is_probe_command(command):
        kind = "run"
    else:
        kind = "look" if path or command else "other"  # a read, a search: what was looked at
    step = Step(call, kind, a.clock, path or "", check=bool(command and TEST_RE.search(clean_command(command))))
    a.steps.append(step)
    if kind == "change" and "id" in block:
        # Taken now: a call beside it in the same message (a TodoWrite) must not be read first.
        a.call_purposes[block["id"]] = _purpose_for(a, path or "")
    elif kind == "look" and path and "id" in block:
        # Taken now, like an edit's: a read after the one the words were about is not theirs.
        a.call_purposes[block["id"]] = _look_for(a, path)
    elif kind not in ("change", "look") and _answers(a.purpose, name, command, args):
        a.purpose_spent = True
    if "id" in block:
        a.pending_steps[block["id"]] = step
        description = args.get("description") if isinstance(args.get("description"), str) else ""
        a.pending[block["id"]] = (name, command, path, description, args)


# The verb of a purpose says what kind of change, not which: "create" fits any call.
_PURPOSE_VERBS = frozenset(
    "add update replace create remove extract rewrite write implement change rename move wire register rebuild "
    "refactor make switch convert delete drop introduce split handle apply modify edit adjust correct exclude "
    "include allow restrict guard skip insert patch start with from into that this then also".split()
)


def _answers(purpose: str, name: str, command: str | None, args: dict[str, Any]) -> bool:
    """Whether a call other than an edit is what the agent's words were about: they share a
    word ("Let me create a todo list" → TodoWrite; "install the linter" → `npm install eslint`).
    "Now create the JS test. Let me first install happy-dom." → `npm install happy-dom` shares
    none with the purpose: the edit after it is still what the words were for."""
    if not purpose:
        return False
    words = content_words(purpose) - _PURPOSE_VERBS
    # The arguments' values only: a key ("command", "path") is no word the agent said of the call.
    values = " ".join(str(value) for value in args.values())[:2000]
    # Every agent's todo tool ("TodoWrite", "todo_write", "update_plan") keeps a todo list.
    tool_words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name) + (" todo" if is_todo_tool(name) else "")
    called = " ".join([tool_words, command or "", values])
    return bool(words & content_words(called))


def _vague_purpose(body: str) -> bool:
    """Whether the words name no particular edit: "update both files", "make the remaining
    changes". An "all" after the edit's own object ("with …", "for …") qualifies what the edit
    adds: "update the test file with new test blocks for all enriched features" is that file's
    purpose; "write the updated file with all Task 3 changes" still names no particular edit."""
    head, *tail = re.split(r"(?i)\s+(?:with|for)\s+", body, maxsplit=1)
    qualifier = re.sub(r"(?i)\ball\b(?!.*\b(?:changes|edits|fixes|updates)\b)", "", tail[0]) if tail else ""
    return bool(VAGUE_PURPOSE_RE.search(head) or VAGUE_PURPOSE_RE.search(qualifier))


def _purpose_for(a: Analysis, path: str) -> str:
    """What an edit of `path` is for, from the agent's words before it. Words that name the
    file are about it even with a todo update or a read in between ("Now let me update the
    Justfile" → TodoWrite → Read → Write); words naming another file are not; words naming no
    file are the purpose of the calls right after them only — "Let me create a todo list and
    start porting" was said of the TodoWrite, not of the edit that followed it."""
    if not a.purpose:
        return ""
    said = a.purpose.lower()
    base = path.rsplit("/", 1)[-1].lower()
    if base and re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-])", said):
        return a.purpose
    # Another file of the session named ("Now update `lib.rs`" before an edit of `main.rs`).
    touched = {p.rsplit("/", 1)[-1].lower() for p in (*a.modified, *a.read)}
    names_other = any(name.lower() in touched for name in FILE_NAME_RE.findall(a.purpose))
    return "" if a.purpose_spent or names_other else a.purpose


def _look_for(a: Analysis, path: str) -> str:
    """Why `path` is read, from the agent's "let me check X to understand Y": words naming the
    file are about it; words naming another file are not ("Let me check `a.py` to understand X.
    Let me also read `b.py` to understand Y." → Read `a.py`, Read `b.py`: each is read for its own
    reason); words naming no file are about the reads after them ("explore the referenced
    files"). Taken when the read is called: by its result the agent may have said more."""
    if not a.look:
        return ""
    base = path.rstrip("/").rsplit("/", 1)[-1].lower()
    said = a.look.lower()
    if base and re.search(rf"(?<![\w.-]){re.escape(base)}(?![\w-])", said):
        return a.look
    return "" if FILE_NAME_RE.search(a.look) else a.look


def _call_shown(name: str, command: str | None, path: str, args: dict[str, Any]) -> str:
    """A tool call as a reader recognises it: its command, its file, or its main argument."""
    if command:
        shown = f"`{one_line(command_shown(clean_command(command), command), 120)}`"
        # SWE-agent names its tools after the command they run: `python x.py`, not python `python x.py`.
        return shown if command.split(maxsplit=1)[0] == name else f"{name} {shown}"
    if path:
        return f"{name} `{path}`"
    keys = ("query", "url", "pattern", "command", "file_name", "search_term")
    main = next((v for k, v in args.items() if k in keys and isinstance(v, str)), "")
    return f"{name} `{one_line(main, 100)}`" if main.strip() else name


# Files no test or compiler looks at: an edit to one asks for no re-run of the checks.
NO_CHECK_RE = re.compile(
    r"(?i)(?:^|/)(?:\.[\w-]*ignore|\.editorconfig|license|changelog|readme)$|\.(?:md|rst|txt|adoc)$"
)


def _record_edit(a: Analysis, name: str, path: str, args: dict[str, Any], purpose: str) -> None:
    a.wrapping_up = False
    work = a.files.setdefault(path, FileWork(path))
    work.edits += 1
    work.units.add(a.unit)
    work.last_event = a.clock
    if path not in a.edits_since_commit:
        a.edits_since_commit.append(path)
    if path not in a.edits_since_test and not NO_CHECK_RE.search(path):
        a.edits_since_test.append(path)
    work.deleted = False
    if purpose and purpose not in work.purposes:
        work.purposes.append(purpose)
    edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
    added_lines: list[str] = []
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        # Each agent's editor names the two texts its own way (see `_change_made`).
        new = next((edit[k] for k in ("new_string", "newText", "new_str", "replace") if k in edit), None)
        if isinstance(new, str):
            old = next((edit[k] for k in ("old_string", "oldText", "old_str", "search") if k in edit), "")
            old = old if isinstance(old, str) else ""
            work.added.extend(t for t in _added_identifiers(old, new) if t not in work.added)
            kept = {line.strip() for line in old.splitlines()}
            added_lines += [line.strip() for line in new.splitlines() if line.strip() and line.strip() not in kept]
    # A short change reads better as its code than as the names in it: `config :app, Endpoint,
    # secret_key_base: String.duplicate("x", 4)` says what `String.duplicate`, `x` cannot.
    code = " ".join(added_lines)
    work.latest_code = code if 0 < len(code) <= MAX_QUOTED_CODE_CHARS and "`" not in code else ""
    # An editor's `create` sub-command carries the whole file as `file_text`.
    content = next((args[k] for k in ("content", "file_text") if isinstance(args.get(k), str)), None)
    if is_create_tool(name) or content is not None:
        work.written = True
        content = content or ""
        defined = [n for n in DEFINES_RE.findall(content[:50_000]) if n not in work.added]
        # What the file offers first; its tests only when that is all it defines.
        work.added.extend([n for n in defined if not n.lower().startswith("test")] or defined)


CLEAN_TREE_RE = re.compile(r"(?i)nothing to commit,? \(?working (?:tree|directory) clean")


def _record_rejected_edit(a: Analysis, name: str, path: str, output: str, purpose: str) -> None:
    """An edit the tool refused: counted apart, its error lines kept, its purpose carried to
    the retry."""
    work = a.files.get(path)
    if work is not None:
        work.rejected += 1
    else:
        a.files[path] = FileWork(path, rejected=1, last_event=a.clock)
    if purpose and path not in a.retry_purposes:
        a.retry_purposes[path] = purpose
    lines = error_lines_of(strip_ansi(output[:3000]), is_error=True)
    said = next((line for line in lines if not EDIT_REJECTED_RE.search(line)), "")
    first = one_line(next((s for s in sentences(output) if EDIT_REJECTED_RE.search(s)), ""), 140)
    said = re.sub(r"^\s*[-*•]\s+", "", said)
    record = ErrorRecord(one_line(said or first, 200), a.clock, None, tool_key(name))
    record.context = f"edit of `{a.rel(path)}` refused" if said else ""
    a.errors.append(record)


def _completion_call(name: str, command: str | None, args: dict[str, Any]) -> str:
    if command:
        return one_line(command, 120)
    raw = args.get("command") if isinstance(args.get("command"), str) else ""
    return one_line(raw.strip() or name, 120)


_DELETE_CMD_RE = re.compile(r"(?:^|&&|\|\||;|\n)\s*(?:sudo\s+)?(?:git\s+rm|rm|unlink)\s+([^;&|\n]+)")


def _record_deletions(a: Analysis, command: str) -> None:
    """Files a successful `rm` / `git rm` / `unlink` removed: a file written in this range
    and removed again leaves nothing behind; one that was there before is a change to commit."""
    for match in _DELETE_CMD_RE.finditer(command):
        for word in match.group(1).split():
            word = word.strip("\"'")
            if not word or word.startswith("-") or any(c in word for c in "*?$`{}[]<>"):
                continue
            work = next((w for p, w in a.files.items() if p == word or p.endswith("/" + word.lstrip("./"))), None)
            if work is not None:
                work.deleted = True
                work.last_event = a.clock
                if work.written and work.path in a.edits_since_commit:
                    a.edits_since_commit.remove(work.path)
                if work.path in a.edits_since_test:
                    a.edits_since_test.remove(work.path)
            elif "." in word.rsplit("/", 1)[-1] and word not in [d for d, _event in a.deleted]:
                a.deleted.append((word, a.clock))


# A file an issue's description lists as one to create ("- `test/x_test.exs` (new)"): what
# the issue is not done without, however far its other work has gone.
_NEW_OUTPUT_RE = re.compile(r"(?im)^\s*[-*]\s+`?([\w./-]+\.\w+)`?\s*\((?:new|create|created|to create|add|added)\)")


def _record_tracker(a: Analysis, command: str, cmd_line: str, output: str, ok: bool) -> None:
    head = strip_ansi(output[:20_000])
    for match in ISSUE_TITLE_RE.finditer(head):
        issue = a.issues.get(match.group(1))
        if issue is None:
            issue = a.issues[match.group(1)] = Issue(match.group(1), "", a.clock)
        issue.title = issue.title or one_line(match.group(2), 100)
        shown_status = (match.group(3) or "").upper()
        for word, status in (("IN_PROGRESS", "in_progress"), ("CLOSED", "closed"), ("OPEN", "open")):
            if word in shown_status.replace(" ", "_"):
                issue.status, issue.event = status, a.clock
                break
        description = ISSUE_DESC_RE.search(head, match.end(), match.end() + 600)
        if description and not issue.description:
            # "## Problem\nThe panel is…": a heading line flattened into the text reads as noise.
            issue.description = one_line(re.sub(r"(?m)^\s*#+\s+[^\n]*\n", "", description.group(1)), 300)
        if not issue.outputs:
            following = ISSUE_TITLE_RE.search(head, match.end())
            shown = head[match.end() : following.start() if following else len(head)]
            issue.outputs = list(dict.fromkeys(_NEW_OUTPUT_RE.findall(shown)))[:8]
    _record_issue_rows(a, head)  # after the headers: the children of an issue shown are its family
    if not ok:
        return
    for match in STATUS_RE.finditer(cmd_line):
        _set_issue(a, match.group(1), match.group(2))
    for match in REOPEN_RE.finditer(cmd_line):
        _set_issue(a, match.group(1), "open")
    for match in CLOSE_RE.finditer(cmd_line):
        for issue_id in match.group(1).split():
            if issue_id.startswith("-") or "=" in issue_id or '"' in issue_id:
                break  # options follow the ids
            _set_issue(a, issue_id, "closed")


# A row of a tracker's listing: `bd list` ("○ proj-gqc.7 [● P2] [task] - Title (blocked by: …)"),
# the children under `bd show` ("↳ ✓ proj-fum.1: Title ● P2"), `bd ready` ("3. [● P2] [task]
# proj-fum.2: Title": ready is open with nothing blocking it).
_ISSUE_ROW_RE = re.compile(
    r"^\s*(?:↳\s*)?([○◐●✓✔])\s+([A-Za-z][\w-]*-[\w.]+)(?::\s+|(?:\s+\[[^\]]*\])+\s+-\s+)(.+?)\s*$", re.MULTILINE
)
_READY_ROW_RE = re.compile(r"^\s*\d+\.\s+(?:\[[^\]]*\]\s+)+([A-Za-z][\w-]*-[\w.]+):\s+(.+?)\s*$", re.MULTILINE)
_ROW_STATUS = {"○": "open", "◐": "in_progress", "●": "blocked", "✓": "closed", "✔": "closed"}
_BLOCKED_BY_RE = re.compile(r"\(blocked by:\s*([^)]*?)(?:,\s*blocks:[^)]*)?\)")


def _record_issue_rows(a: Analysis, head: str) -> None:
    """Issues a tracker listed in rows: the status it shows for the issues already in play, and
    the other issues of their family (children of the same epic), so the next one can be named.
    An unrelated issue of the project's backlog is no part of this work."""
    rows = [(m.group(2), _ROW_STATUS[m.group(1)], m.group(3)) for m in _ISSUE_ROW_RE.finditer(head)]
    rows += [(m.group(1), "", m.group(2)) for m in _READY_ROW_RE.finditer(head)]
    families = {issue_id.split(".")[0] for issue_id in a.issues}
    for issue_id, status, rest in rows:
        blocked = _BLOCKED_BY_RE.search(rest)
        title = one_line(re.sub(r"\s*(?:\([^)]*\)|●\s*P\d)\s*$", "", _BLOCKED_BY_RE.sub("", rest)).strip(), 100)
        issue = a.issues.get(issue_id)
        if issue is None:
            if issue_id.split(".")[0] not in families:
                continue
            issue = a.issues[issue_id] = Issue(issue_id, status or "open", a.clock, title=title)
        issue.title = issue.title or title
        if blocked is not None:
            issue.blocked_by = [b.strip() for b in blocked.group(1).split(",") if b.strip()]
        if status and status != issue.status:
            # Closed before this range, as far as it shows: no unit of its work to claim it.
            issue.status, issue.event = status, a.clock


def _set_issue(a: Analysis, issue_id: str, status: str) -> None:
    issue = a.issues.setdefault(issue_id, Issue(issue_id, status, a.clock))
    issue.status, issue.event = status, a.clock
    if status == "closed":
        issue.unit = a.unit - 1 if a.wrapping_up else a.unit
    elif status == "in_progress":
        a.wrapping_up = False


def _record_git(a: Analysis, command: str, output: str) -> None:
    for branch, sha, subject in commits_in_output(command, output):
        if not any(c.hash == sha for c in a.commits):
            a.commits.append(Commit(sha, one_line(subject, 150), branch, a.clock, a.unit))
            a.branch = branch
            a.unit += 1
            a.wrapping_up = True
            a.edits_since_commit = []
    for sha, destination in pushes_in_output(command, output):
        a.pushes.append((destination, a.clock))
        for commit in a.commits:
            if not commit.pushed_to:
                commit.pushed_to = destination
        if sha and not any(c.hash.startswith(sha) or sha.startswith(c.hash) for c in a.commits):
            a.commits.append(Commit(sha, "", destination, a.clock, a.unit, pushed_to=destination))


_CD_RE = re.compile(r"^\s*cd\s+(\"[^\"]+\"|'[^']+'|[^\s;&|]+)\s*(?:&&|;|$)")
_GIT_STATUS_RE = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?status\b([^;&|\n]*)")
# `git diff --stat` of the working tree (or of the index with --cached): not of a revision range.
_GIT_DIFF_STAT_RE = re.compile(r"\bgit\s+diff\s+((?:-{1,2}[\w-]+(?:=\S+)?\s*)*)(?=$|[;&|\n>2])")
_STATUS_HEADER_RE = re.compile(
    r"^(Changes to be committed|Changes not staged for commit|Untracked files|Unmerged paths):\s*$"
)
_STATUS_ENTRY_RE = re.compile(r"^\s+(?:(modified|new file|deleted|renamed|typechange|both modified):\s+)?(\S.*?)\s*$")
_SHORT_STATUS_RE = re.compile(r"^([ MADRCU?!]{2}) (\S.*?)\s*$")
_DIFF_STAT_RE = re.compile(r"^\s*(\S[^|]*?)\s+\|\s+(?:\d+|Bin\b)")


def _follow_cd(a: Analysis, command: str) -> None:
    """The directory a leading `cd` moves the shell to: git prints paths relative to it."""
    match = _CD_RE.match(command)
    if not match:
        return
    target = os.path.expanduser(match.group(1).strip("\"'"))
    if target.startswith("/"):
        a.cwd = os.path.normpath(target)
    elif a.cwd:
        a.cwd = os.path.normpath(os.path.join(a.cwd, target))


def _tree_path(a: Analysis, shown: str, *, from_root: bool = False) -> str:
    """A path as git printed it, as the file the editor calls name when they name it."""
    shown = shown.strip("\"'")
    bare = re.sub(r"^(?:\.\.?/)+", "", shown)
    if not from_root and a.cwd and not shown.startswith("/"):
        joined = os.path.normpath(os.path.join(a.cwd, shown))
        if joined in a.files or joined in a.modified:
            return joined
    known = [*a.files, *a.modified]
    match = next((p for p in known if p == bare or p.endswith("/" + bare)), None)
    if match:
        return match
    if not from_root and a.cwd and not shown.startswith("/") and a.root and a.cwd.startswith(a.root):
        return os.path.normpath(os.path.join(a.cwd, shown)) + ("/" if shown.endswith("/") else "")
    return bare or shown


def _tree_in_output(a: Analysis, command: str, output: str) -> dict[str, str] | None:
    """What `git status` / `git diff --stat` printed about the working tree, path -> state,
    or None when the command printed neither."""
    status = _GIT_STATUS_RE.search(command)
    diff = _GIT_DIFF_STAT_RE.search(command)
    stat = bool(diff and "--stat" in diff.group(1))
    if not status and not stat:
        return None
    short = bool(status and re.search(r"(?:^|\s)(?:-\w*s\w*|--short|--porcelain\S*)\b", status.group(1)))
    porcelain = bool(status and "--porcelain" in status.group(1))
    staged_stat = bool(diff and re.search(r"--(?:cached|staged)\b", diff.group(1)))
    entries: dict[str, str] = {}
    section = ""
    for line in strip_ansi(output[:20_000]).splitlines():
        header = _STATUS_HEADER_RE.match(line.strip())
        if header:
            section = header.group(1)
            continue
        if not line.strip():
            continue
        if section and line[:1] in ("\t", " ") and not line.strip().startswith("("):
            entry = _STATUS_ENTRY_RE.match(line)
            if entry:
                label, shown = entry.group(1) or "", entry.group(2).split(" -> ")[-1]
                state = (
                    "untracked"
                    if section == "Untracked files"
                    else "staged"
                    if section == "Changes to be committed"
                    else "deleted"
                    if label == "deleted"
                    else "modified"
                )
                entries[_tree_path(a, shown)] = state
                continue
        section = "" if not line[:1].isspace() else section
        if short and status:
            entry = _SHORT_STATUS_RE.match(line)
            if entry:
                code, shown = entry.group(1), entry.group(2).split(" -> ")[-1]
                state = (
                    "untracked"
                    if code == "??"
                    else "deleted"
                    if "D" in code
                    else "staged"
                    if code[1] == " "
                    else "modified"
                )
                if code != "!!":
                    entries[_tree_path(a, shown, from_root=porcelain)] = state
                continue
        if stat:
            entry = _DIFF_STAT_RE.match(line)
            if entry and not re.match(r"^\d+ files? changed", line.strip()):
                entries[_tree_path(a, entry.group(1), from_root=True)] = "staged" if staged_stat else "modified"
    if not status and stat and a.tree is not None:
        # A diff shows the tracked changes of one side only: the rest of the tree stands.
        side = "staged" if staged_stat else "modified"
        kept = {p: s for p, s in a.tree.items() if s != side and p not in entries}
        entries = {**kept, **entries}
    return entries


def _record_tree(a: Analysis, command: str, output: str, *, committed: bool) -> None:
    """git's own view of the working tree: the latest status replaces what the edits suggested;
    a commit after it takes away what it committed."""
    if committed and a.tree:
        taken = _committed_paths(a, command)
        a.tree = {
            path: state
            for path, state in a.tree.items()
            if not (
                state == "staged"
                or (taken is True and state != "untracked")
                or (isinstance(taken, set) and any(path == t or path.startswith(t.rstrip("/") + "/") for t in taken))
            )
        }
    if CLEAN_TREE_RE.search(output[:5000]) and _GIT_STATUS_RE.search(command):
        a.tree, a.tree_event, a.tree_source = {}, a.clock, "git status"
        return
    entries = _tree_in_output(a, command, output)
    if entries is not None:
        a.tree, a.tree_event = entries, a.clock
        a.tree_source = "git status" if _GIT_STATUS_RE.search(command) else "git diff --stat"


# A package manager adding or removing a dependency rewrites its manifest and lock file.
_MANIFEST_CMD_RE = re.compile(
    r"(?:^|&&|;|\|\|)\s*(npm\s+(?:install|i|add|uninstall|remove|rm)|yarn\s+(?:add|remove)|pnpm\s+(?:add|remove|install|i)|"
    r"cargo\s+(?:add|remove)|poetry\s+(?:add|remove)|uv\s+(?:add|remove)|go\s+get|bundle\s+add)((?:\s+(?!\d*>)[^\s;&|>]+)*)"
)
_MANIFESTS = {
    "npm": ("package.json", "package-lock.json"),
    "yarn": ("package.json", "yarn.lock"),
    "pnpm": ("package.json", "pnpm-lock.yaml"),
    "cargo": ("Cargo.toml", "Cargo.lock"),
    "poetry": ("pyproject.toml", "poetry.lock"),
    "uv": ("pyproject.toml", "uv.lock"),
    "go": ("go.mod", "go.sum"),
    "bundle": ("Gemfile", "Gemfile.lock"),
}


_RESTORE_RE = re.compile(r"\bgit\s+(?:restore|checkout)\s+([^;&|\n]+)")
_STASH_RE = re.compile(r"\bgit\s+stash(?:\s+(push|save|pop|apply|drop|list|show|clear))?\b")


def _record_discard(a: Analysis, command: str) -> None:
    """Changes a successful git command put back or away: `git restore x` and `git checkout --
    x` undo the edits of x; `git stash` puts every tracked change away, `git stash pop` (or
    `apply`) brings the latest back. Without this the handoff lists discarded edits as
    uncommitted, or a stash as a clean tree."""
    for match in _RESTORE_RE.finditer(command):
        words = [w.strip("\"'") for w in match.group(1).split()]
        if match.group(0).split()[1] == "checkout" and "--" not in words:
            continue  # `git checkout main` switches branch: not a discard this can follow
        if any(w in ("--staged", "-S") for w in words) and not any(w in ("--worktree", "-W") for w in words):
            continue  # unstaged, still changed
        paths = [w for w in words if not w.startswith("-")]
        if not paths:
            continue
        everything = any(p in (".", ":/") for p in paths)
        targets = {_tree_path(a, p) for p in paths}

        def discarded(path: str, targets: set[str] = targets, everything: bool = everything) -> bool:
            return everything or any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)

        a.edits_since_commit = [p for p in a.edits_since_commit if not discarded(p)]
        a.command_changes = [c for c in a.command_changes if not discarded(c[0])]
        if a.tree is not None:
            a.tree = {p: st for p, st in a.tree.items() if st == "untracked" or not discarded(p)}
    for match in _STASH_RE.finditer(command):
        action = match.group(1) or "push"
        if action in ("push", "save"):
            tracked = {p: st for p, st in (a.tree or {}).items() if st != "untracked"}
            a.stashed.append((a.edits_since_commit, tracked))
            a.edits_since_commit = []
            if a.tree is not None:
                a.tree = {p: st for p, st in a.tree.items() if st == "untracked"}
        elif action in ("pop", "apply") and a.stashed:
            edits, tracked = a.stashed.pop() if action == "pop" else a.stashed[-1]
            a.edits_since_commit = list(dict.fromkeys([*a.edits_since_commit, *edits]))
            if a.tree is not None:
                a.tree = {**a.tree, **tracked}
        elif action == "drop" and a.stashed:
            a.stashed.pop()
        elif action == "clear":
            a.stashed = []


def _record_manifest_change(a: Analysis, command: str) -> None:
    """The manifest and lock file a successful `npm install <pkg>` (`cargo add`, `go get`, …)
    rewrote: changes to commit that no editor call shows."""
    for match in _MANIFEST_CMD_RE.finditer(command):
        if not any(not word.startswith("-") for word in match.group(2).split()):
            continue  # `npm install` alone installs what the manifest lists: it changes neither
        tool = match.group(1).split()[0]
        shown = one_line(f"{match.group(1)}{match.group(2)}", 80)
        for name in _MANIFESTS[tool]:
            path = os.path.join(a.cwd, name) if a.cwd else name
            a.command_changes = [c for c in a.command_changes if c[0] != path]
            a.command_changes.append((path, a.clock, shown))


_GIT_ADD_RE = re.compile(r"\bgit\s+add\s+([^;&|\n]+)")


def _committed_paths(a: Analysis, command: str) -> set[str] | bool:
    """What a committing command took: the paths it `git add`-ed, or True for everything
    tracked (`git add -A`, `git add .`, `git commit -a`)."""
    taken: set[str] = set()
    for match in _GIT_ADD_RE.finditer(command):
        words = [w.strip("\"'") for w in match.group(1).split()]
        if any(w in ("-A", "--all", ".", ":/", "-u", "--update") for w in words):
            return True
        taken.update(_tree_path(a, w) for w in words if not w.startswith("-"))
    if re.search(r"\bgit\s+commit\s+(?:[^;&|\n]*\s)?-(?:a\w*|-all)\b", command):
        return True
    return taken


def uncommitted_changes(a: Analysis) -> list[tuple[str, str]] | None:
    """(path, state) of what is not committed at the end of the range: the latest `git status`
    (or `git diff --stat`) less what commits took since, with the files edited after it; None
    when git never showed the working tree in the range."""
    if a.tree is None:
        return None
    changes = dict(a.tree)
    for path, event, command in a.command_changes:
        if event > a.tree_event and event > max([0, *(c.event for c in a.commits)]):
            changes.setdefault(path, f"changed by `{command}`")
    for path in a.edits_since_commit:
        work = a.files.get(path)
        if work is not None and work.last_event > a.tree_event and path not in changes:
            changes[path] = "edited"
    return list(changes.items())


def on_tool_result(a: Analysis, block: dict[str, Any]) -> None:
    name, command, path, description, args = a.pending.pop(block.get("tool_use_id", ""), ("", None, None, "", {}))
    is_error = bool(block.get("is_error"))
    output = tool_result_text(block.get("content"))
    step = a.pending_steps.pop(block.get("tool_use_id", ""), None)
    if step is not None:
        _settle_step(step, name, command, args, output, is_error)
    if is_tool_rejection(output):
        if "sibling tool call" not in output.lower():
            what = (
                f"{name} of `{a.rel(path)}`"
                if path
                else f"`{one_line(clean_command(command), 100)}`"
                if command
                else f"{name} call"
                if name
                else "a tool call"
            )
            said = one_line(sentences(output)[0], 110) if sentences(output) else ""
            a.rejections.append(f'{what} ("{said}")' if said else what)
        return
    editing = bool(path) and is_edit_call(name, args)
    purpose = a.call_purposes.pop(block.get("tool_use_id", ""), "")
    if editing and not is_error and EDIT_REJECTED_RE.search(output[:1000]):
        _record_rejected_edit(a, name, path, output, purpose)
        return
    if is_completion_tool(name):
        a.submitted = (_completion_call(name, command, args), output)
        return
    if not is_error:
        a.tool_ok[tool_key(name)] = a.clock
        if path and not editing and purpose and path not in a.read_purposes:
            a.read_purposes[path] = purpose
    if editing and not is_error:
        call_text = _call_text(None, path, args)
        if purpose and _code_named(purpose) and not _carries(_code_named(purpose), call_text):
            purpose = ""  # "to use `:auto` mode" said of an edit that put something else in
        # A refused edit's words are the purpose of the retry that went through.
        purpose = a.retry_purposes.pop(path, "") or purpose
        if step is not None:
            step.purpose = purpose
        # Counted when it succeeded: a failed edit changed nothing.
        _record_edit(a, name, path, args, purpose)
        if a.intended:
            change = _change_made(name, args)[0]
            _settle_intents(a, f"Edited `{a.rel(path)}`" + (f" ({change})" if change else ""), call_text)
    elif command is not None and a.intended and not is_probe_command(command):
        _settle_intents(a, f"Ran `{one_line(clean_command(command), 100)}`", command)
    cmd: Command | None = None
    if command is not None:
        ok, detail = _outcome(output, is_error)
        if is_probe_command(command):
            # A grep without matches "fails" with status 1: an answer, not a failure.
            ok, detail = True, ""
        clean_tree = "git" in command and bool(CLEAN_TREE_RE.search(output[:5000]))
        if clean_tree:
            # git's own word that nothing is pending: a `git commit` that "fails" on it had
            # nothing left to commit, and no edit before it is uncommitted any more.
            a.edits_since_commit = []
            a.git_seen = True
            if not ok and GIT_COMMIT_RE.search(command):
                ok, detail = True, "nothing to commit, working tree clean"
        cmd_line = clean_command(command)
        cmd = Command(cmd_line, command, ok, detail, len(a.commands), a.clock, one_line(description, 120))
        cmd.output_head = strip_ansi(output[:300]) if not ok else ""
        a.commands.append(cmd)
        if TRACKER_CMD_RE.search(command):
            _record_tracker(a, command, cmd_line, output, ok)
        # Set after the tracker: starting the next issue ends the wrap-up of the last commit.
        cmd.unit = a.unit - 1 if a.wrapping_up and a.unit > 0 else a.unit
        if ok and ("git" in command):
            a.git_seen = True
            commits_before = len(a.commits)
            _follow_cd(a, command)
            _record_git(a, command, output)
            _record_tree(a, command, output, committed=len(a.commits) > commits_before)
            _record_discard(a, command)
        else:
            _follow_cd(a, command)
        if ok:
            _record_manifest_change(a, command)
        if ok:
            _record_deletions(a, command)
        if TEST_RE.search(cmd_line):
            a.tests_seen = True
            if ok:
                a.edits_since_test = []
    first = next((line.strip() for line in strip_ansi(strip_error_tags(output)).splitlines() if line.strip()), "")
    for line in command_error_lines(name, command, output, is_error=is_error):
        if cmd is not None:
            cmd.errors.append(line)
        record = ErrorRecord(line, a.clock, cmd, tool_key(name), resolved=cmd is not None and cmd.ok)
        if cmd is None and first and first != line and not first.startswith(line[:40]):
            record.context = one_line(first, 140)  # which call failed ("command failed for pattern X")
        a.errors.append(record)


# What an agent harness appends to every observation (SWE-agent): no part of what a run printed.
_HARNESS_TRAILER_RE = re.compile(r"^\((?:Open file|Current directory):.*\)$|^bash-\$$")
BOOKKEEPING_CMD_RE = re.compile(r"^\s*(?:cd \S+ && )?(?:git|bd|gh|glab|jira|linear)\s")
_EDITOR_BODY_RE = re.compile(r"^edit\s+(\d+:\d+)\s*\n(.*?)\n?end_of_edit\s*$", re.DOTALL)
_COMMENT_RE = re.compile(r"^\s*(?:#|//|/\*+|\*|--|<!--)\s*(.*?)\s*(?:\*/|-->)?\s*$")


def _settle_step(step: Step, name: str, command: str | None, args: dict[str, Any], output: str, is_error: bool) -> None:
    """A call's outcome, and what it did: the change an edit made, the tally of a check."""
    if is_tool_rejection(output) or (step.kind == "change" and EDIT_REJECTED_RE.search(output[:1000])):
        step.ok, step.what = False, "refused"
        return
    if step.kind == "change":
        step.ok = not is_error
        step.what, step.empty = _change_made(name, args) if step.ok else ("", False)
        return
    if command is not None:
        ok, detail = _outcome(output, is_error)
        if is_probe_command(command):
            ok, detail = True, ""
        step.ok = ok
        if step.check or not ok:
            step.what = detail
        elif not BOOKKEEPING_CMD_RE.match(clean_command(command)):
            step.what = _printed(output)  # git and trackers say what they did elsewhere
        return
    step.ok = not is_error


def _printed(output: str) -> str:
    """A short output as it read (a computed value, "Done"); a long one is no one-line fact."""
    lines = [line.strip() for line in strip_ansi(output).splitlines() if line.strip()]
    lines = [line for line in lines if not _HARNESS_TRAILER_RE.match(line)]
    if not lines or len(lines) > 2 or any(len(line) > 100 for line in lines):
        return ""
    return one_line(" | ".join(lines), 140)


def _change_made(name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """(what an edit or write changed, whether it left the file empty): the comment it added,
    or its new text when short, or the names it introduced."""
    content = args.get("content", args.get("file_text"))
    if isinstance(content, str):
        lines = [line for line in content.splitlines() if line.strip()]
        if not lines:
            return "", True
        defined = DEFINES_RE.findall(content[:50_000])[:3]
        names = f", defining {', '.join(f'`{n}`' for n in defined)}" if defined else ""
        return f"written, {len(lines)} lines{names}", False
    raw = args.get("command") if isinstance(args.get("command"), str) else ""
    body = _EDITOR_BODY_RE.match(raw.strip()) if raw else None
    replaces = any(isinstance(args.get(k), str) for k in ("new_string", "newText", "new_str", "replace"))
    if is_create_tool(name) and not body and not replaces:
        return "", True  # an editor's `create x.py`: the file exists, its content is still to come
    pairs: list[tuple[str, str]] = []
    for edit in args.get("edits") if isinstance(args.get("edits"), list) else [args]:
        if isinstance(edit, dict):
            new = next((edit[k] for k in ("new_string", "newText", "new_str", "replace") if k in edit), None)
            old = next((edit[k] for k in ("old_string", "oldText", "old_str", "search") if k in edit), None)
            if isinstance(new, str):
                pairs.append((old if isinstance(old, str) else "", new))
    where = ""
    if body:
        where = f"lines {body.group(1)} replaced"
        pairs.append(("", body.group(2)))
    old_lines = {line.strip() for old, _new in pairs for line in old.splitlines()}
    added = [line.strip() for _old, new in pairs for line in new.splitlines() if line.strip()]
    added = [line for line in added if line not in old_lines]
    if not added:
        return where or "lines removed", False
    count = f"{len(added)} new line{'s' if len(added) > 1 else ''}"
    comments = [m.group(1) for m in map(_COMMENT_RE.match, added) if m and len(m.group(1)) >= 12]
    if comments:
        said = f'{count}, commented "{one_line(comments[0], 120)}"'
    elif len(" ".join(added)) <= 100:
        said = "adds `" + one_line(" ".join(added), 100).replace("`", "'") + "`"
    else:
        names = [n for n in _added_identifiers("\n".join(old_lines), "\n".join(added)) if len(n) >= 5][:3]
        said = count + (f" ({', '.join(f'`{n}`' for n in names)})" if names else "")
    return f"{where}: {said}" if where else said, False


def _reconcile(a: Analysis) -> None:
    """Settle every failure on what happened after it: fixed (and how) or still open."""
    by_signature: dict[tuple[str, ...], list[Command]] = {}
    for cmd in a.commands:
        # A chain is a run of each check in it: `git add -A && git commit` commits.
        for signature in dict.fromkeys(command_signatures(cmd.command)):
            by_signature.setdefault(signature, []).append(cmd)
    for cmd in a.commands:
        if cmd.ok:
            continue
        later = [c for c in by_signature.get(command_signature(cmd.command), []) if c.index > cmd.index]
        if TEST_RE.search(cmd.command):
            # A check is fixed only by a run of its own targets or more: `mix test b.exs`
            # passing leaves `mix test a.exs` failing.
            later = [c for c in a.commands[cmd.index + 1 :] if c.full == cmd.full or run_covers(c.command, cmd.command)]
        fix = next((c for c in later if c.ok), None)
        if fix is None or any(not c.ok for c in later if c.index > fix.index and c.full == cmd.full):
            continue
        cmd.fixed_by = fix
        cmd.fix_notes.append(_what_fixed(a, cmd, fix))
    for cmd in a.commands:
        if cmd.ok:
            continue
        # What the agent concluded from this failure, before its next attempt.
        following = [c for c in by_signature.get(command_signature(cmd.command), []) if c.index > cmd.index]
        until = following[0].event if following else a.clock + 1
        cmd.diagnosis = next(
            (n.text for n in a.notes if cmd.event < n.event < until and n.kind == "diagnosis"),
            "",
        )
    for error in a.errors:
        if error.command is not None:
            if error.command.ok:
                # Printed by a command that did not fail: settled only by a later clean run.
                cmd = error.command
                later = [c for c in by_signature.get(command_signature(cmd.command), []) if c.index > cmd.index]
                clean = next((c for c in later if c.ok and not c.errors), None)
                error.resolved = clean is not None
                error.how = "a later run printed no error" if clean else ""
            elif error.command.fixed_by is not None:
                error.resolved, error.how = True, "; ".join(error.command.fix_notes)
        elif a.tool_ok.get(error.tool, 0) > error.event:
            # A file tool that failed (old_string not found) and worked again later.
            error.resolved, error.how = True, f"a later {error.tool} call succeeded"


def _what_fixed(a: Analysis, failed: Command, fix: Command) -> str:
    """What changed between a failure and the later success of the same check: the part of the
    retry that is new (`git add -f x` before the same `git commit`), the commands run in between
    (`npm install x`), the files edited in between. "The retry succeeded" alone hides the fix
    from a reader who will meet the same failure again."""
    old_parts = chain_parts(failed.command)
    old_words = {word for part in old_parts for word in part.split()}
    # A part with a word the failed line lacks (a flag, a file), other than the check itself.
    new_parts = [
        part
        for part in chain_parts(fix.command)
        if part not in old_parts
        and not set(part.split()) <= old_words
        and command_signatures(part)
        and command_signature(part) != command_signature(fix.command)
    ]
    # What ran in between and changed something: not a look, a tracker update, another attempt
    # at a check, or a multi-line script cut at its first line.
    between = [
        c.command
        for c in a.commands[failed.index + 1 : fix.index]
        if c.ok
        and command_signatures(c.command)
        and not is_probe_command(c.command)
        and not TRACKER_CMD_RE.search(c.command)
        and not TEST_RE.search(c.command)
        and command_signature(c.command) != command_signature(failed.command)
        and c.command.count('"') % 2 == 0
        and c.command.count("'") % 2 == 0
    ]
    edited = [
        w.path for w in sorted(a.files.values(), key=lambda w: w.last_event) if failed.event < w.last_event < fix.event
    ]
    changes = [f"`{one_line(command, 100)}`" for command in list(dict.fromkeys(between))[-2:]]
    if edited:
        changes.append("edits to " + ", ".join(f"`{a.rel(p)}`" for p in edited[-3:]))
    after = " and ".join(changes)
    if fix.command == failed.command:
        return f"passed after {after}" if after else "a later run passed"
    outcome = f"`{one_line(fix.shown, 120)}` succeeded"
    if new_parts:
        added = " and ".join(f"`{one_line(part, 100)}`" for part in new_parts[:2])
        outcome = f"the retry added {added}, then {outcome}"
    return f"after {after}, {outcome}" if after else outcome


# A step an intent puts after the one being taken: still ahead once that one is done.
LATER_STEP_RE = re.compile(r"(?i)\b(then|after that|afterwards|once (?:that|this|it)\b|and finally)\b")


WAITING_RE = re.compile(
    r"(?i)^(?:now,? |ok,? )?(?:let me|i'll|let's)\s+(?:just |now )?(?:wait|sleep|check (?:the |on )?(?:output|progress|status))\b"
    r"|^still (compiling|running|waiting)\b"
)


def _telling(text: str, *, guesses: bool = False) -> str:
    """An assistant message without its narration of waiting (and its guesses, unless
    `guesses`); what it was about to do stays."""
    return " ".join(
        s
        for s in condense(text)
        if not WAITING_RE.search(s)
        and (guesses or not SPECULATION_RE.match(s))
        # "Now run tests." says nothing; "Let me check `project.ex` for X" names the next move.
        and not (JUNK_INTENT_RE.search(s) and not ANCHOR_RE.search(s))
        and not (is_sign_off(s) and not ANCHOR_RE.search(s))
    )


# What a planned step does, by its verb: the kind of call that carries it out (see `Step.kind`).
_STEP_VERBS = (
    ("look", re.compile(r"(?i)\b(examine|inspect|open|read|look|check|review|view|search|find|explore)\b")),
    (
        "change",
        re.compile(
            r"(?i)\b(edit|fix|correct|add|change|update|modify|implement|write|create|remove|replace|refactor)\b"
        ),
    ),
    ("run", re.compile(r"(?i)\b(run|test|execute|build|compile|reproduce|verify)\b")),
)
_CODE_SPAN_RE = re.compile(r"`([^`]{3,})`")


def _carried_out(a: Analysis, sentence: str, event: int) -> bool:
    """A planned step ("I will then examine the file and correct it") that the calls made after
    it carried out: the file it names opened or edited, the command it names run, or, when it
    names neither, a call of each kind its verbs ask for (a look, a change, a run)."""
    later = LATER_STEP_RE.search(sentence)
    step_text = sentence[later.end() :] if later else sentence
    calls = [step for step in a.steps if step.event > event and step.ok is not False]
    kinds = {kind for kind, verb in _STEP_VERBS if verb.search(step_text)}
    if not calls or not kinds:
        return False
    names = [name.lower() for name in FILE_NAME_RE.findall(step_text)]
    commands = [c for c in _CODE_SPAN_RE.findall(step_text) if " " in c.strip() and c.lower() not in names]

    def done(kind: str, steps: list[Step]) -> bool:
        return any(step.kind == kind or (kind == "look" and step.kind == "change") for step in steps)

    if commands and not all(any(command in step.call for step in calls) for command in commands):
        return False
    for name in names:
        on_file = [step for step in calls if name in step.call.lower() or step.path.lower().endswith(name)]
        if not all(done(kind, on_file) for kind in kinds - {"run"}):
            return False
    return all(done(kind, calls) for kind in kinds if not names or kind == "run")


def analyze(messages: list[Msg], file_ops: FileOps | None = None) -> Analysis:
    """`file_ops`: the file operations of `messages` when the caller extracted them already."""
    a = Analysis()
    ops = file_ops if file_ops is not None else extract_file_ops(messages)
    a.modified, a.read = list(ops.modified), list(ops.read)
    a.root = _find_root(a)
    a.final_text = ""
    for msg in messages:
        a.clock += 1
        if msg.role == "user":
            on_user_message(a, msg)
        for block in msg.blocks:
            a.clock += 1
            kind = block.get("type")
            if kind == "text" and msg.role == "assistant":
                on_assistant_text(a, text_of(block, "text"))
            elif kind in ("tool_use", "toolCall", "server_tool_use"):
                on_tool_use(a, block)
            elif kind == "tool_result":
                on_tool_result(a, block)
    # The last text of the range is quoted whole as where the work stopped, not as notes.
    _count_calls(a)
    _reconcile(a)
    # Stated just before the range ends: nothing yet contradicts them.
    a.decisions.extend(intent.said for intent in a.intended)
    a.intended = []
    # What the assistant was doing at the cut: intents stated in the latest turn, and only
    # in its final stretch — "now add X" followed by a dozen more tool calls is done already.
    total_tools = len(a.last_tools)
    last = messages[-1] if messages else None
    a.turn_ended = (
        last is not None
        and last.role == "assistant"
        and not any(b.get("type") in ("tool_use", "toolCall", "server_tool_use") for b in last.blocks)
    )
    for text, event, tools_before in a.texts[-3:]:
        if total_tools - tools_before > STALE_INTENT_TOOL_CALLS:
            continue
        # "Next, I will run the script" said with the call that ran it, answered: acted on.
        # A later step it names ("…, then commit") is still ahead.
        acted_on = tools_before < total_tools and not a.pending
        for sentence in condense(text):
            if (INTENT_RE.search(sentence) or NEXT_RE.search(sentence)) and 10 <= len(sentence) <= 400:
                if acted_on and not LATER_STEP_RE.search(sentence):
                    continue
                if _carried_out(a, sentence, event):
                    continue  # "I will then examine the file and correct it": the calls since did
                a.last_intents.append(one_line(sentence))
    said = [t for t in (_telling(text) for text, _event, _tools in a.texts[-2:]) if t]
    latest = a.texts[-1][0] if a.texts else ""
    if latest and not _telling(latest) and _telling(latest, guesses=True):
        # The latest words are a guess ("It seems we found the flag; submitting it"): still
        # the latest; the message before them would read as where the work stopped.
        said = [_telling(latest, guesses=True)]
    if said:
        # A short last word ("Now run tests.") is read with the message before it.
        a.final_text = " … ".join(said[-2:]) if len(said[-1]) < 80 else said[-1]
    a.request_done = _request_done(a)
    return a


# "…you can submit your changes to the code base by simply running the submit command."
HANDOVER_RE = re.compile(r"(?i)\bsubmit\b[^.\n]{0,80}?\bby (?:simply )?running the `?(\w+)`? command\b")


def handover_command(a: Analysis) -> str:
    """The command the task prompt says hands the work over (SWE-agent's `submit`)."""
    for user in a.users:
        match = HANDOVER_RE.search(user.text)
        if match:
            return match.group(1)
    return ""


def _request_done(a: Analysis) -> bool:
    """The range ends inside a turn whose work looks finished: files changed since the latest
    request, every call answered, the last action a success, any failure since followed by a
    passing check, no check owed for the latest edits, nothing announced for later, no todo
    or issue left open. The agent's own report to the user is what is missing."""
    work = [step for step in a.steps if step.kind in ("change", "run")]
    if handover_command(a):
        return False  # the agent says when the task is done, by running that command
    if a.turn_ended or a.submitted is not None or not work or any(step.ok is None for step in a.steps):
        return False
    if not any(step.ok and step.kind == "change" and not step.empty for step in work) or not work[-1].ok:
        return False
    filled = {step.path for step in work if step.kind == "change" and step.ok and not step.empty}
    if any(step.empty and step.path not in filled for step in work):
        return False  # a file created to be written: the writing is still to come
    failures = [index for index, step in enumerate(work) if not step.ok]
    if failures and not any(step.ok and step.check for step in work[failures[-1] + 1 :]):
        return False
    if a.tests_seen and a.edits_since_test:
        return False
    if any(status not in ("completed", "cancelled") for status, _content in a.todos):
        return False
    if any(issue.status == "in_progress" for issue in a.issues.values()):
        return False
    if owed_git_steps(a):
        return False
    return not any(LATER_STEP_RE.search(intent) for intent in a.last_intents)


# "Commit the change, then stop", "commit and push": steps the request names, and git shows.
_ASKED_COMMIT_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bcommit\b(?! message)")
_ASKED_PUSH_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bpush\b")


def owed_git_steps(a: Analysis) -> list[str]:
    """The git steps (commit, push) the latest request asks for and no success since shows. A
    hook that blocks the stop until the work is committed asks it too."""
    requests = [u for u in a.users if u.kind != "chatter" and not u.queued]
    if not requests:
        return []
    latest = requests[-1]
    text = hook_demand(latest.text) if latest.hook else latest.text
    owed = []
    if _ASKED_COMMIT_RE.search(text) and not any(c.event > latest.event for c in a.commits):
        owed.append("commit")
    if _ASKED_PUSH_RE.search(text) and not any(event > latest.event for _where, event in a.pushes):
        owed.append("push")
    return owed


__all__ = [
    "Analysis",
    "Command",
    "Commit",
    "ErrorRecord",
    "Step",
    "FileWork",
    "Issue",
    "Note",
    "UserMessage",
    "analyze",
    "commit_message",
    "handover_command",
    "hook_demand",
    "owed_git_steps",
    "condense",
    "normalize",
    "one_line",
    "similar",
    "uncommitted_changes",
]
