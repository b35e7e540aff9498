"""Offline, deterministic summarizer: a real structured summary built from the messages.

No model and no network: it picks what matters out of the transcript and writes it in the
same format the LLM is asked for. What it keeps is what an agent needs to continue:

- the user's rules, preferences and corrections verbatim (not every "ok" or "did you push?"),
  the first request (the goal), the latest request, and a short list of the ones between;
- concrete progress: files changed (with what was added where the edits say so), tests and
  builds with their outcome, commits with their message, todo items marked completed;
- decisions the assistant stated in its replies (not thinking fragments), latest wins;
- next steps from the todo list, the latest request, unresolved failures and the last plan;
- exact error lines, identifiers, URLs, env values; commands once, in a short list.

Everything is bounded by the output budget, including what a previous summary carried
forward: the least important and oldest items go first, the user's own rules last.
One linear pass, regexes only, so a 100k+ token history takes well under a second.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from compaction.core.fileops import extract_file_ops
from compaction.core.ledger import (
    DECISION_RE,
    MAX_INSTRUCTION_CHARS,
    classify_user_text,
    clean_command,
    clean_user_text,
    command_error_lines,
    command_of,
    error_lines_of,
    instruction_quote,
    is_probe_command,
    is_tool_rejection,
    normalize,
    parse_summary_sections,
    paths_in,
    sentences,
    tool_result_text,
    user_texts,
)
from compaction.core.prompts import SECTION_HEADINGS, TURN_PREFIX_HEADINGS, text_of
from compaction.core.summarizers.base import Draft, SummaryInput
from compaction.core.tokens import count_text
from compaction.core.types import Msg

MODIFY_TOOLS = {
    "edit",
    "multiedit",
    "write",
    "notebookedit",
    "str_replace_based_edit_tool",
    "str_replace_editor",
    "apply_patch",
    "write_file",
    "edit_file",
    "create_file",
    "replace",
}
TODO_TOOLS = {"todowrite", "todo_write", "update_plan", "write_todos"}
PLAN_TOOLS = {"exitplanmode", "exit_plan_mode"}
PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "filename")
TEST_RE = re.compile(
    r"\b(pytest|mix test|npm (run )?test|yarn test|pnpm test|cargo test|go test|jest|vitest|rspec|"
    r"make test|phpunit|tox|unittest|mix credo|ruff|mypy|eslint|tsc|mix compile|cargo build|npm run build|"
    r"make|mix ecto\.migrate|mix ash\.codegen|manage\.py (test|migrate|makemigrations)|docker build|go build|go vet|"
    r"just (test|check|lint|build|ci)|npm run (lint|check|typecheck)|cargo (clippy|check)|bun test|deno test|gradle|mvn)\b"
)
COMMIT_RE = re.compile(r"\bgit (commit|push|merge|tag|rebase)\b")
TRACKER_RE = re.compile(
    r"\b(bd|gh|glab|jira|linear)\s+(close|create|merge|issue close|issue create|pr create|pr merge)\b"
)
TEST_OUTCOME_RE = re.compile(
    r"(?i)(\b\d+ (tests?|examples?|doctests?|properties|passed|failed|failures?|errors?)\b.*|"
    r"\bfound no offenses\b.*|\ball checks passed\b.*|\bno issues\b.*)"
)
FAILED_COUNT_RE = re.compile(r"(?i)\b([1-9]\d*) (failed|failures?|errors?)\b")
EXIT_CODE_RE = re.compile(r"(?i)\bexit (code|status)[: ]+([1-9]\d*)")
# A statement of something finished, with an anchor (a name, a path, a count) to check it by.
DONE_START_RE = re.compile(
    r"(?i)^(now |ok,? |great[,!]? |good[,!]? |done[,!:]? )?(i'?ve |i have |we'?ve )?(fixed|implemented|added|created|"
    r"updated|completed|committed|refactored|removed|resolved|renamed|extracted|replaced|wired|moved|"
    r"pushed|merged|wrote|rewrote|converted|migrated|all \d+ tests|the tests? (now )?pass|tests pass)\b"
)
ANCHOR_RE = re.compile(
    r"`[^`]+`|\b\w+\.[a-z]{1,5}\b|\b\d+ (tests?|files?|failures?)\b|/\w|\b[a-z]+_\w+|\b[a-z]+[A-Z]\w+"
)
NOT_DONE_RE = re.compile(r"(?i)\b(already|not yet|still (fail|need|broken)|should|will|would|if |let me|need to)\b")
INTENT_RE = re.compile(
    r"(?i)^(now,? |next,? |then,? |first,? |finally,? )?(let me|let's|i'll|i will|i need to|i'm going to|i am going to|"
    r"we need to|next step|the next step|remaining)\b"
)
FUTURE_RE = re.compile(
    r"(?i)\b(next|then|after that|afterwards|finally|remaining|still need|still needs|later|follow-?up|once .* done)\b"
)
NEXT_RE = re.compile(r"(?i)^(now|next|then|after that|finally)\b|\bnext step\b")
# Narration of waiting and looking around: true at the time, useless to continue from.
JUNK_INTENT_RE = re.compile(
    r"(?i)^(now,? |ok,? |good,? )?(let me|i'll|let's|i will|now)\s+(just |also |first |quickly )?"
    r"(wait|check|look|read|see|verify|view|examine|inspect|explore|search|find|try|run|re-?run|confirm|"
    r"understand|investigate|review|get|take a look|open|start by|think)\b"
)
SPECULATION_RE = re.compile(
    r"(?i)^(i bet|i think|i guess|i suspect|maybe|perhaps|probably|hmm|wait|it seems|possibly)\b"
)
# A decision the assistant stated, with its reason or alternative.
DECISION_REASON_RE = re.compile(
    r"(?i)\b(because|since|instead of|rather than|so that|decided|decision|going with|go with|opted|chose|"
    r"trade-?off|in favou?r of)\b"
)
IDENT_RE = re.compile(r"`([^`\n]{2,80})`")
# Names a new file defines (module, class, function), to say what a written file is.
DEFINES_RE = re.compile(
    r"^\s*(?:(?:pub(?:\([\w:]+\))?|export|default|async|public|private|protected|static|abstract|final)\s+)*"
    r"(?:defmodule|class|def|defp|function|func|fn|interface|struct|enum|trait|type|"
    r"create table|CREATE TABLE)\s+([\w.:]+)",
    re.MULTILINE,
)
CODE_IDENT_RE = re.compile(r"[:@]?[A-Za-z_][\w]*(?:[.:][A-Za-z_]\w*)*[?!]?")
URL_RE = re.compile(r"https?://[^\s`'\"<>)\]]+")
ENV_RE = re.compile(r"(?<![\w-])([A-Z][A-Z0-9_]{2,})=(\"[^\"]*\"|'[^']*'|[^\s;&|]+)")
COMMIT_MSG_RE = re.compile(r"""(?:^|\s)-[a-z]*m\s+(?:"([^"$][^"]*)"|'([^']+)')""")
HEREDOC_RE = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\1\b", re.DOTALL)
STATUS_RE = re.compile(r"\bbd\s+update\s+([\w.-]+).*?--status[= ](\w+)")
CLOSE_RE = re.compile(r"\b(?:bd|gh issue)\s+close\s+([^\n;&|>]*)")
# An issue header in a tracker's output: "○ spotter-gqc.4 · Add lifecycle state   [● P2 · OPEN]".
ISSUE_TITLE_RE = re.compile(
    r"^\W{0,3}\s*([A-Za-z][\w-]*[-.][\w.]+)\s+(?:\[[A-Z]+\]\s+)?·\s+(.+?)(?:\s{2,}\[.*)?$", re.MULTILINE
)
ISSUE_DESC_RE = re.compile(r"\nDESCRIPTION\n(.+?)(?:\n\s*\n|$)", re.DOTALL)
TRACKER_CMD_RE = re.compile(r"\b(bd|gh|glab|jira|linear)\s")
TASK_NOTE_RE = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
FOCUS_STOPWORDS = frozenset(
    "focus focusing keep keeping only mostly mainly about please the and with what that this from into "
    "compact compaction summary summarize work working part parts things stuff".split()
)

