"""Session services: create/update sessions, append messages, usage reports, the served context.

Writes that touch a session's counters lock its row (`select_for_update`), which is what keeps
`seq` gap-free and unique under concurrent appends (on SQLite the IMMEDIATE transaction mode
serializes writers instead). Token counts are computed once, before the lock is taken, and
stored; appends never scan the history.

Usage figures (seed 002):
- `estimated_tokens` = system prompt + active summary + kept messages (after the prune
  overlay), cached in `Session.context_tokens`, updated incrementally on append and fully
  recomputed when a compaction is (de)activated (`session_recompute_usage`).
- `tokens` = the hybrid: the last provider-reported prompt size plus estimates of what changed
  after it (`Session.tokens_since_report`, a running counter kept on append, so usage never
  sums the history), the trailing estimate scaled by the calibrated ratio. After a
  (de)activation drops the report, `tokens` = fixed + ratio × estimate, the affine calibration
  fitted on the session's recent reports (`compaction.core.calibration`): `fixed` is what the provider counts
  and Compactor cannot see (tool definitions, the agent's own system prompt), `ratio` the
  provider tokenizer's count per cl100k token. So figures before and after a compaction are on
  the same scale. Without any report it is the pure estimate. Never below 0.9 × the estimate
  (compaction.core.calibration.served_floor): no provider counts less than it was served.
  This one figure (`session_usage().tokens`) is what the meter shows, what the auto-compaction
  trigger compares, a compaction's tokens_before / tokens_after, the dry run's estimate, the
  list's stored usage and the chart's line.
- Each usage report is judged first (compaction.core.calibration.judge): one far below what
  was served for that call (a client dropping the cache figures) or far off the calibrated
  prediction is stored and flagged (`implausible`) but neither calibrates nor moves the meter.
- Every report and every compaction is a row of the usage history (UsageSample), for the chart.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Exists, OuterRef, Sum
from django.utils import timezone

from compaction.core import calibration, registry
from compaction.core import tokens as core_tokens
from compaction.core.config import CompactionConfig, resolve_config, usage_level, validate_overrides, window_errors
from compaction.core.orphans import orphaned_results, results_as_text
from compaction.core.overflow import discard_truncated_tool_uses
from compaction.core.prompts import validate_custom_prompt
from compaction.core.provenance import without_provenance
from compaction.core.prune import prune_served, tool_names
from compaction.core.summary_message import render_summary_message
from compaction.core.types import Msg, ProviderUsage

from . import statements, turns, validation
from .models import Message, Session, ToolCall, UsageSample

logger = logging.getLogger(__name__)

MAX_BATCH = 1000
SETTINGS_MAX_DEPTH = 8
STOP_MAX_TOKENS = "max_tokens"


# --- configuration and settings validation -----------------------------------------------


def session_config(session: Session, request_overrides: Mapping[str, Any] | None = None) -> CompactionConfig:
    """Global defaults ← session overrides ← request overrides."""
    return resolve_config(
        context_window=session.context_window,
        defaults=settings.COMPACTOR,
        session_overrides=session.compaction_settings or {},
        request_overrides=dict(request_overrides or {}),
    )


def compaction_settings_errors(overrides: Any) -> dict[str, str]:
    """Problems with a compaction settings dict, keyed by setting name."""
    if not isinstance(overrides, dict):
        return {"": "must be an object of setting → value"}
    errors = validate_overrides(overrides)
    for key, value in overrides.items():
        safe_key = validation.safe_text(str(key))
        bad = validation.find_bad_json({key: value}, "", max_depth=SETTINGS_MAX_DEPTH)
        if bad is not None:
            errors.pop(key, None)
            errors[safe_key] = bad[1]
    prompt = overrides.get("compact_prompt")
    if isinstance(prompt, str) and "compact_prompt" not in errors:
        problems = validate_custom_prompt(prompt)
        if problems:
            errors["compact_prompt"] = "; ".join(problems)
    return errors


def _raise_settings_errors(overrides: Any, prefix: str = "compaction_settings") -> None:
    errors = compaction_settings_errors(overrides)
    if errors:
        raise ValidationError({(f"{prefix}.{k}" if k else prefix): [v] for k, v in errors.items()})


def _raise_window_errors(session: Session, *, changed: str | None = None) -> None:
    """The resolved settings must leave a meaningful trigger for the (possibly new) window."""
    errors = window_errors(session_config(session))
    if errors:
        why = f" (after the change of {changed})" if changed else ""
        raise ValidationError({f"compaction_settings.{k}": [f"{v}{why}"] for k, v in errors.items()})


# --- sessions ------------------------------------------------------------------------------


def session_tokenizer(session: Session) -> core_tokens.Tokenizer:
    """The tokenizer for this session's model (o200k for OpenAI's current models when cached)."""
    return core_tokens.tokenizer_for_model(session.model)


def _system_tokens(system_prompt: str, tokenizer: core_tokens.Tokenizer) -> int:
    return core_tokens.count_text(system_prompt, tokenizer) if system_prompt else 0


def session_create(
    *,
    owner,
    title: str = "",
    agent: str = "",
    model: str = "",
    system_prompt: str = "",
    context_window: int | None = None,
    compaction_settings: dict[str, Any] | None = None,
) -> Session:
    settings_dict = {k: v for k, v in (compaction_settings or {}).items() if v is not None}
    _raise_settings_errors(settings_dict)
    session = Session(
        owner=owner,
        title=title,
        agent=agent,
        model=model,
        system_prompt=system_prompt,
        context_window_override=context_window,
        compaction_settings=settings_dict,
    )
    _raise_window_errors(session)
    session.system_prompt_tokens = session.context_tokens = _system_tokens(system_prompt, session_tokenizer(session))
    _set_meter(session)
    session.save(force_insert=True)
    return session


_UNSET: Any = object()


def session_update(
    *,
    session: Session,
    title: str = _UNSET,
    agent: str = _UNSET,
    model: str = _UNSET,
    system_prompt: str = _UNSET,
    context_window: int | None = _UNSET,
    compaction_settings: dict[str, Any] = _UNSET,
) -> Session:
    """Change what was given. `compaction_settings` is merged key by key; a null value removes a key.
    `context_window=None` clears the override (back to the model registry's window)."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        changed: list[str] = []
        old_model = locked.model
        for name, value in (("title", title), ("agent", agent), ("model", model)):
            if value is not _UNSET:
                setattr(locked, name, value)
                changed.append(name)
        if model is not _UNSET and _model_key(model) != _model_key(old_model) and _is_calibrated(locked):
            # Another model counts with another tokenizer (and another hidden prompt): the
            # calibration measured on the old one says nothing about it.
            _reset_calibration(locked)
            changed += ["calibration", "calibration_offset"]
        if context_window is not _UNSET:
            locked.context_window_override = context_window
            changed.append("context_window_override")
        if compaction_settings is not _UNSET:
            if not isinstance(compaction_settings, dict):
                raise ValidationError({"compaction_settings": ["must be an object of setting → value"]})
            merged = dict(locked.compaction_settings or {})
            for key, value in compaction_settings.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            _raise_settings_errors(merged)
            locked.compaction_settings = merged
            changed.append("compaction_settings")
        if {"model", "context_window_override", "compaction_settings"} & set(changed):
            # Also when only the window or the model changed: explicit settings may no longer fit.
            what = ", ".join(n.replace("_override", "") for n in changed if n in ("model", "context_window_override"))
            _raise_window_errors(locked, changed=what if "compaction_settings" not in changed else None)
        if system_prompt is not _UNSET and system_prompt != locked.system_prompt:
            new_tokens = _system_tokens(system_prompt, session_tokenizer(locked))
            delta = new_tokens - locked.system_prompt_tokens
            # The system prompt is part of the served context: shift the cached usage by the delta.
            locked.context_tokens = max(0, locked.context_tokens + delta)
            locked.system_prompt = system_prompt
            locked.system_prompt_tokens = new_tokens
            changed += ["system_prompt", "system_prompt_tokens", "context_tokens"]
            if locked.reported_input_tokens is not None:
                # The provider's last figure holds the old prompt: the change counts on top of it.
                locked.tokens_since_report += delta
                changed.append("tokens_since_report")
        if changed:
            locked.save(update_fields=[*changed, *_set_meter(locked), "updated_at"])
    return locked


def session_delete(*, session: Session) -> None:
    """Moves the session to the trash (restorable until purged): one call must not destroy a history."""
    from sessions.trash import session_trash

    session_trash(session=session)


# --- appending messages ---------------------------------------------------------------------


@dataclass
class AppendResult:
    messages: list[Message]
    usage: Usage
    # The auto-compaction job queued after this append, if any: set by the compaction layer
    # (compaction.services.messages_append_then_compact); the message store never compacts.
    compaction: Any = None
    session: Session | None = None  # the appended-to session (APPEND_FIELDS loaded), as stored


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
    # Served tokens per message, as _context_view serves it: a reply appended with its own usage
    # saying max_tokens is served truncated, like one reported through usage_report (its
    # tool_uses answered later in this batch stay); whitespace-only text is left out.
    answered: set[str] | None = None
    for item in prepared:
        if _needs_serving(item.role, item.content, item.usage):
            if answered is None:
                answered = {tid for p in prepared for tid, _ in p.tool_results}
            served, changed = served_content(item.role, item.content, item.usage, answered)
            if changed:
                item.served_tokens = 0 if served is None else core_tokens.count_content(served, tokenizer)
    return prepared


def _needs_serving(role: str, content: Any, usage: Any) -> bool:
    """Cheap test: may this message be served differently from how it is stored?"""
    return (role == "assistant" and _is_max_tokens(usage) and isinstance(content, list)) or validation.has_blank_text(
        content
    )


def served_content(role: str, content: Any, usage: Any, answered: set[str]) -> tuple[Any | None, bool]:
    """(content as served, changed?) for a message outside the prune overlay; None = left out.

    A max_tokens reply hides its unanswered tool_uses; whitespace-only text blocks (and a
    whitespace-only string) are dropped, which the Anthropic API requires. A message left
    with nothing is not served: it never holds a tool_use or tool_result (those are not
    text), so no tool pair is broken, and the API merges the same-role turns around it.
    """
    out, changed = content, False
    if role == "assistant" and _is_max_tokens(usage) and isinstance(content, list):
        out, hidden = truncated_content(content, answered)
        changed = bool(hidden)
    if validation.has_blank_text(out):
        out, changed = validation.without_blank_text(out), True
    return out, changed


def _is_max_tokens(usage: Any) -> bool:
    return isinstance(usage, dict) and usage.get("stop_reason") == STOP_MAX_TOKENS


def _check_tool_ids(prepared: list[_Prepared], known: dict[str, ToolCall] | None) -> dict[str, str]:
    """Duplicate tool_use ids and tool_results without an earlier tool_use (session or batch).

    `known` None (before the lock): only the batch itself is checked; a result for an id not
    used earlier in the batch is taken to answer a stored, unanswered tool_use, which the
    UPDATE answering it checks under the lock (_answer_stored_calls).
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


def _answer_stored_calls(session_id: Any, answers: dict[str, int]) -> dict[str, bool]:
    """Set result_seq on the stored, still unanswered tool calls in `answers` ({id: seq}), in one
    statement; returns {id: truncated_use} for the rows it answered (an id missing from it was
    not stored or already answered: the caller names the problem).

    `truncated_use`: the tool_use is in a reply a max_tokens report cut off, so answering it
    makes that reply's hidden tool_use served again. One UPDATE ... RETURNING instead of a
    SELECT and an UPDATE: the ORM has no RETURNING for updates, and this is the hot path of
    every tool_result (the row lock on the session is held meanwhile).
    """
    db = connections[DEFAULT_DB_ALIAS]
    tool_calls = db.ops.quote_name(ToolCall._meta.db_table)
    messages = db.ops.quote_name(Message._meta.db_table)
    session_param = ToolCall._meta.get_field("session").get_db_prep_value(session_id, db)
    ids = list(answers)
    marks = ", ".join(["%s"] * len(ids))
    sql = (
        f"UPDATE {tool_calls} SET result_seq = CASE tool_use_id {' '.join(['WHEN %s THEN %s'] * len(ids))} END "
        f"WHERE session_id = %s AND result_seq IS NULL AND tool_use_id IN ({marks}) "
        f"RETURNING tool_use_id, EXISTS (SELECT 1 FROM {messages} m WHERE m.session_id = {tool_calls}.session_id "
        f"AND m.seq = {tool_calls}.use_seq AND m.role = 'assistant' "
        f"AND {_STOP_REASON_SQL[db.vendor]} = %s)"
    )
    params: list[Any] = [value for tid in ids for value in (tid, answers[tid])]
    params += [session_param, *ids, STOP_MAX_TOKENS]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return {tool_use_id: bool(truncated) for tool_use_id, truncated in cursor.fetchall()}


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
)
# Columns every append writes besides the meter's (one UPDATE, _write_counters).
APPEND_WRITES = (
    "last_seq",
    "message_count",
    "total_message_tokens",
    "context_tokens",
    "tokens_since_report",
    "last_activity_at",
    "updated_at",
)
# What an append changes: copied into the caller's Session instance afterwards.
APPEND_COUNTERS = (*APPEND_WRITES, "usage_tokens", "usage_percent", "usage_level")


def messages_append(
    *,
    session: Session | Any,
    messages: list[dict[str, Any]],
    single: bool = False,
    now: datetime | None = None,
    owner=None,
) -> AppendResult:
    """Append one message or a batch, all or nothing. Stores only: the auto-compaction decision
    is the caller's (compaction.services.messages_append_then_compact, after this commit).

    `session` is a Session (its counters are brought up to date afterwards) or a session id;
    with `owner`, only that owner's session (else Session.DoesNotExist, like a missing one).

    Raises ValidationError ({field path: [problem]}) and stores nothing when any message is
    malformed, a tool_result has no earlier tool_use, or a tool_use id is already taken.

    Cost (the hot path of every agent): one locked read of the needed columns, one UPDATE
    answering the stored tool calls (only when the batch has tool_results; it is also the
    check), the message INSERT, the tool-call INSERT when there are tool_uses, one counter
    UPDATE; the two statements on the session row are compiled once per process. Tokens are
    counted before the lock; the row lock is held only for the writes.
    """
    instance = session if isinstance(session, Session) else None
    session_id = instance.pk if instance is not None else session
    now = now or timezone.now()
    if instance is not None:
        tokenizer = session_tokenizer(instance)
    else:
        tokenizer = _TOKENIZER_GUESS.get(session_id) or core_tokens.tokenizer_for_model(None)
    for _attempt in range(3):
        try:
            prepared = _prepare(messages, single, tokenizer)
        except ValidationError:
            if (
                owner is not None
                and not Session.objects.filter(pk=session_id, owner=owner, deleted_at__isnull=True).exists()
            ):
                raise Session.DoesNotExist from None  # another owner's session: 404 before 400
            raise
        try:
            with transaction.atomic():
                locked = _append_locked(
                    session_id=session_id, owner=owner, prepared=prepared, tokenizer=tokenizer, now=now
                )
        except _OtherTokenizer as other:
            # The session's model counts with another tokenizer than guessed: count again,
            # outside the lock (nothing was written).
            tokenizer = other.tokenizer
            continue
        except (IntegrityError, _ToolIdConflict) as conflict:
            # A tool_use id already stored (the unique index said so) or a tool_result whose
            # tool_use is not stored or already answered (the UPDATE answering it said so):
            # nothing was written; read the stored calls to name the problem.
            errors = _tool_id_errors(session_id, prepared)
            if errors:
                raise ValidationError({path: [problem] for path, problem in errors.items()}) from None
            if isinstance(conflict, IntegrityError):
                raise
            continue  # the stored calls changed between the UPDATE and the look-up: try again
        break
    else:  # pragma: no cover - the model changed between every attempt
        raise ValidationError({"model": ["the session's model kept changing during the append; retry"]})
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


# The append's statements have a fixed text: compiled once per process (sessions.statements;
# through the ORM, compiling them cost as much as running them, on every agent's every turn).


@functools.cache
def _session_reader(vendor: str, scoped: bool) -> statements.RowReader:
    """The locked read of APPEND_FIELDS, as the ORM writes it for this database (FOR UPDATE where
    there is one). Parameters: the session id, then (scoped) the owner's id."""
    rows = Session.objects.select_for_update().only(*APPEND_FIELDS).order_by().filter(pk=uuid.UUID(int=0))
    if scoped:
        rows = rows.filter(owner_id=0, deleted_at__isnull=True)
    return statements.RowReader(rows, param_count=1 + scoped)


def _lock_session(session_id: Any, owner) -> Session:
    """The session's row, locked, with APPEND_FIELDS loaded. With `owner`, the owner's view (the
    API): another owner's or a trashed session does not exist (Session.DoesNotExist)."""
    db = connections[DEFAULT_DB_ALIAS]
    params = [Session._meta.pk.get_db_prep_value(session_id, db)]
    if owner is not None:
        params.append(owner.pk)
    row = _session_reader(db.vendor, owner is not None).read(params)
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
    return statements.RowInserter(Message, MESSAGE_COLUMNS, returning_pk=True)


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
    *, session_id: Any, owner, prepared: list[_Prepared], tokenizer: core_tokens.Tokenizer, now: datetime
) -> Session:
    """The writes of one append, inside its transaction. Returns the session (APPEND_FIELDS
    only) with its counters as stored and the new rows as `appended`."""
    # Problems within the batch are found without the database; an id already stored is
    # rejected by the unique index, a result answering nothing stored by _answer_stored_calls
    # (messages_append then names either).
    errors = _check_tool_ids(prepared, None)
    if errors:
        raise ValidationError({path: [problem] for path, problem in errors.items()})
    locked = _lock_session(session_id, owner)
    actual = session_tokenizer(locked)
    if actual.name != tokenizer.name:
        raise _OtherTokenizer(actual)

    first_seq = locked.last_seq + 1
    answers = {tid: first_seq + index for tid, index in _stored_answers(prepared).items()}
    truncated: dict[str, bool] = {}
    if answers:
        truncated = _answer_stored_calls(session_id, answers)
        if truncated.keys() != answers.keys():
            raise _ToolIdConflict
    order_errors = turns.append_errors(session_id, prepared)  # every tool_result right after its tool_use
    if order_errors:
        raise ValidationError({path: [problem] for path, problem in order_errors.items()})

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
    _message_inserter(connection.vendor).insert(rows)

    result_seq: dict[str, int] = {
        tid: row.seq for row, item in zip(rows, prepared, strict=True) for tid, _ in item.tool_results
    }
    new_calls = [
        ToolCall(session_id=session_id, tool_use_id=tid, name=name, use_seq=row.seq, result_seq=result_seq.get(tid))
        for row, item in zip(rows, prepared, strict=True)
        for tid, name, _ in item.tool_uses
    ]
    if new_calls:
        _tool_call_inserter(connection.vendor).insert(new_calls)

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
    meter = _meter_fields(locked, locked.usage)
    for name, value in meter.items():
        setattr(locked, name, value)
    locked.updated_at = now
    _write_counters(locked, (*APPEND_WRITES, *meter))
    if any(truncated.values()):
        # A result for a tool_use that a max_tokens report had hidden: it is served again.
        _recompute(locked, reset_reported=False)
        locked.usage = session_usage(locked)
    locked.appended = rows
    return locked


