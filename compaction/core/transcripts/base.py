"""What every transcript reader returns, and the tool-pair repair they share.

Readers turn an agent's own log format into Anthropic-shaped messages
(`{"role", "content", "usage"}`) that the service can store as they are. The provider's
rules are enforced here once: every tool_use is answered by a tool_result in the user
message right after its assistant message, and no tool_result lacks its tool_use.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, as_blocks
from compaction.core.provenance import PERSON, QUEUED_TEMPLATE, annotate, stated_blocks
from compaction.core.types import ProviderUsage

MISSING_RESULT_TEXT = "[no tool result was recorded in the transcript for this call]"

# Counter keys in ImportedTranscript.stats that mean "something in the file was not imported":
# the import report lists them by reason, so nothing is skipped silently.
SKIP_PREFIX = "skipped_"
SKIP_SUFFIX = "_dropped"


# A JSON line (or document) nested deeper than this is not a transcript: no agent's log needs
# more, and deeper values only exist to exhaust the stack of whatever walks them next.
MAX_JSON_DEPTH = 100
# Readers report progress to the caller's budget this often (lines, messages).
CHECK_EVERY = 2048

_budget: ContextVar[Callable[[], None] | None] = ContextVar("transcript_budget", default=None)


@contextmanager
def reading_budget(check: Callable[[], None]) -> Iterator[None]:
    """Run readers with `check` called every CHECK_EVERY lines; it raises to stop the reading
    (an import's time budget: the caller owns the clock, this module never reads one)."""
    token = _budget.set(check)
    try:
        yield
    finally:
        _budget.reset(token)


def checkpoint() -> None:
    check = _budget.get()
    if check is not None:
        check()


def too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether containers nest more than `limit` levels (walked level by level, without recursion:
    a request body of a long history holds some hundred thousand containers)."""
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        if depth > limit:
            return True
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
        depth += 1
    return False


def loads_embedded(text: str) -> Any:
    """JSON held inside a string (a call's arguments, a tool's output). A ValueError when it is not
    JSON or nests deeper than a whole line may: the caller keeps it as text, as for any non-JSON,
    since the line-level depth check cannot see inside a string."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if too_deep(value):
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return value


class TranscriptError(ValueError):
    """The file is not a transcript of the expected kind: `line` (1-based, when known) and why."""

    def __init__(self, reason: str, *, line: int | None = None):
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}" if line is not None else reason)