MAX_ITEM_CHARS = 300
# A user message this short is read together with the assistant message it answers.
SHORT_REPLY_CHARS = 60
# An intent followed by more tool calls than this was acted on: not "next" any more.
STALE_INTENT_TOOL_CALLS = 4
# Per-section caps (latest kept): a 200-tool-call turn must not become a 200-line summary.
MAX_DONE_STATEMENTS = 8
MAX_DECISIONS = 10
MAX_ERRORS = 40
MAX_COMMANDS = 25
# Shown length of a command: the fidelity check compares the first 160 characters.
COMMAND_CHARS = 170
MAX_EARLIER_REQUESTS = 10
EARLIER_REQUEST_CHARS = 140
MAX_PREVIOUS_DONE = 30
MAX_PREVIOUS_CRITICAL = 30
# Items at or above this priority are the user's rules and the goal: trimmed last.
RULE_PRIORITY = 90.0
SHORT_QUOTE_CHARS = 200


@dataclass
class Item:
    text: str
    priority: float
    protected: bool = False
    tokens: int = 0
    focus: bool = False
    focus_score: float = 0.0


@dataclass
class Command:
    command: str  # first line, noise (2>&1, | tail -5) removed
    full: str
    ok: bool
    detail: str
    index: int
    description: str = ""


@dataclass
class Analysis:
    requests: list[str] = field(default_factory=list)  # every user text, in order (chatter included)
    done: list[str] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    last_intents: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_source: dict[str, int] = field(default_factory=dict)  # error line -> index of its command
    edits: Counter[str] = field(default_factory=Counter)
    edit_added: dict[str, list[str]] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)
    identifiers: Counter[str] = field(default_factory=Counter)
    user_paths: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    last_tools: list[str] = field(default_factory=list)
    last_statement: str = ""
    todos: list[tuple[str, str]] = field(default_factory=list)  # (status, content) of the latest todo list
    plan_title: str = ""
    plan_steps: list[str] = field(default_factory=list)
    rejections: list[str] = field(default_factory=list)
    interruptions: int = 0
    issue_status: dict[str, str] = field(default_factory=dict)
    issue_titles: dict[str, str] = field(default_factory=dict)
    reply_context: dict[str, str] = field(default_factory=dict)  # short user reply -> what it answered
    activity_after_latest: int = 0  # assistant texts and tool calls after the latest user message
    issue_descriptions: dict[str, str] = field(default_factory=dict)
    edits_since_test: list[str] = field(default_factory=list)  # paths edited after the last passing test/build
    edits_since_commit: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    root: str = ""

    def rel(self, path: str) -> str:
        """A path relative to the project root shared by the touched files (shorter, same file)."""
        if self.root and path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return path