COUNTER_FIELDS = (
    "last_seq",
    "message_count",
    "total_message_tokens",
    "context_tokens",
    "reported_input_tokens",
    "reported_at_seq",
    "tokens_since_report",
    "calibration_offset",
    "calibration",
    "last_usage",
    "last_activity_at",
    "model",
    "usage_tokens",
    "usage_percent",
    "usage_level",
)


def _copy_counters(source: Session, target: Session) -> None:
    """Keep the caller's instance current, so it does not write back stale counters."""
    if source is not target:
        for name in COUNTER_FIELDS:
            setattr(target, name, getattr(source, name))


# --- provider usage -------------------------------------------------------------------------


@dataclass
class UsageReportResult:
    usage: Usage
    message_seq: int | None  # the assistant message the report was attached to
    dropped_tool_use_ids: list[str]
    # A truncated reply or a calibrated (usually higher) figure can cross the trigger: the
    # job the compaction layer queued after this report, if any (usage_report_then_compact).
    compaction: Any = None
    session: Session | None = None  # the reported-on session, as stored


# Columns a usage report reads under its row lock: what an append reads (the meter's inputs and
# the counters; not the system prompt, title or last_usage) and the active compaction's
# boundaries (stale reports, what is in context). The compaction row is joined, not locked.
REPORT_FIELDS = (
    *APPEND_FIELDS,
    "active_compaction__id",
    "active_compaction__first_kept_seq",
    "active_compaction__snapshot_seq",
)


