"""Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl) → Anthropic messages.

Each line is `{"timestamp", "type", "payload"}` (openai/codex, codex-rs/protocol `RolloutLine`):

- `session_meta`: id, cwd, cli_version, instructions, git (newer ones: base_instructions);
- `response_item`: what went to or came from the model — `message` (role user / assistant /
  developer, parts `input_text` / `output_text` / `input_image`), `reasoning` (summary text,
  encrypted content), `function_call` / `function_call_output` and `custom_tool_call` /
  `custom_tool_call_output` (freeform tools such as `apply_patch`) paired by `call_id`,
  `local_shell_call` (answered by a `function_call_output`), `web_search_call` (run by the
  provider: no output line);
- `event_msg`: what the UI was told. `user_message`, `agent_message` and `agent_reasoning`
  mirror response items and are never read twice; `token_count` carries the usage of the
  response that just completed (`info.last_token_usage`, `info.total_token_usage`);
- `turn_context`: the model, cwd and policies of a turn;
- `compacted`: Codex compacted its history here: the summary in `message` (a remote
  compaction's may be empty, the summary then being the last user message of
  `replacement_history`, or encrypted).

Older rollouts (before the typed lines) start with a bare session object (`id`, `timestamp`,
`instructions`, `git`), write `{"record_type": "state"}` lines, and write response items bare;
both shapes are read.

One model response is several lines (reasoning, message, calls): the assistant items between
two inputs, or up to the `token_count` that reports the response, are one assistant message.
OpenAI counts cached tokens inside `input_tokens`; in Anthropic's terms the uncached part is
`input_tokens − cached_input_tokens` and the cached part `cache_read_input_tokens`, so the
prompt the usage describes is `input_tokens` (uncached + cached), not the two added up.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, as_blocks, text_of
from compaction.core.provenance import HARNESS, clean_text
from compaction.core.transcripts.base import (
    ImportedTranscript,
    assemble,
    compaction_records,
    first_line,
    load_jsonl,
    loads_embedded,
    logged_at,
)

LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
    }
)
LEGACY_SESSION_KEYS = frozenset({"id", "timestamp", "instructions", "git", "cwd", "originator", "cli_version"})
# Events that repeat a response item for the UI: the response item is the one imported.
MIRRORED_EVENTS = frozenset({"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"})
WEB_SEARCH_RESULT = (
    "[web search {status}: the provider ran it and handed its results to the model; the rollout does not record them]"
)


def is_legacy_session_line(entry: dict[str, Any]) -> bool:
    """The bare first line of an older rollout: the session object, without `type`."""
    return "type" not in entry and {"id", "timestamp"} <= entry.keys() <= LEGACY_SESSION_KEYS


def _line(entry: dict[str, Any], first: bool) -> tuple[str, Any]:
    """(line kind, payload) for both rollout shapes."""
    kind = entry.get("type")
    if kind in LINE_TYPES and "payload" in entry:
        return kind, entry["payload"]
    if first and is_legacy_session_line(entry):
        return "session_meta", entry
    if "record_type" in entry:
        return "state", entry
    if kind in ITEM_TYPES:
        return "response_item", entry
    return str(kind or "untyped"), entry


def _text_parts(content: Any, stats: Counter[str]) -> list[dict[str, Any]]:
    """A message's content parts as text and image blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in as_blocks(content):
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            blocks.append(_image(part["image_url"]))
        else:
            stats[f"skipped_part_{kind}"] += 1
    return blocks


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header or "image/png", "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _arguments(raw: Any) -> dict[str, Any]:
    """A function call's arguments (a JSON string) as the tool_use input object."""
    if isinstance(raw, dict):
        return raw
    try:
        value = loads_embedded(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {"raw": raw}
    return value if isinstance(value, dict) else {"value": value}


# The header Codex writes before a command's output: "Exit code: N" (shell) or, for a unified
# exec session, "Process exited with code N" after its chunk id and wall time.
_EXIT_RE = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)", re.MULTILINE)
_OUTPUT_RE = re.compile(r"^Output:", re.MULTILINE)