def _one_line(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _path_of(args: Any) -> str | None:
    if not isinstance(args, dict):
        return None
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _outcome(output: str, is_error: bool) -> tuple[bool, str]:
    """(ok, detail) of one command from its output."""
    outcome_lines = [m.group(0).strip() for m in TEST_OUTCOME_RE.finditer(output)]
    detail = _one_line(outcome_lines[-1], 160) if outcome_lines else ""
    failed = is_error or bool(EXIT_CODE_RE.search(output)) or bool(detail and FAILED_COUNT_RE.search(detail))
    if failed:
        errors = [line for line in error_lines_of(output, is_error=False) if not EXIT_CODE_RE.search(line)]
        first = next((line for line in output.splitlines() if line.strip() and not EXIT_CODE_RE.search(line)), "")
        detail = detail or _one_line(errors[0] if errors else first, 200)
    return not failed, detail


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
            todos.append((str(item.get("status") or "pending").lower(), _one_line(content, 200)))
    return todos


def _plan_of(text: str) -> tuple[str, list[str]]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    title = next((re.sub(r"^#+\s*", "", line) for line in lines if line.startswith("#")), lines[0] if lines else "")
    steps = [
        _one_line(re.sub(r"^(\d+[.)]|[-*])\s+", "", line), 160) for line in lines if re.match(r"^\d+[.)]\s+", line)
    ]
    return _one_line(title, 200), steps[:8]


def _commit_message(command: str) -> str:
    heredoc = HEREDOC_RE.search(command)
    if heredoc:
        first = next((line.strip() for line in heredoc.group(2).splitlines() if line.strip()), "")
        return _one_line(first, 150)
    match = COMMIT_MSG_RE.search(command)
    return _one_line(match.group(1) or match.group(2), 150) if match else ""


def _record_edit(a: Analysis, lname: str, path: str, args: dict[str, Any]) -> None:
    a.edits[path] += 1
    for pending_list in (a.edits_since_test, a.edits_since_commit):
        if path not in pending_list:
            pending_list.append(path)
    added = a.edit_added.setdefault(path, [])
    edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
    for edit in edits:
        if isinstance(edit, dict) and isinstance(edit.get("new_string"), str):
            old = edit.get("old_string") if isinstance(edit.get("old_string"), str) else ""
            added.extend(t for t in _added_identifiers(old, edit["new_string"]) if t not in added)
    if lname in ("write", "write_file", "create_file") or isinstance(args.get("content"), str):
        a.written.add(path)
        content = args.get("content") if isinstance(args.get("content"), str) else ""
        defined = [n for n in DEFINES_RE.findall(content[:50_000]) if n not in added]
        # What the file offers first; its tests only when that is all it defines.
        added.extend([n for n in defined if not n.lower().startswith("test")] or defined)


def analyze(messages: list[Msg]) -> Analysis:
    a = Analysis()
    ops = extract_file_ops(messages)
    a.modified, a.read = list(ops.modified), list(ops.read)
    # The project root: the common directory of the touched files in the most common
    # top-level tree (a plan file under ~/.claude must not defeat it).
    absolute = [p for p in [*a.modified, *a.read] if p.startswith("/") and p.count("/") >= 4]
    if absolute:
        trees = Counter("/".join(p.split("/")[:4]) for p in absolute)
        tree = trees.most_common(1)[0][0]
        members = [p for p in absolute if p.startswith(tree + "/")]
        root = os.path.commonpath(members) if len(members) > 1 else os.path.dirname(members[0])
        if all(os.path.dirname(p) == root for p in members):
            root = os.path.dirname(root)  # keep the file's own directory: "api/views.py", not "views.py"
        a.root = root if root.count("/") >= 2 else ""
    pending: dict[str, tuple[str, str | None, str | None, str]] = {}  # id -> (name, command, path, description)
    edit_inputs: dict[str, dict[str, Any]] = {}
    seen_sentences: set[str] = set()
    seen_errors: set[str] = set()
    last_assistant_texts: list[tuple[str, int]] = []  # (text, tool calls made before it)

    for msg in messages:
        if msg.role == "user":
            for block in msg.blocks:
                if block.get("type") == "text" and "[request interrupted by user" in text_of(block, "text").lower():
                    a.interruptions += 1
        for text in user_texts(msg):
            a.requests.append(text)
            # "yes, do it all" means nothing without what it answers.
            if last_assistant_texts and len(text) <= SHORT_REPLY_CHARS:
                said = sentences(last_assistant_texts[-1][0])
                a.reply_context[text] = _one_line(" ".join(said[-2:]).replace("```", " "), 240) if said else ""
            a.activity_after_latest = 0
            a.user_paths.extend(paths_in(text))
            a.urls.extend(URL_RE.findall(text))
            last_assistant_texts = []  # a new user turn: intents before it are stale
        for block in msg.blocks:
            kind = block.get("type")
            if kind == "text" and msg.role == "assistant":
                text = text_of(block, "text")
                last_assistant_texts.append((text, len(a.last_tools)))
                a.activity_after_latest += 1
                a.urls.extend(URL_RE.findall(text))
                for ident in IDENT_RE.findall(text):
                    a.identifiers[ident.strip()] += 1
                for sentence in sentences(text):
                    if not 15 <= len(sentence) <= 400:
                        continue
                    key = normalize(sentence)
                    if key in seen_sentences:
                        continue
                    seen_sentences.add(key)
                    line = _one_line(sentence)
                    if INTENT_RE.search(sentence):
                        a.intents.append(line)
                    elif (
                        DONE_START_RE.search(sentence)
                        and ANCHOR_RE.search(sentence)
                        and not NOT_DONE_RE.search(sentence)
                        and not sentence.endswith((":", "?"))
                    ):
                        a.done.append(line)
                    # Decisions only from what the assistant told the user, with a reason or
                    # an alternative; thinking is musing that often reverses itself.
                    if (
                        DECISION_RE.search(sentence)
                        and DECISION_REASON_RE.search(sentence)
                        and len(sentence) >= 30
                        and not sentence.endswith((":", "?"))
                        and not SPECULATION_RE.match(sentence)
                    ):
                        a.decisions.append(line)
            elif kind == "tool_use":
                a.activity_after_latest += 1
                name = str(block.get("name", "tool"))
                args = block.get("input") or {}
                args = args if isinstance(args, dict) else {}
                path = _path_of(args)
                lname = name.lower()
                if lname in TODO_TOOLS:
                    todos = _todos_of(args)
                    if todos is not None:
                        a.todos = todos
                elif lname in PLAN_TOOLS and isinstance(args.get("plan"), str):
                    a.plan_title, a.plan_steps = _plan_of(args["plan"])
                command = command_of(block)
                if command:
                    a.env.update({k: v for k, v in ENV_RE.findall(command.splitlines()[0])})
                shown = a.rel(path) if path else ""
                a.last_tools.append(
                    f"{name} `{_one_line(clean_command(command), 120)}`"
                    if command
                    else f"{name} `{shown}`"
                    if path
                    else name
                )
                if "id" in block:
                    description = args.get("description") if isinstance(args.get("description"), str) else ""
                    pending[block["id"]] = (name, command, path, description)
                    if lname in MODIFY_TOOLS and path:
                        edit_inputs[block["id"]] = args
            elif kind == "tool_result":
                name, command, path, description = pending.pop(block.get("tool_use_id", ""), ("", None, None, ""))
                is_error = bool(block.get("is_error"))
                output = tool_result_text(block.get("content"))
                edit_args = edit_inputs.pop(block.get("tool_use_id", ""), None)
                if edit_args is not None and path and not is_error and not is_tool_rejection(output):
                    # Counted when it succeeded: a rejected or failed edit changed nothing.
                    _record_edit(a, name.lower(), path, edit_args)
                if is_tool_rejection(output):
                    if "sibling tool call" not in output.lower():
                        what = (
                            f"{name} of `{a.rel(path)}`"
                            if path
                            else f"`{_one_line(clean_command(command), 100)}`"
                            if command
                            else name or "a tool call"
                        )
                        a.rejections.append(what)
                    continue
                if command is not None:
                    ok, detail = _outcome(output, is_error)
                    if is_probe_command(command):
                        # A grep without matches "fails" with status 1: an answer, not a failure.
                        ok, detail = True, ""
                    cmd_line = clean_command(command)
                    a.commands.append(
                        Command(cmd_line, command, ok, detail, len(a.commands), _one_line(description, 120))
                    )
                    if TRACKER_CMD_RE.search(command):
                        head = output[:20_000]
                        for title_match in ISSUE_TITLE_RE.finditer(head):
                            a.issue_titles.setdefault(title_match.group(1), _one_line(title_match.group(2), 100))
                            description = ISSUE_DESC_RE.search(head, title_match.end(), title_match.end() + 600)
                            if description:
                                a.issue_descriptions.setdefault(
                                    title_match.group(1), _one_line(description.group(1), 300)
                                )
                    if ok and TEST_RE.search(cmd_line):
                        a.edits_since_test = []
                    if ok and re.search(r"\bgit commit\b", command):
                        a.edits_since_commit = []
                    for status_match in STATUS_RE.finditer(cmd_line):
                        a.issue_status[status_match.group(1)] = status_match.group(2)
                    if ok:
                        for close_match in CLOSE_RE.finditer(cmd_line):
                            for issue in close_match.group(1).split():
                                if issue.startswith("-") or "=" in issue or '"' in issue:
                                    break  # options follow the ids
                                a.issue_status[issue] = "closed"
                for line in command_error_lines(name, command, output, is_error=is_error):
                    if command is not None:
                        a.error_source[line] = len(a.commands) - 1
                    if line not in seen_errors:
                        seen_errors.add(line)
                        a.errors.append(line)
    # What the assistant was doing at the cut: intents stated in the latest turn, and only
    # in its final stretch — "now add X" followed by a dozen more tool calls is done already.
    total_tools = len(a.last_tools)
    for text, tools_before in last_assistant_texts[-3:]:
        if total_tools - tools_before > STALE_INTENT_TOOL_CALLS:
            continue
        for sentence in sentences(text):
            if (INTENT_RE.search(sentence) or NEXT_RE.search(sentence)) and 10 <= len(sentence) <= 400:
                a.last_intents.append(_one_line(sentence))
    if last_assistant_texts:
        tail = sentences(last_assistant_texts[-1][0])
        a.last_statement = _one_line(tail[-1]) if tail else ""
    return a


# ---------------------------------------------------------------------------- assembly


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_./-]{4,}", text.lower())}


