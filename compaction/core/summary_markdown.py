"""The Markdown of a structured summary: its sections as items, and inserting into one.

Summaries carry state forward (a previous summary's rules, errors, plan); both the
summarizers that merge a previous summary and the repair step that appends to one read
and write the same section layout, so it is parsed in one place.
"""

from __future__ import annotations

import re

from compaction.core.prompts import strip_file_tags

_H2_RE = re.compile(r"^##\s+(.+?)\s*$")
_H3_RE = re.compile(r"^###\s+(.+?)\s*$")
# A list item's marker (-, *, •, "1." or "1)"), with a checkbox when it has one.
_ITEM_MARKER_RE = re.compile(r"^(?:[-*•]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)")
_NONE_ITEM_RE = re.compile(r"\n- \(none\)\s*$")  # a section's "(none)" placeholder, at its end
SECTION_KEYS = {
    "goal": "goal",
    "constraints & preferences": "constraints",
    "constraints": "constraints",
    "key decisions": "decisions",
    "next steps": "next",
    "critical context": "critical",
    "progress": "done",
}
SUB_KEYS = {
    "done": "done",
    "in progress": "in_progress",
    "blocked": "blocked",
    "user messages": "user_messages",
    "user messages (oldest first)": "user_messages",
    "repository state": "repo",
    "errors and fixes": "errors",
    "files": "files",
    "files and their purpose": "files",
}


def parse_summary_sections(summary: str) -> dict[str, list[str]]:
    """Bullet items of a structured summary, by section key (lines outside bullets kept too)."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    section: str | None = None
    for raw in strip_file_tags(summary).splitlines():
        line = raw.strip()
        if not line:
            continue
        h3 = _H3_RE.match(line)
        h2 = _H2_RE.match(line) if not h3 else None
        if h2:
            current = section = SECTION_KEYS.get(h2.group(1).strip().lower(), "critical")
            continue
        if h3:
            current = SUB_KEYS.get(h3.group(1).strip().lower(), section or "critical")
            continue
        item = _ITEM_MARKER_RE.sub("", line).strip()
        if not item or item.lower() in ("(none)", "(none recorded)", "none"):
            continue
        sections.setdefault(current or "critical", []).append(item)
    return sections


_HEADING_RE = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)
_TAGS_START_RE = re.compile(r"^<(read-files|modified-files)>", re.MULTILINE)


def insert_into_section(summary: str, heading: str, lines: list[str]) -> str:
    """Append bullet lines at the end of `## heading`, creating the section when it is missing."""
    if not lines:
        return summary
    addition = "\n".join(lines)
    match = next((m for m in _HEADING_RE.finditer(summary) if m.group(1).strip().lower() == heading.lower()), None)
    if match is None:
        tags = _TAGS_START_RE.search(summary)
        block = f"## {heading}\n{addition}\n"
        if tags:
            return summary[: tags.start()].rstrip() + "\n\n" + block + "\n" + summary[tags.start() :]
        return summary.rstrip() + "\n\n" + block.rstrip()
    end = len(summary)
    following = _HEADING_RE.search(summary, match.end())
    if following:
        end = following.start()
    tags = _TAGS_START_RE.search(summary, match.end())
    if tags and tags.start() < end:
        end = tags.start()
    body = summary[match.end() : end].rstrip()
    # Replace a "(none)" placeholder instead of listing items under it.
    body = _NONE_ITEM_RE.sub("", body)
    rest = summary[end:]
    return summary[: match.end()] + body + "\n" + addition + ("\n\n" + rest.lstrip("\n") if rest.strip() else "\n")
