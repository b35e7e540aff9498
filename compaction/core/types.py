"""Plain data shared by the pure compaction modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from compaction.core.blocks import TOOL_RESULT, TOOL_USE

Content = str | list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Msg:
    """One stored message as the core sees it: seq, role, content blocks, token count."""

    seq: int
    role: str  # "user" | "assistant"
    content: Content
    tokens: int
    # The tool ids as stored beside the content (Message.tool_use_ids / tool_result_ids), or None
    # to read them from the blocks. Given, planning a cut reads no block at all: on long
    # histories that is most of its time (every block is a dict somewhere else in memory).
    stored_use_ids: list[str] | tuple[str, ...] | None = None
    stored_result_ids: list[str] | tuple[str, ...] | None = None
    # Whose words a user message carries: "person", "harness" or "" (not stated: read by shape).
    # A text block may state its own (`compaction.core.provenance`).
    provenance: str = ""

    @property
    def blocks(self) -> list[dict[str, Any]]:
        if isinstance(self.content, str):
            return [{"type": "text", "text": self.content}]
        return self.content

    @property
    def tool_use_ids(self) -> list[str]:
        if self.stored_use_ids is not None:
            return list(self.stored_use_ids)
        ids: list[str] = []
        if not isinstance(self.content, str):
            # A plain loop, the key first: planning a cut reads every message's ids, and most
            # blocks (text, thinking) have no such key.
            for b in self.content:
                if "id" in b and b.get("type") == TOOL_USE:
                    ids.append(b["id"])
        return ids

    @property
    def tool_result_ids(self) -> list[str]:
        if self.stored_result_ids is not None:
            return list(self.stored_result_ids)
        ids: list[str] = []
        if not isinstance(self.content, str):
            for b in self.content:
                if "tool_use_id" in b and b.get("type") == TOOL_RESULT:
                    ids.append(b["tool_use_id"])
        return ids

    @property
    def is_tool_result(self) -> bool:
        """A user message that carries tool results (never a valid place to cut)."""
        return self.role == "user" and bool(self.tool_result_ids)

    @property
    def is_user_turn_start(self) -> bool:
        """A real user message: a user message that is not only tool results."""
        return self.role == "user" and not self.is_tool_result


@dataclass(frozen=True, slots=True)
class ProviderUsage:
    """One model call's usage as the provider reported it, in the Messages API's fields."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    # The fields that add up to the prompt.
    PROMPT_FIELDS: ClassVar[tuple[str, ...]] = (
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )

    @classmethod
    def of(cls, usage: Mapping[str, Any]) -> ProviderUsage:
        """From a usage record; a missing or null field counts 0."""
        return cls(
            int(usage.get("input_tokens") or 0),
            int(usage.get("output_tokens") or 0),
            int(usage.get("cache_read_input_tokens") or 0),
            int(usage.get("cache_creation_input_tokens") or 0),
        )

    @property
    def prompt_tokens(self) -> int:
        """The prompt the provider read: the uncached input plus what it read from its cache and
        what it wrote to it; `input_tokens` alone is only the part after the last cache mark."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


@dataclass
class FileOps:
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Fallback:
    """A summarizer strategy that gave no summary, and why: the chain went on to the next one."""

    strategy: str
    reason: str

    def as_json(self) -> dict[str, str]:
        """The form stored on the job (Compaction.fallbacks) and answered by the API."""
        return {"strategy": self.strategy, "reason": self.reason}
