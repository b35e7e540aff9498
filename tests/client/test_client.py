"""compactor_client.Compactor against a live server."""

from __future__ import annotations

import time

import pytest

from compactor_client import Compactor, CompactorError
from sessions.models import Message, Session
from tests.client.conftest import conversation
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = pytest.mark.django_db(transaction=True)


def test_sessions_messages_context_usage(cx):
    created = cx.create_session(title="client test", model="claude-sonnet-4-5", system_prompt="Be brief.")
    sid = created["id"]
    appended = cx.append(sid, conversation(2))
    assert [m["seq"] for m in appended["messages"]] == list(range(1, 9))
    assert [s["id"] for s in cx.sessions()] == [sid]
    assert [s["id"] for s in cx.sessions(search="nothing like it")] == []
    assert [m["seq"] for m in cx.messages(sid, limit=3)] == list(range(1, 9))  # follows the cursor
    context = cx.context(sid)
    assert context["system"] == "Be brief." and len(context["messages"]) == 8
    report = cx.report_usage(sid, input_tokens=1500, output_tokens=20, stop_reason="end_turn")
    assert report["usage"]["reported_tokens"] == 1500
    assert cx.update_session(sid, title="renamed")["title"] == "renamed"
    cx.delete_session(sid)  # to the trash: gone from the API, every row kept
    assert [s["id"] for s in cx.sessions()] == []
    assert Session.objects.get(pk=sid).deleted_at is not None


def test_compact_wait_undo_and_events(cx, eager_celery):
    sid = cx.create_session(title="compact me")["id"]
    cx.append(sid, conversation(6))
    job = cx.compact(sid, "focus on mod_3", wait=10, keep_recent_tokens=300)
    assert job["status"] == "succeeded"
    assert job["instructions"] == "focus on mod_3"
    assert cx.session(sid)["active_compaction"] == job["id"]
    assert cx.compactions(sid)[0]["id"] == job["id"]
    assert cx.compaction(sid, job["id"])["active"] is True
    undone = cx.undo(sid)
    assert undone["active_compaction"] is None
    with pytest.raises(CompactorError) as caught:
        cx.undo(sid)
    assert caught.value.status == 409
    kinds = [e["kind"] for e in cx.events(sid)["events"]]
    assert kinds == ["compaction_queued", "compaction_started", "compaction_finished", "compaction_reverted"]
    first = next(cx.follow_events(sid, after=0))
    assert first["id"] > 0


def test_errors_carry_the_status_and_the_servers_message(cx, live_server):
    with pytest.raises(CompactorError) as caught:
        cx.session("00000000-0000-0000-0000-000000000000")
    assert caught.value.status == 404
    with pytest.raises(CompactorError) as caught:
        Compactor(live_server.url, "wrong-key").session("00000000-0000-0000-0000-000000000000")
    assert caught.value.status == 401
    with pytest.raises(CompactorError):
        Compactor("http://127.0.0.1:9", "k").session("x")


def test_it_reads_the_environment(monkeypatch, live_server, api_key):
    monkeypatch.setenv("COMPACTOR_URL", live_server.url)
    monkeypatch.setenv("COMPACTOR_API_KEY", api_key)
    assert list(Compactor().sessions()) == []
    monkeypatch.delenv("COMPACTOR_API_KEY")
    with pytest.raises(CompactorError, match="COMPACTOR_API_KEY"):
        Compactor()


@corpus
def test_import_a_claude_code_transcript(cx):
    result = cx.import_transcript(TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl", title="imported")
    session = result["session"]
    assert result["format"] == "claude-code" and result["messages"] == 11
    assert session["title"] == "imported"
    assert Message.objects.filter(session_id=session["id"]).count() == 11


def test_the_anthropic_helper_goes_through_the_gateway(cx, upstream):
    sid = cx.create_session(title="via helper")["id"]
    claude = cx.anthropic(session_id=sid, max_retries=0)
    reply = claude.messages.create(
        model="gateway-test-model", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.content[0].text == "Done."
    # The reply is stored when the server closes the response, once the client has the answer
    # (not before: the client would wait for the database): a reader right after it waits for it.
    assert [m["role"] for m in stored_once(cx, sid, 2)] == ["user", "assistant"]
    assert upstream.requests[0].headers["x-api-key"] == "upstream-secret"


def stored_once(cx, sid: str, count: int, timeout: float = 10.0) -> list[dict]:
    """The session's messages once `count` are stored (at most `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        messages = list(cx.messages(sid))
        if len(messages) >= count or time.monotonic() > deadline:
            return messages
        time.sleep(0.02)
