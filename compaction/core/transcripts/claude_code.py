"""Claude Code session JSONL (~/.claude/projects/…/<session>.jsonl) → Anthropic messages.

The file is a tree of lines linked by `uuid` / `parentUuid`. The conversation is the chain
ending at the last line; an automatic compaction restarts the chain (`parentUuid: null`) with
a `compact_boundary` system line whose `logicalParentUuid` points back into the old history,
followed by a user line with `isCompactSummary` holding the summary. One API response is
written as several `assistant` lines sharing `message.id` (one per content block), and the
tool_result lines of parallel calls hang off different ones of those lines, so they are not
all on the chain: both are collected by `message.id` and by parent.

Nothing is dropped because a link is broken: where a line's parent is not in the file (a
compaction pointing at a line that was cut, a subagent log whose first lines hang off the
parent session), the chain continues with the line before it in the file. A message the
user typed while the agent was busy is only a `queue-operation` line: it is imported where
the agent received it (the `remove`/`dequeue` that took it off the queue), unless it was
sent as a user line of its own later. Newer versions log such a message as an `attachment`
line (`queued_command`) in the tree: imported there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, as_blocks
from compaction.core.provenance import HARNESS
from compaction.core.transcripts.base import (
    ImportedTranscript,
    assemble,
    compaction_records,
    context_tokens,
    first_line,
    load_jsonl,
    logged_at,
)

CONVERSATION_TYPES = ("user", "assistant")
SYNTHETIC_MODEL = "<synthetic>"


def _load(path: str | Path, stats: Counter[str], *, strict: bool = False) -> list[dict[str, Any]]:
    return [entry for _, entry in load_jsonl(path, stats, strict=strict)]


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


def _main_chain(pool: list[dict[str, Any]], stats: Counter[str]) -> set[str]:
    """uuids on the conversation's chain, walked back from its last line.

    A parent that is in the file is followed (branches the user abandoned stay off the
    chain); a parent that is not (a cut file, a subagent log hanging off its parent session)
    is a break, and the walk goes on with the nearest earlier line in file order. A null
    parent is a root: the walk ends there.
    """
    by_uuid: dict[str, dict[str, Any]] = {}
    position: dict[str, int] = {}
    for index, entry in enumerate(pool):
        by_uuid.setdefault(entry["uuid"], entry)
        position.setdefault(entry["uuid"], index)
    leaf = next((e for e in reversed(pool) if e.get("type") in (*CONVERSATION_TYPES, "system")), pool[-1])
    chain: set[str] = set()
    current: dict[str, Any] | None = leaf
    while current is not None and current["uuid"] not in chain:
        chain.add(current["uuid"])
        parent_id = current.get("parentUuid") or current.get("logicalParentUuid")
        if not isinstance(parent_id, str):
            break
        parent = by_uuid.get(parent_id)
        if parent is not None:
            current = parent
            continue
        stats["parent_links_broken"] += 1
        earlier = position[current["uuid"]] - 1
        while earlier >= 0 and pool[earlier]["uuid"] in chain:
            earlier -= 1
        current = pool[earlier] if earlier >= 0 else None
    return chain


def _text_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content.strip()]
    return [str(b.get("text", "")).strip() for b in as_blocks(content) if b.get("type") == "text"]


def _queued_attachment(entry: dict[str, Any]) -> Any:
    """The prompt of a newer Claude Code's `attachment` line of type `queued_command` (how it
    logs a message typed while it worked and folded into the running turn), else None."""
    attachment = entry.get("attachment") if entry.get("type") == "attachment" else None
    if not isinstance(attachment, dict) or attachment.get("type") != "queued_command":
        return None
    prompt = attachment.get("prompt")
    return prompt if as_blocks(prompt) else None


def _queued_messages(entries: list[dict[str, Any]], stats: Counter[str]) -> dict[int, list[str]]:
    """Position in `entries` → the queued messages the agent received there.

    Claude Code logs `enqueue` (with the text) when the user types while the agent works, and
    `remove`/`dequeue` when it hands the oldest one over; `popAll` gives them back to the
    input box (not sent). A queued text that later appears as a user line of its own was
    sent that way and is imported from that line.
    """
    last_sent: dict[str, int] = {}  # text → the last position it appears as a user's own line
    for index, entry in enumerate(entries):
        texts = _text_of(_message(entry).get("content")) if entry.get("type") == "user" else []
        prompt = _queued_attachment(entry)
        for text in texts + (_text_of(prompt) if prompt is not None else []):
            last_sent[text] = index
    received: dict[int, list[str]] = {}
    waiting: list[str] = []
    for index, entry in enumerate(entries):
        if entry.get("type") != "queue-operation":
            continue
        operation = entry.get("operation")
        content = entry.get("content")
        if operation == "enqueue" and isinstance(content, str) and content.lstrip().startswith("<"):
            # Harness notes (a background task finished) arrive as user lines of their own and
            # are never removed from the queue: only the user's own messages wait for a `remove`.
            stats["skipped_queued_harness_notes"] += 1
        elif operation == "enqueue" and isinstance(content, str) and content.strip():
            if last_sent.get(content.strip(), -1) > index:
                stats["queued_messages_sent_as_user_lines"] += 1
            else:
                waiting.append(content)
        elif operation in ("remove", "dequeue") and waiting:
            received.setdefault(index, []).append(waiting.pop(0))
        elif operation == "popAll" and waiting:
            stats["skipped_queued_messages_withdrawn"] += len(waiting)
            waiting.clear()
        else:
            stats["skipped_queue_operations_without_a_message"] += 1
    if waiting:
        # Still queued when the log ends: the user's latest words, which the agent would
        # have received next — imported at the end rather than lost.
        received.setdefault(len(entries), []).extend(waiting)
        stats["queued_messages_pending_at_end"] += len(waiting)
    return received


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
    entries = _unique_lines(entries, stats)
    with_uuid = [e for e in entries if isinstance(e.get("uuid"), str)]
    # A subagent's own file is all sidechain; then the sidechain *is* the conversation.
    pool = [e for e in with_uuid if not e.get("isSidechain")] or with_uuid
    if not pool:
        return ImportedTranscript(messages=[], source="claude-code", stats=stats)
    pool_ids = {id(e) for e in pool}
    reader = _ChainReader(stats, pool, _main_chain(pool, stats))
    queued = _queued_messages(entries, stats)
    for position, entry in enumerate(entries):
        reader.queued(queued.get(position, ()))
        if id(entry) in pool_ids:
            reader.line(entry)
        elif entry.get("type") == "queue-operation":
            continue  # accounted for by _queued_messages
        elif entry.get("isSidechain") and isinstance(entry.get("uuid"), str):
            stats["sidechain_lines_read_as_subagents"] += 1
        else:
            stats[f"skipped_{entry.get('type')}"] += 1
    reader.queued(queued.get(len(entries), ()))
    raw = reader.finish()

    messages, reported, markers, times = assemble(raw, stats)
    model = next((m for m, _ in reader.models.most_common() if m != SYNTHETIC_MODEL), None)
    return ImportedTranscript(
        messages=messages,
        title=_title(entries, raw),
        model=model,
        compactions=compaction_records(markers),
        reported_context_tokens=reported,
        times=times,
        source="claude-code",
        session_id=reader.session_id,
        stats=stats,
        subagents=_inline_subagents(with_uuid) if len(pool) < len(with_uuid) else [],
    )


def _unique_lines(entries: list[dict[str, Any]], stats: Counter[str]) -> list[dict[str, Any]]:
    """The lines without repeats of a uuid (Claude Code rewrites lines on resume)."""
    unique: list[dict[str, Any]] = []
    uuids: set[str] = set()
    for entry in entries:
        uuid = entry.get("uuid")
        if isinstance(uuid, str):
            if uuid in uuids:
                stats["skipped_duplicate_lines"] += 1
                continue
            uuids.add(uuid)
        unique.append(entry)
    return unique


class _ChainReader:
    """The raw messages of the main chain, line by line, for `assemble`."""

    def __init__(self, stats: Counter[str], pool: list[dict[str, Any]], chain: set[str]) -> None:
        self.stats = stats
        self.chain = chain
        self.chain_message_ids = {
            _message(e).get("id") for e in pool if e["uuid"] in chain and e.get("type") == "assistant"
        } - {None}
        self.raw: list[dict[str, Any]] = []
        self.included_tool_ids: set[str | None] = set()
        self.boundary: dict[str, Any] | None = None  # a compact boundary waiting for its summary line
        self.models: Counter[str] = Counter()
        self.session_id: str | None = None
        self.last_assistant_id: str | None = None

    def queued(self, texts: Iterable[Any]) -> None:
        for text in texts:
            self.raw.append({"role": "user", "content": text, "queued": True})
            self.stats["queued_messages_imported"] += 1

    def line(self, entry: dict[str, Any]) -> None:
        kind, uuid, stats = entry.get("type"), entry["uuid"], self.stats
        self.session_id = self.session_id or entry.get("sessionId")
        if kind == "assistant":
            self._assistant(entry, uuid)
        elif kind == "user":
            self._user(entry, uuid)
        elif kind == "system" and entry.get("subtype") == "compact_boundary" and uuid in self.chain:
            metadata = metadata if isinstance(metadata := entry.get("compactMetadata"), dict) else {}
            if self.boundary is not None:  # a boundary without its summary line
                self.raw.append({"role": "marker", "marker": {**self.boundary, "summary": ""}})
            self.boundary = {"trigger": metadata.get("trigger"), "pre_tokens": metadata.get("preTokens")}
        elif kind == "attachment" and _queued_attachment(entry) is not None:
            if uuid not in self.chain:
                stats["skipped_off_chain"] += 1
                return
            self.raw.append(
                {"role": "user", "content": _queued_attachment(entry), "queued": True, "at": logged_at(entry)}
            )
            stats["queued_messages_imported"] += 1
        elif kind == "attachment":
            # Claude Code's own context notes (file changes, reminders, hook output).
            attachment = attachment if isinstance(attachment := entry.get("attachment"), dict) else {}
            stats[f"skipped_attachment_{attachment.get('type') or 'unknown'}"] += 1
        elif kind == "system":
            stats[f"skipped_system_{entry.get('subtype') or 'line'}"] += 1
        else:
            stats[f"skipped_{kind}"] += 1

    def _assistant(self, entry: dict[str, Any], uuid: str) -> None:
        message, stats = _message(entry), self.stats
        message_id = message.get("id")
        if uuid not in self.chain and message_id not in self.chain_message_ids:
            stats["skipped_off_chain"] += 1
            return
        if message.get("model") == SYNTHETIC_MODEL or entry.get("isApiErrorMessage"):
            stats["skipped_synthetic_assistant"] += 1  # Claude Code's own error notes, never sent
            return
        blocks = as_blocks(message.get("content"))
        self.included_tool_ids.update(b.get("id") for b in blocks if b.get("type") == TOOL_USE)
        usage = usage if isinstance(usage := message.get("usage"), dict) else None
        if message_id and message_id == self.last_assistant_id and self.raw:
            # Another content block of the same API response: extend that message.
            target = next(r for r in reversed(self.raw) if r["role"] == "assistant")
            target["content"] = as_blocks(target["content"]) + blocks
            if usage:
                target["usage"] = usage
                target["reported"] = context_tokens(usage)
            stats["assistant_lines_merged"] += 1
            return
        self.last_assistant_id = message_id
        if isinstance(message.get("model"), str):
            self.models[message["model"]] += 1
        self.raw.append(
            {
                "role": "assistant",
                "content": blocks,
                "usage": usage,
                "reported": context_tokens(usage),
                "at": logged_at(entry),
            }
        )

    def _user(self, entry: dict[str, Any], uuid: str) -> None:
        message, stats = _message(entry), self.stats
        answers_included = any(
            b.get("type") == TOOL_RESULT and b.get("tool_use_id") in self.included_tool_ids
            for b in as_blocks(message.get("content"))
        )
        if uuid not in self.chain and not answers_included:
            stats["skipped_off_chain"] += 1
            return
        if entry.get("isCompactSummary"):
            summary = message.get("content")
            if not isinstance(summary, str):
                summary = "\n\n".join(b.get("text", "") for b in as_blocks(summary) if b.get("type") == "text")
            record = self.boundary or {"trigger": None, "pre_tokens": None}
            self.raw.append({"role": "marker", "marker": {**record, "summary": summary}})
            self.boundary = None
            return
        content = message.get("content")
        if not as_blocks(content):
            stats["empty_user_messages_dropped"] += 1
        elif entry.get("isMeta"):
            # Hidden in Claude Code's UI but sent to the model (command caveats, skill text,
            # hook output): the harness's words, not the person's.
            stats["meta_user_lines_imported"] += 1
            self.raw.append({"role": "user", "content": content, "provenance": HARNESS, "at": logged_at(entry)})
        else:
            self.raw.append({"role": "user", "content": content, "at": logged_at(entry)})

    def finish(self) -> list[dict[str, Any]]:
        if self.boundary is not None:
            self.raw.append({"role": "marker", "marker": {**self.boundary, "summary": ""}})
        return self.raw


def _inline_subagents(with_uuid: list[dict[str, Any]]) -> list[ImportedTranscript]:
    """The sidechain conversations inside a main log, one per subagent (`agentId`), in file order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in with_uuid:
        if entry.get("isSidechain"):
            groups.setdefault(str(entry.get("agentId") or "sidechain"), []).append(entry)
    subagents = []
    for agent_id, entries in groups.items():
        transcript = parse_claude_code(entries)
        if transcript.messages:
            transcript.title = transcript.title or f"subagent {agent_id}"
            subagents.append(transcript)
    return subagents


def read_claude_code(path: str | Path, *, strict: bool = False) -> ImportedTranscript:
    """Read one Claude Code session file into Anthropic-shaped messages (see module doc).

    `strict`: a line that is not JSON is a TranscriptError naming it (bar a truncated last line)."""
    stats: Counter[str] = Counter()
    return parse_claude_code(_load(path, stats, strict=strict), stats=stats)
