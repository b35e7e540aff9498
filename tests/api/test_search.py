"""History search (`/sessions/{id}/search/`, `/search/`) and reading a range back verbatim."""

from __future__ import annotations

import pytest
from django.db import connection

from compaction.core.transcripts.claude_code import read_claude_code
from compaction.importing import transcript_import
from compaction.models import Compaction
from sessions import services
from sessions.models import Message, Session
from sessions.search_text import index_vector
from tests.corpus import TRANSCRIPTS, corpus

from .helpers import tool_result, tool_use, url

pytestmark = pytest.mark.django_db

COMPACTED = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def search(api, session, q: str, **params):
    response = api.get(url(session, "search/"), {"q": q, **params})
    assert response.status_code == 200, response.json()
    return response.json()


def append(api, session, *messages):
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()


@corpus
def test_a_term_only_the_summarized_part_holds_is_found_in_an_imported_session(api, other_api, user):
    transcript_import(owner=user, path=COMPACTED, subagents=False)
    session = Session.objects.get(owner=user)
    active = session.active_compaction
    assert active is not None and active.first_kept_seq > 100  # Claude Code's own compaction
    # The term is in the early messages only: neither the summary nor any kept message has it.
    assert "annotations_old" not in (active.summary + active.turn_prefix_summary).lower()
    holders = [
        m.seq
        for m in Message.objects.filter(session=session).order_by("seq")
        if "annotations_old" in str(m.content).lower()
    ]
    assert holders and max(holders) < active.first_kept_seq

    body = search(api, session, "annotations_old")
    assert body["session"] == str(session.pk)
    assert sorted(hit["seq"] for hit in body["hits"]) == holders
    for hit in body["hits"]:
        assert hit["status"] == "summarized"
        assert "«annotations_old»" in hit["snippet"]
        start, end = hit["highlights"][0]
        assert hit["snippet"][start:end] == "annotations_old"
        assert hit["kind"] in ("text", "tool_call", "tool_result", "thinking")
    # A phrase, and a word inside a dotted module name, find the summarized part too.
    phrase = search(api, session, '"MODIFY COLUMN"')["hits"]
    assert phrase and all(hit["status"] == "summarized" and "«MODIFY COLUMN»" in hit["snippet"] for hit in phrase)
    module = search(api, session, "AddStateToAnnotations")["hits"]
    assert {hit["seq"] for hit in module} >= {106, 108, 110}
    # An issue id with punctuation, in a kept message: served verbatim.
    [issue] = [hit for hit in search(api, session, "spotter-fum.2")["hits"] if hit["seq"] >= active.first_kept_seq]
    assert issue["status"] == "verbatim" and "«spotter-fum.2»" in issue["snippet"]
    # Owner-only: another user's key gets a 404, and the cross-session search finds nothing of it.
    assert other_api.get(url(session, "search/"), {"q": "annotations_old"}).status_code == 404
    assert other_api.get("/api/v1/search/", {"q": "annotations_old"}).json()["hits"] == []


def test_identifiers_with_punctuation_and_phrases_match_exactly(api, session):
    append(
        api,
        session,
        {"role": "user", "content": "Please run ALTER TABLE users ADD COLUMN age, then check src/app.py."},
        tool_use("t1", command="git show 3bf70f7a9c --stat"),
        tool_result("t1", "commit 3bf70f7a9c\n src/app.py | 4 ++--\n"),
        {"role": "assistant", "content": "Table altered; the users table now has an age column."},
    )
    seqs = lambda q: sorted(hit["seq"] for hit in search(api, session, q)["hits"])  # noqa: E731
    assert seqs("src/app.py") == [1, 3]
    assert seqs("3bf70f7") == [2, 3]  # a commit hash by its prefix
    assert seqs('"ALTER TABLE"') == [1]  # the phrase, not "Table altered"
    assert seqs("table users") == [1, 4]  # every word, in any order
    assert seqs("3bf70f7a9c --stat") == [2]  # every part, in the same message
    assert seqs("nowhere-to-be-found") == []
    [call] = search(api, session, "--stat")["hits"]
    assert (call["kind"], call["role"], call["block_index"]) == ("tool_call", "assistant", 0)
    [result] = search(api, session, '"4 ++--"')["hits"]
    assert (result["kind"], result["seq"]) == ("tool_result", 3)