def json_kind(value: Any) -> str:
    """A decoded JSON value's name in JSON's own words (object, array, …) for error messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def load_jsonl(path: str | Path, stats: Counter[str], *, strict: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line.

    Lenient (the default, for the readers' own callers): a line that is not a JSON object is
    counted as `skipped_malformed_lines`. Strict (an import): such a line is a TranscriptError
    naming it, except a truncated last line — an agent still writing its log leaves one,
    and the lines before it are whole.
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    bad: tuple[int, str] | None = None
    number = 0
    with open(path, encoding="utf-8-sig") as handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                if bad is not None and strict:
                    raise TranscriptError(bad[1], line=bad[0])
                if number % CHECK_EVERY == 0:
                    checkpoint()
                try:
                    entry = json.loads(text)
                except ValueError as exc:
                    bad = (number, f"not JSON ({exc})")
                    stats["skipped_malformed_lines"] += 1
                    continue
                except RecursionError:
                    raise TranscriptError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", line=number) from None
                if too_deep(entry):
                    raise TranscriptError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", line=number)
                if not isinstance(entry, dict):
                    bad = (number, f"a JSON {json_kind(entry)}, not an object")
                    stats["skipped_malformed_lines"] += 1
                    continue
                rows.append((number, entry))
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", line=number + 1) from None
    if bad is not None and strict and bad[1].startswith("not JSON"):
        stats["skipped_truncated_last_line"] += 1
        stats["skipped_malformed_lines"] -= 1
        if not stats["skipped_malformed_lines"]:
            del stats["skipped_malformed_lines"]
    elif bad is not None and strict:
        raise TranscriptError(bad[1], line=bad[0])
    return rows


@dataclass
class ImportedTranscript:
    # {"role": "user"|"assistant", "content": str | blocks, "usage": dict | None, "provenance": str}:
    # whose words a user message carries (compaction.core.provenance; a text block may carry its own).
    messages: list[dict[str, Any]]
    title: str = ""
    model: str | None = None
    # {"trigger", "pre_tokens", "before_message_index", "summary"}: a compaction the agent itself
    # made; the summary replaced every message before `before_message_index`.
    compactions: list[dict[str, Any]] = field(default_factory=list)
    # Aligned with `messages`: the context size the provider reported for that assistant
    # message (input + cache read + cache creation tokens); None for user messages / unknown.
    reported_context_tokens: list[int | None] = field(default_factory=list)
    # Aligned with `messages`: when the agent logged it (ISO 8601 as the file has it), where the
    # format records it; [] or None entries where it does not (SWE-agent trajectories).
    times: list[str | None] = field(default_factory=list)
    source: str = ""
    session_id: str | None = None
    stats: Counter[str] = field(default_factory=Counter)
    system_prompt: str = ""  # when the format records it (SWE-agent); Claude Code's is not in the file
    # Conversations logged inside this file that belong to a subagent (older Claude Code wrote
    # a Task's sidechain into the main log): each imported as a child session.
    subagents: list[ImportedTranscript] = field(default_factory=list)
    # Image and document blocks the import did not store because the provider refuses them (bad
    # base64, data not of its media type, too large, a URL not https): (message number, 1-based;
    # the block's path in it; the problem). Each is replaced by a text block saying so.
    refused_blocks: list[tuple[int, str, str]] = field(default_factory=list)

    @property
    def skipped(self) -> dict[str, int]:
        """What the reader left out, by reason (the import report lists every one)."""
        return {
            key: count
            for key, count in sorted(self.stats.items())
            if count and (key.startswith(SKIP_PREFIX) or key.endswith(SKIP_SUFFIX))
        }

    @property
    def tool_calls(self) -> int:
        return sum(
            1
            for m in self.messages
            if m["role"] == "assistant"
            for b in as_blocks(m["content"])
            if b.get("type") == TOOL_USE
        )

    @property
    def usage_reports(self) -> int:
        """Assistant messages carrying the provider's reported usage."""
        return sum(1 for t in self.reported_context_tokens if t is not None)

    @property
    def assistant_context_tokens(self) -> list[tuple[int, int]]:
        """(message index, reported context tokens) for every assistant message that has one."""
        return [(i, t) for i, t in enumerate(self.reported_context_tokens) if t is not None]


def _is_result(block: dict[str, Any]) -> bool:
    return block.get("type") == TOOL_RESULT


@dataclass
class _Item:
    role: str  # "assistant" | "user" | "marker"
    content: Any = None
    usage: dict[str, Any] | None = None
    reported: int | None = None
    results: list[dict[str, Any]] = field(default_factory=list)  # assistant: its answers
    extra: list[dict[str, Any]] = field(default_factory=list)  # blocks sent along with the answers
    marker: dict[str, Any] | None = None
    provenance: str = ""  # a user item's, as far as its text says (blocks may state their own)
    at: str | None = None  # when its first line was logged
    answered_at: str | None = None  # assistant: when the first of its results was logged


class Assembled(NamedTuple):
    messages: list[dict[str, Any]]
    reported: list[int | None]  # aligned with messages
    markers: list[dict[str, Any]]
    times: list[str | None]  # aligned with messages