def _similar(a: str, b: str, threshold: float = 0.6) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= threshold


def _focus_words(instructions: str | None) -> set[str]:
    words = {w.strip("./-") for w in _words(instructions or "")} - FOCUS_STOPWORDS - {""}
    # "errors" should find "error:" lines: match on a crude stem.
    return {w[:-1] if w.endswith("s") and len(w) > 4 else w for w in words}


class _Sections:
    KEYS = ("goal", "constraints", "done", "in_progress", "blocked", "decisions", "next", "critical")

    def __init__(self, focus: set[str] | None = None) -> None:
        self.items: dict[str, list[Item]] = {k: [] for k in self.KEYS}
        self._seen: dict[str, set[str]] = {k: set() for k in self.items}
        self.focus = focus or set()

    def add(self, key: str, text: str, priority: float, protected: bool = False) -> Item | None:
        text = text.strip()
        norm = normalize(text)
        if not text or norm in self._seen[key]:
            return None
        self._seen[key].add(norm)
        score = self.focus_score(text)
        # Items about the requested focus are kept first when trimming (the more focus terms
        # an item mentions, the later it goes).
        item = Item(text, priority + 30.0 * score, protected, focus=score > 0, focus_score=score)
        self.items[key].append(item)
        return item

    def focus_score(self, text: str) -> float:
        if not self.focus:
            return 0.0
        lowered = text.lower()
        return sum(1 for f in self.focus if f in lowered) / len(self.focus)

    def is_focus(self, text: str) -> bool:
        return self.focus_score(text) > 0


def _recency(index: int, total: int) -> float:
    return (index + 1) / max(total, 1)


def _quote(text: str) -> str:
    return _one_line(text, MAX_INSTRUCTION_CHARS + 1)


_PREV_QUOTE_RE = re.compile(r'^User(?: said)?(?: \(verbatim\))?:\s*"?(.*?)"?$')


def _previous_goal(items: list[str]) -> tuple[list[str], list[str]]:
    """(goal lines, earlier requests) of a previous summary's Goal section."""
    goal: list[str] = []
    earlier: list[str] = []
    for item in items:
        lowered = item.lower()
        if lowered.startswith("latest request:"):
            earlier.append(item.split(":", 1)[1].strip())
        elif lowered.startswith("earlier requests:"):
            earlier.extend(
                q.strip().strip('"') for q in re.split(r'";\s*"|;\s+(?=")', item.split(":", 1)[1]) if q.strip()
            )
        else:
            goal.append(item)
    return goal, earlier


