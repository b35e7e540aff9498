"""OpenAI Responses API input items ↔ the Messages API blocks Compactor stores. Pure Python.

Items are grouped into messages the way a conversation reads: a user `message` item is one user
message; a run of the model's items (an assistant `message`, `reasoning`, `function_call`,
`custom_tool_call` and other `*_call` items) is one assistant message; a run of `*_call_output`
items is one user message of tool results, paired by `call_id`. Text and image parts become
text and image blocks, calls tool_use blocks, outputs tool_result blocks. What blocks do not
hold — reasoning items (with their encrypted content), item ids and statuses, annotations,
parts without a block — is kept, item by item, in the message's extras (`items`), so the items
go back upstream as the client sent them; reasoning is never read, only passed on.
"""

from __future__ import annotations

from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE

from .chat_map import Mapped, MappingError, Reuse, compact_json, parse_arguments

SYSTEM_ROLES = ("system", "developer")
_FILLER = " "
_TEXT_PARTS = ("input_text", "output_text", "text")


def _kind(item: dict[str, Any]) -> str:
    return str(item.get("type") or ("message" if "role" in item else ""))


def _side(item: Any) -> str:
    """'system', 'user', 'assistant' (the model's items) or 'tool' (outputs)."""
    if not isinstance(item, dict):
        return "?"
    kind = _kind(item)
    if kind == "message":
        role = item.get("role")
        return "system" if role in SYSTEM_ROLES else "assistant" if role == "assistant" else "user"
    return "tool" if kind.endswith("_call_output") else "assistant"


# --- items → blocks --------------------------------------------------------------------------


def _image_block(part: dict[str, Any]) -> dict[str, Any]:
    url = part.get("image_url")
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type or "image/png", "data": data}}
    if isinstance(url, str) and url:
        return {"type": "image", "source": {"type": "url", "url": url}}
    if isinstance(part.get("file_id"), str) and part["file_id"]:
        return {"type": "image", "source": {"type": "file", "file_id": part["file_id"]}}
    raise ValueError("an input_image needs image_url or file_id")


def _message(item: dict[str, Any], path: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    content = item.get("content")
    meta = {k: v for k, v in item.items() if k != "content"}
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}] if content else [{"type": "text", "text": _FILLER}]
        return blocks, {"k": "message", "meta": meta, "string": content}
    if not isinstance(content, list):
        raise MappingError(f"{path}.content", "must be a string or a list of content parts")
    blocks, parts = [], []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS and isinstance(part.get("text"), str) and part["text"]:
            blocks.append({"type": "text", "text": part["text"]})
            parts.append({"text": {k: v for k, v in part.items() if k != "text"}})
        elif kind == "input_image":
            try:
                blocks.append(_image_block(part))
            except ValueError as exc:
                raise MappingError(f"{path}.content[{i}]", str(exc)) from None
            parts.append({"part": part})
        else:  # refusals, files, audio: the words stored, the part kept
            words = part.get("text") or part.get("refusal") if isinstance(part, dict) else None
            blocks.append({"type": "text", "text": words if isinstance(words, str) and words else compact_json(part)})
            parts.append({"part": part})
    if not blocks:
        blocks = [{"type": "text", "text": _FILLER}]
    return blocks, {"k": "message", "meta": meta, "parts": parts}


