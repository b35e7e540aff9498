"""Shared types of the summarizers and the check every summary passes before it is accepted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compaction.core.ledger import Fidelity
from compaction.core.prompts import SECTION_HEADINGS
from compaction.core.tokens import count_text
from compaction.core.types import Fallback, FileOps, Msg
from compaction.core.work import WorkState

# The section skeleton alone costs ~60 tokens, so a summary of a tiny range may be larger
# than the range; below this floor "smaller than its input" is not required.
SIZE_CHECK_FLOOR_TOKENS = 400


@dataclass
class SummaryInput:
    # Everything before the kept messages, a long turn cut inside included: one history.
    messages: list[Msg]
    previous_summary: str | None = None
    previous_files: FileOps = field(default_factory=FileOps)
    instructions: str | None = None
    custom_prompt: str | None = None
    output_budget: int = 13_107
    model: str = "claude-haiku-4-5"
    # The file operations of the messages, extracted once per job (by the chain) and
    # handed to whatever needs them (extractive analysis, fidelity ledger); None: not yet.
    file_ops: FileOps | None = None
    # The messages kept verbatim after the summary, up to the newest: what the summary states
    # as the current status must agree with them (they are not summarized).
    kept: list[Msg] = field(default_factory=list)
    # The work state the previous compaction stored (folded through its summarized range).
    previous_state: WorkState | None = None
    # Folded once per job by the chain: through the summarized range (stored for the next
    # compaction), and on through the kept messages (what the summary states as current).
    state: WorkState | None = None
    state_now: WorkState | None = None

    @property
    def input_tokens(self) -> int:
        total = sum(m.tokens for m in self.messages)
        if self.previous_summary:
            total += count_text(self.previous_summary)
        return total


@dataclass
class SummaryResult:
    summary: str
    strategy: str
    model: str
    usage: dict[str, Any]
    fallbacks: list[Fallback]
    read_files: list[str]
    modified_files: list[str]
    fidelity: Fidelity
    # The work state through the summarized range (JSON), for the next compaction to continue.
    work_state: dict[str, Any] | None = None


@dataclass
class Draft:
    """What one summarizer produced, before checks, repair and file tags."""

    summary: str
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


class SummarizerError(Exception):
    """A summarizer could not produce a summary; the chain falls back with this reason."""


@runtime_checkable
class Summarizer(Protocol):
    name: str

    def summarize(self, inp: SummaryInput) -> Draft: ...


_FENCE_RE = re.compile(r"^```(markdown|md)?[ \t]*\n(.*)\n```\s*$", re.DOTALL)
_FENCE_LINE_RE = re.compile(r"^[ \t]*```", re.MULTILINE)
_HEADING_LINE_RE = re.compile(r"^## ", re.MULTILINE)
_CLOSING_FENCE_RE = re.compile(r"\n```\s*$")
_SECTION_HEADING_RE = re.compile(r"^#{2,3}\s+(.+?)\s*$")
# What an empty section holds: list markers, checkboxes, "(none)".
_FILLER_RE = re.compile(r"[-*\s\[\]x]|\(none\)")
# A line in the transcript's own format (numbered or not): the model went on with the conversation.
_CONTINUATION_RE = re.compile(
    r"^\s*(#\d+\s+)?(\[(user|assistant|assistant thinking|tool call|tool result)\]|\[tool (call|result)\b|human:|<conversation>)",
    re.IGNORECASE | re.MULTILINE,
)
_CHATTY_START_RE = re.compile(
    r"^\s*(sure|okay|ok|certainly|i'll|i will|let me|great|thanks|yes|no problem|absolutely)\b",
    re.IGNORECASE,
)


def normalize_output(text: str) -> str:
    """Strip a Markdown fence around the whole reply and a short preamble before the first
    heading. Code fences inside the summary are its content and stay."""
    text = (text or "").strip()
    fenced = _FENCE_RE.match(text)
    # A wrapper, not a code block that happens to open and close the reply: what it holds is
    # Markdown (said so, or with headings) and every fence inside it is closed again.
    if (
        fenced
        and (fenced.group(1) or _HEADING_LINE_RE.search(fenced.group(2)))
        and len(_FENCE_LINE_RE.findall(fenced.group(2))) % 2 == 0
    ):
        text = fenced.group(2).strip()
    first = _HEADING_LINE_RE.search(text)
    if first and 0 < first.start() <= 300:
        preamble, text = text[: first.start()], text[first.start() :]
        if _FENCE_LINE_RE.search(preamble):
            # "Here is the summary:\n```markdown\n## Goal…\n```": its closing fence goes too.
            text = _CLOSING_FENCE_RE.sub("", text)
    return text.strip()


def has_sections(text: str, headings: tuple[str, ...] = SECTION_HEADINGS) -> list[str]:
    """Required headings missing from `text`."""
    lines = {line.strip().lower() for line in text.splitlines() if line.startswith("#")}
    return [h for h in headings if h.lower() not in lines]


_BULLET_RE = re.compile(r"^\s*([-*•]|\d+[.)])\s+")
# Sections whose bullets go first when a summary is over its budget; Goal and the user's
# Constraints go last (only if nothing else is left to drop).
_TRIM_ORDER = ("critical context", "done", "key decisions", "next steps", "in progress", "blocked", "progress")
_TRIM_LAST = ("where things stand", "constraints & preferences", "goal")


def trim_to_budget(text: str, budget: int) -> tuple[str, int]:
    """Drop bullet lines until `text` fits `budget` tokens: (text, lines dropped).

    Works on any structured summary (an LLM's too): the bullets of Critical Context go
    first, then Done, Decisions, Next Steps, In Progress, Blocked — each from the top (the
    oldest) — and the Goal and Constraints bullets only when nothing else is left.
    Placeholder "(none)" lines are never produced or dropped; headings always stay.
    """
    if count_text(text) <= budget:
        return text, 0
    lines = text.splitlines()
    section: list[str] = []
    current = ""
    for line in lines:
        heading = _SECTION_HEADING_RE.match(line)
        if heading:
            current = heading.group(1).strip().lower()
        section.append(current)
    order = {name: rank for rank, name in enumerate(_TRIM_ORDER + _TRIM_LAST)}
    candidates = sorted(
        (i for i, line in enumerate(lines) if _BULLET_RE.match(line) and "(none" not in line),
        key=lambda i: (order.get(section[i], len(_TRIM_ORDER) - 1), i),
    )
    dropped: set[int] = set()
    total = count_text(text)
    for index in candidates:
        if total <= budget:
            total = count_text("\n".join(line for i, line in enumerate(lines) if i not in dropped))
            if total <= budget:
                break
        dropped.add(index)
        total -= count_text(lines[index]) + 1
    trimmed = "\n".join(line for i, line in enumerate(lines) if i not in dropped)
    return trimmed, len(dropped)


def check_summary_text(
    text: str,
    *,
    input_tokens: int,
    require_sections: bool = True,
    headings: tuple[str, ...] = SECTION_HEADINGS,
    output_budget: int | None = None,
) -> str | None:
    """Why `text` is not an acceptable summary, or None when it is.

    With `output_budget`, a summary over it is rejected (the chain trims first): a summary
    that does not fit its budget costs the context it was meant to free.
    """
    if not text or not text.strip():
        return "empty summary"
    if _CHATTY_START_RE.match(text) or _CONTINUATION_RE.search(text):
        return "looks like a continuation of the conversation, not a summary"
    if require_sections:
        missing = has_sections(text, headings)
        if missing:
            return "missing required sections: " + ", ".join(missing)
    body = "\n".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if not _FILLER_RE.sub("", body):
        return "summary has headings but no content"
    tokens = count_text(text)
    if output_budget is not None and tokens > output_budget:
        return f"summary ({tokens} tokens) exceeds its output budget ({output_budget} tokens)"
    if tokens >= input_tokens and tokens > SIZE_CHECK_FLOOR_TOKENS:
        return f"summary ({tokens} tokens) is not smaller than its input ({input_tokens} tokens)"
    return None
