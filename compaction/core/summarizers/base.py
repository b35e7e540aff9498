"""Shared types of the summarizers and the check every summary passes before it is accepted."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from compaction.core.prompts import SECTION_HEADINGS
from compaction.core.tokens import count_text
from compaction.core.types import FileOps, Msg

# The section skeleton alone costs ~60 tokens, so a summary of a tiny range may be larger
# than the range; below this floor "smaller than its input" is not required.
SIZE_CHECK_FLOOR_TOKENS = 400


@dataclass
class SummaryInput:
    messages: list[Msg]
    turn_prefix: list[Msg] = field(default_factory=list)
    previous_summary: str | None = None
    previous_files: FileOps = field(default_factory=FileOps)
    instructions: str | None = None
    custom_prompt: str | None = None
    output_budget: int = 13_107
    model: str = "claude-haiku-4-5"

    @property
    def input_tokens(self) -> int:
        total = sum(m.tokens for m in self.messages) + sum(m.tokens for m in self.turn_prefix)
        if self.previous_summary:
            total += count_text(self.previous_summary)
        return total


@dataclass
class SummaryResult:
    summary: str
    turn_prefix_summary: str
    strategy: str
    model: str
    usage: dict[str, Any]
    fallbacks: list[dict[str, str]]
    read_files: list[str]
    modified_files: list[str]
    fidelity: dict[str, Any]


@dataclass
class Draft:
    """What one summarizer produced, before checks, repair and file tags."""

    summary: str
    turn_prefix_summary: str = ""
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


class SummarizerError(Exception):
    """A summarizer could not produce a summary; the chain falls back with this reason."""


@runtime_checkable
class Summarizer(Protocol):
    name: str

    def summarize(self, inp: SummaryInput) -> Draft: ...


_FENCE_RE = re.compile(r"^```(?:markdown|md)?\s*\n(.*?)\n```\s*$", re.DOTALL)
_CONTINUATION_RE = re.compile(
    r"^\s*(\[(user|assistant|assistant thinking|tool call|tool result)\]|\[tool (call|result)\b|human:|<conversation>)",
    re.IGNORECASE | re.MULTILINE,
)
_CHATTY_START_RE = re.compile(
    r"^\s*(sure|okay|ok|certainly|i'll|i will|let me|great|thanks|yes|no problem|absolutely)\b",
    re.IGNORECASE,
)


def normalize_output(text: str) -> str:
    """Strip a Markdown fence and a short preamble before the first heading."""
    text = (text or "").strip()
    fenced = _FENCE_RE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    first = text.find("## ")
    if 0 < first <= 300:
        text = text[first:]
    return text.strip()


def has_sections(text: str, headings: tuple[str, ...] = SECTION_HEADINGS) -> list[str]:
    """Required headings missing from `text`."""
    lines = {line.strip().lower() for line in text.splitlines() if line.startswith("#")}
    return [h for h in headings if h.lower() not in lines]


def check_summary_text(
    text: str,
    *,
    input_tokens: int,
    require_sections: bool = True,
    headings: tuple[str, ...] = SECTION_HEADINGS,
) -> str | None:
    """Why `text` is not an acceptable summary, or None when it is."""
    if not text or not text.strip():
        return "empty summary"
    if _CHATTY_START_RE.match(text) or _CONTINUATION_RE.search(text):
        return "looks like a continuation of the conversation, not a summary"
    if require_sections:
        missing = has_sections(text, headings)
        if missing:
            return "missing required sections: " + ", ".join(missing)
    body = "\n".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if not re.sub(r"[-*\s\[\]x]|\(none\)", "", body):
        return "summary has headings but no content"
    tokens = count_text(text)
    if tokens >= input_tokens and tokens > SIZE_CHECK_FLOOR_TOKENS:
        return f"summary ({tokens} tokens) is not smaller than its input ({input_tokens} tokens)"
    return None
