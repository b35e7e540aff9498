"""Which agent wrote this file, and one entry point that reads any supported transcript.

| format | file |
|---|---|
| claude-code | Claude Code session JSONL (main, sidechain and subagent logs) |
| pi | pi coding-agent session JSONL |
| codex | Codex CLI rollout JSONL (`session_meta` first; older rollouts: a bare session object) |
| swe-agent | SWE-agent trajectory (.traj, one JSON document with `history`) |
| anthropic-messages | Anthropic Messages JSON: a list of messages or a request body |
| openai-chat | OpenAI chat JSON: a list of messages or a request body (tool_calls) |

A file that is none of these is a TranscriptError naming the line and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compaction.core.blocks import ANTHROPIC_ONLY_KINDS, as_blocks
from compaction.core.transcripts.anthropic_json import messages_of, parse_anthropic_messages
from compaction.core.transcripts.base import MAX_JSON_DEPTH, ImportedTranscript, TranscriptError, json_kind, too_deep
from compaction.core.transcripts.claude_code import read_claude_code
from compaction.core.transcripts.codex import is_legacy_session_line, read_codex
from compaction.core.transcripts.openai_chat import parse_openai_chat
from compaction.core.transcripts.pi import read_pi
from compaction.core.transcripts.swe_agent import parse_swe_agent

FORMATS = ("claude-code", "pi", "codex", "swe-agent", "anthropic-messages", "openai-chat")
CLAUDE_CODE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation", "attachment"}
)
PI_TYPES = frozenset({"session", "message", "model_change", "thinking_level_change", "compaction", "custom"})
OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
OPENAI_PARTS = frozenset({"image_url", "input_text", "output_text", "refusal", "input_audio"})

# json.load gave up (RecursionError): deeper than MAX_JSON_DEPTH for sure.
_TOO_DEEP: object = object()


def _first_line(path: Path) -> tuple[int, str]:
    # utf-8-sig here and in every reader: a byte order mark (Windows editors write one) is not text.
    with open(path, encoding="utf-8-sig") as handle:
        number = 0
        try:
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    return number, text
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"not UTF-8 text ({exc.reason}); not a transcript", line=number + 1) from None
    raise TranscriptError("the file is empty", line=1)


def _document(path: Path) -> Any:
    with open(path, encoding="utf-8-sig") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"not JSON ({exc.msg}, column {exc.colno})", line=exc.lineno) from None
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"not UTF-8 text ({exc.reason}); not a transcript", line=1) from None
        except RecursionError:
            document = _TOO_DEEP
    if document is _TOO_DEEP or too_deep(document):
        raise TranscriptError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", line=1)
    return document


def _chat_flavour(document: Any) -> str:
    """anthropic-messages or openai-chat, from what only one of the two has."""
    messages, body = messages_of(document, "a chat transcript")
    if "system" in body:
        return "anthropic-messages"  # a top-level system prompt is Anthropic's request shape
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") in OPENAI_ROLES or {"tool_calls", "function_call", "tool_call_id"} & message.keys():
            return "openai-chat"
        if message.get("role") == "assistant" and message.get("content") is None:
            return "openai-chat"
        kinds = {b.get("type") for b in as_blocks(message.get("content"))}
        if kinds & OPENAI_PARTS:
            return "openai-chat"
        if kinds & ANTHROPIC_ONLY_KINDS:
            return "anthropic-messages"
    return "anthropic-messages"


def _document_format(document: Any) -> str:
    if isinstance(document, dict) and isinstance(document.get("history"), list):
        return "swe-agent"
    if isinstance(document, list) or (isinstance(document, dict) and isinstance(document.get("messages"), list)):
        return _chat_flavour(document)
    kind = json_kind(document)
    raise TranscriptError(
        f"a JSON {kind} with neither `history` (SWE-agent) nor `messages` (Anthropic / OpenAI chat); not a transcript",
        line=1,
    )


def detect_format(path: str | Path) -> str:
    """One of FORMATS, or a TranscriptError naming the line and why the file is not a transcript."""
    path = Path(path)
    number, text = _first_line(path)
    try:
        first = json.loads(text)
    except (ValueError, RecursionError):
        first = None
    if first is not None and too_deep(first):
        raise TranscriptError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", line=number)
    if isinstance(first, dict):
        kind = first.get("type")
        if (kind == "session_meta" and isinstance(first.get("payload"), dict)) or is_legacy_session_line(first):
            return "codex"
        if kind in PI_TYPES and (kind != "message" or isinstance(first.get("message"), dict)):
            if kind == "session" or "uuid" not in first:
                return "pi"
        if kind in CLAUDE_CODE_TYPES or "sessionId" in first or "uuid" in first:
            return "claude-code"
    if first is not None and not isinstance(first, dict | list):
        raise TranscriptError(f"a JSON {json_kind(first)}, not a transcript", line=number)
    try:
        document = _document(path)
    except TranscriptError as exc:
        if isinstance(first, dict):
            raise TranscriptError(
                f"JSON lines, but the first has no known `type` ({first.get('type')!r}): not a Claude Code, pi or Codex log",
                line=number,
            ) from None
        if first is None and not text.lstrip().startswith(("{", "[")):
            raise TranscriptError("not JSON; a transcript is JSON or JSON lines", line=number) from None
        raise exc from None
    return _document_format(document)


def _reader(format: str, *, strict: bool) -> Callable[[Path], ImportedTranscript]:
    if format == "claude-code":
        return lambda path: read_claude_code(path, strict=strict)
    if format == "pi":
        return lambda path: read_pi(path, strict=strict)
    if format == "codex":
        return lambda path: read_codex(path, strict=strict)
    parse = {
        "swe-agent": parse_swe_agent,
        "anthropic-messages": parse_anthropic_messages,
        "openai-chat": parse_openai_chat,
    }[format]
    return lambda path: parse(_document(path))


def read_transcript(path: str | Path, *, format: str | None = None) -> ImportedTranscript:
    """Detect (or take) the format and read the file strictly: a line that is not JSON, a
    message of the wrong shape or a file without a single message is a TranscriptError."""
    path = Path(path)
    if format is not None and format not in FORMATS:
        raise TranscriptError(f"unknown format {format!r}; one of {', '.join(FORMATS)}")
    chosen = format or detect_format(path)
    transcript = _reader(chosen, strict=True)(path)
    transcript.source = chosen
    if not transcript.messages:
        skipped = ", ".join(f"{reason} {count}" for reason, count in transcript.skipped.items())
        raise TranscriptError(
            f"holds no {chosen} conversation messages" + (f" (skipped: {skipped})" if skipped else "")
        )
    return transcript