def _call(item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if not isinstance(item.get("call_id"), str) or not item["call_id"]:
        return [], {"k": "opaque", "item": item}  # a hosted tool's call (web search…): passed on as it is
    arguments = item.get("arguments")
    parsed = parse_arguments(arguments) if isinstance(arguments, str) else None
    if isinstance(parsed, dict):
        tool_input = parsed
    elif isinstance(item.get("input"), str):
        tool_input = {"input": item["input"]}  # a custom (freeform) tool: Codex's apply_patch
    else:
        tool_input = {"action": item.get("action")} if item.get("action") is not None else {}
    name = str(item.get("name") or _kind(item))
    block = {"type": TOOL_USE, "id": item["call_id"], "name": name, "input": tool_input}
    return [block], {"k": "call", "meta": {k: v for k, v in item.items() if k != "call_id"}}


def _output(item: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise MappingError(f"{path}.call_id", "required: the call_id of the call this output answers")
    output = item.get("output")
    entry: dict[str, Any] = {"k": "output", "meta": {k: v for k, v in item.items() if k not in ("call_id", "output")}}
    text = output if isinstance(output, str) else compact_json(output)
    if not isinstance(output, str):
        entry["output"] = output
    block = {"type": TOOL_RESULT, "tool_use_id": call_id}
    if text:
        block["content"] = text
    return block, entry


def _group(items: list[Any], start: int) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The message the items from `start` make, its extras, and where the next one starts."""
    side = _side(items[start])
    end = start + 1
    if side in ("assistant", "tool"):
        while end < len(items) and _side(items[end]) == side:
            end += 1
    blocks: list[dict[str, Any]] = []
    template: list[dict[str, Any]] = []
    for i in range(start, end):
        item, path = items[i], f"input[{i}]"
        kind = _kind(item)
        if side == "tool":
            block, entry = _output(item, path)
            got = [block]
        elif kind == "message":
            got, entry = _message(item, path)
        elif kind.endswith("_call"):
            got, entry = _call(item)
        else:
            got, entry = [], {"k": "opaque", "item": item}
        entry["n"] = len(got)
        blocks += got
        template.append(entry)
    if not blocks:
        blocks = [{"type": "text", "text": _FILLER}]
    role = "assistant" if side == "assistant" else "user"
    message: dict[str, Any] = {"role": role, "content": blocks}
    if side == "system":
        message["provenance"] = "harness"
    return message, {"items": template}, end


def to_blocks(items: Any, reuse: Reuse | None = None) -> Mapped:
    """The leading system/developer items (with the request's `instructions`, the system prompt)
    go to `system`; the other items are grouped into Compactor messages (see the module docstring).

    `reuse`: an earlier request's mapping and how many leading items this request holds as the
    very same objects (a resent input, gateway.resent): their groups are taken as they are, but
    for the last one (the item after it decides where a run ends)."""
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise MappingError("input", "must be a string or a list of items")
    out, start = reuse.groups_before() if reuse is not None else (Mapped(), 0)
    for i in range(start, len(items)):
        if not isinstance(items[i], dict) or not _kind(items[i]):
            raise MappingError(f"input[{i}]", "must be an item object with a type (or a role)")
    if start == 0:
        out = Mapped()
        while start < len(items) and _side(items[start]) == "system":
            out.system.append(items[start])
            start += 1
    while start < len(items):
        message, extras, end = _group(items, start)
        out.messages.append(message)
        out.extras.append(extras)
        out.sources.append(items[start:end])
        start = end
    return out


# --- blocks → items --------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return str(content)


def _entry_item(entry: dict[str, Any], got: list[dict[str, Any]]) -> dict[str, Any]:
    kind, meta = entry["k"], entry.get("meta", {})
    if kind == "opaque":
        return entry["item"]
    if kind == "call":
        return {**meta, "call_id": got[0].get("id")}
    if kind == "output":
        text = _result_text(got[0])
        kept = "output" in entry and text == compact_json(entry["output"])  # not pruned since
        return {**meta, "call_id": got[0].get("tool_use_id"), "output": entry["output"] if kept else text}
    if "string" in entry:
        return {**meta, "content": got[0].get("text", "") if entry["string"] else ""}
    parts = [
        {**spec["text"], "text": block.get("text", "")} if "text" in spec else spec["part"]
        for spec, block in zip(entry["parts"], got, strict=False)
    ]
    return {**meta, "content": parts}


def _plain(role: str, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items for a message stored without extras (the summary, a message another API stored)."""
    out: list[dict[str, Any]] = []
    if role == "assistant":
        texts = [
            {"type": "output_text", "text": b.get("text", ""), "annotations": []}
            for b in blocks
            if b.get("type") == "text"
        ]
        if texts:
            out.append({"type": "message", "role": "assistant", "content": texts})
        out += [
            {
                "type": "function_call",
                "call_id": b.get("id"),
                "name": b.get("name"),
                "arguments": compact_json(b.get("input") or {}),
            }
            for b in blocks
            if b.get("type") == TOOL_USE
        ]
        return out
    out += [
        {"type": "function_call_output", "call_id": b.get("tool_use_id"), "output": _result_text(b)}
        for b in blocks
        if b.get("type") == TOOL_RESULT
    ]
    parts = [_input_part(b) for b in blocks if b.get("type") in ("text", "image")]
    if parts:
        out.append({"type": "message", "role": "user", "content": parts})
    return out


def _input_part(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "text":
        return {"type": "input_text", "text": block.get("text", "")}
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return {"type": "input_image", "image_url": f"data:{source.get('media_type')};base64,{source.get('data')}"}
    if source.get("type") == "file":
        return {"type": "input_image", "file_id": source.get("file_id")}
    return {"type": "input_image", "image_url": source.get("url")}


def to_items(message: dict[str, Any], extras: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A stored (or served) message as the input items it stands for."""
    blocks = _blocks(message.get("content"))
    template = (extras or {}).get("items")
    if not template:
        return _plain(str(message.get("role")), blocks)
    out, position = [], 0
    for entry in template:
        got = blocks[position : position + entry.get("n", 0)]
        position += entry.get("n", 0)
        out.append(_entry_item(entry, got))
    return out
