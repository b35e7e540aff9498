"""OpenAI Chat Completions messages ↔ the Messages API blocks Compactor stores. Pure Python.

Compactor stores, counts, prunes and summarizes Anthropic-shaped blocks; an OpenAI client
sends Chat Completions messages. The mapping:

- leading `system` / `developer` messages are the session's system prompt (not stored as
  messages; the client's own copies go upstream every call); one later in the conversation is
  stored as a user message of the harness, its role kept in the extras;
- user text parts → text blocks, `image_url` parts → image blocks (a data: URL as a base64
  source, any other URL as a url source);
- assistant `content` → text blocks, `refusal` → a text block, `tool_calls` → tool_use blocks
  (arguments parsed into `input`);
- a run of `tool` messages → one user message of tool_result blocks, paired by tool_call_id.

What blocks cannot carry (a developer role, `name`, `refusal`, an image's `detail`, arguments
that are not compact JSON, a one-part list where a string would do, parts and fields the
Messages API has no block for) goes into the message's *extras*: stored beside the message
(gateway.models.MessageExtra) and applied on the way back, so `to_chat(*to_blocks(m))`
gives back `m`.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from compaction.core.blocks import TOOL_RESULT, TOOL_USE

SYSTEM_ROLES = ("system", "developer")
# Keys of a Chat Completions message the mapping reads; any other non-empty key is kept as is.
_KNOWN_KEYS = ("role", "content", "name", "tool_calls", "refusal", "tool_call_id")
_FILLER = " "  # a message with no content at all still needs one block to be stored


@dataclass
class Mapped:
    """A request's messages as blocks: `system` (the leading system/developer messages, as sent),
    `messages` (Compactor's), and per stored message its extras and the chat messages it came from."""

    system: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    extras: list[dict[str, Any]] = field(default_factory=list)
    sources: list[list[dict[str, Any]]] = field(default_factory=list)
    _ends: list[int] = field(default_factory=list, repr=False, compare=False)
    # The request's own list, when `system` and `sources` are all of it, in order.
    request: list[Any] | None = field(default=None, repr=False, compare=False)

    def system_text(self) -> str:
        return "\n\n".join(text_of(m.get("content")) for m in self.system)

    def ends(self) -> list[int]:
        """Per stored message, the index of the chat message after its sources (extended from
        what a reused mapping already knew)."""
        known = len(self._ends)
        if known > len(self.sources):
            self._ends, known = [], 0
        end = self._ends[-1] if known else len(self.system)
        for group in self.sources[known:]:
            end += len(group)
            self._ends.append(end)
        return self._ends


@dataclass
class Reuse:
    """An earlier request's mapping, of which the first `shared` chat messages are this one's."""

    mapped: Mapped
    shared: int

    def groups_before(self) -> tuple[Mapped, int]:
        """(the mapping of the system messages and of the groups that end before the last
        shared message, the index of the first chat message after them); (empty, 0) if none."""
        ends = self.mapped.ends()
        system = len(self.mapped.system)
        if self.shared <= system:
            return Mapped(), 0
        groups = bisect.bisect_left(ends, self.shared)  # the groups that end before `shared`
        out = Mapped(
            system=list(self.mapped.system),
            messages=self.mapped.messages[:groups],
            extras=self.mapped.extras[:groups],
            sources=self.mapped.sources[:groups],
            _ends=ends[:groups],
        )
        return out, ends[groups - 1] if groups else system


class MappingError(ValueError):
    """A message the mapping cannot read: `path` names it in the client's terms."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path


def parse_arguments(text: str) -> Any:
    """A tool call's arguments parsed (None if not JSON): orjson first, as a resent history holds
    thousands of them; the standard parser for what only it takes (a lone surrogate, 1e400)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def compact_json(value: Any) -> str:
    """Compact JSON, as models write tool arguments (orjson: this runs for every tool call of the
    history on every call; the standard encoder for what orjson refuses)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _rest(message: dict[str, Any]) -> dict[str, Any]:
    """The message's other fields that say something (None and [] say nothing)."""
    return {k: v for k, v in message.items() if k not in _KNOWN_KEYS and v is not None and v != []}


# --- chat → blocks ---------------------------------------------------------------------------


def _image(part: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    spec = part.get("image_url")
    url = spec.get("url") if isinstance(spec, dict) else spec
    if not isinstance(url, str) or not url:
        raise ValueError("image_url.url: required, a URL or a data: URL")
    detail = spec.get("detail") if isinstance(spec, dict) else None
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        source = {"type": "base64", "media_type": media_type or "image/png", "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}, detail


def _parts(content: Any, extras: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """Text and image parts as blocks; any other part kept whole in the extras (by index)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise MappingError(f"{path}.content", "must be a string, a list of parts or null")
    blocks: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str) and part["text"] and set(part) <= {"type", "text"}:
            blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            try:
                block, detail = _image(part)
            except ValueError as exc:
                raise MappingError(f"{path}.content[{i}]", str(exc)) from None
            if detail is not None:
                extras.setdefault("detail", {})[str(len(blocks))] = detail
            blocks.append(block)
        else:  # audio, files, refusal parts, text with annotations: the words stored, the part kept
            extras.setdefault("raw", {})[str(len(blocks))] = part
            words = part.get("text") or part.get("refusal") if isinstance(part, dict) else None
            blocks.append({"type": "text", "text": words if isinstance(words, str) and words else compact_json(part)})
    extras["parts"] = True
    return blocks


def _tool_use(call: Any, extras: dict[str, Any], path: str) -> dict[str, Any]:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call["id"]:
        raise MappingError(path, "a tool call needs a non-empty string id")
    called = called if isinstance(called := call.get("function"), dict) else {}
    name = called.get("name") or (call.get("custom") or {}).get("name") or call.get("type") or "tool"
    arguments = called.get("arguments")
    parsed = parse_arguments(arguments) if isinstance(arguments, str) else None
    tool_input = parsed if isinstance(parsed, dict) else {}
    plain = call.get("type", "function") == "function" and set(call) <= {"id", "type", "function"}
    if not plain or set(called) - {"name", "arguments"} or arguments != compact_json(tool_input):
        extras.setdefault("calls", {})[call["id"]] = call
    return {"type": TOOL_USE, "id": call["id"], "name": str(name), "input": tool_input}


def _common(message: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    if isinstance(message.get("name"), str) and message["name"]:
        extras["name"] = message["name"]
    rest = _rest(message)
    if rest:
        extras["fields"] = rest
    return extras


def _user(message: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    extras: dict[str, Any] = {}
    content = message.get("content")
    blocks = _parts(content, extras, path)
    if not blocks:
        blocks, extras["content"] = [{"type": "text", "text": _FILLER}], content
    return {"role": "user", "content": blocks}, _common(message, extras)


def _assistant(message: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    extras: dict[str, Any] = {}
    content = message.get("content")
    blocks = _parts(content, extras, path)
    if content is not None and not blocks:
        extras["content"] = content
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        extras["refusal"] = len(blocks)
        blocks.append({"type": "text", "text": refusal})
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MappingError(f"{path}.tool_calls", "must be a list of tool calls")
    blocks += [_tool_use(call, extras, f"{path}.tool_calls[{i}]") for i, call in enumerate(calls)]
    if not blocks:
        blocks, extras["content"] = [{"type": "text", "text": _FILLER}], content
    return {"role": "assistant", "content": blocks}, _common(message, extras)


def _tool_result(message: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise MappingError(f"{path}.tool_call_id", "required: the id of the tool call this message answers")
    extras: dict[str, Any] = {}
    content = message.get("content")
    if isinstance(content, str):
        result: Any = content
    elif isinstance(content, list) and all(
        isinstance(p, dict) and set(p) == {"type", "text"} and p["type"] == "text" and p["text"] for p in content
    ):
        result = [{"type": "text", "text": p["text"]} for p in content]
        extras["parts"] = True
    else:
        result = text_of(content) or compact_json(content)
        extras["content"] = content
    block = {"type": TOOL_RESULT, "tool_use_id": call_id}
    if result != "":
        block["content"] = result
    return block, _common(message, extras)


def to_blocks(messages: list[Any], reuse: Reuse | None = None) -> Mapped:
    """The request's Chat Completions messages as Compactor messages (see the module docstring).

    `reuse`: an earlier request's mapping and how many leading messages this request holds as
    the very same objects (a resent history, gateway.resent): their groups are taken as they are,
    but for the last one (the message after it decides where a run of tool messages ends)."""
    out, i = reuse.groups_before() if reuse is not None else (Mapped(), 0)
    if i == 0:
        out = Mapped()
        while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") in SYSTEM_ROLES:
            out.system.append(messages[i])
            i += 1
    while i < len(messages):
        message, path = messages[i], f"messages[{i}]"
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            run: list[Any] = []
            results: list[dict[str, Any]] = []
            tools: dict[str, Any] = {}
            while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") == "tool":
                block, extras = _tool_result(messages[i], f"messages[{i}]")
                if extras:
                    tools[str(len(run))] = extras
                run.append(messages[i])
                results.append(block)
                i += 1
            out.messages.append({"role": "user", "content": results})
            out.extras.append({"tools": tools} if tools else {})
            out.sources.append(run)
            continue
        if role in ("user", *SYSTEM_ROLES):
            mapped, extras = _user(message, path)
            if role != "user":  # a system or developer message later in the conversation
                extras["role"] = role
                mapped["provenance"] = "harness"
        elif role == "assistant":
            mapped, extras = _assistant(message, path)
        else:
            shown = repr(role) if isinstance(role, str) else "missing"
            raise MappingError(f"{path}.role", f"{shown}: must be system, developer, user, assistant or tool")
        out.messages.append(mapped)
        out.extras.append(extras)
        out.sources.append([message])
        i += 1
    out.request = messages
    return out


# --- blocks → chat ---------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _part(block: dict[str, Any], index: int, extras: dict[str, Any]) -> dict[str, Any]:
    raw = extras.get("raw", {}).get(str(index))
    if raw is not None:
        return raw
    if block.get("type") == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
        else:
            url = source.get("url") or source.get("file_id") or ""
        spec = {"url": url}
        detail = extras.get("detail", {}).get(str(index))
        if detail is not None:
            spec["detail"] = detail
        return {"type": "image_url", "image_url": spec}
    return {"type": "text", "text": str(block.get("text") or "")}


def _content(blocks: list[dict[str, Any]], extras: dict[str, Any], *, skip: int | None = None) -> Any:
    if "content" in extras:
        return extras["content"]
    shown = [(i, b) for i, b in enumerate(blocks) if b.get("type") in ("text", "image") and i != skip]
    if extras.get("parts") or any(b.get("type") == "image" for _, b in shown):
        return [_part(b, i, extras) for i, b in shown]
    texts = [str(b.get("text") or "") for _, b in shown]
    return "\n\n".join(texts) if texts else None


def _finish(message: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    if "name" in extras:
        message["name"] = extras["name"]
    message.update(extras.get("fields") or {})
    return message


def _assistant_back(blocks: list[dict[str, Any]], extras: dict[str, Any]) -> dict[str, Any]:
    refusal = extras.get("refusal")
    message: dict[str, Any] = {"role": "assistant", "content": _content(blocks, extras, skip=refusal)}
    if refusal is not None and refusal < len(blocks):
        message["refusal"] = blocks[refusal].get("text", "")
    calls = [
        extras.get("calls", {}).get(b.get("id"))
        or {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": compact_json(b.get("input") or {})},
        }
        for b in blocks
        if b.get("type") == TOOL_USE
    ]
    if calls:
        message["tool_calls"] = calls
    return _finish(message, extras)


def _tool_back(block: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content", "")
    if "content" in extras:
        content = extras["content"]
    elif isinstance(content, list):
        parts = [{"type": "text", "text": str(p.get("text") or "")} for p in content if isinstance(p, dict)]
        content = parts if extras.get("parts") else "\n".join(p["text"] for p in parts)
    return _finish({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": content}, extras)


def to_chat(message: dict[str, Any], extras: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A stored (or served) message as the Chat Completions messages it stands for."""
    extras = extras or {}
    blocks = _blocks(message.get("content"))
    if message.get("role") == "assistant":
        return [_assistant_back(blocks, extras)]
    results = [b for b in blocks if b.get("type") == TOOL_RESULT]
    tools = extras.get("tools", {})
    out = [_tool_back(b, tools.get(str(i), {})) for i, b in enumerate(results)]
    rest = [b for b in blocks if b.get("type") != TOOL_RESULT]
    if rest or not out:
        out.append(_finish({"role": extras.get("role", "user"), "content": _content(rest, extras)}, extras))
    return out
