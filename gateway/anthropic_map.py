"""A Messages API message as the store can hold it, and back. Pure Python.

The gateway is a transparent proxy: what a client sends goes upstream as it came (only the
compacted prefix replaced), and the store keeps every message, also what it does not model.
The store models the blocks of `compaction.core.blocks` with their known fields, in `user` and
`assistant` messages (the REST API refuses anything else). A client of the gateway may send more:
Claude Code's `{"role": "system"}` messages inside `messages` (its beta
`mid-conversation-system-2026-04-07`), block types and fields of newer betas. Those are
mapped, never refused or dropped:

- a message of another role (`system`, …) is stored as a user message of the harness
  (`provenance: "harness"`): counted, summarized like other harness text;
- a block of a type the store does not know is stored as a text block of its words (its text,
  else its compact JSON);
- a block of a known type with fields the store does not know is stored without them (a
  tool_use stays a tool_use, so its pair with the tool_result stays whole);
- fields of the message beside role and content are left out of the stored copy.

What was left out is the message's *extras* (kept beside it, gateway.extras, like the OpenAI
routes'): `restore` puts it back on a stored copy served from the store, so a message in the
kept part goes upstream as it came. Blocks are identified by their index (`"2"`, or `"2.0"` for
a tool_result's inner block) and restored only where the served copy still has the block the
mapping made (a pruned or dropped block is not brought back).
"""

from __future__ import annotations

import json
from typing import Any

from compaction.core import blocks
from compaction.core.provenance import HARNESS

ROLES = ("user", "assistant")
MESSAGE_KEYS = frozenset(("role", "content"))
# What a stored image or document source may be (sessions.validation.SOURCE_KEYS).
SOURCE_KEYS = {
    "base64": frozenset(("type", "media_type", "data")),
    "url": frozenset(("type", "url")),
    "file": frozenset(("type", "file_id")),
    "text": frozenset(("type", "data", "media_type")),
    "content": frozenset(("type", "content")),
}
# The extras of a Messages API message, beside the OpenAI routes' in the same table.
EXTRAS_KEY = "messages_api"
_WORD_FIELDS = ("text", "content", "thinking", "data")


def _known_source(block: dict[str, Any]) -> bool:
    source = block.get("source")
    if not isinstance(source, dict):
        return True  # not a shape question: validation names what is missing
    keys = SOURCE_KEYS.get(source.get("type"))  # type: ignore[arg-type]
    if keys is None or not set(source) <= keys:
        return False
    inner = source.get("content")
    return not isinstance(inner, list) or all(_modelled(b, inner=True) for b in inner)


def _modelled(block: Any, *, inner: bool = False) -> bool:
    """The store holds this block as it is (its type, its fields, its inner blocks)."""
    if not isinstance(block, dict):
        return True  # not a block at all: validation refuses it, as the provider would
    kind = block.get("type")
    kinds = blocks.TOOL_RESULT_CONTENT_KINDS if inner else blocks.STORED_KINDS
    if not isinstance(kind, str) or kind not in kinds:
        return False
    if not set(block) <= blocks.FIELDS[kind] - {"provenance"}:
        return False
    if kind in (blocks.IMAGE, blocks.DOCUMENT):
        return _known_source(block)
    content = block.get("content")
    if kind == blocks.TOOL_RESULT and isinstance(content, list):
        return all(_modelled(b, inner=True) for b in content)
    return True


def plain(message: Any) -> bool:
    """The store holds this message as it is (the common case, cheap to tell)."""
    if not isinstance(message, dict):
        return True
    role = message.get("role")
    if not isinstance(role, str) or not role:
        return True  # no role at all: validation refuses it, as the provider does
    if role not in ROLES or not set(message) <= MESSAGE_KEYS:
        return False
    content = message.get("content")
    return not isinstance(content, list) or all(_modelled(b) for b in content)