_PREV_ISSUE_RE = re.compile(r"`([^`]+)` (\w+)(?: \(([^)]*)\))?")


def _merge_previous_issues(a: Analysis, critical: list[str]) -> None:
    """Issue states a previous summary recorded, updated by what this range did."""
    merged: dict[str, str] = {}
    for item in critical:
        if item.startswith("Issue states: "):
            for issue, status, title in _PREV_ISSUE_RE.findall(item):
                merged[issue] = status
                if title:
                    a.issue_titles.setdefault(issue, title)
    merged.update(a.issue_status)
    a.issue_status = merged


# Lines the summary derives from the state at the cut: a newer range re-derives them.
_STATE_PREFIXES = (
    "last tool activity",
    "working on",
    "handling the latest request",
    "issue `",
    "finish issue",
    "fix what still fails",
    "answer/handle the latest user request",
    "continue with the user's latest request",
)


def build_sections(analysis: Analysis, *, previous_summary: str | None, instructions: str | None) -> _Sections:
    a = analysis
    s = _Sections(_focus_words(instructions))
    previous = parse_summary_sections(previous_summary) if previous_summary else {}
    requests = [t for t in a.requests if classify_user_text(t) != "chatter"]

    # Goal: what the previous summary said it was, else the first request; then the latest
    # request and a short list of the ones between (progress, not standing rules).
    _merge_previous_issues(a, previous.get("critical", []))
    prev_goal, prev_earlier = _previous_goal(previous.get("goal", []))
    for item in prev_goal[:2]:
        s.add("goal", item, 100, protected=True)
    first = requests[0] if requests else ""
    if first and not s.items["goal"]:
        s.add("goal", _one_line(first, 600), 100, protected=True)
    latest = requests[-1] if len(requests) > 1 or (requests and prev_goal) else ""
    latest_context = a.reply_context.get(latest, "") if latest else ""
    answering = f' (replying to the assistant: "{latest_context}")' if latest_context else ""
    if latest and normalize(latest) != normalize(first):
        s.add("goal", f"Latest request: {_one_line(latest, 400)}{answering}", 97, protected=True)
    between = [t for t in requests[1:-1] if classify_user_text(t) == "request"]
    earlier = list(dict.fromkeys(_one_line(t, EARLIER_REQUEST_CHARS) for t in [*prev_earlier, *between]))
    if earlier:
        shown = earlier[-MAX_EARLIER_REQUESTS:]
        more = f" (+{len(earlier) - len(shown)} older)" if len(earlier) > len(shown) else ""
        s.add("goal", "Earlier requests" + more + ": " + "; ".join(f'"{t}"' for t in shown), 62)

    # Constraints & Preferences: the user's rules and corrections verbatim. Previous ones are
    # carried forward (deduplicated, chatter dropped); under budget pressure the oldest go
    # first, and only after everything else.
    prev_constraints = previous.get("constraints", [])
    for index, item in enumerate(prev_constraints):
        quoted = _PREV_QUOTE_RE.match(item)
        inner = quoted.group(1) if quoted else item
        if classify_user_text(inner) == "chatter":
            continue
        s.add("constraints", f'User: "{inner}"' if quoted else item, 91 + 3 * _recency(index, len(prev_constraints)))
    rules = [t for t in requests if classify_user_text(t) == "instruction"]
    # The first request is quoted when it carries rules; the goal line holds it otherwise.
    for index, text in enumerate(rules):
        # A long message (a bug report with a pasted log) is quoted by its rule sentences.
        s.add("constraints", f'User: "{_quote(instruction_quote(text))}"', 95 + 4 * _recency(index, len(rules)))

    # Done: concrete accomplishments with evidence. Commands: last run of each.
    last_run: dict[str, Command] = {}
    for cmd in a.commands:
        last_run[cmd.command] = cmd
    total_cmds = len(a.commands)

    def fixed_later(cmd: Command) -> bool:
        # "git add x" failing then "git add -f x" passing: same tool, same verb, later success.
        head = cmd.command.split()[:2]
        return any(c.ok and c.command.split()[:2] == head for c in a.commands[cmd.index + 1 :])

    in_done: set[str] = set()
    for item in previous.get("done", [])[-MAX_PREVIOUS_DONE:]:
        s.add("done", item, 50)
    for path, n in a.edits.items():
        added = a.edit_added.get(path, [])[:4]
        names = ", ".join(f"`{t}`" for t in added)
        if path in a.written and n == 1:
            s.add("done", f"Wrote `{a.rel(path)}`" + (f" (defines {names})" if names else ""), 60)
        else:
            what = f"; added {names}" if names else ""
            s.add("done", f"Modified `{a.rel(path)}` ({n} edit{'s' if n != 1 else ''}{what})", 60)
    for cmd in sorted(last_run.values(), key=lambda c: c.index):
        shown = _one_line(cmd.command, COMMAND_CHARS)
        recency = _recency(cmd.index, total_cmds)
        commit = COMMIT_RE.search(cmd.full)
        if cmd.ok and (TEST_RE.search(cmd.command) or commit or TRACKER_RE.search(cmd.command)):
            message = _commit_message(cmd.full) if commit else ""
            evidence = f': "{message}"' if message else f": {cmd.detail}" if cmd.detail else ""
            s.add("done", f"`{shown}` → ok{evidence}", 62 + 10 * recency)
            in_done.add(cmd.command)
        elif not cmd.ok and not fixed_later(cmd):
            s.add("blocked", f"`{shown}` failed: {cmd.detail}", 80 + 10 * recency)
            in_done.add(cmd.command)
        elif not cmd.ok:
            s.add("critical", f"`{shown}` failed earlier (later resolved): {cmd.detail}", 50 + 10 * recency)
            in_done.add(cmd.command)
    for status, content in a.todos:
        if status == "completed":
            s.add("done", f"Todo completed: {content}", 66)
    closed = [i for i, st in a.issue_status.items() if st == "closed"]
    if closed:
        s.add("done", "Issues closed: " + ", ".join(closed), 68)
    done_statements = [d for d in a.done[:-MAX_DONE_STATEMENTS] if s.is_focus(d)] + a.done[-MAX_DONE_STATEMENTS:]
    for index, text in enumerate(done_statements):
        s.add("done", text, 40 + 10 * _recency(index, len(done_statements)))

    # In progress: the todo list, open issues, the latest request and where work stopped.
    for item in previous.get("in_progress", []):
        if item.lower().startswith(_STATE_PREFIXES) or (a.todos and item.startswith("Todo in progress:")):
            continue  # describes the previous cut, not this one
        # Superseded: a new statement of completion says the same thing.
        if any(_similar(item, d) for d in a.done):
            s.add("done", item, 55)
        else:
            s.add("in_progress", item, 72)
    for status, content in a.todos:
        if status == "in_progress":
            s.add("in_progress", f"Todo in progress: {content}", 86)
    for issue, status in a.issue_status.items():
        if status == "in_progress":
            title = f" ({a.issue_titles[issue]})" if issue in a.issue_titles else ""
            s.add("in_progress", f"Issue `{issue}`{title} is marked in_progress (not closed yet)", 84)
            s.add("next", f"Finish issue `{issue}`{title} and close it", 81)
    current = next((t for t in reversed(a.last_intents) if not JUNK_INTENT_RE.search(t)), "")
    if current:
        s.add("in_progress", f"Working on: {current}", 78)
    if a.last_tools:
        s.add("in_progress", "Last tool activity: " + "; ".join(a.last_tools[-3:]), 70)
    for item in previous.get("blocked", []):
        s.add("blocked", item, 70)

    # Key decisions: stated with a reason; a later decision on the same subject replaces
    # the earlier one.
    decisions: list[str] = []
    for text in [*previous.get("decisions", []), *a.decisions]:
        decisions = [d for d in decisions if not _similar(d, text, 0.5)]
        decisions.append(text)
    decisions = decisions[-MAX_DECISIONS:]
    for index, text in enumerate(decisions):
        s.add("decisions", text, 45 + 15 * _recency(index, len(decisions)))
    if a.plan_title:
        steps = "; ".join(a.plan_steps[:6])
        s.add("decisions", f"Plan approved (ExitPlanMode): {a.plan_title}" + (f" — {steps}" if steps else ""), 64)

    # Next steps: pending todos, unresolved failures, the latest request, the stated plan.
    for status, content in a.todos:
        if status not in ("completed", "in_progress"):
            s.add("next", f"Todo: {content}", 85)
    failing = [i for i in s.items["blocked"] if i.text.startswith("`")]
    if failing:
        names = ", ".join(i.text.split(" failed:")[0] for i in failing[-3:])
        more = f" (+{len(failing) - 3} more, see Blocked)" if len(failing) > 3 else ""
        s.add("next", f"Fix what still fails: {names}{more}", 80)
    if len(requests) > 1 and classify_user_text(a.requests[-1]) != "chatter" and not a.activity_after_latest:
        # The range ends with the user's message: it is what the user waits for.
        s.add("next", f'Answer/handle the latest user request: "{_one_line(requests[-1], 200)}"{answering}', 83)
    # Work not yet verified or committed, where this range shows the habit of doing so.
    tests_run = [c for c in a.commands if TEST_RE.search(c.command)]
    # Name the test command rather than a linter when there is one.
    tests_run = [c for c in tests_run if re.search(r"\btest", c.command)] or tests_run
    if a.edits_since_test and tests_run:
        files = ", ".join(f"`{a.rel(p)}`" for p in a.edits_since_test[:6])
        s.add(
            "next",
            f"Re-run the checks (last: `{_one_line(tests_run[-1].command, 120)}`): edited since the last passing run: {files}",
            76,
        )
    if a.edits_since_commit and any(COMMIT_RE.search(c.full) for c in a.commands):
        files = ", ".join(f"`{a.rel(p)}`" for p in a.edits_since_commit[:6])
        s.add("next", f"Commit the changes made after the last commit: {files}", 73)
    # Stated plans beyond the current action ("then", "after that", "remaining"...).
    plan = [t for t in a.last_intents if not JUNK_INTENT_RE.search(t) and len(t) >= 25 and FUTURE_RE.search(t)]
    for text in plan[-3:]:
        s.add("next", text, 74)
    # The previous plan still stands only where this range stated none of its own.
    own_plan = bool(s.items["next"])
    for item in previous.get("next", []):
        if item.lower().startswith(_STATE_PREFIXES) or (a.todos and item.startswith("Todo: ")):
            continue
        if not own_plan or item.startswith("Todo: "):
            s.add("next", item, 40)
    if not s.items["next"] and requests:
        context = a.reply_context.get(requests[-1], "")
        answering = f' (replying to the assistant: "{context}")' if context else ""
        s.add("next", f"Continue with the user's latest request: {_one_line(requests[-1], 200)}{answering}", 72)

    # Critical context: exact error lines, past events, identifiers, URLs, env values.
    if instructions and instructions.strip():
        note = " (items about it are listed first and kept first when trimming)" if s.focus else ""
        s.add("critical", f"Compaction focus requested: {_one_line(instructions, 300)}{note}", 100, protected=True)
    prev_critical = [
        i
        for i in previous.get("critical", [])
        if not i.lower().startswith(("commands run", "other commands", "issue states", "compaction focus requested"))
    ][-MAX_PREVIOUS_CRITICAL:]
    for index, item in enumerate(prev_critical):
        s.add("critical", item, 42 + 8 * _recency(index, len(prev_critical)))
    # Capped to the newest, except those about the requested focus.
    errors = [e for e in a.errors[:-MAX_ERRORS] if s.is_focus(e)] + a.errors[-MAX_ERRORS:]
    blocked_text = "\n".join(i.text for i in [*s.items["blocked"], *s.items["critical"]])
    for index, line in enumerate(errors):
        if line in blocked_text:
            continue  # already quoted, with its command, under Blocked
        source = a.error_source.get(line)
        if source is not None and a.commands[source].ok is False and fixed_later(a.commands[source]):
            # Still quoted exactly (the line may matter again), but marked as history.
            s.add("critical", f"Error (resolved later): {line}", 47 + 15 * _recency(index, len(errors)))
        else:
            s.add("critical", f"Error: {line}", 55 + 20 * _recency(index, len(errors)))
    for what in dict.fromkeys(a.rejections):
        s.add("critical", f"Past event: the user rejected the {what} (that call did not run)", 58)
    if a.interruptions:
        s.add("critical", f"Past event: the user interrupted the assistant {a.interruptions}×", 45)
    if a.user_paths:
        s.add("critical", "Paths named by the user: " + ", ".join(dict.fromkeys(a.user_paths)), 88)
    if a.urls:
        s.add("critical", "URLs: " + ", ".join(list(dict.fromkeys(u.rstrip(".,") for u in a.urls))[:10]), 60)
    if a.env:
        s.add("critical", "Env/config values used: " + ", ".join(f"`{k}={v}`" for k, v in list(a.env.items())[:10]), 60)
    open_issues = {i: st for i, st in a.issue_status.items() if st != "closed"}
    for issue in open_issues:
        if issue in a.issue_descriptions:
            s.add("critical", f"Open issue `{issue}`: {a.issue_descriptions[issue]}", 74)
    if a.issue_status:
        s.add(
            "critical",
            "Issue states: "
            + ", ".join(
                f"`{i}` {st}" + (f" ({a.issue_titles[i]})" if i in a.issue_titles and st != "closed" else "")
                for i, st in a.issue_status.items()
            ),
            66 if open_issues else 50,
        )
    idents = [i for i, n in a.identifiers.most_common(40) if n >= 2 and "/" not in i and " " not in i][:15]
    if idents:
        s.add("critical", "Identifiers: " + ", ".join(f"`{i}`" for i in idents), 40)
    # Commands not already listed with their outcome: once each, newest first, capped.
    others = [c for c in dict.fromkeys(c.command for c in reversed(a.commands)) if c and c not in in_done]
    if others:
        shown = others[:MAX_COMMANDS]
        more = f" (+{len(others) - len(shown)} more)" if len(others) > len(shown) else ""
        s.add(
            "critical",
            "Other commands run (newest first): " + "; ".join(f"`{_one_line(c, COMMAND_CHARS)}`" for c in shown) + more,
            35,
        )
    return s