def test_statuses_follow_the_active_compaction(api, session):
    big = "\n".join(f"line {i}: PASSED tests/test_parser.py::test_case_{i}" for i in range(400))
    append(
        api,
        session,
        {"role": "user", "content": "Find the flaky zebra test."},
        tool_use("t1", command="pytest -q"),
        tool_result("t1", big + "\nzebra_marker"),
        {"role": "assistant", "content": "The zebra test is fixed."},
        {"role": "user", "content": "Thanks, zebra done."},
    )
    compaction = Compaction.objects.create(
        session=session,
        reason="manual",
        status="succeeded",
        summary="Fixed a test.",
        first_kept_seq=2,
        prune_before_seq=4,
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)
    statuses = {hit["seq"]: hit["status"] for hit in search(api, session, "zebra")["hits"]}
    assert statuses == {1: "summarized", 3: "pruned", 4: "verbatim", 5: "verbatim"}


def test_search_across_sessions_is_the_owners_only(api, user, other_user):
    mine = services.session_create(owner=user, title="Mine")
    also_mine = services.session_create(owner=user, title="Also mine")
    theirs = services.session_create(owner=other_user, title="Theirs")
    trashed = services.session_create(owner=user, title="Trashed")
    for s in (mine, also_mine, theirs, trashed):
        services.messages_append(session=s, messages=[{"role": "user", "content": f"quokka in {s.title}"}])
    services.session_delete(session=trashed)
    body = api.get("/api/v1/search/", {"q": "quokka"}).json()
    assert body["session"] is None
    assert {(hit["session"], hit["session_title"]) for hit in body["hits"]} == {
        (str(mine.pk), "Mine"),
        (str(also_mine.pk), "Also mine"),
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "x" * 501}, "q"),
        ({"q": "a\x00b"}, "q"),
        ({"q": "ok", "limit": "0"}, "limit"),
        ({"q": "ok", "limit": "many"}, "limit"),
        ({"q": "%"}, "q"),
        ({"q": "/"}, "q"),
    ],
)
def test_bad_queries_are_400s_naming_the_parameter(api, session, params, field):
    response = api.get(url(session, "search/"), params)
    assert response.status_code == 400
    assert field in response.json()["detail"]


def test_reading_a_range_back_keeps_tool_pairs_whole(api, other_api, session):
    append(
        api,
        session,
        {"role": "user", "content": "one"},
        tool_use("t1", command="ls"),
        tool_result("t1", "a.py"),
        {"role": "assistant", "content": "four"},
        tool_use("t2", command="cat a.py"),
        tool_result("t2", "print(1)"),
        {"role": "user", "content": "seven"},
    )
    read = lambda **p: [m["seq"] for m in api.get(url(session, "messages/"), p).json()["results"]]  # noqa: E731
    assert read(from_seq=4, to_seq=4) == [4]
    assert read(from_seq=3, to_seq=4) == [2, 3, 4]  # the result's call comes with it
    assert read(from_seq=4, to_seq=5) == [4, 5, 6]  # and the call's result
    assert read(from_seq=6) == [5, 6, 7]
    assert read(to_seq=2) == [1, 2, 3]
    page = api.get(url(session, "messages/"), {"from_seq": 2, "to_seq": 3}).json()["results"]
    assert page[0]["content"] == tool_use("t1", command="ls")["content"]  # verbatim
    # A range ending below its start is a 400 (it was an empty page, a typo gone unnoticed).
    assert api.get(url(session, "messages/"), {"from_seq": 5, "to_seq": 2}).status_code == 400
    for params, field in (({"from_seq": "0"}, "from_seq"), ({"to_seq": "x"}, "to_seq")):
        response = api.get(url(session, "messages/"), params)
        assert response.status_code == 400 and field in response.json()["detail"]
    assert other_api.get(url(session, "messages/"), {"from_seq": 1}).status_code == 404


