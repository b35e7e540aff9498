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
    error_lines_of,
    instruction_quote,
    instruction_texts,
    is_probe_command,
    is_tool_rejection,
    normalize,
    paths_in,
    sentences,
    tool_result_text,
    user_texts,
)
from compaction.core.types import Msg

CATEGORIES = ("instructions", "files", "commands", "errors", "decisions")
# Repair appends these; commands and decisions are reported but a summary may paraphrase them.
CRITICAL_CATEGORIES = ("instructions", "errors", "files")
MAX_REPAIR_ERRORS = 40
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


def build_ledger(messages: list[Msg], previous_summary: str | None = None) -> Ledger:
    """List what a compacted range held: instructions, files, commands, error lines, decisions.

    With `previous_summary`, its constraints and error lines are listed too: an update that
    silently drops them is caught and repaired like any other loss.
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
    for msg in messages:
        for text in user_texts(msg):
            for sentence in sentences(text):
                if CONSTRAINT_RE.search(sentence) and 12 <= len(sentence) <= 400:
                    ledger.add("decisions", sentence)
            for path in paths_in(text):
                ledger.add("files", path)
        for block in msg.blocks:
            kind = block.get("type")
            if kind == "tool_use":
                command = command_of(block)
                if command:
                    ledger.add("commands", clean_command(command)[:300])
            elif kind == "tool_result":
                use_id = block.get("tool_use_id", "")
                output = tool_result_text(block.get("content"))
                for line in command_error_lines(
                    tool_names.get(use_id, ""), tool_commands.get(use_id), output, is_error=bool(block.get("is_error"))
                ):
                    ledger.add("errors", line)
            elif kind == "text" and msg.role == "assistant":
                for sentence in sentences(text_of(block, "text")):
                    if DECISION_RE.search(sentence) and 20 <= len(sentence) <= 300:
                        ledger.add("decisions", sentence)

    ops = extract_file_ops(messages)
    for path in [*ops.modified, *ops.read]:
        ledger.add("files", path)
    return ledger


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
    summary: str, ledger: Ledger, *, also_served: str = "", budget: int | None = None
) -> tuple[str, dict[str, int]]:
    """Append missed critical items verbatim; returns the repaired summary and counts added.

    `also_served` is text served alongside the summary (the turn-prefix summary): what it
    kept is not repeated. With `budget`, the repaired summary stays within that many tokens:
    the user's instructions are added first, then the newest errors, then file paths; what
    does not fit is counted in "skipped_for_budget".
    """
    from compaction.core.tokens import count_text

    hay = _Haystack.of(summary + "\n\n" + also_served)
    missed = {c: [i for i in ledger.items[c] if not item_kept(c, i, hay)] for c in CRITICAL_CATEGORIES}
    added = {"instructions": 0, "errors": 0, "files": 0, "skipped_for_budget": 0}
    room = None if budget is None else budget - count_text(summary)

    def fits(line: str) -> bool:
        nonlocal room
        if room is None:
            return True
        cost = count_text(line) + 1
        if cost > room:
            added["skipped_for_budget"] += 1
            return False
        room -= cost
        return True

    instructions = [
        line for line in (f'- User said (verbatim): "{item}"' for item in missed["instructions"]) if fits(line)
    ]
    critical: list[str] = []
    # The newest errors matter most for continuing; keep order but cap from the end.
    errors = missed["errors"][-MAX_REPAIR_ERRORS:]
    kept_errors = [line for line in reversed(errors) if fits(f"- Error (verbatim): {line}")]
    for line in errors:
        if line in kept_errors:
            critical.append(f"- Error (verbatim): {line}")
    files: list[str] = []
    for path in missed["files"]:
        if fits(path + ", "):
            files.append(path)
    if files:
        critical.append("- Files involved: " + ", ".join(files))
    if instructions:
        summary = insert_into_section(summary, "Constraints & Preferences", instructions)
        added["instructions"] = len(instructions)
    added["errors"] = len(kept_errors)
    added["files"] = len(files)
    if critical:
        summary = insert_into_section(summary, "Critical Context", critical)
    return summary, added


def fidelity_report(
    summary: str, ledger: Ledger, *, also_served: str = "", budget: int | None = None
) -> tuple[str, dict[str, Any]]:
    """Check, repair (within `budget` tokens when given), check again: the summary and its report."""
    before = check_summary(summary + "\n\n" + also_served, ledger)
    repaired, added = repair_summary(summary, ledger, also_served=also_served, budget=budget)
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
    report.update({"repaired": added, "before_repair": before, "after_repair": after})
    return repaired, report
