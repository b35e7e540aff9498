"""The append's write path: bounded SQL, no compaction decision under the lock, and the meter
columns (usage_tokens / usage_percent / usage_level) kept by every write that changes usage."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction import services as compaction_services
from compaction.models import Compaction
from sessions import services
from sessions.models import Message
from sessions.statements import returns_rows, statement_text

from .helpers import tool_result, tool_use, url

pytestmark = pytest.mark.django_db

# SQL statements per append through the API, BEGIN/COMMIT, savepoints and PREPARE (once per
# statement and connection, sessions.statements) aside, each EXECUTE read as what it runs: the API key
# lookup (cached; + its last_used_at write at most once a minute), the locked read of the
# session, the UPDATE answering stored tool calls (only with tool_results), the message
# INSERT, the tool-call INSERT (only with tool_uses), the counter UPDATE: at most 5 in all
# (on PostgreSQL the last three go to the database as one query, counted once here).
MAX_APPEND_STATEMENTS = 5


CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "PREPARE")


def statements(ctx: CaptureQueriesContext) -> list[str]:
    """The queries that are not only transaction control, without a BEGIN sent along."""
    out = []
    for query in ctx.captured_queries:
        parts = [p for p in statement_text(query["sql"]).split(";\n") if not p.strip().upper().startswith(CONTROL)]
        if parts:
            out.append(";\n".join(parts))
    return out


def test_an_append_costs_a_bounded_number_of_statements(api, session):
    api.post(url(session, "messages/"), {"role": "user", "content": "warm-up"}, format="json")  # last_used_at
    for body in (
        {"role": "user", "content": "Run the tests."},
        tool_use("toolu_1", text="Running them."),
        tool_result("toolu_1", "3 passed"),
    ):
        with CaptureQueriesContext(connection) as ctx:
            response = api.post(url(session, "messages/"), body, format="json")
        assert response.status_code == 201, response.json()
        sql = statements(ctx)
        assert len(sql) <= MAX_APPEND_STATEMENTS, sql
        # One read of the session, locked, and no compaction lookup under the trigger.
        assert sum("agent_sessions_session" in s and s.startswith("SELECT") for s in sql) == 1, sql
        assert not any("compaction_compaction" in s for s in sql), sql
        # A tool_result's check and its answer are one statement on the tool calls.
        assert sum("agent_sessions_toolcall" in s for s in sql) <= 1, sql
        # The order check reads the state stored on the session's row, not the latest messages.
        assert not any(s.startswith("SELECT") and "agent_sessions_message" in s for s in sql), sql
    # The plain message needs neither a tool-call lookup nor a second session read.
    assert Message.objects.filter(session=session).count() == 4


def test_on_postgresql_the_rows_and_the_counters_are_written_in_one_query(api, session):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's driver runs one statement per query")
    api.post(url(session, "messages/"), {"role": "user", "content": "warm-up"}, format="json")  # last_used_at
    with CaptureQueriesContext(connection) as ctx:
        response = api.post(url(session, "messages/"), tool_use("toolu_1", text="Running them."), format="json")
    assert response.status_code == 201, response.json()
    sql = statements(ctx)
    assert sql[0].startswith("SELECT") and "FOR UPDATE" in sql[0]  # the session's row, locked
    writes = [s for s in sql if not s.startswith("SELECT")]
    assert len(writes) == 1, sql
    write = writes[0]
    assert write.startswith('INSERT INTO "agent_sessions_message"')
    assert 'INSERT INTO "agent_sessions_toolcall"' in write and 'UPDATE "agent_sessions_session"' in write
    assert [m["seq"] for m in response.json()["messages"]] == [2]
    assert Message.objects.get(session=session, seq=2).tool_use_ids == ["toolu_1"]
    session.refresh_from_db()
    assert (session.last_seq, session.tool_calls.get().use_seq) == (2, 2)
    # The messages an append returns carry the ids the INSERT returned, in order.
    result = services.messages_append(
        session=session, messages=[tool_result("toolu_1", "ok"), {"role": "user", "content": "next"}]
    )
    stored = Message.objects.filter(session=session, seq__gt=2).order_by("seq").values_list("pk", flat=True)
    assert [m.pk for m in result.messages] == list(stored) and session.last_seq == 4


def test_another_owners_session_is_a_404_even_with_a_bad_body(api, other_session):
    response = api.post(url(other_session, "messages/"), {"role": "robot", "content": "x"}, format="json")
    assert response.status_code == 404
    response = api.post(url(other_session, "messages/"), {"role": "user", "content": "x"}, format="json")
    assert response.status_code == 404
    assert not Message.objects.filter(session=other_session).exists()


def test_a_tool_use_id_already_stored_is_named_and_nothing_is_stored(api, session):
    assert api.post(url(session, "messages/"), tool_use("toolu_dup"), format="json").status_code == 201
    before = Message.objects.filter(session=session).count()
    response = api.post(url(session, "messages/"), tool_use("toolu_dup"), format="json")
    assert response.status_code == 400
    assert "duplicate tool_use id 'toolu_dup': already used at seq 1" in json_text(response)
    assert Message.objects.filter(session=session).count() == before
    session.refresh_from_db()
    assert session.last_seq == before


def json_text(response) -> str:
    import json

    return json.dumps(response.json())


def test_the_meter_columns_follow_every_write(api, session):
    def stored_matches() -> None:
        session.refresh_from_db()
        usage = services.session_usage(session).as_dict()
        assert session.usage_tokens == usage["tokens"]
        assert session.usage_percent == pytest.approx(100 * usage["tokens"] / usage["context_window"])
        expected = (
            "over"
            if usage["tokens"] >= usage["trigger_tokens"]
            else "near"
            if usage["tokens"] >= usage["trigger_tokens"] - 0.1 * usage["context_window"]
            else "ok"
        )
        assert session.usage_level == expected

    api.post(url(session, "messages/"), {"role": "user", "content": "hello " * 200}, format="json")
    stored_matches()
    assert session.usage_tokens > 0
    api.post(url(session, "messages/"), {"role": "assistant", "content": "hi"}, format="json")
    api.post(url(session, "usage/"), {"input_tokens": 190_000}, format="json")  # past the trigger
    stored_matches()
    assert session.usage_level == "over"
    services.session_update(session=session, context_window=400_000)
    stored_matches()
    assert session.usage_level == "ok"
    services.session_update(session=session, context_window=200_000, compaction_settings={"auto_compact": True})
    job = Compaction.objects.filter(session=session).first() or compaction_services.compaction_request(
        session=session, reason="manual"
    )
    compaction_services.compaction_run(compaction_id=job.pk)
    stored_matches()


def test_the_auto_compaction_decision_follows_the_append(api, session):
    """Usage over the trigger queues a job after the append's commit (the API's path); the
    message store alone never does."""
    services.session_update(session=session, compaction_settings={"auto_compact_token_limit": 2_000})
    services.messages_append(session=session, messages=[{"role": "user", "content": "word " * 3_000}])
    assert not Compaction.objects.filter(session=session).exists()
    response = api.post(url(session, "messages/"), {"role": "assistant", "content": "ok"}, format="json")
    assert response.status_code == 201
    job = response.json()["compaction"]
    assert job is not None and job["reason"] == "threshold"
    assert Compaction.objects.filter(session=session, reason="threshold").count() == 1


def test_the_answer_and_the_stored_rows_are_what_the_orm_gives(api, session):
    """The append writes through compiled statements (sessions.statements): the rows it stores,
    the ids it returns and the messages it answers with are the ORM's and the serializer's."""
    from sessions.api.serializers import MessageOutSerializer

    usage = {"input_tokens": 10, "output_tokens": 3, "stop_reason": "tool_use"}
    batch = {
        "messages": [
            {"role": "user", "content": "Déjà vu: list the files 📁"},
            {**tool_use("toolu_a", text="Listing."), "usage": usage},
            tool_result("toolu_a", "a.py\nb.py"),
        ]
    }
    response = api.post(url(session, "messages/"), batch, format="json")
    assert response.status_code == 201, response.json()
    answered = response.json()["messages"]
    stored = list(Message.objects.filter(session=session).order_by("seq"))
    assert [m.seq for m in stored] == [1, 2, 3]
    assert answered == MessageOutSerializer(stored, many=True).data
    assert stored[0].content == batch["messages"][0]["content"]
    assert stored[1].provider_usage == usage and stored[1].tool_use_ids == ["toolu_a"]
    assert stored[2].tool_result_ids == ["toolu_a"] and stored[2].created_at is not None
    call = session.tool_calls.get()
    assert (call.tool_use_id, call.name, call.use_seq, call.result_seq) == ("toolu_a", "Bash", 2, 3)
    # The listing answers the same representation.
    listed = api.get(url(session, "messages/")).json()
    assert listed["results"] == answered
    session.refresh_from_db()
    assert (session.last_seq, session.message_count) == (3, 3)
    assert session.total_message_tokens == sum(m.token_count for m in stored)


def test_a_batch_larger_than_one_statement_takes_is_stored_whole(api, session):
    """SQLite builds may take as few as 999 parameters per statement (Django plans for that): a
    batch of hundreds of messages with parallel tool calls is written in several INSERTs,
    every row with its seq and id."""
    import sqlite3

    limit = None
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        limit = connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # the old limit
    try:
        _append_a_large_batch(api, session)
    finally:
        if limit is not None:
            connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)


def _append_a_large_batch(api, session) -> None:
    from sessions.models import ToolCall

    messages = []
    for turn in range(150):
        ids = [f"toolu_{turn}_{k}" for k in range(3)]
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tid, "name": "Read", "input": {"path": tid}} for tid in ids],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": "ok"} for tid in ids]}
        )
    response = api.post(url(session, "messages/"), {"messages": messages}, format="json")
    assert response.status_code == 201, response.json()
    assert [m["seq"] for m in response.json()["messages"]] == list(range(1, 301))
    stored = Message.objects.filter(session=session)
    assert stored.count() == 300 and len(set(stored.values_list("pk", flat=True))) == 300
    calls = ToolCall.objects.filter(session=session)
    assert calls.count() == 450
    assert not calls.filter(result_seq__isnull=True).exists()
    assert calls.get(tool_use_id="toolu_149_2").use_seq == 299


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_begin_and_commit_ride_on_the_append_s_own_queries(api, session):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's driver runs one statement per query")
    api.post(url(session, "messages/"), {"role": "user", "content": "warm-up"}, format="json")  # last_used_at
    sent = {}
    for name, body in (
        ("text", {"role": "user", "content": "Run the tests."}),
        ("tool_use", tool_use("toolu_1", text="Running them.")),
        ("tool_result", tool_result("toolu_1", "3 passed")),
    ):
        with CaptureQueriesContext(connection) as ctx:
            response = api.post(url(session, "messages/"), body, format="json")
        assert response.status_code == 201, response.json()
        sent[name] = [statement_text(q["sql"]) for q in ctx.captured_queries if not q["sql"].startswith("PREPARE")]
        assert connection.connection.info.transaction_status.name == "IDLE"
    for name in ("text", "tool_use"):
        # The locked read opens the transaction, the writes' query commits it: two round trips.
        read, writes = sent[name]
        assert read.startswith("BEGIN;\n") and "FOR UPDATE" in read, sent[name]
        assert writes.endswith(";\nCOMMIT"), sent[name]
    # A tool_result's answering UPDATE is checked after it ran: the COMMIT waits for that check.
    assert len(sent["tool_result"]) == 3 and sent["tool_result"][-1] == "COMMIT", sent["tool_result"]
    assert list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4]
    session.refresh_from_db()
    assert session.last_seq == 4 and session.tool_calls.get().result_seq == 4


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_refused_append_rolls_back_whole(api, session):
    def stored():
        return list(Message.objects.filter(session=session).values_list("seq", flat=True)), session.tool_calls.count()

    def refused(body) -> None:
        before = stored()
        response = api.post(url(session, "messages/"), body, format="json")
        assert response.status_code == 400, response.json()
        if connection.vendor == "postgresql":
            assert connection.connection.info.transaction_status.name == "IDLE"
        assert stored() == before

    assert api.post(url(session, "messages/"), tool_use("toolu_1"), format="json").status_code == 201
    refused(tool_use("toolu_1"))  # by the unique index, in the writes' query (the COMMIT not reached)
    assert api.post(url(session, "messages/"), tool_result("toolu_1", "ok"), format="json").status_code == 201
    refused(tool_result("toolu_1", "again"))  # by the checks under the lock, after the BEGIN
    # The connection is usable and the conversation goes on.
    assert (
        api.post(url(session, "messages/"), {"role": "assistant", "content": "Done."}, format="json").status_code == 201
    )
    session.refresh_from_db()
    assert session.last_seq == 3


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_hidden_call_s_result_is_recounted_before_the_commit(api, session):
    cut_off = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me read it."},
            {"type": "tool_use", "id": "toolu_cut", "name": "Read", "input": {"path": "src/app.py"}},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 4096, "stop_reason": "max_tokens"},
    }
    for body in (
        {"role": "user", "content": "Read src/app.py"},
        cut_off,
        tool_result("toolu_cut", "print('hi')\n" * 40),
    ):
        assert api.post(url(session, "messages/"), body, format="json").status_code == 201
        if connection.vendor == "postgresql":
            assert connection.connection.info.transaction_status.name == "IDLE"
    # The answered call is served again: the stored meter is what a full recount gives.
    session.refresh_from_db()
    stored = (session.context_tokens, session.tokens_since_report, session.usage_tokens)
    services.session_recompute_usage(session=session, reset_reported=False)
    assert (session.context_tokens, session.tokens_since_report, session.usage_tokens) == stored
    served = api.get(url(session, "context/")).json()["messages"]
    assert any(b.get("id") == "toolu_cut" for m in served if isinstance(m["content"], list) for b in m["content"])


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_each_statement_is_prepared_once_per_connection(api, session, settings):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    connection.close()  # a new connection: nothing prepared on it yet

    def sent(body) -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            assert api.post(url(session, "messages/"), body, format="json").status_code == 201
        return [q["sql"] for q in ctx.captured_queries]

    def prepared_on_server() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements")
            return {name for (name,) in cursor.fetchall()}

    first = sent({"role": "user", "content": "Run the tests."})
    prepares = [q for q in first if q.startswith("PREPARE")]
    assert len(prepares) == 3, first  # the locked read, the message INSERT, the counters' UPDATE
    second = sent({"role": "assistant", "content": "They pass."})
    assert not any(q.startswith("PREPARE") for q in second), second
    assert all(s.startswith(("BEGIN", "EXECUTE", "COMMIT")) for q in second for s in q.split(";\n")), second
    assert {q.split()[1] for q in prepares} <= prepared_on_server()
    # A refused append (its transaction rolled back) leaves them prepared and usable.
    assert api.post(url(session, "messages/"), tool_result("toolu_x", "?"), format="json").status_code == 400
    assert not any(q.startswith("PREPARE") for q in sent({"role": "user", "content": "And now?"}))
    # A new connection prepares again; with COMPACTOR_DB_PREPARE off the statements are sent as they are.
    connection.close()
    assert any(q.startswith("PREPARE") for q in sent({"role": "assistant", "content": "Again."}))
    settings.COMPACTOR_DB_PREPARE = False
    plain = sent({"role": "user", "content": "Plain."})
    assert not any("PREPARE" in q or "EXECUTE" in q for q in plain), plain
    assert list(Message.objects.filter(session=session).order_by("seq").values_list("content", flat=True)) == [
        "Run the tests.",
        "They pass.",
        "And now?",
        "Again.",
        "Plain.",
    ]


def test_returns_rows_answers_as_description_does():
    """What execute_together and the locked read ask of each result, on either database."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY TABLE t_rows (n integer)")
        for sql, rows in [
            ("SELECT 1", True),
            ("SELECT 1 WHERE 1 = 0", True),  # no row, but a result with columns
            ("INSERT INTO t_rows (n) VALUES (1)", False),
            ("INSERT INTO t_rows (n) VALUES (2) RETURNING n", True),
            ("UPDATE t_rows SET n = n + 1", False),
        ]:
            cursor.execute(sql)
            assert returns_rows(cursor) is rows, sql
            assert (cursor.description is not None) is rows, sql
