"""Appending messages: one message or a batch, all or nothing, at a floor insert's cost.

Writes lock the session's row (`select_for_update`), which is what keeps `seq` gap-free and
unique under concurrent appends (on SQLite the IMMEDIATE transaction mode serializes writers
instead). Token counts are computed once, before the lock is taken, and stored; appends never
scan the history. The tool pairs are checked too: a tool_use id is unique in its session and a
tool_result answers an earlier, unanswered tool_use.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from compaction.core import tokens as core_tokens

from .. import statements, turns, validation
from ..models import Message, Session, ToolCall
from ..search_text import index_vector
from .config import session_tokenizer
from .context import context_recount
from .meter import Usage, meter_fields, session_usage
from .served import LRU, STOP_MAX_TOKENS, needs_serving, served_content

MAX_BATCH = 1000


@dataclass
class AppendResult:
    messages: list[Message]
    usage: Usage
    session: Session  # the appended-to session (APPEND_FIELDS loaded), as stored
    # The auto-compaction job queued after this append, if any: set by the compaction layer
    # (compaction.services.messages_append_then_compact); the message store never compacts.
    compaction: Any = None


@dataclass
class _Prepared:
    role: str
    content: Any
    tokens: int
    usage: dict[str, Any] | None
    served_tokens: int = 0  # as served in the context (differs only for a max_tokens reply)
    provenance: str = ""  # as stated by the client ("" = not stated)
    tool_uses: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, path)
    tool_results: list[tuple[str, str]] = field(default_factory=list)  # (tool_use_id, path)
    path: str = ""  # how errors name the message ("" for a single message)


def _message_path(index: int, single: bool) -> str:
    return "" if single else f"messages[{index}]"


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _prepare(messages: list[Any], single: bool, tokenizer: core_tokens.Tokenizer) -> list[_Prepared]:
    """Shape checks and token counts; all of it before any lock is taken."""
    errors = validation.Errors()
    if not isinstance(messages, list) or not messages:
        raise ValidationError({"messages": ["must be a non-empty list of messages"]})
    if len(messages) > MAX_BATCH:
        raise ValidationError({"messages": [f"at most {MAX_BATCH} messages per request, got {len(messages)}"]})
    for index, message in enumerate(messages):
        validation.check_message(message, _message_path(index, single), errors)
    if errors:
        raise ValidationError({path: [problem] for path, problem in errors.items.items()})

    prepared: list[_Prepared] = []
    for index, message in enumerate(messages):
        path = _message_path(index, single)
        content = message["content"]
        item = _Prepared(
            role=message["role"],
            content=content,
            tokens=core_tokens.count_content(content, tokenizer),
            usage=message.get("usage"),
            provenance=message.get("provenance") or "",
            path=path,
        )
        for block_index, block in validation.tool_uses(content):
            item.tool_uses.append((block["id"], block["name"], _join(path, f"content[{block_index}].id")))
        for block_index, block in validation.tool_results(content):
            item.tool_results.append((block["tool_use_id"], _join(path, f"content[{block_index}].tool_use_id")))
        item.served_tokens = item.tokens
        prepared.append(item)
    # Served tokens per message, as the served context serves it: a reply appended with its own usage
    # saying max_tokens is served truncated, like one reported through usage_report (its
    # tool_uses answered later in this batch stay); whitespace-only text is left out.
    answered: set[str] | None = None
    for item in prepared:
        if needs_serving(item.role, item.content, item.usage):
            if answered is None:
                answered = {tid for p in prepared for tid, _ in p.tool_results}
            served, changed = served_content(item.role, item.content, item.usage, answered)
            if changed:
                item.served_tokens = 0 if served is None else core_tokens.count_content(served, tokenizer)
    return prepared


def _check_tool_ids(prepared: list[_Prepared], known: dict[str, ToolCall] | None) -> dict[str, str]:
    """Duplicate tool_use ids and tool_results without an earlier tool_use (session or batch).

    `known` None (before the lock): only the batch itself is checked; a result for an id not
    used earlier in the batch is taken to answer a stored, unanswered tool_use, which the
    UPDATE answering it checks under the lock (_answer_statement).
    """
    errors = validation.Errors()
    stored_calls = known or {}
    used_in_batch: dict[str, str] = {}
    answered_in_batch: dict[str, str] = {}
    for item in prepared:
        # Results first: a message's results can only answer tool_uses of earlier messages.
        for tool_use_id, path in item.tool_results:
            stored = stored_calls.get(tool_use_id)
            if tool_use_id in answered_in_batch:
                errors.add(path, f"tool_use {tool_use_id!r} already has a result at {answered_in_batch[tool_use_id]}")
            elif stored is not None and stored.result_seq is not None:
                errors.add(path, f"tool_use {tool_use_id!r} already has a result at seq {stored.result_seq}")
            elif known is not None and stored is None and tool_use_id not in used_in_batch:
                errors.add(path, f"no earlier tool_use with id {tool_use_id!r} in this session")
            answered_in_batch.setdefault(tool_use_id, path)
        for tool_use_id, _name, path in item.tool_uses:
            if tool_use_id in stored_calls:
                errors.add(
                    path,
                    f"duplicate tool_use id {tool_use_id!r}: already used at seq {stored_calls[tool_use_id].use_seq}",
                )
            elif tool_use_id in used_in_batch:
                errors.add(path, f"duplicate tool_use id {tool_use_id!r}: already used at {used_in_batch[tool_use_id]}")
            else:
                used_in_batch[tool_use_id] = path
    return errors.items


def _stored_answers(prepared: list[_Prepared]) -> dict[str, int]:
    """{tool_use id: index of the message answering it} for the results that answer a tool_use
    stored by an earlier request (not one earlier in this batch)."""
    used_in_batch: set[str] = set()
    answers: dict[str, int] = {}
    for index, item in enumerate(prepared):
        for tool_use_id, _ in item.tool_results:
            if tool_use_id not in used_in_batch:
                answers.setdefault(tool_use_id, index)
        used_in_batch.update(tid for tid, _, _ in item.tool_uses)
    return answers


# The JSON test "this message's usage says max_tokens", per database (the two the project runs on).
_STOP_REASON_SQL = {
    "postgresql": "m.provider_usage ->> 'stop_reason'",
    "sqlite": "json_extract(m.provider_usage, '$.stop_reason')",
}


def _answer_statement(session_id: Any, answers: dict[str, int]) -> tuple[str, list[Any]]:
    """The statement setting result_seq on the stored, still unanswered tool calls in `answers`
    ({id: seq}); it returns (id, truncated_use) for the rows it answered (an id missing from
    them was not stored or already answered: the caller names the problem).

    `truncated_use`: the tool_use is in a reply a max_tokens report cut off, so answering it
    makes that reply's hidden tool_use served again. One UPDATE ... RETURNING instead of a
    SELECT and an UPDATE: the ORM has no RETURNING for updates, and this is the hot path of
    every tool_result (sent with the append's other writes, sessions.statements.execute_together).
    """
    db = connections[DEFAULT_DB_ALIAS]
    tool_calls = db.ops.quote_name(ToolCall._meta.db_table)
    messages = db.ops.quote_name(Message._meta.db_table)
    session_param = ToolCall._meta.get_field("session").get_db_prep_value(session_id, db)
    ids = list(answers)
    marks = ", ".join(["%s"] * len(ids))
    sql = (
        f"UPDATE {tool_calls} SET result_seq = CASE tool_use_id {' '.join(['WHEN %s THEN CAST(%s AS integer)'] * len(ids))} END "
        f"WHERE session_id = %s AND result_seq IS NULL AND tool_use_id IN ({marks}) "
        f"RETURNING tool_use_id, EXISTS (SELECT 1 FROM {messages} m WHERE m.session_id = {tool_calls}.session_id "
        f"AND m.seq = {tool_calls}.use_seq AND m.role = 'assistant' "
        f"AND {_STOP_REASON_SQL[db.vendor]} = %s)"
    )
    params: list[Any] = [value for tid in ids for value in (tid, answers[tid])]
    params += [session_param, *ids, STOP_MAX_TOKENS]
    return sql, params


# Columns the append reads under its row lock: the counters it bumps and what the meter
# (session_usage) needs for the response and the auto-compaction decision. The rest of the row
# (system prompt, title, last_usage...) is neither read nor written.
APPEND_FIELDS = (
    "id",
    "model",
    "context_window_override",
    "compaction_settings",
    "last_seq",
    "message_count",
    "total_message_tokens",
    "context_tokens",
    "reported_input_tokens",
    "reported_at_seq",
    "tokens_since_report",
    "calibration",
    "calibration_offset",
    "last_activity_at",
    "turn_state",
)
# Columns every append writes besides the meter's (one UPDATE, _write_counters).
APPEND_WRITES = (
    "last_seq",
    "message_count",
    "total_message_tokens",
    "context_tokens",
    "tokens_since_report",
    "last_activity_at",
    "turn_state",
    "updated_at",
)
# What an append changes: copied into the caller's Session instance afterwards.
APPEND_COUNTERS = (*APPEND_WRITES, "usage_tokens", "usage_percent", "usage_level")

# Tokenizer guess per session for appends by id (the API's): the model is only read under
# the lock, and tokens are counted before it. A wrong guess (the model changed) costs a retry.
_TOKENIZER_GUESS = LRU(10_000)


def messages_append(
    *,
    session: Session | Any,
    messages: list[dict[str, Any]],
    single: bool = False,
    now: datetime | None = None,
    owner: Any = None,
) -> AppendResult:
    """Append one message or a batch, all or nothing. Stores only: the auto-compaction decision
    is the caller's (compaction.services.messages_append_then_compact, after this commit).

    `session` is a Session (its counters are brought up to date afterwards) or a session id;
    with `owner`, only that owner's session (else Session.DoesNotExist, like a missing one).

    Raises ValidationError ({field path: [problem]}) and stores nothing when any message is
    malformed, a tool_result has no earlier tool_use, or a tool_use id is already taken.

    Cost (the hot path of every agent): one locked read of the needed columns (the tool-pair
    order is checked against the state stored there), then one UPDATE answering the stored
    tool calls (only when the batch has tool_results; it is also the check), the message
    INSERT, the tool-call INSERT when there are tool_uses and one counter UPDATE, sent
    together (one round trip on PostgreSQL). The statements have a fixed text, compiled once
    per process. Tokens are counted before the lock; the row lock is held only for the writes.
    """
    instance = session if isinstance(session, Session) else None
    session_id = instance.pk if instance is not None else session
    if instance is not None:
        tokenizer = session_tokenizer(instance)
    else:
        tokenizer = _TOKENIZER_GUESS.get(session_id) or core_tokens.tokenizer_for_model(None)
    append = _Append(session_id=session_id, owner=owner, messages=messages, single=single, now=now or timezone.now())
    locked, tokenizer = append.run(tokenizer)
    if instance is None:
        _TOKENIZER_GUESS.put(session_id, tokenizer)
    else:
        for name in APPEND_COUNTERS:
            setattr(instance, name, getattr(locked, name))
    return AppendResult(messages=locked.appended, usage=locked.usage, session=locked)


class _OtherTokenizer(Exception):
    def __init__(self, tokenizer: core_tokens.Tokenizer) -> None:
        self.tokenizer = tokenizer


class _ToolIdConflict(Exception):
    """A tool_result of the batch answers no stored, unanswered tool_use (rolls the append back)."""


@dataclass
class _Append:
    """One append as asked: into which session, on whose behalf, which messages, when."""

    session_id: Any
    owner: Any
    messages: list[dict[str, Any]]
    single: bool
    now: datetime

    def run(self, tokenizer: core_tokens.Tokenizer) -> tuple[Session, core_tokens.Tokenizer]:
        """(the session as stored after the append, the tokenizer its messages were counted with)."""
        for _attempt in range(3):
            prepared = self._prepare(tokenizer)
            try:
                with statements.Transaction() as opening:
                    return _append_locked(self, prepared, tokenizer, opening), tokenizer
            except _OtherTokenizer as other:
                # The session's model counts with another tokenizer than guessed: count again,
                # outside the lock (nothing was written).
                tokenizer = other.tokenizer
            except (IntegrityError, _ToolIdConflict) as conflict:
                # A tool_use id already stored (the unique index said so) or a tool_result whose
                # tool_use is not stored or already answered (the UPDATE answering it said so):
                # nothing was written; read the stored calls to name the problem.
                errors = _tool_id_errors(self.session_id, prepared)
                if errors:
                    raise ValidationError({path: [problem] for path, problem in errors.items()}) from None
                if isinstance(conflict, IntegrityError):
                    raise
                # The stored calls changed between the UPDATE and the look-up: try again.
        problem = "the session's model kept changing during the append; retry"
        raise ValidationError({"model": [problem]})  # pragma: no cover - it changed between every attempt

    def _prepare(self, tokenizer: core_tokens.Tokenizer) -> list[_Prepared]:
        try:
            return _prepare(self.messages, self.single, tokenizer)
        except ValidationError:
            if (
                self.owner is not None
                and not Session.objects.filter(pk=self.session_id, owner=self.owner, deleted_at__isnull=True).exists()
            ):
                raise Session.DoesNotExist from None  # another owner's session: 404 before 400
            raise


# The append's statements have a fixed text: compiled once per process (sessions.statements;
# through the ORM, compiling them cost as much as running them, on every agent's every turn).


@functools.cache
def _session_reader(vendor: str, scoped: bool) -> statements.RowReader:
    """The locked read of APPEND_FIELDS, as the ORM writes it for this database (FOR UPDATE where
    there is one). Parameters: the session id, then (scoped) the owner's id."""
    rows = Session.objects.select_for_update().only(*APPEND_FIELDS).order_by().filter(pk=uuid.UUID(int=0))
    if scoped:
        rows = rows.filter(owner_id=0, deleted_at__isnull=True)
    with transaction.atomic():  # the ORM compiles FOR UPDATE only inside a transaction; nothing is sent
        return statements.RowReader(rows, param_count=1 + scoped)


def _lock_session(session_id: Any, owner: Any, opening: statements.Transaction) -> Session:
    """The session's row, locked, with APPEND_FIELDS loaded (the read opens `opening`). With
    `owner`, the owner's view (the API): another owner's or a trashed session does not exist
    (Session.DoesNotExist)."""
    db = connections[DEFAULT_DB_ALIAS]
    params = [Session._meta.pk.get_db_prep_value(session_id, db)]
    if owner is not None:
        params.append(owner.pk)
    row: Session | None = _session_reader(db.vendor, owner is not None).read(params, opening=opening)
    if row is None:
        raise Session.DoesNotExist("No such session.")
    return row


@functools.cache
def _counter_writer(vendor: str, names: tuple[str, ...]) -> statements.RowUpdater:
    return statements.RowUpdater(Session, names)


def _write_counters(session: Session, names: tuple[str, ...]) -> None:
    """Write these fields of a locked session as they are on the instance. The row is locked
    since it was read, so plain values give what F() expressions would."""
    _counter_writer(connection.vendor, names).update(session)


# What an append inserts: every column of its messages and tool calls but the primary key
# (returned for the messages, which the answer names; a tool call's is never read).
MESSAGE_COLUMNS = (
    "session",
    "seq",
    "role",
    "content",
    "token_count",
    "tool_use_ids",
    "tool_result_ids",
    "provider_usage",
    "provenance",
    "created_at",
)
TOOL_CALL_COLUMNS = ("session", "tool_use_id", "name", "use_seq", "result_seq")


@functools.cache
def _message_inserter(vendor: str) -> statements.RowInserter:
    # On PostgreSQL the search vector goes with the row (built here for a third of what the
    # database's own computation costs it; migration 0015): it is not a field of the model.
    computed: dict[str, Callable[[Any], Any]] | None = (
        {"search_vector": _search_vector} if vendor == "postgresql" else None
    )
    return statements.RowInserter(Message, MESSAGE_COLUMNS, returning_pk=True, computed=computed)


def _search_vector(message: Message) -> str:
    return index_vector(message.content)


@functools.cache
def _tool_call_inserter(vendor: str) -> statements.RowInserter:
    return statements.RowInserter(ToolCall, TOOL_CALL_COLUMNS, returning_pk=False)


def _known_tool_calls(session_id: Any, ids: set[str]) -> dict[str, ToolCall]:
    """The stored tool calls among `ids`, each with `truncated_use`: its tool_use is in a reply a
    max_tokens report cut off (answering it makes that reply's hidden tool_use served again)."""
    cut_off = Message.objects.filter(
        session_id=OuterRef("session_id"),
        seq=OuterRef("use_seq"),
        role="assistant",
        provider_usage__stop_reason=STOP_MAX_TOKENS,
    )
    rows = (
        ToolCall.objects.filter(session_id=session_id, tool_use_id__in=ids)
        .only("tool_use_id", "use_seq", "result_seq")
        .annotate(truncated_use=Exists(cut_off))
    )
    return {tc.tool_use_id: tc for tc in rows}


def _tool_id_errors(session_id: Any, prepared: list[_Prepared]) -> dict[str, str]:
    ids = {tid for item in prepared for tid, _, _ in item.tool_uses} | {
        tid for item in prepared for tid, _ in item.tool_results
    }
    return _check_tool_ids(prepared, _known_tool_calls(session_id, ids))


def _append_locked(
    append: _Append, prepared: list[_Prepared], tokenizer: core_tokens.Tokenizer, opening: statements.Transaction
) -> Session:
    """The writes of one append, inside its transaction. Returns the session (APPEND_FIELDS
    only) with its counters as stored and the new rows as `appended`."""
    # Problems within the batch are found without the database; an id already stored is
    # rejected by the unique index, a result answering nothing stored by _answer_statement
    # (_Append.run then names either).
    errors = _check_tool_ids(prepared, None)
    if errors:
        raise ValidationError({path: [problem] for path, problem in errors.items()})
    locked = _lock_session(append.session_id, append.owner, opening)
    actual = session_tokenizer(locked)
    if actual.name != tokenizer.name:
        raise _OtherTokenizer(actual)

    first_seq = locked.last_seq + 1
    # Every tool_result right after its tool_use: checked against the state stored on the row
    # (read back from the latest messages when it is missing or behind), then stored anew.
    state = turns.from_stored(locked.turn_state, locked.last_seq)
    if state is None:
        state = turns.stored_turn(append.session_id)
    order_errors = turns.check_batch(state, prepared, first_seq)
    if order_errors:
        # A result for an unknown or answered call, or a duplicate id, is named as such first.
        errors = _tool_id_errors(append.session_id, prepared) or order_errors
        raise ValidationError({path: [problem] for path, problem in errors.items()})
    answers = {tid: first_seq + index for tid, index in _stored_answers(prepared).items()}
    rows, calls = _new_rows(append.session_id, prepared, first_seq)
    locked.turn_state = turns.stored_form(state, rows[-1].seq)
    meter = _count_appended(locked, prepared, rows, append.now)
    # The writes commit as they go when nothing can still roll them back: no stored call to answer
    # (its UPDATE is checked after it ran) and so no recount after them.
    closing = [] if answers else opening.closing()
    truncated = _write_append(locked, rows, calls, (*APPEND_WRITES, *meter), answers, closing)
    if truncated.keys() != answers.keys():
        raise _ToolIdConflict  # rolls the writes back
    if any(truncated.values()):
        # A result for a tool_use that a max_tokens report had hidden: it is served again.
        context_recount(locked, reset_reported=False)
        locked.usage = session_usage(locked)
    locked.appended = rows
    return locked


def _new_rows(session_id: Any, prepared: list[_Prepared], first_seq: int) -> tuple[list[Message], list[ToolCall]]:
    """The messages (seq from `first_seq` on) and their new tool calls, not yet stored."""
    rows = [
        Message(
            session_id=session_id,
            seq=first_seq + offset,
            role=item.role,
            content=item.content,
            token_count=item.tokens,
            tool_use_ids=[tid for tid, _, _ in item.tool_uses],
            tool_result_ids=[tid for tid, _ in item.tool_results],
            provider_usage=item.usage,
            provenance=item.provenance,
        )
        for offset, item in enumerate(prepared)
    ]
    result_seq: dict[str, int] = {
        tid: row.seq for row, item in zip(rows, prepared, strict=True) for tid, _ in item.tool_results
    }
    calls = [
        ToolCall(session_id=session_id, tool_use_id=tid, name=name, use_seq=row.seq, result_seq=result_seq.get(tid))
        for row, item in zip(rows, prepared, strict=True)
        for tid, name, _ in item.tool_uses
    ]
    return rows, calls


def _write_append(
    locked: Session,
    rows: list[Message],
    calls: list[ToolCall],
    counters: tuple[str, ...],
    answers: dict[str, int],
    closing: list[tuple[str, list[Any]]],
) -> dict[str, bool]:
    """Answer the stored tool calls (`answers`), INSERT the messages and tool calls, UPDATE the
    session's counters: in one round trip where the database takes several statements at once
    (sessions.statements.execute_together). A tool_use id already stored fails it as a whole
    (IntegrityError), like the INSERT alone. Returns {id: truncated_use} of the calls answered
    (_answer_statement): the caller rolls back when one is missing. `closing` (a COMMIT) goes last."""
    vendor = connection.vendor
    messages, tool_calls = _message_inserter(vendor), _tool_call_inserter(vendor)
    answer = [_answer_statement(locked.pk, answers)] if answers else []
    inserts = messages.batches(rows)
    if len(inserts) > 1 or not connection.features.can_return_rows_from_bulk_insert:
        # A batch over the database's parameter limit, or no RETURNING (old SQLite): one by one.
        answered = statements.execute_together(answer)
        messages.insert(rows)
        tool_calls.insert(calls)
        _write_counters(locked, counters)
        statements.execute_together(closing)
    else:
        parts = [
            *answer,
            *inserts,
            *(tool_calls.batches(calls) if calls else []),
            _counter_writer(vendor, counters).statement(locked),
            *closing,
        ]
        answered = statements.execute_together(parts)
        messages.inserted(rows, [pk for (pk,) in answered[len(answer)]])
        tool_calls.inserted(calls, None)
    return {tool_use_id: bool(truncated) for tool_use_id, truncated in (answered[0] if answer else [])}


def _count_appended(locked: Session, prepared: list[_Prepared], rows: list[Message], now: datetime) -> dict[str, Any]:
    """Bump the locked session's counters and meter for the appended rows (on the instance);
    `locked.usage` is the meter after the append. Returns the meter's columns."""
    added = sum(item.tokens for item in prepared)
    served = sum(item.served_tokens for item in prepared)
    # New messages are always in context (after any first_kept_seq); they count on top of the
    # provider's last report when there is one.
    since_report = served if locked.reported_input_tokens is not None else 0
    locked.last_seq = rows[-1].seq
    locked.message_count += len(rows)
    locked.total_message_tokens += added
    locked.context_tokens += served
    locked.tokens_since_report += since_report
    locked.last_activity_at = now
    # The meter (pure arithmetic on the row) for the stored list columns and the response.
    locked.usage = session_usage(locked)
    meter = meter_fields(locked, locked.usage)
    for name, value in meter.items():
        setattr(locked, name, value)
    locked.updated_at = now
    return meter