def test_phrases_and_identifiers_deep_in_a_long_tool_output_are_found(api, session):
    # Past 16,383 words: where PostgreSQL's vector stops counting word positions.
    long_output = " ".join(f"row{i}" for i in range(20_000)) + "\nthen ALTER TABLE quokkas failed at spotter-fum.77\n"
    append(
        api,
        session,
        tool_use("t1", command="cat build.log"),
        tool_result("t1", long_output),
        {"role": "user", "content": "alter the table, and the spotter fum 77 too"},
    )
    seqs = lambda q: sorted(hit["seq"] for hit in search(api, session, q)["hits"])  # noqa: E731
    assert seqs('"alter table quokkas"') == [2]
    assert seqs("spotter-fum.77") == [2]
    assert seqs('"table quokkas" spotter-fum.7') == [2]
    assert seqs('"alter table"') == [2]  # not the message that has both words apart
    [hit] = search(api, session, '"ALTER TABLE quokkas"')["hits"]
    assert "«ALTER TABLE quokkas»" in hit["snippet"] and hit["kind"] == "tool_result"


def test_deleting_messages_takes_them_out_of_the_index(api, session, user):
    from django.db import connection

    services.messages_append(session=session, messages=[{"role": "user", "content": "the ocelot plan"}])
    assert [hit["seq"] for hit in search(api, session, "ocelot")["hits"]] == [1]
    ids = list(Message.objects.filter(session=session).values_list("id", flat=True))
    session.delete()  # a purge: the rows go, and with them what the index holds of them
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM message_search WHERE rowid IN ({','.join('%s' for _ in ids)})", ids)
            assert cursor.fetchone()[0] == 0
    assert api.get("/api/v1/search/", {"q": "ocelot"}).json()["hits"] == []