def assemble(raw: list[dict[str, Any]], stats: Counter[str]) -> Assembled:
    """Put raw chronological messages into provider order and repair tool pairs.

    `raw` items: {"role": "assistant"|"user", "content", "usage"?, "reported"?, "queued"?,
    "provenance"?, "at"?} or {"role": "marker", "marker": {...}} (a compaction point, mapped to a
    message index). A user item's `provenance` is what the reader knows of its text ("harness"
    for Claude Code's meta lines); without it, its text is read by shape
    (compaction.core.provenance.annotate).

    - each tool_result moves into the user message right after its tool_use's assistant
      message (parallel results spread over several lines become one message);
    - a tool_result with no earlier tool_use, or answering one already answered, is dropped;
    - a tool_use never answered gets a synthetic error result, except in the final assistant
      message (the agent was still waiting for it);
    - a `queued` user message (typed while a tool ran) joins that tool's results;
    - consecutive plain user messages are merged (each text block then states its own
      provenance where the two differ); whitespace-only text blocks and empty messages are
      dropped (the Messages API rejects both).
    Returns the messages, with the reported context tokens and the times (`at`: when the
    message's first line was logged; a tool results message, its first result's) aligned with
    them, and the markers with their message indexes.
    """
    assembler = _Assembler(stats)
    for position, entry in enumerate(raw, start=1):
        if position % CHECK_EVERY == 0:
            checkpoint()
        assembler.add(entry)
    return assembler.emit()


