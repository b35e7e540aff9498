"""Plain data shared by the pure compaction modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
        return [b["id"] for b in self.blocks if b.get("type") == "tool_use" and "id" in b]

    @property
    def tool_result_ids(self) -> list[str]:
        if self.stored_result_ids is not None:
            return list(self.stored_result_ids)
        return [b["tool_use_id"] for b in self.blocks if b.get("type") == "tool_result" and "tool_use_id" in b]

    @property
    def is_tool_result(self) -> bool:
        """A user message that carries tool results (never a valid place to cut)."""
        return self.role == "user" and bool(self.tool_result_ids)

    @property
    def is_user_turn_start(self) -> bool:
        """A real user message: a user message that is not only tool results."""
        return self.role == "user" and not self.is_tool_result


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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fallback:
        return cls(strategy=str(data.get("strategy", "")), reason=str(data.get("reason", "")))
