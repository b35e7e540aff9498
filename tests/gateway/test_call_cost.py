"""What keeps a gateway call cheap on a long history changes nothing it decides: the resent
prefix's digests reused from the last call, the session lookup from the newest digests back,
and a request whose messages go unchanged sent upstream as the client's own bytes."""

from __future__ import annotations

import json
import re
from collections import OrderedDict

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from gateway import digests, served
from gateway.extras import extra_key, extras_store
from gateway.history import chain_digests
from gateway.models import MessageExtra
from gateway.openai.responses import map_input
from sessions.models import Message, Session
from sessions.services import messages_append, session_create, usage_report

pytestmark = pytest.mark.django_db

ANTHROPIC = "/anthropic/v1/messages"
CHAT = "/openai/v1/chat/completions"


def conversation(turns: int, *, start: int = 0) -> list[dict]:
    messages: list[dict] = []
    for i in range(start, start + turns):
        messages.append({"role": "user", "content": f"Step {i}: run the tests in module {i}."})
        tool = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"pytest m{i}"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Running {i}."}, tool]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} passed"}
        messages.append({"role": "user", "content": [result]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Module {i} passes."}]})
    return messages


@pytest.fixture(autouse=True)
def fresh_digests(monkeypatch):
    """Nothing kept: the module's store replaced by an empty one (the old one back after the test)."""
    monkeypatch.setattr(digests, "_known", OrderedDict())
    monkeypatch.setattr(digests, "_kept", 0)


def test_reused_digests_equal_digesting_every_message_again():
    history = conversation(6)
    assert digests.request_digests(1, history) == chain_digests(history)
    longer = history + conversation(2, start=6)
    assert digests.request_digests(1, longer) == chain_digests(longer)
    # An earlier message edited (a rewound and changed history): the prefix no longer matches.
    edited = json.loads(json.dumps(longer))
    edited[5]["content"][0]["text"] = "Running something else."
    assert digests.request_digests(1, edited) == chain_digests(edited)
    assert digests.request_digests(1, edited[:7]) == chain_digests(edited[:7])  # shorter than the known one
    assert digests.request_digests(2, longer) == chain_digests(longer)  # another owner
    # Equal copies (as the next request parses them) reuse the digests; the result is the same.
    copy = json.loads(json.dumps(longer)) + [{"role": "user", "content": "And now?"}]
    assert digests.request_digests(1, copy) == chain_digests(copy)


def test_more_histories_than_are_kept_are_still_digested_right(monkeypatch):
    histories = [conversation(2, start=i * 10) for i in range(digests.MAX_HISTORIES + 3)]
    for history in histories + histories:
        assert digests.request_digests(1, history) == chain_digests(history)
    assert len(digests._known) == digests.MAX_HISTORIES
    monkeypatch.setattr(digests, "MAX_MESSAGES", 20)
    longer = conversation(4)  # 16 messages: the budget keeps only it
    assert digests.request_digests(1, longer) == chain_digests(longer)
    assert list(digests._known.values())[-1][0] == longer and digests._kept <= 20
    too_long = conversation(6)  # over the budget alone: digested, not kept
    assert digests.request_digests(1, too_long) == chain_digests(too_long)
    assert digests.request_digests(1, too_long + longer) == chain_digests(too_long + longer)
    assert digests._kept == sum(len(m) for m, _ in digests._known.values()) <= 20


def post(path: str, raw: bytes, key: str, **headers) -> object:
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    return Client().post(path, data=raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}", **extra)


def test_a_continuation_far_past_the_stored_head_lands_in_the_same_session(upstream, api_key):
    first = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": conversation(1)[:1]}
    answer = post(ANTHROPIC, json.dumps(first).encode(), api_key).json()
    # The agent comes back with the reply and many more messages than the newest digests tried first.
    later = conversation(1)[:1] + [{"role": "assistant", "content": answer["content"]}] + conversation(8, start=1)
    later.append({"role": "user", "content": "Summarize what passed."})
    response = post(ANTHROPIC, json.dumps({**first, "messages": later}).encode(), api_key)
    assert response.status_code == 200
    assert Session.objects.count() == 1
    assert Message.objects.count() == len(later) + 1  # and the second reply


def test_an_unchanged_request_goes_upstream_as_the_client_sent_it(upstream, api_key):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": conversation(2), "metadata": {"user_id": "u"}}
    body["messages"].append({"role": "user", "content": "Next: the docs. Ünïcode stays as sent."})
    raw = json.dumps(body, indent=1).encode()  # a spelling the gateway would not produce itself
    assert post(ANTHROPIC, raw, api_key).status_code == 200
    assert upstream.message_calls[-1].raw == raw


def test_a_body_only_the_lenient_parser_takes_is_re_encoded_as_standard_json(upstream, api_key):
    raw = b'{"model": "claude-sonnet-4-5", "max_tokens": 64, "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}'
    assert post(ANTHROPIC, raw, api_key).status_code == 200
    sent = upstream.message_calls[-1]
    assert b"NaN" not in sent.raw and sent.body["temperature"] is None


def test_chat_completions_unchanged_go_as_sent_and_an_added_usage_option_is_encoded(openai_upstream, api_key):
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "List the files."},
    ]
    raw = json.dumps({"model": "gpt-4o", "messages": messages}, indent=2).encode()
    assert post(CHAT, raw, api_key).status_code == 200
    assert openai_upstream.calls()[-1].raw == raw
    # A stream without include_usage: the gateway asks for the usage chunk, so the body is its own.
    streamed = json.dumps({"model": "gpt-4o", "messages": messages, "stream": True}, indent=2).encode()
    response = post(CHAT, streamed, api_key)
    b"".join(response.streaming_content)
    sent = openai_upstream.calls()[-1]
    assert sent.raw != streamed and sent.body["stream_options"] == {"include_usage": True}