class _Assembler:
    """The items read so far in provider order, and who answered which tool_use."""

    def __init__(self, stats: Counter[str]) -> None:
        self.stats = stats
        self.items: list[_Item] = []
        self.owner: dict[str, _Item] = {}  # tool_use id → assistant item
        self.answered: set[str] = set()

    def add(self, entry: dict[str, Any]) -> None:
        role = entry.get("role")
        if role == "marker":
            self.items.append(_Item("marker", marker=dict(entry["marker"])))
            return
        blocks = as_blocks(entry.get("content"))
        blank = [b for b in blocks if b.get("type") == "text" and not str(b.get("text", "")).strip()]
        if blank:
            # Claude Code logs "\n\n" text blocks between thinking and text; the Messages API
            # rejects whitespace-only text, so they are not part of an API-valid history.
            self.stats["blank_text_blocks_dropped"] += len(blank)
            blocks = [b for b in blocks if b not in blank]
        if role == "assistant":
            self._assistant(entry, blocks)
        elif role == "user":
            self._user(entry, blocks, bool(blank))
        else:
            self.stats[f"role_{role}_skipped"] += 1

    def _assistant(self, entry: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
        item = _Item("assistant", [], entry.get("usage"), entry.get("reported"), at=entry.get("at"))
        for block in blocks:
            if block.get("type") == TOOL_USE:
                tool_id = block.get("id")
                if not tool_id or tool_id in self.owner:
                    self.stats["duplicate_or_idless_tool_uses_dropped"] += 1
                    continue
                self.owner[tool_id] = item
            item.content.append(block)
        if item.content:
            self.items.append(item)
        else:
            self.stats["empty_assistant_messages_dropped"] += 1

    def _user(self, entry: dict[str, Any], blocks: list[dict[str, Any]], blank: bool) -> None:
        results = [b for b in blocks if _is_result(b)]
        others = [b for b in blocks if not _is_result(b)]
        stated = PERSON if entry.get("queued") else str(entry.get("provenance") or "")
        provenance, marked = annotate(others, stated)
        target: _Item | None = None
        for block in results:
            tool_id = block.get("tool_use_id")
            answering = self.owner.get(tool_id) if isinstance(tool_id, str) else None
            if answering is None or not isinstance(tool_id, str) or tool_id in self.answered:
                self.stats["orphan_tool_results_dropped"] += 1
                continue
            self.answered.add(tool_id)
            answering.results.append(block)
            answering.answered_at = answering.answered_at or entry.get("at")
            target = answering
        if target is not None and others:
            target.extra.extend(stated_blocks(marked, provenance))  # e.g. an image or note sent with the results
        elif others:
            self._user_text(entry, others, marked, provenance, stated, blank)
        elif not results:
            self.stats["empty_user_messages_dropped"] += 1

    def _user_text(
        self, entry: dict[str, Any], others: list[Any], marked: Any, provenance: str, stated: str, blank: bool
    ) -> None:
        """A user message's blocks other than tool results, answering no tool call of its own."""
        previous = self.items[-1] if self.items else None
        waiting = (
            previous is not None
            and previous.role == "assistant"
            and any(b.get("type") == TOOL_USE and b.get("id") not in self.answered for b in previous.content)
        )
        if entry.get("queued") and waiting and previous is not None:
            # A message the user typed while a tool ran: the agent received it with the
            # tool's result (Claude Code attaches it there), not as a turn of its own, in
            # the reminder it is delivered in, so a summarizer can tell it from a typed turn.
            previous.extra.extend(
                {"type": "text", "text": QUEUED_TEMPLATE.format(text=b["text"].strip()), "provenance": PERSON}
                if b.get("type") == "text"
                else b
                for b in others
            )
            self.stats["queued_messages_attached_to_tool_results"] += 1
        elif previous is not None and previous.role == "user":
            if previous.provenance or not isinstance(previous.content, list):
                # Once its blocks state their own provenance, later merges only append to
                # them: restating the whole list on each would be quadratic in a long run
                # of user lines.
                previous.content = stated_blocks(previous.content, previous.provenance)
                previous.provenance = ""
            previous.content.extend(stated_blocks(marked, provenance))
            self.stats["user_messages_merged"] += 1
        else:
            content: Any = entry.get("content") if isinstance(entry.get("content"), str) and not blank else others
            provenance, content = annotate(content, stated)
            self.items.append(_Item("user", content, provenance=provenance, at=entry.get("at")))

    def emit(self) -> Assembled:
        items = self.items
        last_assistant = next((i for i in reversed(items) if i.role == "assistant"), None)
        messages: list[dict[str, Any]] = []
        reported: list[int | None] = []
        markers: list[dict[str, Any]] = []
        times: list[str | None] = []
        for item in items:
            if item.role == "marker":
                marker = dict(item.marker or {})
                marker["before_message_index"] = len(messages)
                markers.append(marker)
                continue
            if item.role == "user":
                provenance, content = annotate(item.content, item.provenance)
                messages.append({"role": "user", "content": content, "usage": None, "provenance": provenance})
                reported.append(None)
                times.append(item.at)
                continue
            messages.append({"role": "assistant", "content": item.content, "usage": item.usage, "provenance": ""})
            reported.append(item.reported)
            times.append(item.at)
            # The agent was still waiting for the final message's tool calls: they stay unanswered.
            waiting = item is last_assistant and not item.results and not item.extra and item is items[-1]
            answers = self._answers(item, waiting)
            if answers:
                provenance, content = annotate(answers)
                messages.append({"role": "user", "content": content, "usage": None, "provenance": provenance})
                reported.append(None)
                times.append(item.answered_at or item.at)
        return Assembled(messages, reported, markers, times)

    def _answers(self, item: _Item, waiting: bool) -> list[dict[str, Any]]:
        """The user message answering an assistant item: its results (a synthetic error for each
        tool_use never answered, unless the agent is still `waiting`) and what came with them."""
        results = list(item.results)
        unanswered = [b["id"] for b in item.content if b.get("type") == TOOL_USE and b["id"] not in self.answered]
        if unanswered and not waiting:
            for tool_id in unanswered:
                results.append(
                    {"type": TOOL_RESULT, "tool_use_id": tool_id, "content": MISSING_RESULT_TEXT, "is_error": True}
                )
                self.stats["unanswered_tool_uses_repaired"] += 1
        return results + item.extra


def logged_at(entry: dict[str, Any], key: str = "timestamp") -> str | None:
    """When a log line says it was written (ISO 8601 text, as the file has it), or None."""
    value = entry.get(key)
    return value if isinstance(value, str) and value else None


def context_tokens(usage: dict[str, Any] | None) -> int | None:
    """Anthropic usage → the prompt size the provider saw (input + cache read + cache creation)."""
    if not isinstance(usage, dict):
        return None
    if not any(isinstance(usage.get(k), int) for k in ProviderUsage.PROMPT_FIELDS):
        return None
    return ProviderUsage.of(usage).prompt_tokens


def compaction_records(markers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's own compactions, as ImportedTranscript.compactions lists them."""
    return [
        {
            "trigger": m.get("trigger"),
            "pre_tokens": m.get("pre_tokens"),
            "before_message_index": m["before_message_index"],
            "summary": m.get("summary", ""),
        }
        for m in markers
    ]


def first_line(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