def _ordered(items: list[Item]) -> list[Item]:
    # Focus items first (best match first); otherwise in the order added (chronological).
    return sorted(items, key=lambda i: -i.focus_score)


def _render(s: _Sections) -> str:
    def bullets(key: str, prefix: str = "- ") -> list[str]:
        return [f"{prefix}{i.text}" for i in _ordered(s.items[key])] or ["- (none)"]

    def numbered(key: str) -> list[str]:
        return [f"{n}. {i.text}" for n, i in enumerate(_ordered(s.items[key]), 1)] or ["1. (none recorded)"]

    goal = s.items["goal"]
    lines = ["## Goal", *([i.text for i in goal[:1]] + [f"- {i.text}" for i in goal[1:]] or ["(not stated)"]), ""]
    lines += ["## Constraints & Preferences", *bullets("constraints"), ""]
    lines += ["## Progress", "### Done", *bullets("done", "- [x] "), ""]
    lines += ["### In Progress", *bullets("in_progress", "- [ ] "), ""]
    lines += ["### Blocked", *bullets("blocked"), ""]
    lines += ["## Key Decisions", *bullets("decisions"), ""]
    lines += ["## Next Steps", *numbered("next"), ""]
    lines += ["## Critical Context", *bullets("critical")]
    return "\n".join(lines)


