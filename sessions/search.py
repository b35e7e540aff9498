"""Search over the whole stored history of a session, or of all the owner's sessions.

Compaction never deletes a message, so whatever a summary dropped can still be found and read
back. The index is the database's own (migration 0010_message_search_index): on PostgreSQL a
generated tsvector column with a GIN index (identifiers with punctuation are found by their
words, then checked as substrings); on SQLite an FTS5 table (trigram tokenizer) filled by
triggers. The append path writes nothing for it. Each hit says whether the served
context still carries the message verbatim, pruned, or only through the summary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import OperationalError, connection, transaction

from compaction.core import tokens as core_tokens
from compaction.core.blocks import TOOL_RESULT
from compaction.core.prune import DEFAULT_PROTECTED_TOOLS, prune_served
from compaction.selectors import active_overlay

from .models import Message, Session, ToolCall
from .search_text import KIND_TOOL_RESULT, LONG_MARK, WORD_RE, Query, QueryError, parse_query, snippet_for
from .services import overlay_kept_plan

__all__ = [
    "HIT_STATUSES", "MAX_LIMIT", "QueryError", "SearchHit", "SearchResult", "SearchTooCostly", "history_search",
    "history_search_result",
]  # fmt: skip

MAX_LIMIT = 100

STATUS_VERBATIM, STATUS_PRUNED, STATUS_SUMMARIZED, STATUS_DROPPED = "verbatim", "pruned", "summarized", "dropped"
# A hit's status choices, in the order the API documents them (the schema's HitStatusEnum).
HIT_STATUSES = [STATUS_VERBATIM, STATUS_PRUNED, STATUS_SUMMARIZED, STATUS_DROPPED]


@dataclass(frozen=True)
class SearchHit:
    session_id: UUID
    session_title: str
    seq: int
    role: str
    created_at: datetime
    kind: str  # the matching block's: text, tool_call, tool_result, thinking
    block_index: int | None
    snippet: str  # the match marked «like this»
    highlights: list[tuple[int, int]]
    # verbatim: served as stored; pruned: served with this tool output trimmed; summarized: only
    # the active summary stands for it; dropped: cut by a compaction without a summary.
    status: str
    rank: float


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    # True when the cost bound left messages unchecked (PostgreSQL): more messages held every word
    # than the newest SEARCH_CANDIDATES checked, or more had them in order than the newest
    # SEARCH_SUBSTRING_CANDIDATES read as text. Older matches may then be missing from `hits`.
    capped: bool


def history_search(*, user, q: str, session: Session | None = None, limit: int = 20) -> list[SearchHit]:
    """The caller's messages matching `q` (one session's, or every session not in the trash),
    best first. QueryError when `q` cannot be searched."""
    return history_search_result(user=user, q=q, session=session, limit=limit).hits


def history_search_result(*, user, q: str, session: Session | None = None, limit: int = 20) -> SearchResult:
    """history_search's hits, and whether the search's cost bound left older messages unchecked."""
    query = parse_query(q)
    limit = max(1, min(limit, MAX_LIMIT))
    if connection.vendor == "postgresql":
        sql, params, caps = _postgres_sql(query, user=user, session=session, limit=limit)
    else:
        (sql, params), caps = _sqlite_sql(query, user=user, session=session, limit=limit), None
    rows = _run_bounded(sql, params)
    # PostgreSQL's statement adds, to each row, how many messages each bounded step checked (one
    # row with no hit when nothing matched): as many as the step's bound means it was cut there.
    capped = caps is not None and bool(rows) and any(count >= cap for count, cap in zip(rows[0][2:], caps, strict=True))
    ranked = [(row[0], float(row[1] or 0.0)) for row in rows if row[0] is not None]
    if not ranked:
        return SearchResult(hits=[], capped=capped)
    messages = Message.objects.in_bulk([pk for pk, _ in ranked])
    sessions = {session.pk: session} if session is not None else _sessions(messages.values())
    hits: list[SearchHit] = []
    for pk, rank in ranked:
        message = messages.get(pk)
        if message is not None:
            hits.append(_hit(message, sessions[message.session_id], query, rank))
    return SearchResult(
        hits=_mark_pruned(hits, rows_by_seq={(m.session_id, m.seq): m for m in messages.values()}, sessions=sessions),
        capped=capped,
    )


class SearchTooCostly(QueryError):
    """The search's statement ran past settings.SEARCH_TIMEOUT_MS and was stopped."""


def _run_bounded(sql: str, params: list[Any]) -> list[tuple]:
    """The rows of the search statement ((message id, rank, …)), run with a time bound: PostgreSQL's
    statement_timeout for this transaction only, SQLite's progress handler. SearchTooCostly
    when the bound stops it."""
    limit_ms = settings.SEARCH_TIMEOUT_MS
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(limit_ms)])
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            else:
                rows = _sqlite_bounded(cursor, sql, params, limit_ms)
    except OperationalError as exc:
        if not _stopped_by_bound(exc):
            raise
        raise SearchTooCostly(
            f"matches too much to search within {limit_ms:,} ms and was stopped; add a rarer word, a phrase or "
            "a longer identifier"
        ) from None
    return list(rows)


