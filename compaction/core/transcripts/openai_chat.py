"""OpenAI chat JSON → Anthropic messages: a list of chat messages or a request body `{model, messages}`.

system / developer messages become the system prompt; an assistant's `tool_calls`
(`{id, function {name, arguments}}`, arguments a JSON string) become tool_use blocks and a
`tool` message (`tool_call_id`) their tool_result; the legacy `function_call` / `function`
pair is paired by order. Content parts (`text`, `image_url`) become text and image blocks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, as_blocks
from compaction.core.transcripts.anthropic_json import messages_of
from compaction.core.transcripts.base import (
    ImportedTranscript,
    TranscriptError,
    assemble,
    first_line,
    json_kind,
    loads_embedded,
)

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header or "image/png", "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any, where: str, stats: Counter[str]) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise TranscriptError(f"{where}: expected a string, a list of content parts or null")
    blocks: list[dict[str, Any]] = []
    for number, part in enumerate(content):
        if not isinstance(part, dict):
            raise TranscriptError(f"{where}[{number}]: expected a content part object")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            blocks.append({"type": "text", "text": part["refusal"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if isinstance(url, str):
                blocks.append(_image(url))
        else:
            stats[f"skipped_part_{kind}"] += 1
    return blocks


def _text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(b["text"] for b in blocks if b.get("type") == "text")


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = loads_embedded(raw) if raw.strip() else {}
        except ValueError:
            return {"raw": raw}
    return raw if isinstance(raw, dict) else {"value": raw}


def _usage(usage: Any) -> tuple[dict[str, Any] | None, int | None]:
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None, None
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    prompt = int(usage["prompt_tokens"])
    anthropic = {
        "input_tokens": prompt - int(cached),
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "cache_read_input_tokens": int(cached),
        "cache_creation_input_tokens": 0,
    }
    return anthropic, prompt or None


def _tool_uses(message: dict[str, Any], where: str, index: int, legacy_calls: list[str]) -> list[dict[str, Any]]:
    """An assistant message's tool calls as tool_use blocks; a legacy `function_call` gets an id
    (appended to `legacy_calls`, which the function messages answer in order)."""
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise TranscriptError(f"{where}.tool_calls: expected a list")
    blocks: list[dict[str, Any]] = []
    for number, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str):
            raise TranscriptError(f"{where}.tool_calls[{number}]: expected {{id, function {{name, arguments}}}}")
        name = str(function.get("name") or "unknown")
        blocks.append(
            {"type": TOOL_USE, "id": call["id"], "name": name, "input": _arguments(function.get("arguments"))}
        )
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        legacy_id = f"call_legacy_{index}"
        legacy_calls.append(legacy_id)
        name = str(legacy.get("name") or "unknown")
        blocks.append({"type": TOOL_USE, "id": legacy_id, "name": name, "input": _arguments(legacy.get("arguments"))})
    return blocks


def parse_openai_chat(document: Any) -> ImportedTranscript:
    stats: Counter[str] = Counter()
    messages, body = messages_of(document, "OpenAI chat JSON")
    raw: list[dict[str, Any]] = []
    system_parts: list[str] = []
    legacy_calls: list[str] = []  # ids given to function_call messages, answered in order
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise TranscriptError(f"{where}: a JSON {json_kind(message)}, not a message object")
        role = message.get("role")
        if role not in ROLES:
            raise TranscriptError(f"{where}.role: {role!r} is not one of {', '.join(ROLES)}")
        blocks = _blocks(message.get("content"), f"{where}.content", stats)
        if role in ("system", "developer"):
            system_parts.append(_text(blocks))
        elif role == "user":
            raw.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks += _tool_uses(message, where, index, legacy_calls)
            usage, reported_tokens = _usage(message.get("usage"))
            raw.append({"role": "assistant", "content": blocks, "usage": usage, "reported": reported_tokens})
        else:  # tool / function: a result
            tool_id = message.get("tool_call_id") if role == "tool" else (legacy_calls.pop(0) if legacy_calls else None)
            if not isinstance(tool_id, str):
                raise TranscriptError(f"{where}.tool_call_id: a {role} message must name the call it answers")
            raw.append(
                {
                    "role": "user",
                    "content": [{"type": TOOL_RESULT, "tool_use_id": tool_id, "content": blocks}],
                }
            )
    stats["lines"] = len(messages)
    out, reported, _, _ = assemble(raw, stats)
    first_user = next((m for m in out if m["role"] == "user"), None)
    texts = (
        [b.get("text", "") for b in as_blocks(first_user["content"]) if b.get("type") == "text"] if first_user else []
    )
    return ImportedTranscript(
        messages=out,
        title=first_line(texts[0]) if texts else "",
        model=body.get("model") if isinstance(body.get("model"), str) else None,
        reported_context_tokens=reported,
        source="openai-chat",
        stats=stats,
        system_prompt="\n\n".join(p for p in system_parts if p.strip()),
    )