def _failed(text: str) -> bool:
    """Whether a tool's output says its command failed (a non-zero exit code), in the shapes
    Codex writes: JSON with `metadata.exit_code`, or a text header naming the exit code."""
    if text.lstrip().startswith("{"):
        try:
            metadata = loads_embedded(text).get("metadata")
        except (ValueError, AttributeError):
            return False
        code = metadata.get("exit_code") if isinstance(metadata, dict) else None
        return isinstance(code, int) and code != 0
    header = _OUTPUT_RE.split(text[:400], maxsplit=1)[0]  # never the command's own output
    match = _EXIT_RE.search(header)
    return match is not None and int(match.group(1)) != 0


def _output(raw: Any, stats: Counter[str]) -> tuple[Any, bool]:
    """A call's output as tool_result content, and whether it reports a failure."""
    if isinstance(raw, dict):  # {content, success} (an older payload shape)
        text = raw.get("content")
        content = text if isinstance(text, str) else json.dumps(raw, ensure_ascii=False)
        return content, raw.get("success") is False or _failed(content)
    if isinstance(raw, list):  # content items (an MCP tool's text and images)
        return _text_parts(raw, stats), False
    text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    return text, _failed(text)


def _usage(info: dict[str, Any]) -> tuple[dict[str, int], int] | None:
    last = info.get("last_token_usage")
    if not isinstance(last, dict):
        return None
    total = int(last.get("input_tokens") or 0)
    cached = min(int(last.get("cached_input_tokens") or 0), total)
    if not total:
        return None
    usage = {
        "input_tokens": total - cached,
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "output_tokens": int(last.get("output_tokens") or 0),
    }
    return usage, total


@dataclass
class _Rollout:
    """Reading state: the raw messages for `assemble`, and the response being read."""

    stats: Counter[str]
    raw: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] | None = None  # the assistant message items are being added to
    unreported: dict[str, Any] | None = None  # the latest reply no token_count has reported yet
    answers: list[dict[str, Any]] = field(default_factory=list)  # results the rollout cannot hold
    models: Counter[str] = field(default_factory=Counter)
    session_id: str | None = None
    system_prompt: str = ""
    last_total: Any = None
    last_prompt: int | None = None
    spare_prompt: int | None = None  # a usage no reply took: Codex's own compaction call
    at: str | None = None  # when the line being read was logged

    def close_reply(self) -> None:
        if self.reply is not None and self.answers:
            self.raw.append({"role": "user", "content": list(self.answers), "at": self.at})
            self.answers.clear()
        self.reply = None

    def input(self, content: Any, provenance: str = "") -> None:
        self.close_reply()
        self.spare_usage_unclaimed()
        entry: dict[str, Any] = {"role": "user", "content": content, "at": self.at}
        if provenance:
            entry["provenance"] = provenance
        self.raw.append(entry)

    def assistant(self, block: dict[str, Any]) -> None:
        self.spare_usage_unclaimed()
        if self.reply is None:
            self.reply = {"role": "assistant", "content": [], "usage": None, "reported": None, "at": self.at}
            self.raw.append(self.reply)
            self.unreported = self.reply
        self.reply["content"].append(block)

    def spare_usage_unclaimed(self) -> None:
        if self.spare_prompt is not None:
            self.stats["skipped_token_counts_without_a_reply"] += 1
            self.spare_prompt = None


def _message(state: _Rollout, item: dict[str, Any]) -> None:
    role = item.get("role")
    blocks = _text_parts(item.get("content"), state.stats)
    if role == "assistant":
        for block in blocks:
            state.assistant(block)
    elif role == "user":
        state.input(blocks)
    elif role in ("developer", "system"):
        # Codex's own instructions (permissions, collaboration mode) sent as input items:
        # the model reads them in its context, and they are not the person's words.
        state.stats[f"{role}_messages_imported_as_harness_text"] += 1
        state.input(blocks, HARNESS)
    else:
        state.stats[f"skipped_message_role_{role}"] += 1


