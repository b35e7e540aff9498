"""A summary checked against the work state, and repaired before it goes live.

An LLM writes from the transcript it was given, which ends at the cut; the agent will read the
summary beside the messages kept after it. So a summary must agree with the state of the work
as of the newest message: nothing the state shows closed may be listed as in progress, blocked
or next; every commit must be named; "Where Things Stand" must be there. What disagrees is
repaired here — stale lines removed, missing facts added from the state — and each repair is
recorded with the compaction (`Fidelity.agreement`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from compaction.core.summarizers.extractive.render import where_lines
from compaction.core.summary_markdown import insert_into_section
from compaction.core.vocabulary import names_key
from compaction.core.work.state import WorkState

_HEADING_RE = re.compile(r"^(#{2,3})\s+(.+?)\s*$")
# Sections whose lines state what is still to do.
_OPEN_SECTIONS = ("in progress", "blocked", "next steps", "pending", "current work", "remaining")
_DONE_WORDS_RE = re.compile(r"(?i)\b(closed|done|completed|finished|committed|merged|fixed|passed)\b|✓|\[x\]")
WHERE_HEADING = "## Where Things Stand"


@dataclass
class Agreement:
    summary: str
    repairs: list[str] = field(default_factory=list)


def _section_of_lines(summary: str) -> list[tuple[str, str]]:
    """(the heading a line is under, lower-case, the line) for every line."""
    out, current = [], ""
    for line in summary.splitlines():
        heading = _HEADING_RE.match(line)
        if heading:
            current = heading.group(2).strip().lower()
        out.append((current, line))
    return out


def _drop_stale(summary: str, state: WorkState, repairs: list[str]) -> str:
    closed = [t.key for t in state.tasks.tasks.values() if t.status == "closed" and t.source != "todo"]
    if not closed:
        return summary
    kept = []
    for section, line in _section_of_lines(summary):
        stale = next((k for k in closed if names_key(line, k)), None) if section.startswith(_OPEN_SECTIONS) else None
        if (
            stale
            and line.lstrip().startswith(("-", "*", "1", "2", "3", "4", "5", "6", "7", "8", "9"))
            and not _DONE_WORDS_RE.search(line)
        ):
            repairs.append(f"removed a line listing {stale} as open (closed at #{state.tasks.tasks[stale].closed})")
            continue
        kept.append(line)
    return "\n".join(kept)


def _add_commits(summary: str, state: WorkState, repairs: list[str]) -> str:
    lines = []
    for commit in state.git.commits:
        if commit.subject and commit.sha[:7].lower() not in summary.lower():
            # Only what a message shows: a push seen, or that none was seen (not "not pushed").
            if commit.pushed_to:
                at = f" at #{commit.pushed_seq}" if commit.pushed_seq else ""
                pushed = f"pushed to `{commit.pushed_to}`{at}"
            else:
                pushed = "no push of it in this history"
            lines.append(f'- Commit `{commit.sha[:7]}` "{commit.subject}" (#{commit.seq}, {pushed})')
            repairs.append(f"added commit {commit.sha[:7]}")
    return insert_into_section(summary, "Critical Context", lines) if lines else summary


def agree(summary: str, state: WorkState | None, *, add_where: bool = True) -> Agreement:
    """`summary` made to agree with `state` (the state as of the newest message); with
    `add_where`, a summary without "Where Things Stand" gets the state's."""
    if state is None:
        return Agreement(summary)
    repairs: list[str] = []
    text = _drop_stale(summary, state, repairs)
    text = _add_commits(text, state, repairs)
    if add_where and WHERE_HEADING.lower() not in text.lower():
        where = where_lines(state)
        if where:
            text = f"{WHERE_HEADING}\n" + "\n".join(where) + "\n\n" + text.lstrip()
            repairs.append("added Where Things Stand, computed from the work state")
    return Agreement(text, repairs)