def _sqlite_bounded(cursor, sql: str, params: list[Any], limit_ms: int) -> list[tuple]:
    raw = connection.connection
    deadline = time.monotonic() + limit_ms / 1000
    raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor.execute(sql, params)
        return cursor.fetchall()
    finally:
        raw.set_progress_handler(None, 0)


def _stopped_by_bound(exc: OperationalError) -> bool:
    cause = exc.__cause__
    if connection.vendor == "postgresql":
        return getattr(cause, "sqlstate", None) == "57014"  # query_canceled: the statement_timeout
    return "interrupted" in str(exc)


def _sessions(messages) -> dict[UUID, Session]:
    ids = {m.session_id for m in messages}
    return {s.pk: s for s in Session.objects.filter(pk__in=ids).select_related("active_compaction")}


def _hit(message: Message, session: Session, query: Query, rank: float) -> SearchHit:
    snippet = snippet_for(message.content, query)
    active = active_overlay(session)
    if active is not None and message.seq < active.kept_from:
        status = STATUS_SUMMARIZED if active.has_summary else STATUS_DROPPED
    else:
        status = STATUS_VERBATIM
    return SearchHit(
        session_id=session.pk,
        session_title=str(session),
        seq=message.seq,
        role=message.role,
        created_at=message.created_at,
        kind=snippet.block.kind if snippet else "text",
        block_index=snippet.block.index if snippet else None,
        snippet=snippet.text if snippet else "",
        highlights=snippet.highlights if snippet else [],
        status=status,
        rank=rank,
    )


def _mark_pruned(
    hits: list[SearchHit], *, rows_by_seq: dict[tuple[UUID, int], Message], sessions: dict[UUID, Session]
) -> list[SearchHit]:
    """A tool output below the active prune boundary is served trimmed when the prune tier
    trims it (large enough, its tool not protected), one the kept plan trims too: the same
    decisions the served context takes."""
    out: list[SearchHit] = []
    for hit in hits:
        active = active_overlay(sessions[hit.session_id])
        boundary = active.prune_below if active else 0
        edits = overlay_kept_plan(active).edits.get(hit.seq, ()) if hit.status == STATUS_VERBATIM else ()
        if hit.kind == KIND_TOOL_RESULT and any(edit.block == hit.block_index for edit in edits):
            hit = replace(hit, status=STATUS_PRUNED)
        elif hit.status == STATUS_VERBATIM and hit.kind == KIND_TOOL_RESULT and hit.seq < boundary:
            message = rows_by_seq[(hit.session_id, hit.seq)]
            if _block_pruned(message, sessions[hit.session_id], hit.block_index):
                hit = replace(hit, status=STATUS_PRUNED)
        out.append(hit)
    return out


def _block_pruned(message: Message, session: Session, index: int | None) -> bool:
    content = message.content
    if index is None or not isinstance(content, list):
        return False
    ids = [b.get("tool_use_id", "") for b in content if isinstance(b, dict) and b.get("type") == TOOL_RESULT]
    names = dict(ToolCall.objects.filter(session=session, tool_use_id__in=ids).values_list("tool_use_id", "name"))
    served = prune_served(
        content,
        stored_tokens=None,
        tool_names=names,
        tokenizer=core_tokens.tokenizer_for_model(session.model),
        protected_tools=DEFAULT_PROTECTED_TOOLS,
        seq=message.seq,
    )
    return served.changed and served.content[index] != content[index]


# --- the vendors' statements ----------------------------------------------------------------


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _scope(session: Session | None, user) -> tuple[str, list[Any]]:
    if session is not None:
        return "m.session_id = %s", [session.pk.hex if connection.vendor == "sqlite" else session.pk]
    if connection.vendor == "postgresql":
        # The owner's session ids as a literal array: with the subquery the planner could not
        # tell how many messages it keeps and read every vector (a one-letter word: 180 ms -> 25 ms).
        ids = list(Session.objects.filter(owner=user, deleted_at__isnull=True).values_list("pk", flat=True))
        return "m.session_id = ANY(%s::uuid[])", [ids]
    return (
        "m.session_id IN (SELECT s.id FROM agent_sessions_session s WHERE s.owner_id = %s AND s.deleted_at IS NULL)",
        [user.pk],
    )


# The lexeme a message long enough to pass the vector's positions carries, as tsquery text.
LONG_LEXEME = f"'{LONG_MARK}'"


def _in_order(parts: list[str], *, last_is_prefix: bool) -> tuple[str, str]:
    """(the words in a row, by the vector's positions; the same words in any order, in a long
    message) as tsquery text. Words are letters and digits only, lowercased as the vector's."""
    lexemes = [f"'{part.lower()}'" for part in parts]
    if last_is_prefix:
        lexemes[-1] += ":*"
    return " <-> ".join(lexemes), " & ".join([*lexemes, LONG_LEXEME])


