"""The history as the summarizer model reads it: numbered entries, fitted to a budget.

Every block of a message is one entry that starts with the message's number (`#N`, its stored
seq) and a label: `#12 [User]: …`, `#13 [Tool call] Bash({…})`, `#14 [Tool result]: …`. The
work-state facts, the recall tools and the served summary use the same numbers, so a model can
cite what it read and the next assistant can look it up.

`fit_conversation` shows the model the whole history when it fits the budget (the summarizer
model's window less the output and the instructions). Beyond it, the middles of tool calls'
outputs and arguments are cut first, the longest first (every output longer than a common cap
is cut to that cap: head and tail kept, error lines of the middle rescued), down to a floor;
then the longest texts and thinking the same way, down to a higher floor. A history that still
does not fit is for the caller to summarize in chunks (`DEFAULT_CAPS` measures them).

Anti-continuation: content can never close one of the prompt's blocks early; closing tags of
every block we use are escaped wherever they appear inside content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE, text_of
from compaction.core.tokens import count_text
from compaction.core.types import Msg

# Tags whose closing form inside content could end one of our blocks early.
_BLOCK_TAGS = (
    "conversation",
    "previous-summary",
    "summary",
    "instructions",
    "read-files",
    "modified-files",
    "must-keep",
    "analysis",
    "work-state",
    "kept-messages",
)
_TAG_RE = re.compile(r"<(/?)\s*(" + "|".join(_BLOCK_TAGS) + r")\b", re.IGNORECASE)

# What an error line looks like in program output. Deliberately narrower than "contains the
# word error": git logs, issue texts and source listings mention errors without being one.
ERROR_LINE_RE = re.compile(
    r"(?i:\b(error|fatal|panic|exception|failed|failure)\s*[:!\]])"  # "error: …", "fatal: …", "[ERROR] …"
    r"|\b[A-Z]\w*(Error|Exception)\b(?!\.)"  # NameError, CompileError, NullPointerException
    r"|^\s*Traceback \(most recent call last\)"
    r"|\*\* \(\w"  # Elixir: ** (CompileError) …
    r"|^\s*E\s{2,}\S"  # pytest assertion detail
    r"|\bFAILED\b|\bERROR\b"
    r"|(?i:\b[1-9]\d* (failed|failures?|errors?)\b)"
    r"|(?i:\b(no such file or directory|command not found|permission denied|segmentation fault|"
    r"unknown revision|undefined (function|variable|method|module|reference)|cannot find|could not find|"
    r"is not defined|not recognized|exit code [1-9]\d*|exit status [1-9]\d*|non-zero exit)\b)"
)
_SUCCESS_COUNT_RE = re.compile(r"(?i)\b0 (failures?|errors?)\b")
# Error-looking lines from a cut middle are kept anyway (up to this many): exact error lines
# are what summaries most often lose (field notes).
MAX_RESCUED_ERROR_LINES = 12
# A cut keeps this share of its cap from the start (where a command says what it does), the
# rest from the end (where it says how it ended).
HEAD_SHARE = 0.55


@dataclass(frozen=True)
class Caps:
    """The most characters an entry's body keeps, by kind (None: whole). `tool` covers tool
    results and tool-call arguments, `prose` texts and thinking."""

    tool: int | None = None
    prose: int | None = None


# How chunks of a history beyond the window are measured: the cuts of a modest prompt (a tool
# output at 4,000 characters, a text at 30,000), so no chunk is planned around one huge output.
DEFAULT_CAPS = Caps(tool=4_000, prose=30_000)
# Fitting never cuts below these: a tool output shorter than 600 characters is read whole,
# and texts and thinking are cut only when every tool output is at its floor.
TOOL_FLOOR_CHARS = 600
PROSE_FLOOR_CHARS = 8_000
# Recounts while fitting: each finds the cut from the last count, so two or three suffice.
MAX_FIT_ROUNDS = 6
# Fitting aims at this share of the budget, so the markers of the cuts do not tip it over.
FIT_AIM = 0.98


def escape_block_tags(text: str) -> str:
    """Neutralize our block tags inside content so it cannot open or close a block."""
    return _TAG_RE.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)


def is_error_line(line: str) -> bool:
    return bool(ERROR_LINE_RE.search(line)) and not _SUCCESS_COUNT_RE.search(line)


def truncate_middle(text: str, cap: int | None, *, rescue_errors: bool = False) -> str:
    """`text` cut to about `cap` characters: its head and tail, and a marker saying how much of
    the middle went (with the middle's error lines when `rescue_errors`)."""
    if cap is None or len(text) <= cap:
        return text
    head = int(cap * HEAD_SHARE)
    tail = cap - head
    middle = text[head : len(text) - tail]
    rescued: list[str] = []
    if rescue_errors:
        for line in middle.splitlines():
            stripped = line.strip()
            if 8 <= len(stripped) <= 300 and is_error_line(stripped) and stripped not in rescued:
                rescued.append(stripped)
                if len(rescued) >= MAX_RESCUED_ERROR_LINES:
                    break
    marker = f"\n[... {len(middle)} characters ({middle.count(chr(10)) + 1} lines) truncated"
    if rescued:
        marker += "; error lines from the truncated part:\n" + "\n".join(rescued) + "\n"
    marker += " ...]\n"
    return text[:head] + marker + text[len(text) - tail :]


def tool_result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(text_of(block, "text"))
        elif kind == "image":
            parts.append("[image]")
        elif kind == "document":
            parts.append("[document]")
        else:
            parts.append(json.dumps(block, ensure_ascii=False)[:500])
    return "\n".join(parts)


def _bodies(msg: Msg) -> Iterator[tuple[str, str, str]]:
    """(label, kind of cut, body) for every block of `msg` the model reads."""
    speaker = "[User]" if msg.role == "user" else "[Assistant]"
    for block in msg.blocks:
        kind = block.get("type")
        if kind == "text":
            text = text_of(block, "text")
            if text.strip():
                yield f"{speaker}: ", "prose", text
        elif kind == "thinking":
            thinking = text_of(block, "thinking")
            if thinking.strip():
                yield "[Assistant thinking]: ", "prose", thinking
        elif kind == TOOL_USE:
            args = json.dumps(block.get("input", {}), ensure_ascii=False)
            yield f"[Tool call] {block.get('name', 'tool')}(", "tool", args
        elif kind == TOOL_RESULT:
            label = "[Tool result] (error): " if block.get("is_error") else "[Tool result]: "
            yield label, "tool", tool_result_text(block.get("content"))
        elif kind in ("image", "document"):
            yield f"{speaker}: ", "", f"[{kind}]"


def serialize_message(msg: Msg, caps: Caps = DEFAULT_CAPS) -> list[str]:
    """The entries one message contributes to the transcript, in order, each numbered."""
    entries: list[str] = []
    for label, kind, body in _bodies(msg):
        if kind == "tool":
            body = truncate_middle(body, caps.tool, rescue_errors=label.startswith("[Tool result]"))
        elif kind == "prose":
            body = truncate_middle(body, caps.prose)
        close = ")" if label.startswith("[Tool call]") else ""
        entries.append(escape_block_tags(f"#{msg.seq} {label}{body}{close}"))
    return entries


def serialize_messages_body(messages: list[Msg], caps: Caps = DEFAULT_CAPS) -> str:
    return "\n\n".join(entry for msg in messages for entry in serialize_message(msg, caps))


def serialize_conversation(messages: list[Msg], caps: Caps = DEFAULT_CAPS) -> str:
    """The transcript as data: one entry per block inside <conversation>...</conversation>."""
    return f"<conversation>\n{serialize_messages_body(messages, caps)}\n</conversation>"


def serialize_kept(messages: list[Msg], caps: Caps = DEFAULT_CAPS) -> str:
    """The messages kept after the summary, numbered like the transcript, for the prompt."""
    return f"<kept-messages>\n{serialize_messages_body(messages, caps)}\n</kept-messages>"


def water_level(lengths: list[int], reduction: float, floor: int) -> int:
    """The largest cap (at least `floor`) that cutting every length above it to it saves
    `reduction` characters: the longest go first, and only as far as needed."""
    ordered = sorted((n for n in lengths if n > floor), reverse=True)
    total = 0
    for k, length in enumerate(ordered, start=1):
        total += length
        below = ordered[k] if k < len(ordered) else floor
        if total - k * below >= reduction:
            return max(floor, int((total - reduction) // k))
    return floor


@dataclass(frozen=True)
class Fitted:
    """A transcript fitted to a budget: its text, its size (our count), the caps that were
    applied (None where nothing of that kind was cut) and whether it fits."""

    text: str
    tokens: int
    caps: Caps
    fits: bool = True

    @property
    def cut(self) -> bool:
        return self.caps != Caps()


def fit_conversation(messages: list[Msg], budget_tokens: int) -> Fitted:
    """The transcript of `messages` whole if it fits `budget_tokens`, else with the middles of
    the longest tool outputs cut (then the longest texts) until it fits; when it cannot fit
    even with every one of them at its floor, that is what comes back (`fits` False)."""
    caps = Caps()
    text = serialize_conversation(messages, caps)
    tokens = count_text(text)
    if tokens <= budget_tokens:
        return Fitted(text, tokens, caps)
    lengths: dict[str, list[int]] = {"tool": [], "prose": []}
    for msg in messages:
        for _label, kind, body in _bodies(msg):
            if kind in lengths:
                lengths[kind].append(len(body))
    for kind, floor in (("tool", TOOL_FLOOR_CHARS), ("prose", PROSE_FLOOR_CHARS)):
        reduction = 0.0
        for _round in range(MAX_FIT_ROUNDS):
            chars_per_token = len(text) / max(1, tokens)
            # Each round cuts deeper by what the last count was over, aiming a little under.
            reduction += (tokens - budget_tokens * FIT_AIM) * chars_per_token
            cap = water_level(lengths[kind], reduction, floor)
            caps = replace(caps, **{kind: cap})
            text = serialize_conversation(messages, caps)
            tokens = count_text(text)
            if tokens <= budget_tokens:
                return Fitted(text, tokens, caps)
            if cap <= floor:
                break
    return Fitted(text, tokens, caps, fits=False)
