"""When what goes upstream is simply what the client sent.

Without an active compaction nothing is summarized or pruned, and the served context is the
stored history, which the client has just resent in full. gateway.history.merge_served then
hands back the client's own copy of every message, so reading and decoding the stored history
(the bulk of a call's cost at a few thousand messages) would only confirm it. Two stored shapes
are served differently from their copies and keep the full path: a message of whitespace-only
text (left out) and a reply cut off by max_tokens (its unanswered tool calls hidden).
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from sessions.models import Message, Session
from sessions.validation import without_blank_text

from .resent import Parsed

# The memo, kept with a request's parse, of how many of its leading messages hold no blank one.
BLANK_FREE = "blank_free"


def client_copies_suffice(*, session: Session, client_messages: list[Any], resent: Parsed | None = None) -> bool:
    """True when merge_served(context_build(...), client_messages) would be client_messages.
    `session` as the call read it; `resent`: the request's parse, whose previous request's
    messages are not looked at again."""
    if session.active_compaction_id is not None:
        return False
    if _holds_blank(client_messages, resent):
        return False
    return not holds_cut_off_reply(session.pk)


def _holds_blank(messages: list[Any], resent: Parsed | None) -> bool:
    start = 0
    previous = resent.previous_memo.get(BLANK_FREE) if resent is not None else None
    if previous is not None:
        before, clean = previous
        for mine, theirs in zip(messages[:clean], before, strict=False):
            if mine is not theirs:
                break
            start += 1
    for i in range(start, len(messages)):
        message = messages[i]
        if isinstance(message, dict) and without_blank_text(message.get("content")) is None:
            _remember(resent, messages, i)
            return True
    _remember(resent, messages, len(messages))
    return False


def _remember(resent: Parsed | None, messages: list[Any], clean: int) -> None:
    if resent is not None:
        resent.memo[BLANK_FREE] = (messages, clean)


# The partial index on the replies a max_tokens report cut off (sessions.models.Message).
CUT_OFF_INDEX = "message_cut_off_reply"


def holds_cut_off_reply(session_id: Any) -> bool:
    """Whether the session holds an assistant message whose usage says it was cut off by
    max_tokens: a look-up of the partial index that holds only those, however long the history.

    Through the ORM, SQLite did not use that index: it read every message of the session and
    decoded its usage JSON (~1.5 ms at 2,000 messages, on every call). A partial index serves a
    query whose WHERE repeats the index's condition term for term; the ORM binds the values as
    parameters, which SQLite cannot compare, and spells a set of JSON types in an order that
    changes with the process's hash seed (the index's is the order of the process that migrated).
    So the condition is read back from the database's own definition of the index, once."""
    connection = connections[DEFAULT_DB_ALIAS]
    sql = _cut_off_sql(connection.alias, str(connection.settings_dict["NAME"]))
    if sql is None:  # no such index (another database): the ORM's query
        rows = Message.objects.filter(session_id=session_id, role="assistant", provider_usage__stop_reason="max_tokens")
        return rows.exists()
    param = Message._meta.get_field("session").get_db_prep_value(session_id, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [param])
        return cursor.fetchone() is not None


@functools.cache
def _cut_off_sql(alias: str, name: str) -> str | None:
    """SELECT 1 of a session's cut-off reply, on the index's condition as the database holds it."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s", [CUT_OFF_INDEX])
            row = cursor.fetchone()
            condition = row[0].partition(" WHERE ")[2] if row and row[0] else ""
        elif connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE c.relname = %s AND pg_table_is_visible(i.indrelid)",
                [CUT_OFF_INDEX],
            )
            row = cursor.fetchone()
            condition = row[0] if row and row[0] else ""
        else:
            condition = ""
    if not condition:
        return None
    quote = connection.ops.quote_name
    table, session = Message._meta.db_table, Message._meta.get_field("session").column
    # The condition's values are literals of the index's own definition; %% for the driver.
    return f"SELECT 1 FROM {quote(table)} WHERE {quote(session)} = %s AND ({condition.replace('%', '%%')}) LIMIT 1"
