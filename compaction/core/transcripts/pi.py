"""pi coding-agent session JSONL → Anthropic messages.

Line types: `session` (header: id, cwd, provider, modelId), `message` (roles user,
assistant, toolResult, bashExecution), `model_change`, `thinking_level_change`,
`compaction {summary, firstKeptEntryIndex, tokensBefore}`. Assistant blocks are text,
thinking and `toolCall {id, name, arguments}`; a toolResult message answers one toolCall.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from compaction.core.transcripts.base import ImportedTranscript, as_blocks, assemble, compaction_records, first_line


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
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {"raw": arguments}
        return {
            "type": "tool_use",
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


def _blocks(content: Any) -> list[dict[str, Any]]:
    converted = (_convert_block(b) for b in as_blocks(content))
    return [b for b in converted if b is not None]


def _usage(usage: Any) -> tuple[dict[str, Any] | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    anthropic = {
        "input_tokens": int(usage.get("input") or 0),
        "output_tokens": int(usage.get("output") or 0),
        "cache_read_input_tokens": int(usage.get("cacheRead") or 0),
        "cache_creation_input_tokens": int(usage.get("cacheWrite") or 0),
    }
    context = (
        anthropic["input_tokens"] + anthropic["cache_read_input_tokens"] + anthropic["cache_creation_input_tokens"]
    )
    return anthropic, (context or None)


def read_pi(path: str | Path) -> ImportedTranscript:
    """Read one pi session file. Aborted and errored assistant turns are dropped, as pi does."""
    stats: Counter[str] = Counter()
    entries: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for text in handle:
            if not text.strip():
                continue
            try:
                entry = json.loads(text)
            except ValueError:
                stats["malformed_lines"] += 1
                continue
            if isinstance(entry, dict):
                entries.append(entry)
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
        message = entry.get("message") if isinstance(entry.get("message"), dict) else {}
        role = message.get("role")
        if role == "user":
            raw.append({"role": "user", "content": _blocks(message.get("content"))})
        elif role == "assistant":
            if message.get("stopReason") in ("error", "aborted"):
                # pi never sends a failed or aborted turn to the model again (its tool calls
                # were not run); importing it would leave unanswered tool_use blocks.
                stats["skipped_failed_assistant"] += 1
                continue
            usage, reported = _usage(message.get("usage"))
            if isinstance(message.get("model"), str):
                models[message["model"]] += 1
            raw.append(
                {"role": "assistant", "content": _blocks(message.get("content")), "usage": usage, "reported": reported}
            )
        elif role == "toolResult":
            result_content = _blocks(message.get("content"))
            raw.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": message.get("toolCallId"),
                            "content": result_content,
                            "is_error": bool(message.get("isError")),
                        }
                    ],
                }
            )
        elif role == "bashExecution":
            # pi shows the model a user-run command (`!cmd`) as a user message like this.
            output = str(message.get("output", "")).rstrip()
            raw.append({"role": "user", "content": f"Ran `{message.get('command', '')}`\n```\n{output}\n```"})
        else:
            stats[f"skipped_role_{role}"] += 1
            continue
        raw_entry_index.append(index)

    # Place each compaction marker before the first message kept by it.
    for first_kept, marker in sorted(compactions, key=lambda c: c[0], reverse=True):
        position = next((i for i, e in enumerate(raw_entry_index) if e >= first_kept), len(raw))
        raw.insert(position, {"role": "marker", "marker": marker})
        raw_entry_index.insert(position, first_kept)

    messages, reported, markers = assemble(raw, stats)
    texts = (
        b.get("text", "")
        for m in messages
        if m["role"] == "user"
        for b in as_blocks(m["content"])
        if b.get("type") == "text"
    )
    title = first_line(next((t for t in texts if t.strip() and not t.startswith("/")), ""))
    return ImportedTranscript(
        messages=messages,
        title=title,
        model=models.most_common(1)[0][0] if models else None,
        compactions=compaction_records(markers),
        reported_context_tokens=reported,
        source="pi",
        session_id=session_id,
        stats=stats,
    )
