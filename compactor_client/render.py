"""Search hits and stored messages as compact text, for the CLI and the MCP server: what a person
or an agent reads directly (message number, role, where the match is, snippet)."""

from __future__ import annotations

import json
from typing import Any

# Status as a short word beside each hit: how the served context carries the message now.
STATUS_NOTES = {
    "verbatim": "in context",
    "pruned": "pruned from context",
    "summarized": "summarized away",
    "dropped": "cut from context",
}
KIND_NAMES = {"text": "text", "tool_call": "tool call", "tool_result": "tool result", "thinking": "thinking"}


def session_label(session: dict[str, Any]) -> str:
    title = session.get("title") or "(untitled)"
    return f'session {session["id"]} "{title}"'


def hits_text(result: dict[str, Any], *, session: dict[str, Any] | None = None) -> str:
    """One line per hit: `#seq role (kind, status)  snippet`; headed by what was searched."""
    hits = result["hits"]
    where = session_label(session) if session else "all your sessions"
    head = f"{len(hits)} hit{'' if len(hits) == 1 else 's'} for {result['query']!r} in {where}"
    lines = [head if hits else f"No hits for {result['query']!r} in {where}."]
    for hit in hits:
        origin = "" if session else f"[{hit['session']}] "
        note = f"{KIND_NAMES.get(hit['kind'], hit['kind'])}, {STATUS_NOTES.get(hit['status'], hit['status'])}"
        lines.append(f"{origin}#{hit['seq']} {hit['role']} ({note})  {hit['snippet']}")
    return "\n".join(lines)


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind == "thinking":
        return f"[thinking]\n{block.get('thinking', '')}"
    if kind == "tool_use":
        arguments = json.dumps(block.get("input"), ensure_ascii=False, indent=2)
        return f"[tool call {block.get('name')} id={block.get('id')}]\n{arguments}"
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            inner = "\n".join(_block_text(b) for b in inner if isinstance(b, dict))
        error = " error" if block.get("is_error") else ""
        return f"[tool result{error} for {block.get('tool_use_id')}]\n{inner or ''}"
    return f"[{kind}]"


def message_text(message: dict[str, Any]) -> str:
    """A stored message's content in full: text as sent, tool calls and results labelled."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(_block_text(block) for block in content if isinstance(block, dict))


def messages_text(messages: list[dict[str, Any]], *, max_chars: int | None = None) -> str:
    """`--- #seq role` then the message in full, for each message. Past `max_chars` the rest is
    left out, with a line saying which messages were not shown and where to read on."""
    parts: list[str] = []
    used = 0
    for index, message in enumerate(messages):
        body = f"--- #{message['seq']} {message['role']}\n{message_text(message)}"
        if max_chars is not None and used + len(body) > max_chars:
            rest = messages[index:]
            if not parts:  # one message longer than the whole budget: its start
                parts.append(f"{body[:max_chars]}\n[… {len(body) - max_chars:,} more characters of #{message['seq']}]")
                rest = messages[index + 1 :]
            if rest:
                first, last = rest[0]["seq"], rest[-1]["seq"]
                parts.append(f"[not shown: messages #{first} to #{last}; read them with from_seq={first}]")
            break
        parts.append(body)
        used += len(body)
    return "\n".join(parts)
