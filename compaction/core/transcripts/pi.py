"""pi coding-agent session JSONL → Anthropic messages.

Line types: `session` (header: id, cwd, provider, modelId), `message` (roles user,
assistant, toolResult, bashExecution), `model_change`, `thinking_level_change`,
`compaction {summary, firstKeptEntryIndex, tokensBefore}`. Assistant blocks are text,
thinking and `toolCall {id, name, arguments}`; a toolResult message answers one toolCall.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, as_blocks
from compaction.core.provenance import HARNESS
from compaction.core.transcripts.base import (
    ImportedTranscript,
    assemble,
    compaction_records,
    first_line,
    load_jsonl,
    loads_embedded,
    logged_at,
)
from compaction.core.types import ProviderUsage


def _convert_block(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))} if block.get("text") else None
    if kind == "thinking":
        text = block.get("thinking")
        return {"type": "thinking", "thinking": text} if text else None
    if kind == "toolCall":
        arguments = block.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = loads_embedded(arguments)
            except ValueError:
                arguments = {"raw": arguments}
        return {
            "type": TOOL_USE,
            "id": block.get("id"),
            "name": block.get("name"),
            "input": arguments if isinstance(arguments, dict) else {},
        }
    if kind == "image":
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": block.get("mimeType", "image/png"),
                "data": block.get("data", ""),
            },
        }
    return None


def _blocks(content: Any, stats: Counter[str] | None = None) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    out: list[dict[str, Any]] = []
    for block in as_blocks(content):
        converted = _convert_block(block)
        if converted is not None:
            out.append(converted)
        elif stats is not None and block.get("type") not in ("text", "thinking"):
            stats[f"skipped_block_{block.get('type')}"] += 1  # empty text/thinking carry nothing
    return out


def _usage(usage: Any) -> tuple[dict[str, Any] | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    anthropic = {
        "input_tokens": int(usage.get("input") or 0),
        "output_tokens": int(usage.get("output") or 0),
        "cache_read_input_tokens": int(usage.get("cacheRead") or 0),
        "cache_creation_input_tokens": int(usage.get("cacheWrite") or 0),
    }
    context = ProviderUsage.of(anthropic).prompt_tokens
    if not context:
        # pi writes all-zero usage on aborted calls: no report was made, none is imported.
        return None, None
    return anthropic, context


def read_pi(path: str | Path, *, strict: bool = False) -> ImportedTranscript:
    """Read one pi session file. An aborted or failed assistant turn is kept when it holds
    anything (its calls, never run, get an error result); an empty one is skipped."""
    stats: Counter[str] = Counter()
    entries = [entry for _, entry in load_jsonl(path, stats, strict=strict)]
    stats["lines"] = len(entries)

    session_id = None
    models: Counter[str] = Counter()
    raw: list[dict[str, Any]] = []
    raw_entry_index: list[int] = []
    compactions: list[tuple[int, dict[str, Any]]] = []
    for index, entry in enumerate(entries):
        kind = entry.get("type")
        if kind == "session":
            session_id = entry.get("id")
            continue
        if kind == "compaction":
            first_kept = entry.get("firstKeptEntryIndex")
            compactions.append(
                (
                    first_kept if isinstance(first_kept, int) else index,
                    {"trigger": None, "pre_tokens": entry.get("tokensBefore"), "summary": entry.get("summary", "")},
                )
            )
            continue
        if kind != "message":
            stats[f"skipped_{kind}"] += 1
            continue
        message = message if isinstance(message := entry.get("message"), dict) else {}
        item = _raw_message(message, stats, models)
        if item is not None:
            item["at"] = logged_at(entry)
            raw.append(item)
            raw_entry_index.append(index)

    _place_markers(raw, raw_entry_index, compactions)
    messages, reported, markers, times = assemble(raw, stats)
    return ImportedTranscript(
        messages=messages,
        title=_title(messages),
        model=models.most_common(1)[0][0] if models else None,
        compactions=compaction_records(markers),
        reported_context_tokens=reported,
        times=times,
        source="pi",
        session_id=session_id,
        stats=stats,
    )


def _raw_message(message: dict[str, Any], stats: Counter[str], models: Counter[str]) -> dict[str, Any] | None:
    """One pi message as a raw message for `assemble`; None when it is skipped."""
    role = message.get("role")
    if role == "user":
        return {"role": "user", "content": _blocks(message.get("content"), stats)}
    if role == "assistant":
        blocks = _blocks(message.get("content"), stats)
        usage, reported = _usage(message.get("usage"))
        if message.get("stopReason") in ("error", "aborted"):
            if not blocks:
                stats["skipped_empty_failed_assistant"] += 1
                return None
            # Kept: what the model wrote before the abort is part of the conversation;
            # its tool calls were not run, so assemble answers them with an error result.
            stats["failed_assistant_turns_kept"] += 1
        if isinstance(message.get("model"), str):
            models[message["model"]] += 1
        return {"role": "assistant", "content": blocks, "usage": usage, "reported": reported}
    if role == "toolResult":
        result = {
            "type": TOOL_RESULT,
            "tool_use_id": message.get("toolCallId"),
            "content": _blocks(message.get("content"), stats),
            "is_error": bool(message.get("isError")),
        }
        return {"role": "user", "content": [result]}
    if role == "bashExecution":
        # pi shows the model a user-run command (`!cmd`) as a user message like this: the
        # person ran it, the words are the command's output.
        output = str(message.get("output", "")).rstrip()
        text = f"Ran `{message.get('command', '')}`\n```\n{output}\n```"
        return {"role": "user", "content": text, "provenance": HARNESS}
    stats[f"skipped_role_{role}"] += 1
    return None


def _place_markers(
    raw: list[dict[str, Any]], raw_entry_index: list[int], compactions: list[tuple[int, dict[str, Any]]]
) -> None:
    """Place each compaction marker before the first message kept by it."""
    for first_kept, marker in sorted(compactions, key=lambda c: c[0], reverse=True):
        position = next((i for i, e in enumerate(raw_entry_index) if e >= first_kept), len(raw))
        raw.insert(position, {"role": "marker", "marker": marker})
        raw_entry_index.insert(position, first_kept)


def _title(messages: list[dict[str, Any]]) -> str:
    texts = (
        b.get("text", "")
        for m in messages
        if m["role"] == "user"
        for b in as_blocks(m["content"])
        if b.get("type") == "text"
    )
    return first_line(next((t for t in texts if t.strip() and not t.startswith("/")), ""))