def _reasoning(state: _Rollout, item: dict[str, Any]) -> None:
    texts = [text_of(p) for p in as_blocks(item.get("summary"))]
    if not any(t.strip() for t in texts):
        # Open models log their raw reasoning as content; OpenAI's only as a summary.
        texts = [text_of(p) for p in as_blocks(item.get("content"))]
    text = "\n\n".join(t for t in texts if t.strip())
    if item.get("encrypted_content"):
        state.stats["reasoning_encrypted_content_dropped"] += 1  # only the provider can read it
    if text:
        state.assistant({"type": "thinking", "thinking": text})
    else:
        state.stats["skipped_reasoning_without_readable_text"] += 1


def _call(state: _Rollout, item: dict[str, Any], number: int) -> None:
    kind = item["type"]
    call_id = item.get("call_id") or item.get("id")
    if kind == "function_call":
        name, arguments = item.get("name"), _arguments(item.get("arguments"))
    elif kind == "custom_tool_call":
        # A freeform tool (apply_patch): its input is text in the tool's own grammar, kept whole.
        name, arguments = item.get("name"), {"input": item.get("input", "")}
    elif kind == "local_shell_call":
        action = action if isinstance(action := item.get("action"), dict) else {}
        name, arguments = "local_shell", {k: v for k, v in action.items() if k != "type" and v is not None}
    else:  # web_search_call: run by the provider, no output line follows
        search = search if isinstance(search := item.get("action"), dict) else {}
        name, arguments = "web_search", {k: v for k, v in search.items() if v is not None}
        call_id = call_id or f"web_search_{number}"
        state.answers.append(
            {
                "type": TOOL_RESULT,
                "tool_use_id": call_id,
                "content": WEB_SEARCH_RESULT.format(status=item.get("status") or "call"),
            }
        )
        state.stats["web_searches_without_recorded_results"] += 1
    if not call_id:
        state.stats[f"skipped_{kind}_without_call_id"] += 1
        return
    state.assistant({"type": TOOL_USE, "id": str(call_id), "name": str(name or kind), "input": arguments})


def _call_output(state: _Rollout, item: dict[str, Any]) -> None:
    content, failed = _output(item.get("output"), state.stats)
    result: dict[str, Any] = {"type": TOOL_RESULT, "tool_use_id": item.get("call_id"), "content": content}
    if failed:
        result["is_error"] = True
    state.input([result])


def _response_item(state: _Rollout, item: Any, number: int) -> None:
    if not isinstance(item, dict):
        state.stats["skipped_malformed_response_items"] += 1
        return
    kind = item.get("type")
    if kind == "message":
        _message(state, item)
    elif kind == "reasoning":
        _reasoning(state, item)
    elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        _call(state, item, number)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _call_output(state, item)
    elif kind in ("compaction", "compaction_summary"):
        state.stats["skipped_encrypted_compaction_items"] += 1  # a remote compaction's, unreadable
    else:
        state.stats[f"skipped_item_{kind}"] += 1


def _token_count(state: _Rollout, event: dict[str, Any]) -> None:
    # Early rollouts wrote the response's usage as the event itself, without `info`.
    info = event.get("info") if "info" in event else {"last_token_usage": event, "total_token_usage": None}
    read = _usage(info) if isinstance(info, dict) else None
    if read is None or not isinstance(info, dict):
        state.stats["skipped_token_counts_without_usage"] += 1  # rate limits only
        return
    total = info.get("total_token_usage")
    if total is not None and total == state.last_total:
        # Codex repeats the last usage when it reports new rate limits.
        state.stats["repeated_token_counts_dropped"] += 1
        return
    state.last_total = total
    usage, prompt = read
    state.last_prompt = prompt
    reply = state.unreported
    if reply is None:
        state.spare_usage_unclaimed()
        state.spare_prompt = prompt
        return
    reply["usage"], reply["reported"] = usage, prompt
    state.unreported = None
    state.close_reply()


