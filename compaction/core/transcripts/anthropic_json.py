"""Anthropic Messages JSON → messages: a list of messages, or a request body `{model, system, messages}`.

Content is already in the shape the service stores (a string or text / image / tool_use /
tool_result / thinking blocks), so the reader checks the shape, names what is wrong, and
lets `assemble` put tool results next to their calls. An assistant message may carry the
`usage` the provider reported for it (exports that keep responses do).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from compaction.core.blocks import as_blocks
from compaction.core.transcripts.base import (
    ImportedTranscript,
    TranscriptError,
    assemble,
    context_tokens,
    first_line,
    json_kind,
)

ROLES = ("user", "assistant")


def messages_of(document: Any, source: str) -> tuple[list[Any], dict[str, Any]]:
    """(the messages list, the request body or {}) of a list or a `{"messages": [...]}` body."""
    if isinstance(document, list):
        return document, {}
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        return document["messages"], document
    raise TranscriptError(f"not {source}: expected a list of messages or an object with a `messages` list", line=1)


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(str(b.get("text", "")) for b in as_blocks(system) if b.get("type") == "text")


def parse_anthropic_messages(document: Any) -> ImportedTranscript:
    stats: Counter[str] = Counter()
    messages, body = messages_of(document, "Anthropic Messages JSON")
    raw: list[dict[str, Any]] = []
    models: Counter[str] = Counter()
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise TranscriptError(f"{where}: a JSON {json_kind(message)}, not a message object")
        role = message.get("role")
        if role not in ROLES:
            raise TranscriptError(f"{where}.role: {role!r} is not one of {', '.join(ROLES)}")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise TranscriptError(f"{where}.content: expected a string or a list of content blocks")
        if isinstance(content, list):
            for number, block in enumerate(content):
                if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                    raise TranscriptError(f"{where}.content[{number}]: expected a block with a `type`")
        if role == "assistant":
            usage = usage if isinstance(usage := message.get("usage"), dict) else None
            if isinstance(message.get("model"), str):
                models[message["model"]] += 1
            raw.append(
                {"role": "assistant", "content": as_blocks(content), "usage": usage, "reported": context_tokens(usage)}
            )
        else:
            raw.append({"role": "user", "content": content})
    stats["lines"] = len(messages)
    out, reported, _, _ = assemble(raw, stats)
    first_user = next((m for m in out if m["role"] == "user"), None)
    texts = (
        [b.get("text", "") for b in as_blocks(first_user["content"]) if b.get("type") == "text"] if first_user else []
    )
    model = model if isinstance(model := body.get("model"), str) else None
    return ImportedTranscript(
        messages=out,
        title=first_line(texts[0]) if texts else "",
        model=model or (models.most_common(1)[0][0] if models else None),
        reported_context_tokens=reported,
        source="anthropic-messages",
        stats=stats,
        system_prompt=_system_text(body.get("system")),
    )
