"""Which stored conversation a gateway request continues, and how the served context is mapped back
onto the client's messages. Pure functions on plain data (no Django).

Clients of the Messages API resend their whole history on every call. Each message gets a
*fingerprint* that survives the ways clients re-serialize what they received (a string vs one
text block, `cache_control` markers moving to the newest message, `citations: null` dropped,
whitespace-only text blocks dropped, tool inputs re-encoded): the role plus, per block, its type
and identity (text, tool_use id, tool_result's tool_use_id, thinking signature, image source).
A chain digest over the fingerprints names each prefix of the history, so "which session does
this request continue" is one indexed lookup of the request's prefix digests against the digest
each session's history ends with — no scan of anyone's stored messages.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from compaction.core.blocks import (
    REDACTED_THINKING,
    TEXT,
    THINKING,
    THINKING_KINDS,
    TOOL_RESULT,
    TOOL_USE,
    block_text,
    iter_blocks,
)
from compaction.core.provenance import PERSON, annotate, content_parts

# Request-scoped markers, not conversation content: a client moves them to its newest blocks on
# every call, and the Messages API allows at most four per request.
TRANSPORT_KEYS = ("cache_control",)


# One encoder for every call: json.dumps with options builds a new one each time, a third of the
# cost of a short fingerprint.
_canon = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode


def _short(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _tool_result_content(content: Any) -> Any:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return [_block_fingerprint(block, deep=True) for block in content if not _blank(block)]
    return content


def _blank(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == TEXT and not str(block.get("text") or "").strip()


def _reminder(text: str) -> bool:
    """An agent-injected reminder (Claude Code's <system-reminder>): clients may attach one to a
    message for one call only, so it does not identify the conversation."""
    text = text.strip()
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")


def _identity_block(block: Any) -> bool:
    if not isinstance(block, dict):
        return True
    # Clients may drop earlier turns' thinking blocks (the API ignores them there anyway).
    if block.get("type") in THINKING_KINDS or _blank(block):
        return False
    return not (block.get("type") == TEXT and _reminder(str(block.get("text") or "")))


def _block_fingerprint(block: Any, *, deep: bool) -> Any:
    if not isinstance(block, dict):
        return ["?", _canon(block)]
    kind = block.get("type")
    if kind == TEXT:
        return ["text", _short(str(block.get("text") or "").strip())]
    if kind == TOOL_USE:
        return [TOOL_USE, block.get("id"), block.get("name")] + ([_short(_canon(block.get("input")))] if deep else [])
    if kind == TOOL_RESULT:
        # The id alone identifies it: clients may later clear old results' content (Claude Code
        # "microcompact") and the conversation is still the same one.
        if not deep:
            return [TOOL_RESULT, block.get("tool_use_id")]
        content = _short(_canon(_tool_result_content(block.get("content"))))
        return [TOOL_RESULT, block.get("tool_use_id"), content, bool(block.get("is_error"))]
    if kind == THINKING:
        return ["thinking", block.get("signature") or _short(str(block.get("thinking") or ""))]
    if kind == REDACTED_THINKING:
        return ["redacted_thinking", _short(str(block.get("data") or ""))]
    rest = {k: v for k, v in block.items() if k not in TRANSPORT_KEYS and v is not None}
    return [str(kind), _short(_canon(rest))]


def message_fingerprint(message: Any, *, deep: bool = False) -> list[Any]:
    """Role + block identities of one message; equal for the re-serializations clients make.

    Shallow (the default, for finding the conversation) leaves out what clients change from call
    to call: thinking blocks, injected reminders, tool results' content. `deep` also covers tool
    inputs, tool results' content, thinking blocks and reminders: equal deep fingerprints mean
    the provider would see the same message.
    """
    if not isinstance(message, dict):
        return ["?", _short(_canon(message))]
    content = message.get("content")
    if isinstance(content, str):
        keep = content.strip() and (deep or not _reminder(content))
        blocks = [["text", _short(content.strip())]] if keep else []
    elif isinstance(content, list):
        blocks = [
            _block_fingerprint(block, deep=deep)
            for block in content
            if (not _blank(block) if deep else _identity_block(block))
        ]
    else:
        blocks = [["?", _short(_canon(content))]]
    return [message.get("role"), blocks]


def chain_digests(messages: Iterable[Any], start: str = "") -> list[str]:
    """Digest of every prefix: result[i] names messages[: i + 1]. `start` continues a chain."""
    digests: list[str] = []
    current = start
    for message in messages:
        current = hashlib.sha256((current + _canon(message_fingerprint(message))).encode()).hexdigest()
        digests.append(current)
    return digests


def strip_transport(message: dict[str, Any]) -> dict[str, Any]:
    """The message without cache_control markers (a copy; the input is not changed)."""
    if not isinstance(message, dict):
        return message  # not a message at all: validation names it
    content = message.get("content")
    if not isinstance(content, list) or not any(_has_transport(block) for block in content):
        return message
    out = copy.deepcopy(message)
    for block in out["content"]:
        _drop_transport(block)
    return out


def _has_transport(block: Any) -> bool:
    if not isinstance(block, dict):
        return False
    if any(key in block for key in TRANSPORT_KEYS):
        return True
    inner = block.get("content")
    return isinstance(inner, list) and any(_has_transport(b) for b in inner)


def _drop_transport(block: Any) -> None:
    if not isinstance(block, dict):
        return
    for key in TRANSPORT_KEYS:
        block.pop(key, None)
    inner = block.get("content")
    if isinstance(inner, list):
        for b in inner:
            _drop_transport(b)


def with_provenance(message: Any) -> Any:
    """A client's user message marked with whose words it carries (compaction.core.provenance):
    the Messages API has no field for it, so Claude Code's injections (skill bodies, command
    caveats, hook output, reminders) are told from the person's words by their shape and place.
    A new dict; block texts unchanged. Anything else (an assistant message, a malformed one,
    one whose provenance is already stated) is returned as it is."""
    if not isinstance(message, dict) or message.get("role") != "user" or "provenance" in message:
        return message
    content = message.get("content")
    if not isinstance(content, str | list):
        return message
    provenance, marked = annotate(content)
    return {**message, "content": marked, "provenance": provenance} if provenance else message


def merge_served(served: list[dict[str, Any]], client: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What goes upstream: the served context, with its tail replaced by the client's own copies.

    The served context ends with the messages the client just sent (they were appended). From
    the end, while served and client messages are the same message, the client's copy is used
    as it sent it (its cache_control breakpoints included). A pruned or truncated message differs
    (deep fingerprint) and ends the run, so what compaction served is never undone. Everything before — the summary
    and older stored messages — goes without cache_control, so stale markers never pile up
    past the API's limit of four. Without a compaction the whole request is the client's own.
    """
    out = [strip_transport(m) for m in served]
    s, c = len(served) - 1, len(client) - 1
    while s >= 0 and c >= 0 and _same_message(out[s], served[s], client[c]):
        out[s] = client[c]
        s -= 1
        c -= 1
    return out


def _same_message(stripped: dict[str, Any], served: dict[str, Any], client: dict[str, Any]) -> bool:
    # Plain equality first: usually the stored copy is the client's without its markers.
    if stripped == client or stripped == strip_transport(client):
        return True
    return message_fingerprint(served, deep=True) == message_fingerprint(client, deep=True)


def first_user_text(messages: list[Any], limit: int = 80) -> str:
    """A title: the person's first words (not an injected reminder, skill body, command caveat or
    Codex's <environment_context> message, which come before them, even in a message of their
    own), else the first user text."""
    fallback = ""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        texts = [" ".join(block_text(b).split()) for b in iter_blocks(content) if b.get("type") == TEXT]
        texts = [t for t in texts if t]
        if not texts:
            continue
        said = [" ".join(p.words.split()) for p in content_parts(content or "") if p.provenance == PERSON and p.words]
        said = [t for t in said if t]
        if said:
            return _clipped(said[0], limit)
        fallback = fallback or texts[0]
    return _clipped(fallback, limit)


def _clipped(title: str, limit: int) -> str:
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"
