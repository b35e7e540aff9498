"""How one stored message is served: what a max_tokens reply hides, what whitespace is dropped.

Shared by the append (served sizes counted before the lock), the usage report (the reported
reply's served size) and the served context.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from compaction.core import tokens as core_tokens
from compaction.core.blocks import TOOL_USE
from compaction.core.overflow import discard_truncated_tool_uses

from .. import validation
from ..models import Message, Session, ToolCall
from .config import session_tokenizer

STOP_MAX_TOKENS = "max_tokens"
TRUNCATED_NOTE = "[reply cut off at max_tokens; its incomplete tool calls were dropped]"


def is_max_tokens(usage: Any) -> bool:
    return isinstance(usage, dict) and usage.get("stop_reason") == STOP_MAX_TOKENS


def needs_serving(role: str, content: Any, usage: Any) -> bool:
    """Cheap test: may this message be served differently from how it is stored?"""
    return (role == "assistant" and is_max_tokens(usage) and isinstance(content, list)) or validation.has_blank_text(
        content
    )


def served_content(role: str, content: Any, usage: Any, answered: set[str]) -> tuple[Any | None, bool]:
    """(content as served, changed?) for a message outside the prune overlay; None = left out.

    A max_tokens reply hides its unanswered tool_uses; whitespace-only text blocks (and a
    whitespace-only string) are dropped, which the Anthropic API requires. A message left
    with nothing is not served: it never holds a tool_use or tool_result (those are not
    text), so no tool pair is broken, and the API merges the same-role turns around it.
    """
    out, changed = content, False
    if role == "assistant" and is_max_tokens(usage) and isinstance(content, list):
        out, hidden = truncated_content(content, answered)
        changed = bool(hidden)
    if validation.has_blank_text(out):
        out, changed = validation.without_blank_text(out), True
    return out, changed


def truncated_content(content: list[dict[str, Any]], answered: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Content served for a max_tokens reply, and the tool_use ids it hides.

    Only tool_uses that never got a result are hidden (one that was answered stays with its
    result). A reply left with no block is served as a short note: the provider rejects an
    empty assistant message in the middle of a conversation.
    """
    kept = discard_truncated_tool_uses(content)
    kept_ids = {b.get("id") for b in kept if b.get("type") == TOOL_USE}
    hidden = [
        b.get("id")
        for b in content
        if b.get("type") == TOOL_USE and b.get("id") not in kept_ids and b.get("id") not in answered
    ]
    if not hidden:
        return content, []
    served = [b for b in content if not (b.get("type") == TOOL_USE and b.get("id") in hidden)]
    if not served:
        served = [{"type": "text", "text": TRUNCATED_NOTE}]
    return served, hidden


def _truncated_view(session: Session, message: Message) -> tuple[list[dict[str, Any]], list[str]]:
    ids = [b.get("id") for b in message.content if b.get("type") == TOOL_USE]
    answered = set(
        ToolCall.objects.filter(session=session, tool_use_id__in=ids, result_seq__isnull=False).values_list(
            "tool_use_id", flat=True
        )
    )
    return truncated_content(message.content, answered)


def served_assistant(session: Session, message: Message) -> tuple[int, list[str]]:
    """(tokens served for an assistant message, tool_use ids hidden by a max_tokens report)."""
    content: Any = message.content
    hidden: list[str] = []
    if is_max_tokens(message.provider_usage) and isinstance(message.content, list):
        content, hidden = _truncated_view(session, message)
    changed = bool(hidden)
    if validation.has_blank_text(content):
        content, changed = validation.without_blank_text(content), True
    if changed:
        return (0 if content is None else core_tokens.count_content(content, session_tokenizer(session))), hidden
    return message.token_count, []


class LRU:
    """A small bounded mapping, least recently used out first (process-local, thread-safe)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self.lock:
            value = self.data.get(key)
            if value is not None:
                self.data.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            if len(self.data) > self.size:
                self.data.popitem(last=False)
