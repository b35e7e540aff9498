"""A ledger of what a compacted range held, a fidelity check of a summary against it, and repair.

Summaries lose exactly the things an agent needs to continue: the user's rules and
corrections, exact error lines, file paths (field notes: Claude Code's own summaries in our
real data keep 2 of 19 exact error lines). Before a summary goes live we list those items
from the messages themselves, measure which ones the summary kept, and append the missed
critical ones verbatim, so nothing critical is silently lost — and the report says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from compaction.core.fileops import extract_file_ops
from compaction.core.prompts import text_of
from compaction.core.summary_markdown import insert_into_section, parse_summary_sections
from compaction.core.text_heuristics import (  # noqa: F401 - re-exported for callers of the old module
    CONSTRAINT_RE,
    DECISION_RE,
    MAX_INSTRUCTION_CHARS,
    classify_user_text,
    clean_command,
    clean_user_text,
    command_error_lines,
    command_of,
    command_signature,
    command_signatures,
    commits_in_output,
    error_lines_of,
    instruction_quote,
    instruction_texts,
    is_probe_command,
    is_tool_rejection,
    normalize,
    paths_in,
    pushes_in_output,
    sentences,
    tool_result_text,
    user_texts,
)
from compaction.core.tool_vocabulary import tool_key
from compaction.core.types import FileOps, Msg

# "focus": what the compaction's focus instructions asked to keep ("the commit hashes pushed").
CATEGORIES = ("instructions", "files", "commands", "errors", "decisions", "focus")
# Repair appends these; commands and decisions are reported but a summary may paraphrase them.
CRITICAL_CATEGORIES = ("instructions", "errors", "files", "focus")
# Repair adds at most this many error lines, the newest first: the pi session's repair once
# appended 40 stale TypeScript errors and grew the summary to 24.9k characters.
MAX_REPAIR_ERRORS = 8
MAX_REPAIR_FILES = 30
MAX_REPORTED_MISSED = 50

_WORD_RE = re.compile(r"[a-z0-9_][a-z0-9_.\-/]{3,}")
_STOPWORDS = frozenset(
    "this that with from have will would could should there their they them then than what when where which "
    "while about into your just also been were does doing done make like need want please here some more "
    "very each other only over such after before these those being because".split()
)


@dataclass
class Ledger:
    """Items per category, in first-seen order, deduplicated."""

    items: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    # Error lines a later success in the range superseded: history, not must-keep items.
    resolved_errors: list[str] = field(default_factory=list)
    _seen: dict[str, set[str]] = field(
        default_factory=lambda: {c: set() for c in CATEGORIES}, repr=False, compare=False
    )

    def add(self, category: str, text: str) -> None:
        text = text.strip()
        if text and text not in self._seen[category]:
            self._seen[category].add(text)
            self.items[category].append(text)

    def total(self) -> int:
        return sum(len(v) for v in self.items.values())


_QUOTE_PREFIX_RE = re.compile(r"^User(?: said)?(?: \(verbatim\))?:\s*")
_PREVIOUS_ERROR_RE = re.compile(r"^Error(?: \(verbatim\))?:\s*(.+)$")


def _add_previous(ledger: Ledger, previous_summary: str) -> None:
    """What the previous summary carried forward must survive the next one (iterative merge)."""
    sections = parse_summary_sections(previous_summary)
    for item in sections.get("constraints", []):
        quoted = _QUOTE_PREFIX_RE.sub("", item).strip().strip('"').strip()
        if classify_user_text(quoted) != "chatter":
            ledger.add("instructions", quoted)
    for item in sections.get("critical", []):
        match = _PREVIOUS_ERROR_RE.match(item)
        if match:
            ledger.add("errors", match.group(1))


def build_ledger(
    messages: list[Msg],
    previous_summary: str | None = None,
    *,
    instructions: str | None = None,
    file_ops: FileOps | None = None,
) -> Ledger:
    """List what a compacted range held: instructions, files, commands, current error lines,
    decisions, and the items the focus `instructions` ask for.

    With `previous_summary`, its constraints and error lines are listed too: an update that
    silently drops them is caught and repaired like any other loss. An error line is listed
    only while it is current: a later successful run of the same command (or tool) in the
    range supersedes it, and it moves to `resolved_errors`.

    `file_ops`: the file operations of `messages` when the caller extracted them already.
    """
    ledger = Ledger()
    if previous_summary:
        _add_previous(ledger, previous_summary)
    tool_names: dict[str, str] = {}
    tool_commands: dict[str, str | None] = {}
    for msg in messages:
        for block in msg.blocks:
            if block.get("type") == "tool_use" and "id" in block:
                tool_names[block["id"]] = str(block.get("name", ""))
                tool_commands[block["id"]] = command_of(block)

    all_user_texts = [text for msg in messages for text in user_texts(msg)]
    for text in instruction_texts(all_user_texts):
        instruction = text if len(text) <= MAX_INSTRUCTION_CHARS else text[:MAX_INSTRUCTION_CHARS].rstrip() + "…"
        ledger.add("instructions", instruction)
    # (line, what settles it, position) of every error line; settled below.
    errors: list[tuple[str, tuple[str, ...], int]] = []
    last_ok: dict[tuple[str, ...], int] = {}
    commits: list[str] = []
    position = 0
    for msg in messages:
        for text in user_texts(msg):
            for sentence in sentences(text):
                if CONSTRAINT_RE.search(sentence) and 12 <= len(sentence) <= 400:
                    ledger.add("decisions", sentence)
            for path in paths_in(text):
                ledger.add("files", path)
        for block in msg.blocks:
            position += 1
            kind = block.get("type")
            if kind == "tool_use":
                command = command_of(block)
                if command:
                    ledger.add("commands", clean_command(command)[:300])
            elif kind == "tool_result":
                use_id = block.get("tool_use_id", "")
                output = tool_result_text(block.get("content"))
                command = tool_commands.get(use_id)
                name = tool_names.get(use_id, "")
                lines = command_error_lines(name, command, output, is_error=bool(block.get("is_error")))
                key = command_signature(clean_command(command)) if command else ("tool", tool_key(name))
                errors += [(line, key, position) for line in lines]
                if not lines and not block.get("is_error") and not is_tool_rejection(output):
                    for signature in command_signatures(clean_command(command)) if command else [key]:
                        last_ok[signature] = position
                if command:
                    commits += [sha for _branch, sha, _subject in commits_in_output(command, output)]
                    commits += [sha for sha, _dest in pushes_in_output(command, output) if sha]
            elif kind == "text" and msg.role == "assistant":
                for sentence in sentences(text_of(block, "text")):
                    if DECISION_RE.search(sentence) and 20 <= len(sentence) <= 300:
                        ledger.add("decisions", sentence)
    _add_errors(ledger, errors, last_ok)
    ops = file_ops if file_ops is not None else extract_file_ops(messages)
    for path in [*ops.modified, *ops.read]:
        ledger.add("files", path)
    if instructions:
        _add_focus(ledger, instructions, commits)
    return ledger


def _error_shape(line: str) -> str:
    """The same error at another line or column ("a.ts(12,5)", "a.py:40:") is the same error."""
    return re.sub(r"([(:,])\d+", r"\1#", normalize(line))


def _add_errors(
    ledger: Ledger, errors: list[tuple[str, tuple[str, ...], int]], last_ok: dict[tuple[str, ...], int]
) -> None:
    current: dict[str, str] = {}
    for line, key, position in errors:
        if last_ok.get(key, -1) > position:
            if line not in ledger.resolved_errors:
                ledger.resolved_errors.append(line)
            continue
        # One line per error shape, the newest instance.
        current.pop(_error_shape(line), None)
        current[_error_shape(line)] = line
    for line in current.values():
        ledger.add("errors", line)


_FOCUS_KINDS = (
    (re.compile(r"(?i)\b(commit|hash|sha)"), "commits"),
    (re.compile(r"(?i)\berror"), "errors"),
    (re.compile(r"(?i)\b(file|path)s?\b"), "files"),
)
_FOCUS_LITERAL_RE = re.compile(r"`([^`\n]{2,80})`|\"([^\"\n]{2,80})\"|'([^'\n]{2,80})'")


def _add_focus(ledger: Ledger, instructions: str, commits: list[str]) -> None:
    """The items a focus instruction asks for, so the check counts them and repair adds them:
    "keep the commit hashes pushed" → every hash created or pushed in the range; "the errors" →
    the error lines; a quoted or backticked term → that term verbatim."""
    for pattern, kind in _FOCUS_KINDS:
        if not pattern.search(instructions):
            continue
        if kind == "commits":
            for sha in dict.fromkeys(sha[:7] for sha in commits):
                ledger.add("focus", sha)
        elif kind == "errors":
            for line in ledger.items["errors"]:
                ledger.add("focus", line)
        elif kind == "files":
            for path in ledger.items["files"][:MAX_REPAIR_FILES]:
                ledger.add("focus", path)
    for match in _FOCUS_LITERAL_RE.finditer(instructions):
        ledger.add("focus", next(g for g in match.groups() if g))


# ---------------------------------------------------------------------------- checking


def _content_words(text: str) -> set[str]:
    return {w.strip(".-/") for w in _WORD_RE.findall(text.lower())} - _STOPWORDS - {""}


@dataclass
class _Haystack:
    norm: str
    words: set[str]

    @classmethod
    def of(cls, text: str) -> _Haystack:
        return cls(normalize(text), _content_words(text))


def _path_kept(path: str, hay: _Haystack) -> bool:
    norm = normalize(path)
    if norm in hay.norm:
        return True
    # Summaries relativize absolute paths; the last two components identify a file.
    parts = [p for p in norm.split("/") if p]
    return len(parts) >= 2 and "/".join(parts[-2:]) in hay.norm


def item_kept(category: str, item: str, hay: _Haystack) -> bool:
    norm = normalize(item.rstrip("…"))
    if category == "files":
        return _path_kept(item, hay)
    if category == "focus":
        return _path_kept(item, hay) if "/" in item else norm[:160] in hay.norm
    if category in ("errors", "commands"):
        # Exact lines: the line itself (its first 160 characters for long ones).
        return norm[:160] in hay.norm
    if norm[:200] in hay.norm:
        return True
    words = _content_words(item)
    if not words:
        return True
    return len(words & hay.words) / len(words) >= 0.6


def check_summary(summary: str, ledger: Ledger) -> dict[str, Any]:
    """Fidelity report: per category total, kept and the missed items."""
    hay = _Haystack.of(summary)
    categories: dict[str, Any] = {}
    kept_total = 0
    for category in CATEGORIES:
        items = ledger.items[category]
        missed = [item for item in items if not item_kept(category, item, hay)]
        kept = len(items) - len(missed)
        kept_total += kept
        categories[category] = {"total": len(items), "kept": kept, "missed": missed[:MAX_REPORTED_MISSED]}
    total = ledger.total()
    return {
        "categories": categories,
        "kept": kept_total,
        "total": total,
        "score": round(kept_total / total, 4) if total else 1.0,
    }


# ---------------------------------------------------------------------------- repair


def repair_summary(
    summary: str,
    ledger: Ledger,
    *,
    also_served: str = "",
    budget: int | None = None,
    max_chars: int | None = None,
) -> tuple[str, dict[str, int]]:
    """Append missed critical items verbatim; returns the repaired summary and counts added.

    Only current items are in the ledger (a fixed error is not), each once. `also_served` is
    text served alongside the summary (the turn-prefix summary): what it kept is not
    repeated. Repair never floods: with `budget` (tokens) and `max_chars` the repaired summary
    stays within both; the user's instructions go first, then the focus items, the newest
    errors (at most MAX_REPAIR_ERRORS), then file paths (at most MAX_REPAIR_FILES); what is
    left out by a budget or cap is counted in "skipped_for_budget".
    """
    from compaction.core.tokens import count_text

    hay = _Haystack.of(summary + "\n\n" + also_served)
    missed = {c: [i for i in ledger.items[c] if not item_kept(c, i, hay)] for c in CRITICAL_CATEGORIES}
    added = {"instructions": 0, "errors": 0, "files": 0, "focus": 0, "skipped_for_budget": 0}
    room = None if budget is None else budget - count_text(summary)
    char_room = None if max_chars is None else max_chars - len(summary)

    def fits(line: str) -> bool:
        nonlocal room, char_room
        cost = 0 if room is None else count_text(line) + 1
        if (room is not None and cost > room) or (char_room is not None and len(line) + 1 > char_room):
            added["skipped_for_budget"] += 1
            return False
        if room is not None:
            room -= cost
        if char_room is not None:
            char_room -= len(line) + 1
        return True

    instructions = [
        line for line in (f'- User said (verbatim): "{item}"' for item in missed["instructions"]) if fits(line)
    ]
    critical: list[str] = []
    focus = [item for item in missed["focus"] if item not in missed["errors"] and item not in missed["files"]]
    short = [item for item in focus if len(item) <= 80 and "\n" not in item]
    shown = [item for item in short if fits(f"`{item}`, ")]
    if shown:
        critical.append("- Kept for the requested focus: " + ", ".join(f"`{item}`" for item in shown))
    for item in focus:
        if item not in short and fits(f"- Kept for the requested focus: {item}"):
            critical.append(f"- Kept for the requested focus: {item}")
            shown.append(item)
    # The newest errors matter most for continuing; keep order but cap from the end.
    capped = missed["errors"][:-MAX_REPAIR_ERRORS]
    added["skipped_for_budget"] += len(capped)
    errors = missed["errors"][-MAX_REPAIR_ERRORS:]
    kept_errors = [line for line in reversed(errors) if fits(f"- Error (verbatim): {line}")]
    critical += [f"- Error (verbatim): {line}" for line in errors if line in kept_errors]
    added["skipped_for_budget"] += max(0, len(missed["files"]) - MAX_REPAIR_FILES)
    files = [path for path in missed["files"][:MAX_REPAIR_FILES] if fits(path + ", ")]
    if files:
        critical.append("- Files involved: " + ", ".join(files))
    if instructions:
        summary = insert_into_section(summary, "Constraints & Preferences", instructions)
        added["instructions"] = len(instructions)
    added["errors"] = len(kept_errors)
    added["files"] = len(files)
    added["focus"] = len(shown)
    if critical:
        summary = insert_into_section(summary, "Critical Context", critical)
    return summary, added


def fidelity_report(
    summary: str,
    ledger: Ledger,
    *,
    also_served: str = "",
    budget: int | None = None,
    max_chars: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Check, repair (within `budget` tokens and `max_chars` when given), check again: the
    summary and its report."""
    before = check_summary(summary + "\n\n" + also_served, ledger)
    repaired, added = repair_summary(summary, ledger, also_served=also_served, budget=budget, max_chars=max_chars)
    after = check_summary(repaired + "\n\n" + also_served, ledger)
    report: dict[str, Any] = {
        "score": after["score"],
        "score_before_repair": before["score"],
    }
    # Flat per-category counts for dashboards and the bench; details below them.
    for category in CATEGORIES:
        report[category] = {
            "kept": after["categories"][category]["kept"],
            "total": after["categories"][category]["total"],
            "kept_before_repair": before["categories"][category]["kept"],
        }
    report["resolved_errors"] = len(ledger.resolved_errors)
    report.update({"repaired": added, "before_repair": before, "after_repair": after})
    return repaired, report