def words_of(block: dict[str, Any]) -> str:
    """What an unknown block says, as text: its words when it has some, else its compact JSON."""
    for key in _WORD_FIELDS:
        value = block.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return json.dumps(block, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _placeholder(block: dict[str, Any]) -> dict[str, Any]:
    return {"type": blocks.TEXT, "text": words_of(block)}


def _trimmed(block: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k in blocks.FIELDS[kind] and k != "provenance"}


def _store_block(block: Any, path: str, saved: dict[str, Any], *, inner: bool = False) -> Any:
    if _modelled(block, inner=inner):
        return block
    saved[path] = block
    kind = block.get("type")
    kinds = blocks.TOOL_RESULT_CONTENT_KINDS if inner else blocks.STORED_KINDS
    if kind not in kinds or kind in (blocks.IMAGE, blocks.DOCUMENT) and not _known_source(block):
        return _placeholder(block)
    out = _trimmed(block, kind)
    content = out.get("content")
    if kind == blocks.TOOL_RESULT and isinstance(content, list):
        out["content"] = [_store_block(b, f"{path}.{j}", saved, inner=True) for j, b in enumerate(content)]
    return out


def to_stored(message: Any) -> tuple[Any, dict[str, Any]]:
    """(the message as the store holds it, its extras: {} when it is held as it is)."""
    if plain(message):
        return message, {}
    extras: dict[str, Any] = {}
    role = message.get("role")
    stored: dict[str, Any] = {"role": role, "content": message.get("content")}
    if role not in ROLES:
        extras["role"] = role
        stored["role"] = "user"
    fields = {k: v for k, v in message.items() if k not in MESSAGE_KEYS}
    if fields:
        extras["fields"] = fields
    content = stored["content"]
    if isinstance(content, list):
        saved: dict[str, Any] = {}
        stored["content"] = [_store_block(b, str(i), saved) for i, b in enumerate(content)]
        if saved:
            extras["blocks"] = saved
    return stored, extras


def for_store(message: Any) -> tuple[Any, dict[str, Any]]:
    """(the message to append, the extras to keep beside it, under EXTRAS_KEY; {} for none): a
    message of another role is the harness's words."""
    stored, extras = to_stored(message)
    if not extras:
        return stored, {}
    if "role" in extras:
        stored = {**stored, "provenance": HARNESS}
    return stored, {EXTRAS_KEY: extras}


def _restore_block(served: Any, original: Any) -> Any:
    """The original block in place of the mapping's copy, or the served block when it is no
    longer that copy (pruned, truncated)."""
    if not isinstance(served, dict) or not isinstance(original, dict):
        return served
    kind = original.get("type")
    if served.get("type") == kind and kind in blocks.FIELDS:
        # Known type, unknown fields: the served copy (maybe pruned) with the fields back.
        return {**served, **{k: v for k, v in original.items() if k not in blocks.FIELDS[kind]}}
    if served == _placeholder(original):
        return original
    return served


def restore(message: dict[str, Any], kept: dict[str, Any] | None) -> dict[str, Any]:
    """A stored message (as served) with what its mapping left out put back (`kept`: the row
    for_store's extras became, or None)."""
    extras = (kept or {}).get(EXTRAS_KEY)
    if not extras:
        return message
    out = dict(message)
    if "role" in extras:
        out["role"] = extras["role"]
    saved = extras.get("blocks") or {}
    content = out.get("content")
    if saved and isinstance(content, list):
        content = list(content)
        for path in sorted((p for p in saved if "." not in p), key=int):
            i = int(path)
            if i < len(content):
                content[i] = _restore_block(content[i], saved[path])
        for path in (p for p in saved if "." in p):
            i, j = (int(n) for n in path.split(".", 1))
            if i < len(content) and isinstance(content[i], dict) and isinstance(content[i].get("content"), list):
                inner = list(content[i]["content"])
                if j < len(inner):
                    inner[j] = _restore_block(inner[j], saved[path])
                    content[i] = {**content[i], "content": inner}
        out["content"] = content
    out.update(extras.get("fields") or {})
    return out
