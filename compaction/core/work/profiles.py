"""The user's turn, read for the work model: the person's words and the harness's text
(compaction.core.provenance: the stated provenance of a message and its blocks, else the known
shapes of what each agent injects — skill documents, command caveats, hook output, reminders,
Codex's environment context, task templates with worked examples), and how a harness's task
template says the work is handed in.

Adding an agent: the shapes of the text it injects go in compaction.core.provenance (a tag, a
whole-text prefix, a template); if its template names a command that hands the work in, a
`Profile` here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.core import provenance
from compaction.core.types import Msg


@dataclass(frozen=True)
class Profile:
    """How one harness's task template says the work is handed in."""

    name: str
    handover: re.Pattern[str]


PROFILES: tuple[Profile, ...] = (
    Profile("swe-agent", re.compile(r"(?i)\bsubmit\b[^.\n]{0,80}?\bby (?:simply )?running the `?(\w+)`? command\b")),
)
HOOK_DEMAND_RE = re.compile(r"^\s*(\w+) hook (?:feedback|error|blocking error)\b[^\n]*:?\s*", re.I)
PERSON, HARNESS = "person", "harness"


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a user message: the person's words or injected text."""

    provenance: str  # person | harness
    kind: str  # for harness text: skill, reminder, hook …; for the person: "" or "queued"
    text: str


def message_parts(msg: Msg) -> list[Part]:
    """The pieces of a user message in order: the person's words (typed, queued while the agent
    worked, a command, the task inside a template) and injected text, as compaction.core.provenance
    reads them (the stated provenance of the message and its blocks, the shapes otherwise). A
    hook's demand is kept without the harness's "Stop hook feedback:" lead-in."""
    if msg.role != "user":
        return []
    out: list[Part] = []
    for part in provenance.message_parts(msg):
        if part.provenance == provenance.PERSON:
            # Each message queued while the agent worked is one of the person's messages.
            texts = (
                [provenance.clean_text(m.group(1)) for m in provenance.QUEUED_RE.finditer(part.text)]
                if part.kind == provenance.QUEUED
                else [part.words]
            )
            out += [Part(PERSON, part.kind, text) for text in texts if text]
        elif part.kind == provenance.HOOK:
            out.append(Part(HARNESS, part.kind, HOOK_DEMAND_RE.sub("", part.text, count=1).strip() or part.text))
        else:
            out.append(Part(HARNESS, part.kind or "injected", part.text))
    return out


def handover_command(text: str) -> str:
    """The command a task template says hands the work over (SWE-agent's "…by simply running
    the submit command"), or ""."""
    for profile in PROFILES:
        match = profile.handover.search(text)
        if match:
            return match.group(1)
    return ""
