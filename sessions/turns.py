"""Tool-pair order across messages: what the Messages API requires of every served context.

The provider reads consecutive messages of one role as one turn, and requires each tool_use's
tool_result in the user turn right after the assistant turn holding it, before any other content
of that turn. So, at append time and against the stored tail plus the batch before it:

- a user message after an assistant turn whose tool_uses still wait for results must start
  with those results (text, images and notes may follow them once every call is answered;
  parallel results may also be spread over consecutive user messages);
- a tool_result must answer a call of the latest assistant turn, and comes before any other
  content of the user turn after it (a late result would be served as tool_use → text →
  tool_result, which the provider rejects);
- once results began, the next assistant message waits until every call is answered.

A max_tokens reply's trailing tool_uses are hidden when served (`services.truncated_content`):
they need no result, and may still get one while the user turn has nothing else.

Duplicate ids, results for an unknown call and results already given are named earlier by the
append (`services._check_tool_ids`); this module only looks at order. The check runs under the
session's row lock, so concurrent appends see each other's messages. The state after the last
message is kept on the session row (`Session.turn_state`, `stored_form`/`from_stored`), so an
append reads no message; `stored_turn` reads it from the messages when that copy is missing or
behind.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connections

from compaction.core.blocks import TOOL_RESULT, TOOL_USE
from compaction.core.overflow import discard_truncated_tool_uses

from . import validation
from .models import Message

STOP_MAX_TOKENS = "max_tokens"
# Rows read walking back from the session's last message: a first small step (almost always
# enough: a reply and the messages after it), then larger ones.
FIRST_STEP = 4
TAIL_STEP = 32
NO_SEQ_ABOVE = 2**31 - 1  # above any seq (a PostgreSQL integer)


@dataclass
class TurnState:
    """The latest assistant turn, as far as the next user message is concerned."""

    where: str = ""  # how an error names that turn: "seq 12" or "messages[3]"
    waiting: dict[str, None] = field(default_factory=dict)  # its tool_use ids without a result, in order
    hidden: set[str] = field(default_factory=set)  # of those, cut off by max_tokens: no result needed
    closed: bool = False  # the user turn after it already holds other content: no more results
    last_role: str = ""  # role of the message before the next one
    turn_seq: int | None = None  # that turn's latest message's seq (None: in the batch, not stored yet)
    plain_user: bool = False  # a user message without results came after that turn: no result may follow

    @property
    def pending(self) -> list[str]:
        return [tid for tid in self.waiting if tid not in self.hidden]

    def add_assistant(self, content: Any, usage: Any, where: str, seq: int | None = None) -> None:
        if self.last_role != "assistant":
            self.waiting, self.hidden, self.closed = {}, set(), False
        self.where, self.turn_seq, self.plain_user = where, seq, False
        ids = [b["id"] for _, b in validation.tool_uses(content)]
        self.waiting.update(dict.fromkeys(ids))
        self.hidden |= hidden_tool_uses(content, usage)
        self.last_role = "assistant"


def hidden_tool_uses(content: Any, usage: Any) -> set[str]:
    """The tool_use ids a max_tokens reply is served without (unless answered)."""
    if not (isinstance(usage, dict) and usage.get("stop_reason") == STOP_MAX_TOKENS and isinstance(content, list)):
        return set()
    kept = {b.get("id") for b in discard_truncated_tool_uses(content) if b.get("type") == TOOL_USE}
    return {b["id"] for _, b in validation.tool_uses(content)} - kept


def _is_other(block: Any) -> bool:
    """Content that is served and is not a tool_result (whitespace-only text is not served)."""
    return block.get("type") != TOOL_RESULT and not validation.has_blank_text([block])


def _waiting_problem(state: TurnState) -> str:
    pending = state.pending
    ids = ", ".join(repr(tid) for tid in pending)
    if len(pending) == 1:
        head = f"tool_use {ids} of the assistant message at {state.where} is waiting for its result"
        how = f'start this message\'s content with {{"type": "tool_result", "tool_use_id": {ids}, "content": ...}}'
    else:
        head = f"tool_uses {ids} of the assistant message at {state.where} are waiting for their results"
        how = "start this message's content with one tool_result block for each (tool_use_id " + ids + ")"
    return f"{head}: {how}; text and other blocks may follow the results"


def _unanswered_problem(state: TurnState) -> str:
    pending = state.pending
    ids = ", ".join(repr(tid) for tid in pending)
    noun = (
        f"tool_use {ids} of the assistant message at {state.where} is"
        if len(pending) == 1
        else (f"tool_uses {ids} of the assistant message at {state.where} are")
    )
    return (
        f"{noun} still waiting for a result: send a user message with the missing tool_result "
        "block(s) before the next assistant message"
    )


def check_user(state: TurnState, content: Any, path: str, errors: validation.Errors) -> None:
    """Check one user message against the turn before it, then take it into the state."""
    where = f"{path}.content" if path else "content"
    if state.last_role != "user":
        state.closed = False
    state.last_role = "user"
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not any(block.get("type") == TOOL_RESULT for block in blocks):
        state.plain_user = True
    for index, block in enumerate(blocks):
        block_path = where if isinstance(content, str) else f"{where}[{index}]"
        if block.get("type") == TOOL_RESULT:
            tool_use_id = block.get("tool_use_id")
            if tool_use_id not in state.waiting:
                turn = f" (at {state.where})" if state.where else ""
                errors.add(
                    f"{block_path}.tool_use_id",
                    f"tool_use {tool_use_id!r} is not a call of the latest assistant turn{turn} still waiting for "
                    "its result: a tool_result must be in the user message right after the assistant message "
                    "holding its tool_use, before any other content",
                )
            elif state.closed:
                errors.add(
                    f"{block_path}.tool_use_id",
                    f"tool_result for {tool_use_id!r} comes after other content of this user turn: "
                    "tool_result blocks must come first",
                )
            else:
                del state.waiting[tool_use_id]
        elif _is_other(block):
            if state.pending:
                errors.add(where, _waiting_problem(state))
                return
            state.closed = True


def check_batch(state: TurnState, batch: list[Any], first_seq: int | None = None) -> dict[str, str]:
    """{field path: problem} for the batch's messages (each with role, content, usage and path),
    in order, after the stored turn `state`. Stops at the first message in error. With
    `first_seq` (the batch's first message's seq), `state` is left as after the batch, ready
    to be stored (`stored_form`)."""
    errors = validation.Errors()
    for index, item in enumerate(batch):
        if item.role == "assistant":
            if state.last_role == "user" and state.pending:
                # Results already began (parallel ones in separate messages): the rest come first.
                errors.add(f"{item.path}.role" if item.path else "role", _unanswered_problem(state))
                break
            seq = None if first_seq is None else first_seq + index
            state.add_assistant(item.content, item.usage, item.path or f"messages[{index}]", seq)
        else:
            check_user(state, item.content, item.path, errors)
        if errors:
            break
    return errors.items


def stored_form(state: TurnState, seq: int) -> dict[str, Any]:
    """`state`, after the message at `seq`, as Session.turn_state stores it: what `stored_turn`
    would read back from the messages, so a check against either names the same problems."""
    if state.last_role == "user" and state.plain_user:
        return {"seq": seq, "last_role": "user", "plain_user": True}
    return {
        "seq": seq,
        "last_role": state.last_role,
        "turn": state.turn_seq,
        "waiting": list(state.waiting),
        "hidden": sorted(state.hidden),
        # Whether the user turn holds other content matters only while calls wait.
        "closed": state.closed and bool(state.waiting),
    }


def from_stored(stored: Any, last_seq: int) -> TurnState | None:
    """The state a Session.turn_state holds, or None unless it was written after the message
    at `last_seq` (the session's last): then `stored_turn` reads it from the messages."""
    if last_seq == 0:
        return TurnState()  # no message yet
    if not isinstance(stored, dict) or stored.get("seq") != last_seq:
        return None
    if stored.get("plain_user"):
        return TurnState(closed=True, last_role="user", plain_user=True)
    turn = stored.get("turn")
    return TurnState(
        where=f"seq {turn}" if turn is not None else "",
        waiting=dict.fromkeys(stored.get("waiting", ())),
        hidden=set(stored.get("hidden", ())),
        closed=bool(stored.get("closed")),
        last_role=stored.get("last_role", ""),
        turn_seq=turn,
    )


class _Row(NamedTuple):
    seq: int
    role: str
    tool_use_ids: list[str]
    tool_result_ids: list[str]
    stop_reason: str | None


def stored_turn(session_id: Any) -> TurnState:
    """The state after the session's stored messages: its latest assistant turn, the results the
    user messages after it gave, and whether those hold other content. Walks back from the last
    message only as far as the turn before that assistant turn: a few rows, as plain tuples, by a
    statement compiled once (this runs on every append, under the session's lock)."""
    after: list[_Row] = []  # user messages after the latest assistant turn, newest first
    turn: list[_Row] = []  # the latest assistant turn, newest first
    before, size = NO_SEQ_ABOVE, FIRST_STEP
    while True:
        step = _tail_reader(connections[DEFAULT_DB_ALIAS].vendor, size).read(session_id, before)
        for row in step:
            if row.role == "assistant":
                turn.append(row)
            elif turn:
                return _state_from(session_id, after, turn)
            elif not row.tool_result_ids:
                # A user message of other content closes the user turn: no result may follow,
                # and no call can be waiting (it would have been refused), so stop here.
                return TurnState(closed=True, last_role=(after or [row])[0].role, plain_user=True)
            else:
                after.append(row)
        if len(step) < size:
            return _state_from(session_id, after, turn)
        before, size = step[-1].seq, TAIL_STEP


class _TailReader:
    """Up to `size` messages of a session before a seq, newest first: the SQL the ORM writes for
    it, compiled once, with the ORM's converters applied to the columns (as sessions.statements)."""

    def __init__(self, size: int) -> None:
        connection = connections[DEFAULT_DB_ALIAS]
        session_mark, seq_mark = uuid.UUID(int=0), 2_000_000_001  # marks, replaced per read
        rows = Message.objects.filter(session_id=session_mark).filter(seq__lt=seq_mark).order_by("-seq")
        compiler = rows.values_list(*_Row._fields[:4], "provider_usage__stop_reason")[:size].query.get_compiler(
            connection=connection
        )
        self.sql, params = compiler.as_sql()
        self.params = list(params)
        prepared_mark = Message._meta.get_field("session").get_db_prep_value(session_mark, connection)
        self.session_index = self.params.index(prepared_mark)
        self.seq_index = self.params.index(seq_mark)
        columns = [expression for expression, _sql, _alias in compiler.select]
        self.converters = [(i, fns, expr) for i, (fns, expr) in compiler.get_converters(columns).items()]

    def read(self, session_id: Any, before: int) -> list[_Row]:
        connection = connections[DEFAULT_DB_ALIAS]
        params = list(self.params)
        params[self.session_index] = Message._meta.get_field("session").get_db_prep_value(session_id, connection)
        params[self.seq_index] = before
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            fetched = cursor.fetchall()
        out = []
        for row in fetched:
            values = list(row)
            for index, functions, expression in self.converters:
                for convert in functions:
                    values[index] = convert(values[index], expression, connection)
            out.append(_Row(*values))
        return out


@functools.cache
def _tail_reader(vendor: str, size: int) -> _TailReader:
    return _TailReader(size)


def _state_from(session_id: Any, after: list[_Row], turn: list[_Row]) -> TurnState:
    state = TurnState(last_role=(after or turn)[0].role if (after or turn) else "")
    if not turn:
        return state
    answered = {tid for row in after for tid in row.tool_result_ids}
    state.where, state.turn_seq = f"seq {turn[0].seq}", turn[0].seq
    for row in reversed(turn):
        state.waiting.update((tid, None) for tid in row.tool_use_ids if tid not in answered)
        if row.stop_reason == STOP_MAX_TOKENS:  # content read only for a cut-off reply
            content = _content(session_id, row.seq)
            state.hidden |= hidden_tool_uses(content, {"stop_reason": STOP_MAX_TOKENS})
    if state.waiting and not state.pending:
        # Only results for hidden calls are still possible: they need the user turn's content.
        state.closed = any(_is_other(b) for row in after for b in _blocks(_content(session_id, row.seq)))
    return state


def _content(session_id: Any, seq: int) -> Any:
    return Message.objects.filter(session_id=session_id, seq=seq).values_list("content", flat=True).first()


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content
