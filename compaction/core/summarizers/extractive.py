"""Offline, deterministic summarizer: a real structured summary built from the messages.

No model and no network: it picks what matters out of the transcript and writes it in the
same format the LLM is asked for. The user's own words are quoted verbatim and never
trimmed; error lines, commands and paths are copied exactly. One linear pass, regexes only,
so a 100k+ token history takes well under a second.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from compaction.core.fileops import extract_file_ops
from compaction.core.ledger import (
    CONSTRAINT_RE,
    DECISION_RE,
    MAX_INSTRUCTION_CHARS,
    command_of,
    error_lines_of,
    normalize,
    output_is_program_output,
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
PATH_KEYS = ("file_path", "path", "filePath", "notebook_path", "filename")
TEST_RE = re.compile(
    r"\b(pytest|mix test|npm (run )?test|yarn test|pnpm test|cargo test|go test|jest|vitest|rspec|"
    r"make test|phpunit|tox|unittest|mix credo|ruff|mypy|eslint|tsc|mix compile|cargo build|npm run build|make)\b"
)
COMMIT_RE = re.compile(r"\bgit (commit|push|merge|tag)\b")
TEST_OUTCOME_RE = re.compile(
    r"(?i)(\b\d+ (tests?|examples?|doctests?|properties|passed|failed|failures?|errors?)\b.*|"
    r"\bfound no offenses\b.*|\ball checks passed\b.*|\bno issues\b.*)"
)
FAILED_COUNT_RE = re.compile(r"(?i)\b([1-9]\d*) (failed|failures?|errors?)\b")
EXIT_CODE_RE = re.compile(r"(?i)\bexit (code|status)[: ]+([1-9]\d*)")
DONE_RE = re.compile(
    r"(?i)\b(fixed|implemented|added|created|updated|completed|committed|refactored|removed|resolved|"
    r"renamed|extracted|replaced|tests? pass(es|ed)?|all \d+ tests|passing|done|closed|works now|succeeded)\b"
)
INTENT_RE = re.compile(
    r"(?i)^(now,? |next,? |then,? |first,? |finally,? )?(let me|let's|i'll|i will|i need to|i'm going to|i am going to|"
    r"we need to|next step|the next step|remaining)\b"
)
NEXT_RE = re.compile(r"(?i)^(now|next|then|after that|finally)\b|\bnext step\b")
NOT_DONE_START_RE = re.compile(r"(?i)^(let me|i'll|i will|now let me|i need|let's|first,|next,|should i)")
IDENT_RE = re.compile(r"`([^`\n]{2,80})`")
MAX_ITEM_CHARS = 300
# Per-section caps (latest kept): a 200-tool-call turn must not become a 200-line summary.
MAX_DONE_STATEMENTS = 25
MAX_DECISIONS = 15
MAX_ERRORS = 40
MAX_COMMANDS = 40


@dataclass
class Item:
    text: str
    priority: float
    protected: bool = False
    tokens: int = 0


@dataclass
class Analysis:
    requests: list[str] = field(default_factory=list)
    constraint_sentences: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    last_intents: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    commands: list[tuple[str, bool, str]] = field(default_factory=list)  # (command, ok, detail)
    errors: list[str] = field(default_factory=list)
    edits: Counter[str] = field(default_factory=Counter)
    identifiers: Counter[str] = field(default_factory=Counter)
    user_paths: list[str] = field(default_factory=list)
    last_tools: list[str] = field(default_factory=list)
    last_statement: str = ""
    modified: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)


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


def analyze(messages: list[Msg]) -> Analysis:
    a = Analysis()
    pending: dict[str, tuple[str, str | None]] = {}  # tool_use_id -> (name, command)
    seen_sentences: set[str] = set()
    seen_errors: set[str] = set()
    last_assistant_texts: list[str] = []

    for msg in messages:
        for text in user_texts(msg):
            a.requests.append(text)
            for sentence in sentences(text):
                if CONSTRAINT_RE.search(sentence) and 12 <= len(sentence) <= 400:
                    a.constraint_sentences.append(_one_line(sentence))
            a.user_paths.extend(paths_in(text))
            last_assistant_texts = []  # a new user turn: intents before it are stale
        for block in msg.blocks:
            kind = block.get("type")
            if kind == "text" and msg.role == "assistant":
                text = text_of(block, "text")
                last_assistant_texts.append(text)
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
                    elif DONE_RE.search(sentence) and not NOT_DONE_START_RE.search(sentence):
                        a.done.append(line)
                    if DECISION_RE.search(sentence):
                        a.decisions.append(line)
            elif kind == "thinking" and msg.role == "assistant":
                # Plans are often only spelled out in thinking; take its decisions, nothing else.
                for sentence in sentences(text_of(block, "thinking")):
                    if (
                        DECISION_RE.search(sentence)
                        and 40 <= len(sentence) <= 300
                        and not sentence.endswith((":", "?"))
                    ):
                        key = normalize(sentence)
                        if key not in seen_sentences:
                            seen_sentences.add(key)
                            a.decisions.append(_one_line(sentence))
            elif kind == "tool_use":
                name = str(block.get("name", "tool"))
                args = block.get("input") or {}
                path = _path_of(args)
                if name.lower() in MODIFY_TOOLS and path:
                    a.edits[path] += 1
                command = command_of(block)
                a.last_tools.append(
                    f"{name} `{_one_line(command, 120)}`" if command else f"{name} `{path}`" if path else name
                )
                if "id" in block:
                    pending[block["id"]] = (name, command)
            elif kind == "tool_result":
                name, command = pending.pop(block.get("tool_use_id", ""), ("", None))
                is_error = bool(block.get("is_error"))
                output = tool_result_text(block.get("content"))
                if command is not None:
                    ok, detail = _outcome(output, is_error)
                    a.commands.append((command, ok, detail))
                if output_is_program_output(name, is_error):
                    for line in error_lines_of(output, is_error=is_error):
                        if line not in seen_errors:
                            seen_errors.add(line)
                            a.errors.append(line)
    # Stated next steps come from what the assistant said in the latest turn.
    for text in last_assistant_texts[-3:]:
        for sentence in sentences(text):
            if (INTENT_RE.search(sentence) or NEXT_RE.search(sentence)) and 10 <= len(sentence) <= 400:
                a.last_intents.append(_one_line(sentence))
    if last_assistant_texts:
        tail = sentences(last_assistant_texts[-1])
        a.last_statement = _one_line(tail[-1]) if tail else ""
    ops = extract_file_ops(messages)
    a.modified, a.read = list(ops.modified), list(ops.read)
    return a


# ---------------------------------------------------------------------------- previous summary

# ---------------------------------------------------------------------------- assembly


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_./-]{4,}", text.lower())}


def _similar(a: str, b: str) -> bool:
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= 0.6


class _Sections:
    def __init__(self) -> None:
        self.items: dict[str, list[Item]] = {
            k: [] for k in ("goal", "constraints", "done", "in_progress", "blocked", "decisions", "next", "critical")
        }
        self._seen: dict[str, set[str]] = {k: set() for k in self.items}

    def add(self, key: str, text: str, priority: float, protected: bool = False) -> None:
        text = text.strip()
        norm = normalize(text)
        if not text or norm in self._seen[key]:
            return
        self._seen[key].add(norm)
        self.items[key].append(Item(text, priority, protected))


def _recency(index: int, total: int) -> float:
    return (index + 1) / max(total, 1)


def build_sections(analysis: Analysis, *, previous_summary: str | None, instructions: str | None) -> _Sections:
    s = _Sections()
    previous = parse_summary_sections(previous_summary) if previous_summary else {}
    focus = _words(instructions or "")

    def boost(text: str) -> float:
        return 15.0 if focus and _words(text) & focus else 0.0

    # Goal: what the previous summary said it was, else the first request.
    for item in previous.get("goal", []):
        s.add("goal", item, 100, protected=True)
    if analysis.requests:
        first = _one_line(analysis.requests[0], 600)
        if not s.items["goal"]:
            s.add("goal", first, 100, protected=True)
        last = _one_line(analysis.requests[-1], 400)
        if len(analysis.requests) > 1 and normalize(last) != normalize(first):
            s.add("goal", f"Latest request: {last}", 95, protected=True)

    # Constraints & Preferences: the user's words, verbatim and never trimmed.
    for item in previous.get("constraints", []):
        s.add("constraints", item, 100, protected=True)
    for text in analysis.requests:
        quoted = _one_line(text, MAX_INSTRUCTION_CHARS + 1)
        s.add("constraints", f'User: "{quoted}"', 100, protected=True)
        if len(text) > MAX_INSTRUCTION_CHARS:
            # The rules inside a long message matter even when its quote is cut.
            for sentence in analysis.constraint_sentences:
                if sentence[:40] in text[MAX_INSTRUCTION_CHARS - 40 :]:
                    s.add("constraints", f'User: "{sentence}"', 100, protected=True)

    # Progress.
    new_done: list[str] = []
    for path, n in analysis.edits.items():
        new_done.append(f"Modified `{path}` ({n} edit{'s' if n != 1 else ''})")
    last_run: dict[str, tuple[bool, str, int]] = {}
    for index, (command, ok, detail) in enumerate(analysis.commands):
        last_run[command] = (ok, detail, index)
    total_cmds = len(analysis.commands)

    def fixed_later(command: str, index: int) -> bool:
        # "git add x" failing then "git add -f x" passing: same tool, same verb, later success.
        head = command.split()[:2]
        return any(ok and c.split()[:2] == head for c, ok, _d in analysis.commands[index + 1 :])

    for command, (ok, detail, index) in last_run.items():
        first_line = _one_line(command.splitlines()[0], 160)
        significant = TEST_RE.search(command) or COMMIT_RE.search(command)
        recency = _recency(index, total_cmds)
        if ok and significant:
            s.add("done", f"`{first_line}` → ok{': ' + detail if detail else ''}", 60 + 10 * recency)
        elif not ok and not fixed_later(command, index):
            s.add("blocked", f"`{first_line}` failed: {detail}", 75 + 10 * recency)
        elif not ok:
            s.add("critical", f"`{first_line}` failed (later resolved): {detail}", 55 + 10 * recency)
    for item in previous.get("done", []):
        s.add("done", item, 85)
    for text in new_done:
        s.add("done", text, 55 + boost(text))
    done_statements = analysis.done[-MAX_DONE_STATEMENTS:]
    n_done = len(done_statements)
    for index, text in enumerate(done_statements):
        s.add("done", text, 35 + 10 * _recency(index, n_done) + boost(text))

    for item in previous.get("in_progress", []):
        # Superseded: a new statement of completion says the same thing.
        if any(_similar(item, d) for d in analysis.done):
            s.add("done", item, 85)
        else:
            s.add("in_progress", item, 80)
    current = analysis.last_intents[-1] if analysis.last_intents else analysis.last_statement
    if current:
        s.add("in_progress", f"Working on: {current}", 78)
    if analysis.last_tools:
        s.add("in_progress", "Last tool activity: " + "; ".join(analysis.last_tools[-3:]), 70)
    for item in previous.get("blocked", []):
        s.add("blocked", item, 75)

    # Key decisions (user rules are already quoted above).
    for item in previous.get("decisions", []):
        s.add("decisions", item, 80)
    decisions = analysis.decisions[-MAX_DECISIONS:]
    n_dec = len(decisions)
    for index, text in enumerate(decisions):
        s.add("decisions", text, 45 + 10 * _recency(index, n_dec) + boost(text))

    # Next steps: the assistant's stated intent in the latest turn, then older ones.
    for text in analysis.last_intents:
        s.add("next", text, 72)
    if analysis.requests and not analysis.last_intents:
        s.add("next", f"Continue with the user's latest request: {_one_line(analysis.requests[-1], 200)}", 72)
    for item in previous.get("next", []):
        s.add("next", item, 50)

    # Critical context: exact error lines, commands, identifiers, paths.
    if instructions and instructions.strip():
        s.add("critical", f"Compaction focus requested: {_one_line(instructions, 300)}", 100, protected=True)
    for item in previous.get("critical", []):
        s.add("critical", item, 82)
    errors = analysis.errors[-MAX_ERRORS:]
    n_err = len(errors)
    for index, line in enumerate(errors):
        s.add("critical", f"Error: {line}", 50 + 20 * _recency(index, n_err) + boost(line))
    if analysis.user_paths:
        s.add("critical", "Paths named by the user: " + ", ".join(dict.fromkeys(analysis.user_paths)), 90)
    recent_commands = list(dict.fromkeys(c.splitlines()[0] for c, _ok, _d in reversed(analysis.commands)))
    recent_commands = recent_commands[:MAX_COMMANDS]
    for index, command in enumerate(recent_commands):
        s.add("critical", f"Command run: `{_one_line(command, 200)}`", 30 - index / 2 + boost(command))
    idents = [i for i, n in analysis.identifiers.most_common(40) if n >= 2 and "/" not in i and " " not in i][:15]
    if idents:
        s.add("critical", "Identifiers: " + ", ".join(f"`{i}`" for i in idents), 40)
    return s


def _render(s: _Sections) -> str:
    def bullets(key: str, prefix: str = "- ") -> list[str]:
        items = s.items[key]
        return [f"{prefix}{i.text}" for i in items] or ["- (none)"]

    def numbered(key: str) -> list[str]:
        items = s.items[key]
        return [f"{n}. {i.text}" for n, i in enumerate(items, 1)] or ["1. (none recorded)"]

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


def fit_budget(s: _Sections, budget: int) -> str:
    """Drop the least important items until the summary fits `budget` tokens."""
    text = _render(s)
    total = count_text(text)
    if total <= budget:
        return text
    candidates: list[tuple[float, int, str, Item]] = []
    order = 0
    for key, items in s.items.items():
        for item in items:
            if not item.protected:
                item.tokens = count_text(item.text) + 3
                candidates.append((item.priority, order, key, item))
                order += 1
    candidates.sort(key=lambda c: (c[0], c[1]))
    dropped: set[int] = set()
    for _priority, _order, _key, item in candidates:
        if total <= budget:
            # Per-item counts are estimates (joins, "(none)" placeholders): confirm exactly.
            _apply_drops(s, dropped)
            total = count_text(_render(s))
            if total <= budget:
                break
        dropped.add(id(item))
        total -= item.tokens
    _apply_drops(s, dropped)
    text = _render(s)
    if count_text(text) > budget:
        text = _shorten_protected(s, budget)
    return text


SHORT_QUOTE_CHARS = 200


def _shorten_protected(s: _Sections, budget: int) -> str:
    """Last resort when the user's own words alone exceed the budget (hundreds of requests).

    Quotes are cut, longest first, to their first SHORT_QUOTE_CHARS characters — the start of
    a request carries its intent; nothing is removed outright.
    """
    protected = sorted(
        (i for items in s.items.values() for i in items if i.protected and len(i.text) > SHORT_QUOTE_CHARS + 20),
        key=lambda i: -len(i.text),
    )
    text = _render(s)
    for item in protected:
        quote = item.text.endswith('"')
        item.text = item.text[:SHORT_QUOTE_CHARS].rstrip() + ('…"' if quote else "…")
        text = _render(s)
        if count_text(text) <= budget:
            break
    return text


def _apply_drops(s: _Sections, dropped: set[int]) -> None:
    for key in s.items:
        s.items[key] = [i for i in s.items[key] if id(i) not in dropped]


def extractive_summary(
    messages: list[Msg],
    *,
    previous_summary: str | None = None,
    instructions: str | None = None,
    budget: int = 13_107,
) -> str:
    analysis = analyze(messages)
    return fit_budget(build_sections(analysis, previous_summary=previous_summary, instructions=instructions), budget)


def extractive_turn_prefix(messages: list[Msg], *, budget: int) -> str:
    """What the in-progress turn attempted so far, in the turn-prefix format."""
    a = analyze(messages)
    request = _one_line(a.requests[0], MAX_INSTRUCTION_CHARS + 1) if a.requests else ""
    attempted = [f"- Modified `{p}` ({n} edits)" for p, n in a.edits.items()]
    attempted += [
        f"- `{_one_line(c.splitlines()[0], 160)}` → {'ok' if ok else 'failed'}{': ' + d if d else ''}"
        for c, ok, d in a.commands[-25:]
    ]
    attempted += [f"- {t}" for t in a.done[-15:]]
    results = [f"- Error: {line}" for line in a.errors[-25:]]
    if a.read:
        results.append("- Files read: " + ", ".join(a.read[:40]))
    context = [f"- {t}" for t in (a.last_intents or a.intents)[-3:]]
    if a.last_tools:
        context.append("- Last tool activity: " + "; ".join(a.last_tools[-3:]))
    parts = [
        TURN_PREFIX_HEADINGS[0],
        f'User: "{request}"' if request else "(the request precedes this part of the turn)",
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
    return text


class ExtractiveSummarizer:
    name = "extractive"

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