@pytest.fixture
def cut_off_sql():
    served._cut_off_sql.cache_clear()
    yield
    served._cut_off_sql.cache_clear()


def _plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return " ".join(str(row[-1]) for row in cursor.fetchall())
        cursor.execute("EXPLAIN " + sql, params)
        return " ".join(str(row[0]) for row in cursor.fetchall())


def test_a_cut_off_reply_is_looked_up_in_its_partial_index(user, cut_off_sql):
    """Whether any reply was cut off by max_tokens is asked on every call (the client's copies
    go upstream only when none was): a look-up of the partial index holding only those replies,
    not a read of every message's usage (the ORM's query, whose bound values SQLite cannot
    match to the index's condition). It still answers right."""
    session = session_create(owner=user, title="cut off")
    messages_append(session=session, messages=conversation(3))
    assert served.holds_cut_off_reply(session.pk) is False
    sql = served._cut_off_sql(connection.alias, str(connection.settings_dict["NAME"]))
    param = Message._meta.get_field("session").get_db_prep_value(session.pk, connection)
    assert served.CUT_OFF_INDEX in _plan(sql, [param])
    usage_report(session=session, input_tokens=100, stop_reason="max_tokens", message_seq=10)
    assert served.holds_cut_off_reply(session.pk) is True
    other = session_create(owner=user, title="other")
    assert served.holds_cut_off_reply(other.pk) is False


def test_the_partial_index_is_used_whichever_order_the_migration_wrote_its_condition_in(user, cut_off_sql):
    """The ORM spells the index's set of JSON types in hash order, which changes between
    processes: the condition is read back from the index as the database holds it."""
    if connection.vendor != "sqlite":
        pytest.skip("the condition's order shows on SQLite (PostgreSQL keeps its own form of it)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [served.CUT_OFF_INDEX])
        (ddl,) = cursor.fetchone()
        types = re.search(r"IN \(([^)]*)\)", ddl)
        assert types is not None
        reordered = ddl.replace(types.group(0), "IN (" + ",".join(reversed(types.group(1).split(","))) + ")")
        assert reordered != ddl
        cursor.execute(f'DROP INDEX "{served.CUT_OFF_INDEX}"')
        cursor.execute(reordered)
    session = session_create(owner=user, title="cut off")
    messages_append(session=session, messages=conversation(1))
    sql = served._cut_off_sql(connection.alias, str(connection.settings_dict["NAME"]))
    param = Message._meta.get_field("session").get_db_prep_value(session.pk, connection)
    assert served.CUT_OFF_INDEX in _plan(sql, [param])
    usage_report(session=session, input_tokens=100, stop_reason="max_tokens", message_seq=2)
    assert served.holds_cut_off_reply(session.pk) is True


def test_extras_are_stored_in_one_statement_and_the_first_copy_stays(user):
    """A message's extras (what the store's blocks do not hold) are written with one INSERT that
    skips a key already stored, on every Codex call twice: no look-up of the known keys first."""
    session = session_create(owner=user, title="extras")
    message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    with CaptureQueriesContext(connection) as queries:
        extras_store(session=session, pairs=[(message, {"name": "first"})])
    assert len(queries.captured_queries) == 1
    with CaptureQueriesContext(connection) as queries:
        extras_store(
            session=session, pairs=[(message, {"name": "second"}), ({"role": "user", "content": "x"}, {"a": 1})]
        )
    assert len(queries.captured_queries) == 1
    assert MessageExtra.objects.get(session=session, key=extra_key(message)).data == {"name": "first"}
    assert MessageExtra.objects.filter(session=session).count() == 2


def test_a_responses_input_served_as_sent_is_the_clients_own_list():
    """The Responses mapping covers the whole input in order: when the client's copies suffice the
    input goes as its own list (and its bytes), not a copy rebuilt from the groups and compared
    item by item with it (4,000 items at 2,000 stored messages)."""
    items = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]},
        {"type": "function_call", "name": "exec_command", "arguments": '{"cmd":"ls"}', "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.py\n"},
    ]
    mapped = map_input({"model": "gpt-5", "input": items})
    assert mapped.request is items
    assert list(mapped.system) + [item for source in mapped.sources for item in source] == items