def usage_report(
    *,
    session: Session,
    input_tokens: int,
    output_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
    stop_reason: str | None = None,
    model: str | None = None,
    message_seq: int | None = None,
    now: datetime | None = None,
) -> UsageReportResult:
    """Record the provider's usage for the last model call (calibrates the hybrid estimate).

    The reported prompt size is input + cache read + cache write. The report belongs to an
    assistant message: `message_seq`, or by default the newest message when it is an
    assistant message (the agent appended the reply, then reported). The provider had seen
    every message before that reply, so later messages (the reply included) are added as
    estimates. Without such a message the provider had seen everything stored.

    stop_reason "max_tokens": the reply was cut off; its trailing tool_use blocks are
    incomplete and have no result, so the served context drops them.
    """
    now = now or timezone.now()
    prompt_tokens = ProviderUsage(
        input_tokens=input_tokens,
        cache_read_input_tokens=cache_read_input_tokens,
        cache_creation_input_tokens=cache_creation_input_tokens,
    ).prompt_tokens
    record = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "stop_reason": stop_reason,
        "model": model or None,
        "prompt_tokens": prompt_tokens,
        # Set by the plausibility check (None: passed, or a stale report, which is not judged).
        "implausible": None,
    }
    dropped: list[str] = []
    with transaction.atomic():
        locked = (
            Session.objects.select_for_update(of=("self",))
            .select_related("active_compaction")
            .only(*REPORT_FIELDS)
            .get(pk=session.pk)
        )
        # The meter's basis before this report: the last accepted report and the served
        # estimate it was compared with (what the plausibility check predicts from).
        last_report = None
        if locked.reported_input_tokens is not None:
            last_report = (locked.context_tokens - locked.tokens_since_report, locked.reported_input_tokens)
        target: Message | None = None
        if message_seq is not None:
            target = Message.objects.filter(session=locked, seq=message_seq).first()
            if target is None:
                raise ValidationError({"message_seq": [f"no message with seq {message_seq} in this session"]})
            if target.role != "assistant":
                raise ValidationError(
                    {
                        "message_seq": [
                            f"message {message_seq} is a {target.role} message; usage belongs to an assistant reply"
                        ]
                    }
                )
        elif locked.last_seq:
            newest = Message.objects.filter(session=locked, seq=locked.last_seq).first()
            if newest is not None and newest.role == "assistant":
                target = newest

        reported_at_seq = locked.last_seq
        truncated = 0  # the served change of the reported reply (max_tokens hides its tool calls)
        if target is not None:
            reported_at_seq = target.seq - 1
            before, _ = _served_assistant(locked, target)
            target.provider_usage = record
            after, dropped = _served_assistant(locked, target)
            if after != before and _in_context(locked, target.seq):
                locked.context_tokens = max(0, locked.context_tokens + after - before)
                truncated = after - before

        # A report for a call made before the active compaction's snapshot describes the old,
        # larger context: keep it on the message, but don't calibrate the served context with it.
        stale = _reported_before_active_compaction(locked, reported_at_seq)
        verdict = None
        reported_at_seq = max(0, reported_at_seq)
        if not stale:
            # Our estimate of the context the provider saw = the served estimate minus what came
            # after the report point; the difference is what only the provider counts.
            since = _served_after(locked, reported_at_seq, target)
            seen = max(0, locked.context_tokens - since)
            verdict = _judge_report(locked, reported=prompt_tokens, served=seen, model=model, last_report=last_report)
            model_key = _model_key(model or locked.model)
            if verdict.plausible:
                locked.reported_input_tokens = prompt_tokens
                locked.reported_at_seq = reported_at_seq
                locked.tokens_since_report = since
                locked.calibration_offset = prompt_tokens - seen
                locked.calibration = calibration.accepted(locked.calibration, verdict, model=model_key)
            else:
                # Stored and shown, but the meter keeps its basis: the last plausible report
                # plus what was appended since (or the calibrated estimate, or the estimate).
                locked.calibration = calibration.flagged(locked.calibration, verdict, model=model_key)
            record["implausible"] = verdict.flag()
        if (verdict is None or not verdict.plausible) and truncated and locked.reported_input_tokens is not None:
            # The meter keeps its basis report: the reply after it is served smaller now.
            if target.seq > (locked.reported_at_seq or 0):
                locked.tokens_since_report += truncated
        if target is not None:
            target.save(update_fields=["provider_usage"])
        locked.last_usage = {
            **record,
            "reported_at": now.isoformat(),
            "message_seq": target.seq if target else None,
            "calibrated": verdict is not None and verdict.plausible,
        }
        update = [
            "reported_input_tokens",
            "reported_at_seq",
            "tokens_since_report",
            "calibration_offset",
            "calibration",
            "last_usage",
            "context_tokens",
            "last_activity_at",
            "updated_at",
        ]
        if model and not locked.model:
            locked.model = model
            update.append("model")
        locked.last_activity_at = now
        locked.save(update_fields=[*update, *_set_meter(locked)])
        usage_sample_record(
            session=locked,
            kind=UsageSample.Kind.REPORT,
            seq=reported_at_seq,
            tokens=_meter_at_report(verdict, fallback=locked.usage_tokens),
            estimated_tokens=verdict.served_tokens if verdict else locked.context_tokens,
            reported_tokens=prompt_tokens,
            flagged=verdict is not None and not verdict.plausible,
            now=now,
        )
    usage = session_usage(locked)
    _copy_counters(locked, session)
    return UsageReportResult(
        usage=usage,
        message_seq=target.seq if target else None,
        dropped_tool_use_ids=dropped,
        session=locked,
    )


