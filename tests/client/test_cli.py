"""The `compactor` CLI against a live server (in-process main(); the installed command is run in
tests/gateway/test_server.py against gunicorn)."""

from __future__ import annotations

import json
import uuid

import pytest

from compaction.models import Compaction
from compaction.services import describe
from compactor_client.cli import main
from sessions.models import Session
from sessions.services import messages_append, session_create
from tests import codex_rollouts
from tests.client.conftest import conversation
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def env(monkeypatch, live_server, api_key):
    monkeypatch.setenv("COMPACTOR_URL", live_server.url)
    monkeypatch.setenv("COMPACTOR_API_KEY", api_key)


@pytest.fixture
def session(user):
    s = session_create(
        owner=user, title="CLI session", model="claude-sonnet-4-5", compaction_settings={"keep_recent_tokens": 300}
    )
    messages_append(session=s, messages=conversation(6))
    return s


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compact_with_a_focus_waits_for_the_summary(env, session, capsys, eager_celery):
    code, out, err = run(capsys, "compact", str(session.pk), "focus", "on", "mod_2", "--wait", "10")
    assert code == 0, err
    job = Compaction.objects.get(session=session)
    assert job.status == "succeeded" and job.instructions == "focus on mod_2"
    assert out.strip() == describe(job)  # the job's own one-line description
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk
    # --json: the job as the API returns it.
    code, out, _ = run(capsys, "--json", "compact", str(session.pk), "--dry-run")
    assert code == 0 and json.loads(out)["dry_run"] is True


def test_sessions_show_context_undo_tail(env, session, capsys, eager_celery):
    code, out, _ = run(capsys, "sessions")
    assert code == 0 and str(session.pk) in out and "CLI session" in out
    code, out, _ = run(capsys, "sessions", "--json")
    assert json.loads(out)[0]["id"] == str(session.pk)
    run(capsys, "compact", str(session.pk), "--wait", "10")
    code, out, _ = run(capsys, "show", str(session.pk))
    assert "active compaction" in out and "succeeded" in out
    code, out, _ = run(capsys, "context", str(session.pk))
    assert "summary" in out.splitlines()[1]
    context = json.loads(run(capsys, "context", str(session.pk), "--json")[1])
    assert "<summary>" in context["messages"][0]["content"]
    code, out, _ = run(capsys, "undo", str(session.pk))
    assert code == 0 and "undone" in out
    assert Session.objects.get(pk=session.pk).active_compaction_id is None
    code, out, _ = run(capsys, "tail", str(session.pk), "--once")
    assert "compaction_queued" in out and "compaction_reverted" in out
    code, out, _ = run(capsys, "--json", "tail", str(session.pk), "--once")
    assert all("kind" in json.loads(line) for line in out.splitlines())


@corpus
def test_import(env, capsys):
    code, out, _ = run(capsys, "import", str(TRANSCRIPTS / "claude-code" / "tool_heavy.jsonl"))
    assert code == 0 and "Imported 11 messages (claude-code)" in out


def test_import_a_codex_rollout_names_what_was_skipped(env, capsys, user):
    code, out, err = run(capsys, "import", str(codex_rollouts.SAMPLE))
    assert code == 0, err
    session = Session.objects.get(owner=user)
    assert f"Imported {session.message_count} messages (codex) into {session.pk}" in out
    assert "42 tool calls, 1 compaction(s) recorded, 71 usage reports; skipped: " in out
    assert "event user message mirrors 30" in out and "token counts without usage 1" in out


def test_errors_exit_1_with_the_servers_message(env, capsys, monkeypatch):
    code, _, err = run(capsys, "show", "00000000-0000-0000-0000-000000000000")
    assert code == 1 and "404" in err
    monkeypatch.setenv("COMPACTOR_API_KEY", "wrong")
    code, _, err = run(capsys, "sessions")
    assert code == 1 and "401" in err


def _session_with_id(user, sid: str, title: str) -> Session:
    return Session.objects.create(pk=uuid.UUID(sid), owner=user, title=title, model="claude-sonnet-4-5")


def test_a_short_id_as_the_dashboard_shows_it_names_the_session(env, user, capsys):
    _session_with_id(user, "f07b7eaa-1111-4111-8111-111111111111", "Parser")
    code, out, err = run(capsys, "show", "f07b7eaa")
    assert code == 0, err
    assert "Parser  [f07b7eaa-1111-4111-8111-111111111111]" in out


def test_an_ambiguous_short_id_lists_the_matches(env, user, other_user, capsys):
    _session_with_id(user, "f07b7eaa-1111-4111-8111-111111111111", "Parser")
    _session_with_id(user, "f07b7eaa-2222-4222-8222-222222222222", "Lexer")
    Session.objects.create(pk=uuid.UUID("f07b7eaa-3333-4333-8333-333333333333"), owner=other_user, title="Theirs")
    code, _, err = run(capsys, "context", "f07b7eaa")
    assert code == 1
    assert "session id f07b7eaa is ambiguous" in err
    assert "f07b7eaa-1111-4111-8111-111111111111 (Parser)" in err and "(Lexer)" in err
    assert "Theirs" not in err  # another owner's sessions are not even counted
    code, out, err = run(capsys, "show", "f07b7eaa-2222")
    assert code == 0 and "Lexer" in out


def test_a_short_id_too_short_or_unknown_is_named(env, user, capsys):
    code, _, err = run(capsys, "show", "f07b7e")
    assert code == 1 and "at least 8 hex digits" in err
    code, _, err = run(capsys, "show", "abcdef01")
    assert code == 1 and "session abcdef01 not found" in err
