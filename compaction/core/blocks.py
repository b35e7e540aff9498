"""Content blocks: every kind a message may hold, their shapes, and one way to read them.

Compactor stores the Anthropic Messages API's blocks (`STORED_KINDS`, shaped as the TypedDicts
below, whose keys are also the fields the API accepts). Transcript readers meet others, which
they convert (pi's `toolCall`) or keep as JSON text (server tools' blocks). Code that dispatches
on a block's kind takes the kinds from here, walks content with `iter_blocks` (a string is one
text block) and reads the words of a text, thinking or redacted-thinking block with `block_text`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, NotRequired, TypedDict

TEXT = "text"
THINKING = "thinking"
REDACTED_THINKING = "redacted_thinking"
TOOL_USE = "tool_use"
TOOL_RESULT = "tool_result"
IMAGE = "image"
DOCUMENT = "document"
# Tool calls in other shapes: the Messages API's server tools (web search, code execution),
# and pi's transcripts (`toolCall {id, name, arguments}`) before they are converted.
SERVER_TOOL_USE = "server_tool_use"
PI_TOOL_CALL = "toolCall"

# What a stored message may hold, in the order the API's schema and its errors list them.
STORED_KINDS = (TEXT, THINKING, REDACTED_THINKING, TOOL_USE, TOOL_RESULT, IMAGE, DOCUMENT)
# What a tool_result's content list may hold.
TOOL_RESULT_CONTENT_KINDS = (TEXT, IMAGE, DOCUMENT)
THINKING_KINDS = (THINKING, REDACTED_THINKING)
# A tool call, whoever wrote it.
TOOL_CALL_KINDS = (TOOL_USE, PI_TOOL_CALL, SERVER_TOOL_USE)
# Kinds only the Messages API's format has (an OpenAI chat transcript has text parts too).
ANTHROPIC_ONLY_KINDS = frozenset(STORED_KINDS) - {TEXT}
# Kinds only one role's messages may carry.
ROLE_ONLY = {TOOL_RESULT: "user", TOOL_USE: "assistant", THINKING: "assistant", REDACTED_THINKING: "assistant"}


class _Cacheable(TypedDict, total=False):
    cache_control: dict[str, Any]  # a prompt-caching marker, on any block


class TextBlock(_Cacheable):
    type: Literal["text"]
    text: str
    citations: NotRequired[list[dict[str, Any]] | None]
    # Not the Messages API's: whose words a message's text block carries when it differs from
    # the message's (compaction.core.provenance). Stored, never served.
    provenance: NotRequired[str]


class ThinkingBlock(_Cacheable):
    type: Literal["thinking"]
    thinking: str
    signature: NotRequired[str]


class RedactedThinkingBlock(_Cacheable):
    type: Literal["redacted_thinking"]
    data: str


class ToolUseBlock(_Cacheable):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    caller: NotRequired[Any]  # not the Messages API's: Claude Code records it


class ToolResultBlock(_Cacheable):
    type: Literal["tool_result"]
    tool_use_id: str
    content: NotRequired[str | list[TextBlock | ImageBlock | DocumentBlock]]
    is_error: NotRequired[bool]


class ImageBlock(_Cacheable):
    type: Literal["image"]
    source: dict[str, Any]  # base64, url or file


class DocumentBlock(_Cacheable):
    type: Literal["document"]
    source: dict[str, Any]  # base64, url, file, text or content
    title: NotRequired[str]
    context: NotRequired[str]
    citations: NotRequired[dict[str, Any]]


Block = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock | ToolResultBlock | ImageBlock | DocumentBlock

SHAPES: dict[str, type] = {
    TEXT: TextBlock,
    THINKING: ThinkingBlock,
    REDACTED_THINKING: RedactedThinkingBlock,
    TOOL_USE: ToolUseBlock,
    TOOL_RESULT: ToolResultBlock,
    IMAGE: ImageBlock,
    DOCUMENT: DocumentBlock,
}
# The fields each stored kind may carry: anything else is most likely a typo.
FIELDS: dict[str, frozenset[str]] = {kind: frozenset(shape.__annotations__) for kind, shape in SHAPES.items()}

# The field holding the words of a block that is words.
_TEXT_FIELDS = {TEXT: "text", THINKING: "thinking", REDACTED_THINKING: "data"}


def iter_blocks(content: Any) -> Iterator[dict[str, Any]]:
    """A message's blocks: a non-empty string is one text block; a list, its objects."""
    if isinstance(content, str):
        if content:
            yield {"type": TEXT, "text": content}
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict):
                yield block


def as_blocks(content: Any) -> list[dict[str, Any]]:
    """`iter_blocks`, as a list."""
    return list(iter_blocks(content))


def text_of(block: Any, key: str = "text") -> str:
    """A block's text field, or "" when it is missing or not a string (content from the wild)."""
    value = block.get(key) if isinstance(block, dict) else None
    return value if isinstance(value, str) else ""


def block_text(block: Any) -> str:
    """The words of a text, thinking or redacted-thinking block; "" for any other block."""
    field = _TEXT_FIELDS.get(str(block.get("type"))) if isinstance(block, dict) else None
    return text_of(block, field) if field else ""