def _meter_at_report(verdict: calibration.Verdict | None, *, fallback: int) -> int:
    """The meter's figure for the context the reported call saw (UsageSample.tokens): the report
    itself when plausible, else what the meter predicted for it (the estimate before any
    calibration). A stale report (a call before the active compaction) keeps the meter's figure."""
    if verdict is None:
        return fallback
    if verdict.plausible:
        return verdict.reported_tokens
    return verdict.expected_tokens if verdict.expected_tokens is not None else verdict.served_tokens


def _judge_report(
    session: Session, *, reported: int, served: int, model: str | None, last_report: tuple[int, int] | None
) -> calibration.Verdict:
    """compaction.core.calibration.judge against the meter's prediction for this call. A report
    from another model than the one calibrated is judged against the served floor only (its
    tokenizer and hidden prompt are new: the calibration will start over)."""
    cal = session.calibration or {}
    same_model = not cal.get("model") or not model or cal.get("model") == _model_key(model)
    fit = session_calibration(session) if same_model else None
    expected = calibration.expected_report(fit, served=served, last_report=last_report if same_model else None)
    return calibration.judge(
        reported=reported,
        served=served,
        expected=expected,
        pending=cal.get("pending") if same_model else None,
        ratio=float(fit["ratio"]) if fit else 1.0,
        window=session.known_context_window(model),
    )