def _apply_drops(s: _Sections, dropped: set[int]) -> None:
    for key in s.items:
        s.items[key] = [i for i in s.items[key] if id(i) not in dropped]


def _drop_until(s: _Sections, budget: int, candidates: list[Item]) -> int:
    """Drop `candidates` in order until the rendering fits; returns the exact token count."""
    total = count_text(_render(s))
    dropped: set[int] = set()
    for item in candidates:
        if total <= budget:
            # Per-item counts are estimates (joins, "(none)" placeholders): confirm exactly.
            _apply_drops(s, dropped)
            total = count_text(_render(s))
            if total <= budget:
                return total
        dropped.add(id(item))
        total -= item.tokens
    _apply_drops(s, dropped)
    return count_text(_render(s))


def fit_budget(s: _Sections, budget: int) -> str:
    """Fit the summary into `budget` tokens.

    1. drop ordinary items, least important (then oldest) first;
    2. shorten long quotes and goal lines to their first SHORT_QUOTE_CHARS characters;
    3. drop the user's rules too, oldest and least important first — a summary over its
       budget is worse than one that lost an old rule (the chain would reject it);
    4. as a last resort cut even the goal lines.
    """
    if count_text(_render(s)) <= budget:
        return _render(s)
    order = 0
    ordinary: list[tuple[float, int, Item]] = []
    rules: list[tuple[float, int, Item]] = []
    for items in s.items.values():
        for item in items:
            item.tokens = count_text(item.text) + 3
            if item.protected:
                continue
            (rules if item.priority >= RULE_PRIORITY else ordinary).append((item.priority, order, item))
            order += 1
    ordinary.sort(key=lambda c: (c[0], c[1]))
    if _drop_until(s, budget, [c[2] for c in ordinary]) <= budget:
        return _render(s)
    for item in sorted((i for v in s.items.values() for i in v), key=lambda i: -len(i.text)):
        if len(item.text) > SHORT_QUOTE_CHARS + 20:
            quote = item.text.endswith('"')
            item.text = item.text[:SHORT_QUOTE_CHARS].rstrip() + ('…"' if quote else "…")
            item.tokens = count_text(item.text) + 3
    if count_text(_render(s)) <= budget:
        return _render(s)
    rules.sort(key=lambda c: (c[0], c[1]))
    if _drop_until(s, budget, [c[2] for c in rules]) <= budget:
        return _render(s)
    protected = [i for v in s.items.values() for i in v if i.protected]
    protected.sort(key=lambda i: i.priority)
    _drop_until(s, budget, protected)
    return _render(s)