def _postgres_sql(query: Query, *, user, session: Session | None, limit: int) -> tuple[str, list[Any], tuple[int, int]]:
    """Through the tsvector's GIN index: a word is the start of a word; a phrase is its words in
    a row; an identifier its words in a row (the last one as a start), then an exact substring
    of the message's text. The vector counts positions up to 16,383, so in a message long enough
    to pass them (it carries LONG_MARK) a phrase is checked against the text instead.

    Cost bound: the index first finds the messages holding every word (a plain AND, which the
    GIN index answers without reading a vector), the newest SEARCH_CANDIDATES of them; only
    those are checked for word order and ranked, and the newest SEARCH_SUBSTRING_CANDIDATES
    in order checked as text. Ranking every match read each message's vector (0.2 to 0.4 s for
    a common word over 40k messages), a substring check every such message's text (0.8 s)."""
    where, scope_params = _scope(session, user)
    every_word: list[str] = [f"'{word.lower()}':*" for word in query.words]
    parts: list[str] = list(every_word)
    conditions: list[str] = []
    params: list[Any] = []
    for phrase in query.phrases:
        words = WORD_RE.findall(phrase)
        every_word += [f"'{word.lower()}'" for word in words]
        in_row, in_long = _in_order(words, last_is_prefix=False)
        parts.append(f"(({in_row}) | ({in_long}))")
        conditions.append("(m.search_vector @@ %s::tsquery OR compactor_search_text(m.content) ~* %s)")
        glue = "[^[:alnum:]]+"
        params += [in_row, f"(^|[^[:alnum:]]){glue.join(words)}([^[:alnum:]]|$)"]
    for identifier in query.identifiers:
        words = WORD_RE.findall(identifier)
        if words:
            every_word += [f"'{word.lower()}'" for word in words[:-1]] + [f"'{words[-1].lower()}':*"]
            in_row, in_long = _in_order(words, last_is_prefix=True)
            parts.append(f"(({in_row}) | ({in_long}))")
        conditions.append("compactor_search_text(m.content) ILIKE %s")
        params.append(_like(identifier))
    # parse_query refuses a query without a word: there is always one to look up.
    tsquery = " & ".join(parts)
    # An identifier is checked against the text (a detoasted, walked message: ~0.15 ms each), on
    # the newest SEARCH_SUBSTRING_CANDIDATES of the messages whose words are in order. (A phrase's
    # text is read only in a long message, where the vector has no positions left.)
    checked = settings.SEARCH_SUBSTRING_CANDIDATES if query.identifiers else settings.SEARCH_CANDIDATES
    sql = (
        "WITH candidates AS MATERIALIZED ("
        "SELECT m.id, m.search_vector, m.content FROM agent_sessions_message m "
        f"WHERE {where} AND m.search_vector @@ %s::tsquery ORDER BY m.id DESC LIMIT %s), "
        "in_order AS MATERIALIZED ("
        "SELECT c.id, c.search_vector, c.content FROM candidates c WHERE c.search_vector @@ %s::tsquery "
        "ORDER BY c.id DESC LIMIT %s), "
        "hits AS (SELECT m.id, ts_rank(m.search_vector, %s::tsquery) AS rank FROM in_order m "
        f"WHERE {' AND '.join(conditions) or 'TRUE'} ORDER BY rank DESC, m.id DESC LIMIT %s) "
        # How many each bounded step kept (SearchResult.capped), on every row, and on one row of
        # its own when nothing matched.
        "SELECT h.id, h.rank, (SELECT count(*) FROM candidates), (SELECT count(*) FROM in_order) "
        "FROM (SELECT 1) AS one LEFT JOIN hits h ON TRUE ORDER BY h.rank DESC NULLS LAST, h.id DESC"
    )
    loose = " & ".join(dict.fromkeys(every_word))
    params = [*scope_params, loose, settings.SEARCH_CANDIDATES, tsquery, checked, tsquery, *params, limit]
    return sql, params, (settings.SEARCH_CANDIDATES, checked)


def _fts5_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _sqlite_sql(query: Query, *, user, session: Session | None, limit: int) -> tuple[str, list[Any]]:
    """Every part a substring through the trigram FTS5 index; a part under 3 characters (which
    no trigram holds) is a LIKE over the indexed text of the messages the rest found."""
    where, params = _scope(session, user)
    conditions = [where]
    matched: list[str] = []
    for term in (*query.words, *query.phrases, *query.identifiers):
        if len(term) >= 3:
            matched.append(_fts5_string(term))
        else:
            conditions.append("message_search.body LIKE %s ESCAPE '\\'")
            params.append(_like(term))
    rank = "0"
    if matched:
        conditions.insert(0, "message_search MATCH %s")
        params.insert(0, " AND ".join(matched))
        rank = "bm25(message_search)"
    sql = (
        f"SELECT m.id, {rank} AS rank FROM message_search JOIN agent_sessions_message m ON m.id = message_search.rowid "
        f"WHERE {' AND '.join(conditions)} ORDER BY rank ASC, m.id DESC LIMIT %s"
    )
    return sql, [*params, limit]