def _served_after(session: Session, seq: int, target: Message | None) -> int:
    """Served tokens of the messages in context after `seq` (usually just the reported reply).

    Bounded by the messages since the report point; only runs when a report arrives.
    """
    first_kept = (session.active_compaction.first_kept_seq if session.active_compaction else None) or 1
    total = 0
    tokenizer = session_tokenizer(session)
    for row_seq, content, tokens in Message.objects.filter(
        session=session, seq__gt=seq, seq__gte=first_kept
    ).values_list("seq", "content", "token_count"):
        if target is not None and row_seq == target.seq:
            tokens, _ = _served_assistant(session, target)
        elif validation.has_blank_text(content):
            served = validation.without_blank_text(content)
            tokens = 0 if served is None else core_tokens.count_content(served, tokenizer)
        total += tokens
    return total


def _reported_before_active_compaction(session: Session, reported_at_seq: int) -> bool:
    """True when the provider saw fewer messages than the active compaction's snapshot held.

    Such a call was made before the compaction existed, so its prompt size is the old one.
    """
    active = session.active_compaction
    if active is None:
        return False
    snapshot = active.snapshot_seq
    if snapshot is None:
        snapshot = (active.first_kept_seq or 1) - 1
    return reported_at_seq < snapshot


def _in_context(session: Session, seq: int) -> bool:
    active = session.active_compaction
    return not (active and active.first_kept_seq and seq < active.first_kept_seq)


TRUNCATED_NOTE = "[reply cut off at max_tokens; its incomplete tool calls were dropped]"