def extractive_summary(
    messages: list[Msg],
    *,
    previous_summary: str | None = None,
    instructions: str | None = None,
    budget: int = 13_107,
) -> str:
    analysis = analyze(messages)
    return fit_budget(build_sections(analysis, previous_summary=previous_summary, instructions=instructions), budget)


def _turn_start(messages: list[Msg], a: Analysis) -> str:
    """What the summarized part of the turn really began with."""
    if a.requests:
        first = next((t for t in a.requests if classify_user_text(t) != "chatter"), a.requests[0])
        return f'User: "{_quote(first)}"'
    for msg in messages[:3]:
        if msg.role != "user":
            continue
        for block in msg.blocks:
            if block.get("type") != "text":
                continue
            raw = text_of(block, "text")
            if "<task-notification>" in raw:
                note = TASK_NOTE_RE.search(raw)
                what = _one_line(note.group(1), 200) if note else "a background task finished"
                return f"This part began with a background-task notification ({what}); the user's request precedes it."
            if "[request interrupted by user" in raw.lower():
                return "This part began right after the user interrupted the assistant; the user's request precedes it."
            cleaned = clean_user_text(raw)
            if cleaned:
                return f'User: "{_quote(cleaned)}"'
        if msg.is_tool_result:
            return "(the user's request precedes this part of the turn; this part starts with tool results)"
    return "(the user's request precedes this part of the turn)"


def extractive_turn_prefix(messages: list[Msg], *, budget: int) -> str:
    """What the in-progress turn attempted so far, in the turn-prefix format."""
    a = analyze(messages)
    attempted = []
    for path, n in a.edits.items():
        added = a.edit_added.get(path, [])[:3]
        what = f"; added {', '.join(f'`{t}`' for t in added)}" if added else ""
        attempted.append(f"- Modified `{a.rel(path)}` ({n} edit{'s' if n != 1 else ''}{what})")
    last_run: dict[str, Command] = {}
    for cmd in a.commands:
        last_run[cmd.command] = cmd
    runs = sorted(last_run.values(), key=lambda c: c.index)
    significant = [
        c
        for c in runs
        if not c.ok or TEST_RE.search(c.command) or COMMIT_RE.search(c.full) or TRACKER_RE.search(c.command)
    ]
    for c in significant[-25:]:
        message = _commit_message(c.full) if c.ok and COMMIT_RE.search(c.full) else ""
        evidence = f': "{message}"' if message else f": {c.detail}" if c.detail else ""
        attempted.append(f"- `{_one_line(c.command, COMMAND_CHARS)}` → {'ok' if c.ok else 'failed'}{evidence}")
    others = [c.command for c in reversed(runs) if c not in significant][:MAX_COMMANDS]
    if others:
        attempted.append("- Other commands run (newest first): " + "; ".join(f"`{_one_line(c, 120)}`" for c in others))
    attempted += [f"- Todo {st}: {content}" for st, content in a.todos]
    attempted += [f"- {t}" for t in a.done[-8:]]
    results = [f"- Error: {line}" for line in a.errors[-25:]]
    results += [f"- Past event: the user rejected the {what} (that call did not run)" for what in a.rejections]
    if a.read:
        results.append("- Files read: " + ", ".join(a.rel(p) for p in a.read[:40]))
    context = [f"- {t}" for t in [t for t in (a.last_intents or a.intents) if not JUNK_INTENT_RE.search(t)][-3:]]
    if a.last_tools:
        context.append("- Last tool activity: " + "; ".join(a.last_tools[-3:]))
    parts = [
        TURN_PREFIX_HEADINGS[0],
        _turn_start(messages, a),
        "",
        TURN_PREFIX_HEADINGS[1],
        *(attempted or ["- (none)"]),
        "",
        TURN_PREFIX_HEADINGS[2],
        *(results or ["- (none)"]),
        "",
        TURN_PREFIX_HEADINGS[3],
        *(context or ["- (none)"]),
    ]
    text = "\n".join(parts)
    # Oldest attempts go first when over budget; the request and latest state stay.
    while count_text(text) > budget and len(attempted) > 1:
        attempted = attempted[len(attempted) // 4 or 1 :]
        parts[parts.index(TURN_PREFIX_HEADINGS[1]) + 1 : parts.index(TURN_PREFIX_HEADINGS[2]) - 1] = attempted
        text = "\n".join(parts)
    while count_text(text) > budget and len(results) > 1:
        results = results[len(results) // 4 or 1 :]
        start = parts.index(TURN_PREFIX_HEADINGS[2]) + 1
        parts[start : parts.index(TURN_PREFIX_HEADINGS[3]) - 1] = results
        text = "\n".join(parts)
    return text


class ExtractiveSummarizer:
    name = "extractive"
    exact_budget = True  # fits its output to inp.output_budget itself

    def summarize(self, inp: SummaryInput) -> Draft:
        budget = max(256, inp.output_budget)
        # A split first turn has no history before it: its prefix is the history then.
        history = inp.messages if inp.messages or inp.previous_summary else inp.turn_prefix
        summary = extractive_summary(
            history, previous_summary=inp.previous_summary, instructions=inp.instructions, budget=budget
        )
        turn = extractive_turn_prefix(inp.turn_prefix, budget=max(256, budget // 2)) if inp.turn_prefix else ""
        return Draft(summary=summary, turn_prefix_summary=turn, model="extractive")


__all__ = ["ExtractiveSummarizer", "extractive_summary", "extractive_turn_prefix", "SECTION_HEADINGS"]
