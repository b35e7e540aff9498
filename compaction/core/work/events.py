"""Messages as typed events: who said what, which call was made and what it answered.

`events_of` reads one message at a time. A tool call is an event once its result arrives
(the call is remembered as pending until then, in the state, so a call made before a
compaction boundary and answered after it is still one event).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction.core.blocks import TOOL_CALL_KINDS, TOOL_RESULT, TOOL_USE
from compaction.core.prompts import text_of
from compaction.core.text_heuristics import is_tool_rejection, tool_result_text
from compaction.core.tool_vocabulary import (
    EDITOR_READ_COMMANDS,
    EDITOR_TOOLS,
    READ_TOOLS,
    SEARCH_TOOLS,
    is_completion_tool,
    is_edit_call,
    is_output_tool,
    is_plan_tool,
    is_todo_tool,
    path_argument,
    shell_command_of,
    tool_input,
    tool_key,
)
from compaction.core.types import Msg
from compaction.core.work.profiles import PERSON, message_parts
from compaction.core.work.state import PendingCall

# Subagent tools: the call's result is another agent's report.
AGENT_TOOLS = frozenset({"task", "agent", "dispatch_agent", "subagent"})


@dataclass(frozen=True, slots=True)
class Said:
    """The person's words."""

    seq: int
    text: str
    queued: bool = False
    task: bool = False  # taken out of a harness's task template


@dataclass(frozen=True, slots=True)
class Injected:
    """Text the harness put in the user's turn (never quoted as the person's)."""

    seq: int
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class Narration:
    """The agent's own words (a fact only as a labelled quote attached to something done)."""

    seq: int
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call with its result."""

    seq: int  # the call's message
    result_seq: int  # the result's message
    name: str  # the bare tool name
    kind: str  # shell | edit | read | search | todo | plan | submit | output | agent | other
    args: Any
    command: str | None  # the shell command, for shell calls
    path: str | None
    output: str
    is_error: bool
    rejected: bool  # refused by the person or the harness: it did not run
    purpose: str = ""  # the agent's words just before the call
    alone: bool = True  # the only call of its message


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The agent ended its turn with words and no call left open."""

    seq: int
    text: str


Event = Said | Injected | Narration | Call | TurnEnded


def call_kind(name: str, args: Any) -> str:
    key = tool_key(name)
    block = {"type": TOOL_USE, "name": name, "input": args}
    if shell_command_of(block):
        return "shell"
    if is_edit_call(name, args):
        return "edit"
    if key in EDITOR_TOOLS:
        sub = args.get("command") if isinstance(args, dict) else None
        return "read" if str(sub).lower() in EDITOR_READ_COMMANDS else "other"
    for kind, test in (
        ("todo", is_todo_tool),
        ("plan", is_plan_tool),
        ("submit", is_completion_tool),
        ("output", is_output_tool),
    ):
        if test(name):
            return kind
    if key in READ_TOOLS:
        return "read"
    if key in SEARCH_TOOLS:
        return "search"
    if key in AGENT_TOOLS:
        return "agent"
    return "other"


def _call(pending: PendingCall, result_seq: int, block: dict[str, Any]) -> Call:
    name = pending.name
    args = pending.args
    output = tool_result_text(block.get("content"))
    command = shell_command_of({"type": TOOL_USE, "name": name, "input": args})
    return Call(
        seq=pending.seq,
        result_seq=result_seq,
        name=tool_key(name),
        kind=call_kind(name, args),
        args=args,
        command=command,
        path=path_argument(args),
        output=output,
        is_error=bool(block.get("is_error")),
        rejected=is_tool_rejection(output),
        purpose=pending.purpose,
        alone=pending.alone,
    )


def _assistant_events(msg: Msg, pending: dict[str, PendingCall]) -> list[Event]:
    out: list[Event] = []
    said = ""
    made: list[str] = []
    for block in msg.blocks:
        kind = block.get("type")
        if kind == "text":
            text = text_of(block, "text").strip()
            if text:
                out.append(Narration(msg.seq, text))
                said = text
        elif kind in TOOL_CALL_KINDS and block.get("id"):
            made.append(str(block["id"]))
            pending[made[-1]] = PendingCall(msg.seq, str(block.get("name") or ""), tool_input(block), said)
    if len(made) > 1:
        for call_id in made:
            pending[call_id].alone = False
    calls = len(made)
    if said and not calls and not pending:
        out.append(TurnEnded(msg.seq, said))
    return out


def events_of(msg: Msg, pending: dict[str, PendingCall]) -> list[Event]:
    """The events of one message, in order; `pending` (the state's open calls) is updated."""
    if msg.role == "assistant":
        return _assistant_events(msg, pending)
    out: list[Event] = []
    for block in msg.blocks:
        if block.get("type") == TOOL_RESULT:
            call = pending.pop(str(block.get("tool_use_id") or ""), None)
            if call is not None:
                out.append(_call(call, msg.seq, block))
    for part in message_parts(msg):
        if part.provenance == PERSON:
            out.append(Said(msg.seq, part.text, queued=part.kind == "queued", task=part.kind == "task"))
        else:
            out.append(Injected(msg.seq, part.kind, part.text))
    return out