def truncated_content(content: list[dict[str, Any]], answered: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Content served for a max_tokens reply, and the tool_use ids it hides.

    Only tool_uses that never got a result are hidden (one that was answered stays with its
    result). A reply left with no block is served as a short note: the provider rejects an
    empty assistant message in the middle of a conversation.
    """
    kept = discard_truncated_tool_uses(content)
    kept_ids = {b.get("id") for b in kept if b.get("type") == "tool_use"}
    hidden = [
        b.get("id")
        for b in content
        if b.get("type") == "tool_use" and b.get("id") not in kept_ids and b.get("id") not in answered
    ]
    if not hidden:
        return content, []
    served = [b for b in content if not (b.get("type") == "tool_use" and b.get("id") in hidden)]
    if not served:
        served = [{"type": "text", "text": TRUNCATED_NOTE}]
    return served, hidden


def _truncated_view(session: Session, message: Message) -> tuple[list[dict[str, Any]], list[str]]:
    ids = [b.get("id") for b in message.content if b.get("type") == "tool_use"]
    answered = set(
        ToolCall.objects.filter(session=session, tool_use_id__in=ids, result_seq__isnull=False).values_list(
            "tool_use_id", flat=True
        )
    )
    return truncated_content(message.content, answered)


def _served_assistant(session: Session, message: Message) -> tuple[int, list[str]]:
    """(tokens served for an assistant message, tool_use ids hidden by a max_tokens report)."""
    content: Any = message.content
    hidden: list[str] = []
    if _is_max_tokens(message.provider_usage) and isinstance(message.content, list):
        content, hidden = _truncated_view(session, message)
    changed = bool(hidden)
    if validation.has_blank_text(content):
        content, changed = validation.without_blank_text(content), True
    if changed:
        return (0 if content is None else core_tokens.count_content(content, session_tokenizer(session))), hidden
    return message.token_count, []


# --- usage figures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """The meter: one session's usage on the provider's scale and what it is measured against.

    `tokens` is the one figure the gauge, the list, the trigger, a compaction's tokens_before
    and tokens_after, the dry run and the chart's line share (see the module doc). The API's
    JSON is `as_dict()`.
    """

    tokens: int
    estimated_tokens: int  # ours, uncalibrated: system prompt + summary + kept messages as served
    reported_tokens: int | None  # the last plausible report, while it describes the served context
    reported_at_seq: int | None
    trailing_tokens: int  # estimated tokens on top of the report (or the whole estimate)
    calibration_offset: int | None
    calibration: dict[str, Any] | None  # {fixed, ratio, reports, fitted}
    source: str  # "estimate", "provider+estimate" or "estimate+calibration"
    tokenizer: str
    exact: bool
    context_window: int
    usage_ratio: float | None
    trigger_tokens: int
    auto_compact: bool
    # The last usage report failed the plausibility check (compaction.core.calibration.judge):
    # {code, reason, reported_tokens, served_tokens, expected_tokens}; None when it passed.
    implausible: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        # Scalars and two flat dicts (calibration, implausible), copied by hand: asdict()
        # deep-copies through every value, and this is in every append's answer.
        out = {}
        for name in _USAGE_FIELDS:
            value = getattr(self, name)
            out[name] = dict(value) if isinstance(value, dict) else value
        return out


_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def session_usage(session: Session) -> Usage:
    """Both figures (pure estimate and hybrid provider+estimate) and what they are measured against.

    Reads only the session row (no query), so listing sessions costs no query per session.
    """
    cal = session_calibration(session)
    estimate = calibration.usage_estimate(
        estimated_tokens=session.context_tokens,
        reported_prompt_tokens=session.reported_input_tokens,
        tokens_since_report=session.tokens_since_report,
        calibration=cal,
    )
    tokens = estimate.tokens
    tokenizer = session_tokenizer(session)
    window = session.context_window
    config = session_config(session)
    return Usage(
        tokens=tokens,
        estimated_tokens=estimate.estimated_tokens,
        reported_tokens=estimate.reported_tokens,
        reported_at_seq=session.reported_at_seq if estimate.reported_tokens is not None else None,
        trailing_tokens=estimate.trailing_tokens,
        calibration_offset=session.calibration_offset,
        calibration=cal,
        source=estimate.source,
        tokenizer=tokenizer.name,
        exact=tokenizer.exact,
        context_window=window,
        usage_ratio=round(tokens / window, 4) if window else None,
        trigger_tokens=config.trigger_tokens,
        auto_compact=config.auto_compact,
        implausible=(session.calibration or {}).get("last_flag"),
    )


def usage_sample_record(
    *,
    session: Session,
    kind: str,
    seq: int,
    tokens: int,
    estimated_tokens: int | None,
    reported_tokens: int | None = None,
    flagged: bool = False,
    compaction: Any = None,
    now: datetime | None = None,
) -> UsageSample:
    """One point of the usage history (UsageSample): written by a usage report and by a
    compaction's activation, in their transaction; the chart reads them."""
    return UsageSample.objects.create(
        session_id=session.pk,
        kind=kind,
        seq=max(0, seq),
        tokens=max(0, tokens),
        estimated_tokens=None if estimated_tokens is None else max(0, estimated_tokens),
        reported_tokens=reported_tokens,
        flagged=flagged,
        compaction=compaction,
        created_at=now or timezone.now(),
    )


METER_FIELDS = ("usage_tokens", "usage_percent", "usage_level")


def _meter_fields(session: Session, usage: Usage | None = None) -> dict[str, Any]:
    """The stored meter columns (Session.usage_*) for the session's current counters."""
    usage = usage if usage is not None else session_usage(session)
    tokens, window = usage.tokens, usage.context_window
    return {
        "usage_tokens": tokens,
        "usage_percent": 100.0 * tokens / window if window else 0.0,
        "usage_level": usage_level(tokens=tokens, trigger_tokens=usage.trigger_tokens, context_window=window),
    }


def _set_meter(session: Session) -> list[str]:
    """Set the stored meter columns on the instance; the update_fields to save them."""
    for name, value in _meter_fields(session).items():
        setattr(session, name, value)
    return list(METER_FIELDS)


def session_meter_refresh(*, sessions=None) -> int:
    """Recompute the stored meter columns (all sessions by default), e.g. after the global
    defaults changed. Returns how many were rewritten."""
    changed = []
    for session in (sessions if sessions is not None else Session.objects.all()).iterator(chunk_size=1000):
        fields = _meter_fields(session)
        if any(getattr(session, name) != value for name, value in fields.items()):
            for name, value in fields.items():
                setattr(session, name, value)
            changed.append(session)
    Session.objects.bulk_update(changed, list(METER_FIELDS), batch_size=1000)
    return len(changed)


# --- affine calibration (the math is in compaction.core.calibration) -----------------


def _is_calibrated(session: Session) -> bool:
    return session.calibration is not None or session.calibration_offset is not None


def _model_key(model: str | None) -> str:
    """The model a calibration belongs to: dated snapshots and routing prefixes of one model
    ("claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5") count alike."""
    return registry.lookup(model).name


def _reset_calibration(session: Session) -> None:
    session.calibration = None
    session.calibration_offset = None


def session_calibration(session: Session) -> dict[str, Any] | None:
    """{fixed, ratio, reports, fitted} of the session's calibration, None before any report.

    Sessions calibrated before the history existed fall back to their additive offset.
    """
    cal = session.calibration
    if cal and cal.get("pairs"):
        return {
            "fixed": int(cal["fixed"]),
            "ratio": float(cal["ratio"]),
            "reports": len(cal.get("pairs", [])),
            "fitted": bool(cal.get("fitted")),
        }
    if session.calibration_offset is not None:
        return {"fixed": session.calibration_offset, "ratio": 1.0, "reports": 1, "fitted": False}
    return None


# --- the served context ---------------------------------------------------------------------


@dataclass
class ServedMessage:
    seq: int
    role: str
    content: Any
    tokens: int  # tokens as served (after the prune overlay / truncation)
    stored_tokens: int
    pruned: bool = False
    dropped: bool = False  # nothing left to serve (only whitespace-only text): content None, 0 tokens


@dataclass
class ContextView:
    system: str
    system_tokens: int
    summary_text: str | None
    summary_tokens: int
    messages: list[ServedMessage]
    stored: list[Msg] | None = None  # the same messages as stored (only when asked for)

    @property
    def tokens(self) -> int:
        return self.system_tokens + self.summary_tokens + sum(m.tokens for m in self.messages)


class _LRU:
    """A small bounded mapping, least recently used out first (process-local, thread-safe)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self.lock:
            value = self.data.get(key)
            if value is not None:
                self.data.move_to_end(key)
            return value

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            if len(self.data) > self.size:
                self.data.popitem(last=False)


# Output token counts of pruned messages with several tool results, by (session, seq,
# tokenizer): stored messages are never rewritten, so a count never goes stale. A single
# result's count is derived from the stored message count and needs no entry.
_PRUNE_OUTPUTS = _LRU(100_000)
# Tokenizer guess per session for appends by id (the API's): the model is only read under
# the lock, and tokens are counted before it. A wrong guess (the model changed) costs a retry.
_TOKENIZER_GUESS = _LRU(10_000)


def _context_view(session: Session, *, keep_stored: bool = False) -> ContextView:
    """The served context, without re-tokenizing it: stored counts are used as they are, a pruned
    message's count is derived from its stored count (`prune_served`), the summary message's
    count is cached by its text. Only a max_tokens reply with hidden tool calls and a message with
    whitespace-only text (left out of what is served) are recounted."""
    tokenizer = session_tokenizer(session)
    active = session.active_compaction
    first_kept = (active.first_kept_seq if active else None) or 1
    prune_before = (active.prune_before_seq if active else None) or 0
    summary_text = None
    if active and active.summary.strip():
        summary_text = render_summary_message(active.summary, active.turn_prefix_summary or "")
    rows = _context_rows(session, first_kept)
    names: dict[str, str] = {}
    if prune_before:
        # Tool names of the results below the boundary (their uses are before them, maybe before the cut).
        below = [Msg(*row[:4], row[5], row[6]) for row in rows if row[0] < prune_before]
        names = tool_names(below)
        missing = {tid for m in below if m.role == "user" for tid in m.tool_result_ids} - names.keys()
        if missing:
            names.update(
                ToolCall.objects.filter(session=session, tool_use_id__in=missing).values_list("tool_use_id", "name")
            )
    # Stored counts are the current tokenizer's unless the session switched tokenizers since.
    stored_exact = core_tokens.single_tokenizer()
    answered: set[str] | None = None
    served: list[ServedMessage] = []
    for seq, role, content, stored_tokens, usage, _uses, _results, _provenance in rows:
        out, tokens, changed = content, stored_tokens, False
        if seq < prune_before and role == "user" and isinstance(content, list):
            key = (session.pk, seq, tokenizer.name)
            pruned = prune_served(
                content,
                stored_tokens=stored_tokens if stored_exact else None,
                tool_names=names,
                tokenizer=tokenizer,
                known_outputs=_PRUNE_OUTPUTS.get(key) if stored_exact else None,
                seq=seq,
            )
            out, tokens, changed = pruned.content, pruned.tokens, pruned.changed
            was_pruned = changed
            if stored_exact and len(pruned.outputs) > 1:
                _PRUNE_OUTPUTS.put(key, pruned.outputs)
            if validation.has_blank_text(out):
                out, changed = validation.without_blank_text(out), True
                tokens = 0 if out is None else core_tokens.count_content(out, tokenizer)
        elif _needs_serving(role, content, usage):  # rare: only these messages are recounted
            was_pruned = False
            if answered is None:
                answered = _answered_ids(rows)
            out, changed = served_content(role, content, usage, answered)
            if changed:
                tokens = 0 if out is None else core_tokens.count_content(out, tokenizer)
        else:
            was_pruned = False
        served.append(
            ServedMessage(
                seq=seq,
                role=role,
                # A text block's provenance is the store's, not the provider's (it refuses the field).
                content=without_provenance(out) if isinstance(out, list) else out,
                tokens=tokens if changed else stored_tokens,
                stored_tokens=stored_tokens,
                pruned=was_pruned,
                dropped=out is None,
            )
        )
    if first_kept > 1:
        _serve_orphaned_results(served, tokenizer)
    for m in reversed(served):
        if not m.dropped:
            if m.role == "assistant":
                # The final message: the API rejects an assistant reply ending in whitespace
                # there (only there). Its count stays that of the reply as served once the
                # conversation goes on (at most the stripped whitespace's token more): the
                # cached usage then needs no update when an append makes it non-final.
                m.content = validation.without_trailing_whitespace(m.content)
            break
    return ContextView(
        system=session.system_prompt,
        system_tokens=session.system_prompt_tokens,
        summary_text=summary_text,
        summary_tokens=_summary_tokens(active, summary_text, tokenizer) if summary_text else 0,
        messages=served,
        stored=_engine_messages(rows) if keep_stored else None,
    )


# A message row as the served context and the engine read it: seq, role, content, token_count,
# provider_usage, and the tool ids stored beside the content at append.
ContextRow = tuple[int, str, Any, int, Any, list[str], list[str], str]


def _context_rows(session: Session, first_kept: int) -> list[ContextRow]:
    return list(
        Message.objects.filter(session=session, seq__gte=first_kept)
        .order_by("seq")
        .values_list(
            "seq", "role", "content", "token_count", "provider_usage", "tool_use_ids", "tool_result_ids", "provenance"
        )
    )


def _answered_ids(rows: list[ContextRow]) -> set[str]:
    """Every tool_use id a message of `rows` holds a result for (from the stored ids)."""
    return {tool_id for row in rows if row[1] == "user" for tool_id in row[6]}


def _engine_messages(rows: list[ContextRow]) -> list[Msg]:
    """Context rows as the engine cuts them: as stored, with their stored tool ids (the cut reads
    no block), except that a max_tokens reply's dropped tool calls are not tool_uses waiting for
    a result (they are never answered nor served), which the cut would never summarize."""
    answered: set[str] | None = None
    messages = []
    for seq, role, content, tokens, usage, use_ids, result_ids, provenance in rows:
        uses = use_ids
        if role == "assistant" and _is_max_tokens(usage) and isinstance(content, list):
            if answered is None:
                answered = _answered_ids(rows)
            hidden = set(truncated_content(content, answered)[1])
            if hidden:
                uses = [tool_id for tool_id in use_ids if tool_id not in hidden]
        messages.append(Msg(seq, role, content, tokens, uses, result_ids, provenance))
    return messages


def _serve_orphaned_results(served: list[ServedMessage], tokenizer) -> None:
    """A result whose tool_use is before the kept part (compacted before the cut kept waiting
    tool_uses) is served as text: the provider rejects a tool_result without its tool_use.
    Appends refuse such a result, so only a context after a compaction can hold one."""
    orphaned = orphaned_results([Msg(m.seq, m.role, m.content or [], 0) for m in served if not m.dropped])
    for m in served:
        if m.seq in orphaned:
            m.content = results_as_text(m.content, orphaned[m.seq])
            m.tokens = core_tokens.count_content(m.content, tokenizer)


def summary_message_count(*, session: Session, summary: str, turn_prefix_summary: str = "") -> tuple[int, str]:
    """(tokens, tokenizer name) of a summary as served (render_summary_message), for storing on
    its compaction (Compaction.summary_message_tokens / summary_tokenizer)."""
    tokenizer = session_tokenizer(session)
    if not summary.strip():
        return 0, tokenizer.name
    return core_tokens.count_content(render_summary_message(summary, turn_prefix_summary), tokenizer), tokenizer.name


def _summary_tokens(active: Any, summary_text: str, tokenizer: core_tokens.Tokenizer) -> int:
    """The served summary's count: stored with the compaction when made with this tokenizer
    (no per-process cache to thrash past a few dozen sessions), else counted (cached by text)."""
    if active.summary_message_tokens is not None and active.summary_tokenizer == tokenizer.name:
        return active.summary_message_tokens
    return core_tokens.count_content_cached(summary_text, tokenizer)


def served_summary_tokens(session: Session) -> int:
    """The active summary as served (preamble included), counted as the served context counts it."""
    active = session.active_compaction
    if active is None or not active.summary.strip():
        return 0
    text = render_summary_message(active.summary, active.turn_prefix_summary or "")
    return _summary_tokens(active, text, session_tokenizer(session))


def context_messages(session: Session, *, served: bool = False) -> list[Msg]:
    """The messages currently in context (from the active compaction's first_kept_seq on).

    Default: as stored, with stored token counts (what the engine cuts and summarizes).
    `served=True`: as served, after the prune overlay and max_tokens truncation.
    """
    if served:
        # A message left out of the served context stays in the list, empty and with 0 tokens, so
        # that per-seq lookups and cut points still find every stored message in context.
        return [
            Msg(m.seq, m.role, m.content if not m.dropped else [], m.tokens) for m in _context_view(session).messages
        ]
    active = session.active_compaction
    first_kept = (active.first_kept_seq if active else None) or 1
    return _engine_messages(_context_rows(session, first_kept))


def context_messages_both(session: Session) -> tuple[list[Msg], list[Msg]]:
    """(as stored, as served): context_messages(session) and context_messages(session,
    served=True) from one read of the messages in context (a compaction job's snapshot)."""
    view = _context_view(session, keep_stored=True)
    served = [Msg(m.seq, m.role, m.content if not m.dropped else [], m.tokens) for m in view.messages]
    return view.stored or [], served


def _active_compaction_dict(session: Session) -> dict[str, Any] | None:
    active = session.active_compaction
    if active is None:
        return None
    return {
        "id": str(active.id),
        "reason": active.reason,
        "strategy": active.strategy,
        "summary_tokens": active.summary_tokens,
        "first_kept_seq": active.first_kept_seq,
        "prune_before_seq": active.prune_before_seq,
        "messages_summarized": active.messages_summarized,
        "tokens_before": active.tokens_before,
        "tokens_after": active.tokens_after,
        "activated_at": active.activated_at.isoformat() if active.activated_at else None,
    }


def context_build(*, session: Session) -> dict[str, Any]:
    """The LLM-ready history: `system` and `messages` ({role, content} only, so they can be sent
    to the provider as is), the active summary first as a user message, then the kept messages."""
    view = _context_view(session)
    usage = session_usage(session)
    messages: list[dict[str, Any]] = []
    seqs: list[int | None] = []
    if view.summary_text:
        messages.append({"role": "user", "content": view.summary_text})
        seqs.append(None)
    for m in view.messages:
        if m.dropped:  # only whitespace-only text: the provider rejects it
            continue
        messages.append({"role": m.role, "content": m.content})
        seqs.append(m.seq)
    return {
        "system": view.system,
        "messages": messages,
        "seqs": seqs,
        "tokens": usage.tokens,
        "estimated_tokens": view.tokens,
        "breakdown": {
            "system": view.system_tokens,
            "summary": view.summary_tokens,
            "messages": sum(m.tokens for m in view.messages),
            "pruned_tool_results_saved": sum(m.stored_tokens - m.tokens for m in view.messages if m.pruned),
        },
        "context_window": usage.context_window,
        "usage_ratio": usage.usage_ratio,
        "trigger_tokens": usage.trigger_tokens,
        "active_compaction": _active_compaction_dict(session),
        "usage": usage.as_dict(),
    }


def _recompute(session: Session, *, reset_reported: bool) -> None:
    view = _context_view(session)
    totals = Message.objects.filter(session=session).aggregate(total=Sum("token_count"))
    session.context_tokens = view.tokens
    session.total_message_tokens = totals["total"] or 0
    fields = ["context_tokens", "total_message_tokens", "tokens_since_report", "updated_at"]
    if reset_reported:
        # The provider's last figure described a context that is no longer served. Its
        # calibration offset (what only the provider counts) stays: usage = estimate + offset.
        session.reported_input_tokens = None
        session.reported_at_seq = None
        session.tokens_since_report = 0
        fields += ["reported_input_tokens", "reported_at_seq"]
    elif session.reported_input_tokens is not None:
        # Served sizes may have changed (a hidden tool_use answered): recount what is after the report.
        reported_at = session.reported_at_seq or 0
        session.tokens_since_report = sum(m.tokens for m in view.messages if m.seq > reported_at)
    session.save(update_fields=[*fields, *_set_meter(session)])


def session_recompute_usage(*, session: Session, reset_reported: bool = True) -> Session:
    """Full recompute of the cached usage, after a compaction is activated or undone.

    Locks the session row so a concurrent append cannot interleave its incremental update.
    Returns the locked, updated instance (the caller's `session` is refreshed too).
    """
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        _recompute(locked, reset_reported=reset_reported)
    _copy_counters(locked, session)
    return locked
