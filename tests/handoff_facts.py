"""What a handoff (a served summary) must hold, read as facts rather than wording: its sections,
no first-person narration of the agent outside a quote, no harness text quoted as the person.
bench/summary_eval.py reports the same checks over the shared sessions."""

from __future__ import annotations

import re

# The agent speaking in the first person: allowed only inside a quote.
NARRATION_RE = re.compile(
    r"\b(I'll|I will|I'm|I am going|I need to|I see|Let me|Let's|Now I|I think|we'll|We need to)\b"
)
# Claude Code's injected text (skill bodies, command caveats, reminders, hook output).
HARNESS_RE = re.compile(
    r"Base directory for this skill|Caveat: The messages below|<system-reminder>|<command-(?:name|message|args)>|"
    r"<local-command|\bhook (?:feedback|error)\b|<task-notification>|This session is being continued"
)
PEOPLE_SECTIONS = ("## Goal", "## Constraints & Preferences", "### The Person's Messages")


def _unquoted(line: str) -> str:
    return re.sub(r'"[^"]*"|`[^`]*`', " ", line)


def narration_lines(summary: str) -> list[str]:
    """Lines where the agent's words stand outside a quote, as if they were facts."""
    return [line for line in summary.splitlines() if NARRATION_RE.search(_unquoted(line))]


def harness_lines(summary: str) -> list[str]:
    """Lines of the sections that quote the person that hold the harness's injected text."""
    out, inside = [], False
    for line in summary.splitlines():
        if line.startswith("#"):
            inside = line.strip() in PEOPLE_SECTIONS
        elif inside and HARNESS_RE.search(line):
            out.append(line)
    return out


def sections(summary: str) -> dict[str, list[str]]:
    """The summary's Markdown headings (in order, as keys) with their non-blank lines."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in summary.splitlines():
        if line.startswith("#"):
            current = line.strip()
            out.setdefault(current, [])
        elif line.strip():
            out.setdefault(current, []).append(line.rstrip())
    return out


_CODE_SPAN_RE = re.compile(r"`([^`\s]+)`")  # a quoted identifier, path, hash or id (no space)
_HASH_RE = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w/-])")
_TAG_RE = re.compile(r"^</?([a-z][\w-]*)>$")


def facts(summary: str) -> dict[str, list[str]]:
    """Per section (a heading, or a file-list tag such as <read-files>): the facts it states that
    wording does not change: quoted identifiers and paths, commit hashes, and the listed files."""
    out: dict[str, set[str]] = {}
    current = ""
    for line in summary.splitlines():
        tag = _TAG_RE.match(line.strip())
        if line.startswith("#") or (tag and not line.strip().startswith("</") and tag.group(1) != "summary"):
            current = line.strip()
            out.setdefault(current, set())
            continue
        if tag:
            continue
        found = out.setdefault(current, set())
        if current.startswith("<"):
            found.add(line.strip())
        found.update(_CODE_SPAN_RE.findall(line))
        found.update(_HASH_RE.findall(line))
    return {section: sorted(found - {""}) for section, found in out.items()}
