"""A ledger of what a compacted range held, a fidelity check of a summary against it, and repair.

Summaries lose exactly the things an agent needs to continue: the user's rules and
corrections, exact error lines, file paths (field notes: Claude Code's own summaries in our
real data keep 2 of 19 exact error lines). Before a summary goes live we list those items
from the messages themselves, measure which ones the summary kept, and append the missed
critical ones verbatim, so nothing critical is silently lost — and the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from compaction.core.paths import SCRATCH_DIR_RE
from compaction.core.summary_markdown import insert_into_section, parse_summary_sections
from compaction.core.text_heuristics import (
    MAX_INSTRUCTION_CHARS,
    classify_user_text,
    clean_command,
    instruction_texts,
    normalize,
    paths_in,
)
from compaction.core.tokens import count_text
from compaction.core.vocabulary import is_probe
from compaction.core.work import WorkState
from compaction.core.work.reducers.decisions import taken_out

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
# A file named alone in a summary (`mix.exs`, a line of the file tags): NAME stands for its name,
# escaped (_path_kept); the rule's row tests the bounds around it.
_NAMED_FILE_RE = re.compile(r"(?:^|[\s`(])NAME(?:$|[\s`),])")


def _add_previous(ledger: Ledger, previous_summary: str) -> None:
    """A previous summary with no stored work state (written before there was one): its
    constraints and error lines must survive the next one."""
    sections = parse_summary_sections(previous_summary)
    for item in sections.get("constraints", []):
        quoted = _QUOTE_PREFIX_RE.sub("", item).strip().strip('"').strip()
        if classify_user_text(quoted) != "chatter":
            ledger.add("instructions", quoted)
    for item in sections.get("critical", []):
        match = _PREVIOUS_ERROR_RE.match(item)
        if match:
            ledger.add("errors", match.group(1))


def _of_the_work(error: Any, state: WorkState) -> bool:
    """An error the handoff must carry: a command's or a check's. A file or helper tool, or a
    look around (grep, ls), that failed and was passed over is not, unless it just happened."""
    source = error.source.strip("`")
    passing = not error.key.startswith(("cmd:", "check:")) or (error.key.startswith("cmd:") and is_probe(source))
    return not passing or error.seq >= state.through - 2


def build_ledger(
    state: WorkState,
    *,
    through: int | None = None,
    previous_summary: str | None = None,
    instructions: str | None = None,
) -> Ledger:
    """What a summary must carry, read off the work state: the person's first and latest
    requests and every rule they gave, the files changed and read, the commands and checks
    run, the error lines still open, the decisions, and what the focus `instructions` ask for.

    `state` is the state as of the newest message (an error fixed after the summarized range
    is fixed); `through` restricts the items to the summarized range (what comes after is
    served verbatim). Only the person's words count as instructions: text the harness put in
    the user's turn never does. `previous_summary`: a previous summary that came without a
    stored state, whose rules and error lines are listed too.
    """
    last = through if through is not None else state.through
    ledger = Ledger()
    if previous_summary:
        _add_previous(ledger, previous_summary)
    person = [p for p in state.people.messages if p.seq <= last]
    for text in instruction_texts([p.text for p in person]):
        ledger.add(
            "instructions", text if len(text) <= MAX_INSTRUCTION_CHARS else text[:MAX_INSTRUCTION_CHARS].rstrip() + "…"
        )
    for rec in sorted(state.files.values(), key=lambda r: (r.state == "read" and not r.edits, r.first)):
        # A file only read in scratch space (a background task's output) is not carried over.
        scratch = rec.state == "read" and not rec.edits and SCRATCH_DIR_RE.match(rec.path)
        if rec.first <= last and not scratch:
            ledger.add("files", rec.path)
    for p in person:
        for path in paths_in(p.text):  # a file the person named is one the summary must name
            ledger.add("files", path)
    for check in state.checks.values():
        if check.seq <= last or (check.failed_seq or last + 1) <= last:
            ledger.add("commands", clean_command(check.command)[:300])
    for error in state.errors:
        if error.seq > last:
            continue
        if error.status == "open" and _of_the_work(error, state):  # never resolved, even if the work went on
            ledger.add("errors", error.line)
        elif error.line not in ledger.resolved_errors:
            ledger.resolved_errors.append(error.line)
    for decision in state.decisions:
        # A choice of code the later edits took out again did not hold: no summary need name it.
        if decision.seq <= last and taken_out(state, f"{decision.reason}\n{decision.choice}", decision.seq) is None:
            ledger.add("decisions", decision.reason or decision.choice)
    if instructions:
        _add_focus(ledger, instructions, [c.sha for c in state.git.commits if c.seq <= last])
    return ledger


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
    # Summaries relativize absolute paths; the last two components identify a file, and a file
    # at the project's top is named alone (`mix.exs`, a line of the file tags).
    parts = [p for p in norm.split("/") if p]
    if len(parts) >= 2 and "/".join(parts[-2:]) in hay.norm:
        return True
    return bool(parts) and re.search(_NAMED_FILE_RE.pattern.replace("NAME", re.escape(parts[-1])), hay.norm) is not None


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


@dataclass(frozen=True)
class CategoryCheck:
    """One category of a check: the ledger's items, how many the summary kept, and the missed
    ones (the first MAX_REPORTED_MISSED)."""

    total: int
    kept: int
    missed: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"total": self.total, "kept": self.kept, "missed": list(self.missed)}


@dataclass(frozen=True)
class SummaryCheck:
    """A summary checked against a ledger: per category (in CATEGORIES order) and overall."""

    categories: Mapping[str, CategoryCheck]
    kept: int
    total: int
    score: float  # kept / total, 1.0 for an empty ledger

    def as_json(self) -> dict[str, Any]:
        return {
            "categories": {name: check.as_json() for name, check in self.categories.items()},
            "kept": self.kept,
            "total": self.total,
            "score": self.score,
        }


@dataclass(frozen=True)
class Repairs:
    """What repair appended per critical category, and the items a budget or cap left out."""

    instructions: int = 0
    errors: int = 0
    files: int = 0
    focus: int = 0
    skipped_for_budget: int = 0

    def as_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Fidelity:
    """What a summary kept of its ledger, before and after repair, and how it was made to agree
    with the work state. `error` set: the check could not run, and there are no figures."""

    before: SummaryCheck | None = None
    after: SummaryCheck | None = None
    repaired: Repairs = field(default_factory=Repairs)
    resolved_errors: int = 0  # error lines a later success superseded (not must-keep items)
    # The agreement repairs (summarizers/agree.py): stale lines removed, facts added.
    agreement: tuple[str, ...] = ()
    error: str = ""

    @property
    def score(self) -> float | None:
        return self.after.score if self.after is not None else None

    @property
    def score_before_repair(self) -> float | None:
        return self.before.score if self.before is not None else None

    def as_json(self) -> dict[str, Any]:
        """The form stored on the job (Compaction.fidelity), which the dashboard, the admin and
        the API read: flat scores and per-category counts first, the full checks below them."""
        agreement = {"repaired": bool(self.agreement), "repairs": list(self.agreement)}
        if self.before is None or self.after is None:
            return {"error": self.error, "agreement": agreement}
        report: dict[str, Any] = {"score": self.after.score, "score_before_repair": self.before.score}
        for name, after in self.after.categories.items():
            report[name] = {
                "kept": after.kept,
                "total": after.total,
                "kept_before_repair": self.before.categories[name].kept,
            }
        report["resolved_errors"] = self.resolved_errors
        report["repaired"] = self.repaired.as_json()
        report["before_repair"] = self.before.as_json()
        report["after_repair"] = self.after.as_json()
        report["agreement"] = agreement
        return report


def check_summary(summary: str, ledger: Ledger) -> SummaryCheck:
    """What of the ledger `summary` kept: per category the total, the kept and the missed items."""
    hay = _Haystack.of(summary)
    categories: dict[str, CategoryCheck] = {}
    for category in CATEGORIES:
        items = ledger.items[category]
        missed = [item for item in items if not item_kept(category, item, hay)]
        categories[category] = CategoryCheck(len(items), len(items) - len(missed), tuple(missed[:MAX_REPORTED_MISSED]))
    kept = sum(c.kept for c in categories.values())
    total = ledger.total()
    return SummaryCheck(categories, kept, total, round(kept / total, 4) if total else 1.0)


# ---------------------------------------------------------------------------- repair


@dataclass
class _Room:
    """What is left of the token budget and the character cap (None: no limit) as repair lines
    are taken, and how many items were left out for either."""

    tokens: int | None
    chars: int | None
    skipped: int = 0

    def take(self, line: str) -> bool:
        """Whether `line` (plus its separator) fits; if it does, its room is spent."""
        cost = 0 if self.tokens is None else count_text(line) + 1
        if (self.tokens is not None and cost > self.tokens) or (self.chars is not None and len(line) + 1 > self.chars):
            self.skipped += 1
            return False
        if self.tokens is not None:
            self.tokens -= cost
        if self.chars is not None:
            self.chars -= len(line) + 1
        return True


def _focus_lines(missed: dict[str, list[str]], room: _Room) -> tuple[list[str], int]:
    """Lines for the missed focus items that repair adds as errors or files anyway are left out;
    short ones share one line. (lines, items shown)."""
    focus = [item for item in missed["focus"] if item not in missed["errors"] and item not in missed["files"]]
    short = [item for item in focus if len(item) <= 80 and "\n" not in item]
    shown = [item for item in short if room.take(f"`{item}`, ")]
    lines = ["- Kept for the requested focus: " + ", ".join(f"`{item}`" for item in shown)] if shown else []
    for item in focus:
        if item not in short and room.take(f"- Kept for the requested focus: {item}"):
            lines.append(f"- Kept for the requested focus: {item}")
            shown.append(item)
    return lines, len(shown)


REPAIR_HEADING = "### Also in the history, verbatim (error lines and paths from its tool output)"


def _error_lines(missed: list[str], room: _Room) -> list[str]:
    """At most MAX_REPAIR_ERRORS missed error lines, in their order; the newest matter most for
    continuing, so they are taken first and the cap drops the oldest."""
    room.skipped += len(missed[:-MAX_REPAIR_ERRORS])
    errors = missed[-MAX_REPAIR_ERRORS:]
    taken = {line for line in reversed(errors) if room.take(f"- Error (verbatim): {line}")}
    return [f"- Error (verbatim): {line}" for line in errors if line in taken]


def repair_summary(
    summary: str,
    ledger: Ledger,
    *,
    also_served: str = "",
    budget: int | None = None,
    max_chars: int | None = None,
) -> tuple[str, Repairs]:
    """Append missed critical items verbatim; returns the repaired summary and what was added.

    Only current items are in the ledger (a fixed error is not), each once. `also_served` is
    text served alongside the summary (the turn-prefix summary): what it kept is not
    repeated. Repair never floods: with `budget` (tokens) and `max_chars` the repaired summary
    stays within both; the user's instructions go first, then the focus items, the newest
    errors (at most MAX_REPAIR_ERRORS), then file paths (at most MAX_REPAIR_FILES); what is
    left out by a budget or cap is counted in `skipped_for_budget`.
    """
    hay = _Haystack.of(summary + "\n\n" + also_served)
    missed = {c: [i for i in ledger.items[c] if not item_kept(c, i, hay)] for c in CRITICAL_CATEGORIES}
    room = _Room(
        tokens=None if budget is None else budget - count_text(summary),
        chars=None if max_chars is None else max_chars - len(summary),
    )
    instructions = [
        line for line in (f'- User said (verbatim): "{item}"' for item in missed["instructions"]) if room.take(line)
    ]
    focus, focus_shown = _focus_lines(missed, room)
    errors = _error_lines(missed["errors"], room)
    room.skipped += max(0, len(missed["files"]) - MAX_REPAIR_FILES)
    files = [path for path in missed["files"][:MAX_REPAIR_FILES] if room.take(path + ", ")]
    critical = [*focus, *errors, *(["- Files involved: " + ", ".join(files)] if files else [])]
    if instructions:
        summary = insert_into_section(summary, "Constraints & Preferences", instructions)
    if critical:
        # Under a heading of their own: appended at the section's end, they would otherwise read
        # as items of its last subsection (an error line among the person's messages).
        summary = insert_into_section(summary, "Critical Context", [REPAIR_HEADING, *critical])
    repairs = Repairs(
        instructions=len(instructions),
        errors=len(errors),
        files=len(files),
        focus=focus_shown,
        skipped_for_budget=room.skipped,
    )
    return summary, repairs


def fidelity_report(
    summary: str,
    ledger: Ledger,
    *,
    also_served: str = "",
    budget: int | None = None,
    max_chars: int | None = None,
) -> tuple[str, Fidelity]:
    """Check, repair (within `budget` tokens and `max_chars` when given), check again: the
    summary and its report."""
    before = check_summary(summary + "\n\n" + also_served, ledger)
    repaired, added = repair_summary(summary, ledger, also_served=also_served, budget=budget, max_chars=max_chars)
    after = check_summary(repaired + "\n\n" + also_served, ledger)
    return repaired, Fidelity(before, after, added, resolved_errors=len(ledger.resolved_errors))