def _stored_vector(message_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_vector::text FROM agent_sessions_message WHERE id = %s", [message_id])
        return cursor.fetchone()[0]


def _database_vector(content) -> str:
    """What the database's own compactor_search_vector gives (other writers' rows, migration 0015)."""
    from psycopg.types.json import Jsonb  # PostgreSQL only: SQLite installs need not have psycopg

    with connection.cursor() as cursor:
        cursor.execute("SELECT compactor_search_vector(%s)::text", [Jsonb(content)])
        return cursor.fetchone()[0]


EDGE_CONTENTS = [
    "",
    "   \n\t ",
    # Letters beyond ASCII. Not held equal (Python's Unicode rules, which the query side uses, and
    # the C library's differ): a dotted capital I or a final capital sigma lowercased, and
    # superscript or circled digits as letters or digits.
    "Straße naïve café ÅNGSTRÖM Ελληνικά 東京タワー",
    "hash 343e9883c1e3172f08096c352aa46f12 and 01E8sJYrFgRdZ1PvNVErtTSP and 1e5 and 2.50e-3",
    "under_score snake_case __dunder__ ─── box ─word─ a\u0301b",
    [
        {"type": "text", "text": "first"},
        {"type": "tool_use", "id": "t", "name": "Bash", "input": {"zz": 1.5, "a": [True, None, 7]}},
    ],
    "w" * 2048 + " after " + "é" * 1100 + " end",
    "word " * 17_000,  # positions past 16,383 and past 256 per word, and a long message
]


@corpus
def test_the_vector_the_append_sends_is_the_one_the_database_computes(api, session):
    if connection.vendor != "postgresql":
        pytest.skip("the tsvector is PostgreSQL's")
    real = [m["content"] for m in read_claude_code(COMPACTED).messages]
    for content in [*EDGE_CONTENTS, *real]:
        assert index_vector_text(content) == _database_vector(content), content if isinstance(content, str) else ""


def index_vector_text(content) -> str:
    """The append path's vector, as the database prints it back."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::tsvector::text", [index_vector(content)])
        return cursor.fetchone()[0]


def test_rows_written_outside_the_append_path_are_indexed_by_the_database(api, session):
    if connection.vendor != "postgresql":
        pytest.skip("the tsvector is PostgreSQL's")
    append(api, session, {"role": "user", "content": "appended 343e9883c1e3172f08096c352aa46f12"})
    by_append = Message.objects.get(session=session, seq=1)
    other = Message.objects.create(
        session=session, seq=2, role="assistant", content="written by the ORM 01E8sJYrFgRdZ1PvNVErtTSP", token_count=9
    )
    assert _stored_vector(by_append.pk) == _database_vector(by_append.content)
    assert _stored_vector(other.pk) == _database_vector(other.content)
    # A change of content gets its vector again; a vector written with it is kept.
    Message.objects.filter(pk=other.pk).update(content="now about parsers")
    assert _stored_vector(other.pk) == _database_vector("now about parsers")
    assert [hit["seq"] for hit in search(api, session, "parsers")["hits"]] == [2]
    # An id that starts like a number in scientific notation is one word, found whole and by its start.
    assert [hit["seq"] for hit in search(api, session, "343e9883c1e3172f08096c352aa46f12")["hits"]] == [1]
    assert [hit["seq"] for hit in search(api, session, "343e9883c1e3")["hits"]] == [1]


@pytest.mark.parametrize("q", ["%", "[", "_", "/"])
def test_a_query_of_punctuation_only_is_refused_saying_why(api, session, q):
    response = api.get("/api/v1/search/", {"q": q})
    assert response.status_code == 400
    assert "no letter or digit" in response.json()["error"]


def test_a_search_past_its_time_bound_is_stopped_and_answered_400(api, session, monkeypatch, settings):
    """The statement runs under a time bound (PostgreSQL's statement_timeout, SQLite's progress
    handler): one that would run 2 s is stopped at 50 ms and answered with a 400, and the
    connection serves the next request."""
    from django.db import connection

    from sessions import search as search_module

    settings.SEARCH_TIMEOUT_MS = 50
    if connection.vendor == "postgresql":
        slow = "SELECT 1 AS id, 0 AS rank FROM pg_sleep(2)"
    else:
        slow = (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 500000000) "
            "SELECT max(x), 0 FROM c"
        )
    if connection.vendor == "postgresql":
        monkeypatch.setattr(search_module, "_postgres_sql", lambda *args, **kwargs: (slow, [], (2000, 2000)))
    else:
        monkeypatch.setattr(search_module, "_sqlite_sql", lambda *args, **kwargs: (slow, []))
    # Unbounded, the statement runs on (PostgreSQL: 2 s, then a 200; SQLite: minutes).
    response = api.get(url(session, "search/"), {"q": "anything"})
    assert response.status_code == 400, response.content
    assert "within 50 ms" in response.json()["error"] and "q" in response.json()["detail"]
    monkeypatch.undo()
    assert api.get(url(session, "search/"), {"q": "anything"}).status_code == 200


def test_a_search_says_when_its_cost_bound_left_older_messages_unchecked(api, session, settings):
    """PostgreSQL ranks only the newest SEARCH_CANDIDATES messages holding every word (and reads
    the newest SEARCH_SUBSTRING_CANDIDATES as text for an identifier): the answer's `capped` says
    when that cut any, so a missing older match is not taken for none. SQLite ranks every match."""
    append(api, session, {"role": "user", "content": "see src/app.py here"})
    append(api, session, *[{"role": "user", "content": f"see src app py there, step {i}"} for i in range(4)])
    body = search(api, session, "src")
    assert (len(body["hits"]), body["capped"]) == (5, False)
    assert search(api, session, "src/app.py")["capped"] is False
    if connection.vendor != "postgresql":
        return
    settings.SEARCH_CANDIDATES = 3
    body = search(api, session, "src")
    assert (len(body["hits"]), body["capped"]) == (3, True)
    # The newest 3 hold the words but not the identifier; the one that does is older: no hit, capped.
    body = search(api, session, "src/app.py")
    assert (body["hits"], body["capped"]) == ([], True)
    assert search(api, session, "absent")["capped"] is False
    settings.SEARCH_CANDIDATES, settings.SEARCH_SUBSTRING_CANDIDATES = 2000, 3
    assert search(api, session, "src/app.py")["capped"] is True
