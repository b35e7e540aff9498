"""Claude Code session JSONL (~/.claude/projects/…/<session>.jsonl) → Anthropic messages.

The file is a tree of lines linked by `uuid` / `parentUuid`. The conversation is the chain
ending at the last line; an automatic compaction restarts the chain (`parentUuid: null`) with
a `compact_boundary` system line whose `logicalParentUuid` points back into the old history,
followed by a user line with `isCompactSummary` holding the summary. One API response is
written as several `assistant` lines sharing `message.id` (one per content block), and the
tool_result lines of parallel calls hang off different ones of those lines, so they are not
all on the chain: both are collected by `message.id` and by parent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compaction.core.text_heuristics import QUEUED_TEMPLATE
from compaction.core.transcripts.base import (
    ImportedTranscript,
    as_blocks,
    assemble,
    compaction_records,
    context_tokens,
    first_line,
)

CONVERSATION_TYPES = ("user", "assistant")
SYNTHETIC_MODEL = "<synthetic>"


def _load(path: str | Path, stats: Counter[str]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                stats["malformed_lines"] += 1
                continue
            if isinstance(entry, dict):
                entries.append(entry)
            else:
                stats["malformed_lines"] += 1
    return entries


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


def _has_tool_results(entry: dict[str, Any]) -> bool:
    return any(b.get("type") == "tool_result" for b in as_blocks(_message(entry).get("content")))


def _main_chain(pool: list[dict[str, Any]]) -> set[str]:
    by_uuid = {e["uuid"]: e for e in pool}
    leaf = next((e for e in reversed(pool) if e.get("type") in (*CONVERSATION_TYPES, "system")), pool[-1])
    chain: set[str] = set()
    current: dict[str, Any] | None = leaf
    while current is not None and current["uuid"] not in chain:
        chain.add(current["uuid"])
        parent = current.get("parentUuid") or current.get("logicalParentUuid")
        current = by_uuid.get(parent) if isinstance(parent, str) else None
    return chain


def _title(entries: list[dict[str, Any]], raw: list[dict[str, Any]]) -> str:
    for entry in entries:
        if entry.get("type") == "summary" and isinstance(entry.get("summary"), str):
            return first_line(entry["summary"])
    for item in raw:
        if item.get("role") != "user":
            continue
        for block in as_blocks(item.get("content")):
            text = block.get("text") if block.get("type") == "text" else None
            if text and not text.lstrip().startswith("<") and not text.startswith("[Request interrupted"):
                return first_line(text)
    return ""


def parse_claude_code(entries: Iterable[dict[str, Any]], *, stats: Counter[str] | None = None) -> ImportedTranscript:
    """Like `read_claude_code`, from already-decoded lines (tests build these by hand)."""
    stats = stats if stats is not None else Counter()
    entries = list(entries)
    stats["lines"] += len(entries)
    with_uuid = [e for e in entries if isinstance(e.get("uuid"), str)]
    # A subagent's own file is all sidechain; then the sidechain *is* the conversation.
    pool = [e for e in with_uuid if not e.get("isSidechain")] or with_uuid
    if not pool:
        return ImportedTranscript(messages=[], source="claude-code", stats=stats)
    pool_ids = {id(e) for e in pool}
    chain = _main_chain(pool)
    chain_message_ids = {_message(e).get("id") for e in pool if e["uuid"] in chain and e.get("type") == "assistant"} - {
        None
    }

    raw: list[dict[str, Any]] = []
    included: set[str] = set()
    boundary: dict[str, Any] | None = None
    models: Counter[str] = Counter()
    session_id = None
    last_assistant_id: str | None = None
    queued: list[str] = []  # typed while the agent worked, waiting to be delivered
    delivered: list[str] = []  # delivered with the next tool result (Claude Code's queued-command reminder)
    for entry in entries:
        kind = entry.get("type")
        if kind == "queue-operation":
            _queue_operation(entry, queued, delivered)
        if id(entry) not in pool_ids:
            stats[
                f"skipped_{kind}"
                if kind in ("progress", "file-history-snapshot", "queue-operation", "summary")
                else "skipped_sidechain_or_unlinked"
            ] += 1
            continue
        uuid = entry["uuid"]
        session_id = session_id or entry.get("sessionId")
        message = _message(entry)
        if kind == "assistant":
            message_id = message.get("id")
            if uuid not in chain and message_id not in chain_message_ids:
                stats["skipped_off_chain"] += 1
                continue
            included.add(uuid)
            if message.get("model") == SYNTHETIC_MODEL or entry.get("isApiErrorMessage"):
                stats["skipped_synthetic_assistant"] += 1  # Claude Code's own error notes, never sent
                continue
            usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
            if message_id and message_id == last_assistant_id and raw:
                # Another content block of the same API response: extend that message.
                target = next(r for r in reversed(raw) if r["role"] == "assistant")
                target["content"] = as_blocks(target["content"]) + as_blocks(message.get("content"))
                if usage:
                    target["usage"] = usage
                    target["reported"] = context_tokens(usage)
                stats["assistant_lines_merged"] += 1
                continue
            last_assistant_id = message_id
            if isinstance(message.get("model"), str):
                models[message["model"]] += 1
            raw.append(
                {
                    "role": "assistant",
                    "content": as_blocks(message.get("content")),
                    "usage": usage,
                    "reported": context_tokens(usage),
                }
            )
        elif kind == "user":
            on_chain = uuid in chain
            if not on_chain and not (_has_tool_results(entry) and entry.get("parentUuid") in included):
                stats["skipped_off_chain"] += 1
                continue
            included.add(uuid)
            if entry.get("isCompactSummary"):
                summary = message.get("content")
                if not isinstance(summary, str):
                    summary = "\n\n".join(b.get("text", "") for b in as_blocks(summary) if b.get("type") == "text")
                record = boundary or {"trigger": None, "pre_tokens": None}
                raw.append({"role": "marker", "marker": {**record, "summary": summary}})
                boundary = None
                continue
            if entry.get("isMeta"):
                stats["skipped_meta"] += 1
                continue
            content = message.get("content")
            if not as_blocks(content):
                stats["empty_user_messages_dropped"] += 1
                continue
            if delivered and _has_tool_results(entry):
                # The API saw the queued messages beside these tool results; so must we.
                content = as_blocks(content) + [
                    {"type": "text", "text": QUEUED_TEMPLATE.format(text=text)} for text in delivered
                ]
                stats["queued_messages_imported"] += len(delivered)
                delivered.clear()
            raw.append({"role": "user", "content": content})
        elif kind == "system" and entry.get("subtype") == "compact_boundary" and uuid in chain:
            metadata = entry.get("compactMetadata") if isinstance(entry.get("compactMetadata"), dict) else {}
            if boundary is not None:  # a boundary without its summary line
                raw.append({"role": "marker", "marker": {**boundary, "summary": ""}})
            boundary = {"trigger": metadata.get("trigger"), "pre_tokens": metadata.get("preTokens")}
        else:
            stats[f"skipped_{kind}"] += 1
    if boundary is not None:
        raw.append({"role": "marker", "marker": {**boundary, "summary": ""}})

    messages, reported, markers = assemble(raw, stats)
    model = next((m for m, _ in models.most_common() if m != SYNTHETIC_MODEL), None)
    return ImportedTranscript(
        messages=messages,
        title=_title(entries, raw),
        model=model,
        compactions=compaction_records(markers),
        reported_context_tokens=reported,
        source="claude-code",
        session_id=session_id,
        stats=stats,
    )


def _queue_operation(entry: dict[str, Any], queued: list[str], delivered: list[str]) -> None:
    """Messages the user typed while the agent was busy: `enqueue` records one, `remove`
    (or `dequeue`) hands the oldest to the agent with the next tool result, `popAll` takes
    them back into the input box (they come back as a normal message if sent)."""
    operation = entry.get("operation")
    content = entry.get("content")
    if operation == "enqueue" and isinstance(content, str) and content.strip():
        # Harness notes (a background task finished) arrive as their own user lines and are
        # never removed from the queue: only the user's own messages wait for a `remove`.
        if not content.lstrip().startswith("<"):
            queued.append(content.strip())
    elif operation in ("remove", "dequeue") and queued:
        delivered.append(queued.pop(0))
    elif operation == "popAll":
        queued.clear()


def read_claude_code(path: str | Path) -> ImportedTranscript:
    """Read one Claude Code session file into Anthropic-shaped messages (see module doc)."""
    stats: Counter[str] = Counter()
    return parse_claude_code(_load(path, stats), stats=stats)