def _compacted(state: _Rollout, payload: dict[str, Any]) -> None:
    state.close_reply()
    summary = summary if isinstance(summary := payload.get("message"), str) else ""
    history = payload.get("replacement_history")
    if not summary.strip() and isinstance(history, list):
        users = [i for i in history if isinstance(i, dict) and i.get("type") == "message" and i.get("role") == "user"]
        texts = [b["text"] for b in _text_parts(users[-1].get("content"), Counter())] if users else []
        summary = "\n".join(t for t in texts if t.strip())
    if isinstance(history, list):
        state.stats["replacement_history_items_not_imported_again"] += len(history)
    # The compaction call's own usage (reported just before this line) is the context Codex
    # compacted; without one, the last usage reported before it.
    tokens_before = state.spare_prompt if state.spare_prompt is not None else state.last_prompt
    if state.spare_prompt is not None:
        state.stats["token_counts_read_as_tokens_before_a_compaction"] += 1
        state.spare_prompt = None
    if not summary.strip():
        state.stats["skipped_compactions_without_a_readable_summary"] += 1
        return
    state.raw.append({"role": "marker", "marker": {"trigger": None, "pre_tokens": tokens_before, "summary": summary}})


def _session_meta(state: _Rollout, meta: dict[str, Any]) -> None:
    if state.session_id is not None:
        state.stats["session_meta_lines_after_the_first"] += 1  # a fork copies its parent's
        return
    state.session_id = str(meta.get("id")) if meta.get("id") else None
    base = meta.get("base_instructions")
    text = base.get("text") if isinstance(base, dict) else base
    state.system_prompt = text if isinstance(text, str) else ""


def _event(state: _Rollout, event: Any) -> None:
    kind = event.get("type") if isinstance(event, dict) else None
    if kind == "token_count":
        _token_count(state, event)
    elif kind in MIRRORED_EVENTS:
        state.stats[f"skipped_event_{kind}_mirrors"] += 1
    else:
        state.stats[f"skipped_event_{kind}"] += 1


def _read_line(state: _Rollout, kind: str, payload: Any, number: int) -> None:
    if kind == "response_item":
        _response_item(state, payload, number)
    elif kind == "event_msg":
        _event(state, payload)
    elif not isinstance(payload, dict):
        state.stats[f"skipped_malformed_{kind}_lines"] += 1
    elif kind == "session_meta":
        _session_meta(state, payload)
    elif kind == "turn_context":
        state.close_reply()
        if isinstance(payload.get("model"), str) and payload["model"]:
            state.models[payload["model"]] += 1
    elif kind == "compacted":
        _compacted(state, payload)
    elif kind == "state":
        state.stats["skipped_state_lines"] += 1
    else:
        state.stats[f"skipped_{kind}"] += 1


def _title(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message["role"] != "user" or message.get("provenance") == HARNESS:
            continue
        for block in as_blocks(message["content"]):
            if block.get("type") == "text" and block.get("provenance") != HARNESS:
                words = clean_text(str(block.get("text", "")))
                if words.strip():
                    return first_line(words)
    return ""


def parse_codex(rows: list[tuple[int, dict[str, Any]]], *, stats: Counter[str] | None = None) -> ImportedTranscript:
    """Like `read_codex`, from already-decoded (line number, object) rows."""
    state = _Rollout(stats if stats is not None else Counter())
    state.stats["lines"] += len(rows)
    for position, (number, entry) in enumerate(rows):
        kind, payload = _line(entry, position == 0)
        state.at = logged_at(entry)
        _read_line(state, kind, payload, number)
    state.close_reply()
    state.spare_usage_unclaimed()
    messages, reported, markers, times = assemble(state.raw, state.stats)
    return ImportedTranscript(
        messages=messages,
        title=_title(messages),
        model=state.models.most_common(1)[0][0] if state.models else None,
        compactions=compaction_records(markers),
        reported_context_tokens=reported,
        times=times,
        source="codex",
        session_id=state.session_id,
        stats=state.stats,
        system_prompt=state.system_prompt,
    )


def read_codex(path: str | Path, *, strict: bool = False) -> ImportedTranscript:
    """Read one Codex rollout (see module doc). `strict`: a line that is not JSON is a
    TranscriptError naming it (bar a truncated last line, which a running Codex leaves)."""
    stats: Counter[str] = Counter()
    return parse_codex(load_jsonl(path, stats, strict=strict), stats=stats)
