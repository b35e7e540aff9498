"""Compaction API: manual compaction, dry run, wait, history, undo, overflow, events, scoping."""

from __future__ import annotations

import pytest

from compaction.models import Compaction, Event, EventKind, Status
from sessions.models import Session

from .factories import append, conversation, make_session, orphan_tool_results

pytestmark = pytest.mark.django_db


def url(session, tail: str = "compactions/") -> str:
    return f"/api/v1/sessions/{session.pk}/{tail}"


@pytest.fixture
def session(user):
    s = make_session(user)
    append(s, conversation(8))
    return s


def test_dry_run_changes_nothing(api, session):
    session.refresh_from_db()
    before = (session.context_tokens, Compaction.objects.count(), Event.objects.count())
    response = api.post(url(session), {"dry_run": True, "keep_recent_tokens": 1500}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["dry_run"] is True and body["would_compact"] is True
    assert body["first_summarized_seq"] == 1 and body["first_kept_seq"] > 1
    assert body["estimated_tokens_after"] < body["tokens_before"]
    session.refresh_from_db()
    assert (session.context_tokens, Compaction.objects.count(), Event.objects.count()) == before


def test_request_without_a_worker_answers_202_and_a_second_request_gets_the_same_job(api, session):
    first = api.post(url(session), {"instructions": "focus on the parser"}, format="json")
    assert first.status_code == 202, first.json()
    job = first.json()
    assert job["status"] == "queued" and job["reason"] == "manual" and job["already_in_flight"] is False
    assert first["Location"].endswith(f"/compactions/{job['id']}/")
    second = api.post(url(session), {}, format="json")
    assert second.status_code == 202
    assert second.json()["id"] == job["id"] and second.json()["already_in_flight"] is True
    assert Compaction.objects.filter(session=session).count() == 1
    assert Compaction.objects.get().instructions == "focus on the parser"


def test_a_job_queued_for_long_says_a_worker_may_be_missing(api, session, monkeypatch, settings):
    from datetime import timedelta

    from django.utils import timezone

    from compaction.api import views

    first = api.post(url(session), {}, format="json").json()
    assert first["queued_seconds"] == 0 and first["detail"] == ""
    Compaction.objects.filter(pk=first["id"]).update(created_at=timezone.now() - timedelta(seconds=40))
    polled = api.get(url(session, f"compactions/{first['id']}/")).json()
    assert polled["status"] == "queued" and 40 <= polled["queued_seconds"] < 45
    assert polled["detail"].startswith(f"Still queued after {polled['queued_seconds']} s — is a Celery worker running?")
    # The worker log is where make run writes it: under COMPACTOR_VAR_DIR (a temporary directory in tests).
    assert "make run" in polled["detail"] and f"see {settings.VAR_DIR / 'worker.log'})" in polled["detail"]

    # Younger than the threshold: no hint on a plain poll, but a caller that waited for the job
    # and saw no worker pick it up is told at once.
    Compaction.objects.filter(pk=first["id"]).update(created_at=timezone.now() - timedelta(seconds=8))
    assert api.get(url(session, f"compactions/{first['id']}/")).json()["detail"] == ""
    monkeypatch.setattr(views, "WAIT_HINT_MIN_SECONDS", 0.5)
    waited = api.post(url(session), {"wait": 0.5}, format="json")
    assert waited.status_code == 202 and waited.json()["id"] == first["id"]
    assert waited.json()["detail"].startswith("Still queued after 8 s")

    # Once a worker started it, queued_seconds is the time it waited; the hint is gone.
    job = Compaction.objects.get(pk=first["id"])
    Compaction.objects.filter(pk=job.pk).update(status=Status.RUNNING, started_at=job.created_at + timedelta(seconds=3))
    running = api.get(url(session, f"compactions/{first['id']}/")).json()
    assert running["queued_seconds"] == 3 and running["detail"] == ""


@pytest.mark.django_db(transaction=True)
def test_wait_returns_the_finished_job_then_history_detail_revert_and_events(api, user, eager_celery):
    session = make_session(user)
    append(session, conversation(8))
    response = api.post(url(session), {"wait": 10, "strategy": "extractive"}, format="json")
    assert response.status_code == 200, response.json()
    job = response.json()
    assert job["status"] == "succeeded", job
    assert job["active"] is True
    assert job["strategy"] == "extractive"
    assert job["message"].startswith("Conversation compacted: ")
    assert job["summarized"]["first_seq"] == 1 and job["summarized"]["last_seq"] == job["first_kept_seq"] - 1
    assert job["tokens_after"] < job["tokens_before"]
    assert "## Goal" in job["summary"]

    detail = api.get(url(session, f"compactions/{job['id']}/"))
    assert detail.status_code == 200 and detail.json()["id"] == job["id"]
    history = api.get(url(session))
    assert history.status_code == 200
    assert [item["id"] for item in history.json()["results"]] == [job["id"]]

    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    assert context["active_compaction"]["id"] == job["id"]
    assert orphan_tool_results(context["messages"]) == []

    events = api.get(url(session, "events/")).json()
    kinds = [e["kind"] for e in events["events"]]
    assert kinds == ["compaction_queued", "compaction_started", "compaction_finished"]
    assert events["events"][-1]["message"] == job["message"]
    newer = api.get(url(session, "events/"), {"after": events["last_id"]}).json()
    assert newer["events"] == [] and newer["last_id"] == events["last_id"]

    undo = api.post(url(session, f"compactions/{job['id']}/revert/"))
    assert undo.status_code == 200, undo.json()
    assert undo.json()["active_compaction"] is None
    session.refresh_from_db()
    assert session.active_compaction_id is None
    again = api.post(url(session, f"compactions/{job['id']}/revert/"))
    assert again.status_code == 409
    assert "only the active compaction" in again.json()["error"]
    assert (
        api.get(url(session, "events/"), {"after": events["last_id"]}).json()["events"][0]["kind"]
        == "compaction_reverted"
    )


@pytest.mark.django_db(transaction=True)
def test_nothing_to_compact_answers_compacted_false(api, user, eager_celery):
    session = make_session(user, window=200_000, keep_recent_tokens=20_000)
    append(session, conversation(1))
    response = api.post(url(session), {"wait": 5}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["compacted"] is False
    assert body["reason"].startswith("nothing to compact")
    assert body["job"]["status"] == "skipped"
    # The one-line message says why, once: not "Nothing compacted: nothing to compact: ...".
    assert body["job"]["message"].startswith("Not compacted: all ") and "keep_recent_tokens" in body["job"]["message"]
    assert "nothing to compact" not in body["job"]["message"].lower()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"strategy": "magic"}, "strategy"),
        ({"keep_recent_tokens": -5}, "keep_recent_tokens"),
        ({"preserve_messages": 0}, "preserve_messages"),
        ({"wait": -1}, "wait"),  # above the cap is waited to the cap, not refused
        ({"instructions": 42}, "instructions"),
        ({"keep_recent": 100}, "keep_recent"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, session, payload, field):
    response = api.post(url(session), payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["detail"]
    assert response.json()["error"].startswith(field)
    assert not Compaction.objects.exists()


def test_another_owners_session_and_compaction_are_404(api, other_api, session, other_user):
    job = Compaction.objects.create(session=session, reason="manual", status=Status.SKIPPED)
    for client_call in (
        lambda: other_api.post(url(session), {}, format="json"),
        lambda: other_api.get(url(session)),
        lambda: other_api.get(url(session, f"compactions/{job.pk}/")),
        lambda: other_api.post(url(session, f"compactions/{job.pk}/revert/")),
        lambda: other_api.post(url(session, "overflow/"), {"error_text": "prompt is too long"}, format="json"),
        lambda: other_api.get(url(session, "events/")),
    ):
        assert client_call().status_code == 404
    theirs = make_session(other_user)
    assert api.get(url(theirs, f"compactions/{job.pk}/")).status_code == 404
    assert Compaction.objects.count() == 1


def test_unauthenticated_is_401(client, session):
    assert client.get(url(session)).status_code in (401, 403)


def test_events_after_must_be_a_number(api, session):
    response = api.get(url(session, "events/"), {"after": "yesterday"})
    assert response.status_code == 400 and "after" in response.json()["detail"]


def test_overflow_that_is_not_one_says_so(api, session):
    response = api.post(
        url(session, "overflow/"), {"error_text": "invalid x-api-key", "status_code": 401}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["overflow"] is False and response.json()["reason"]
    assert not Compaction.objects.exists()


def test_overflow_compacts_at_once_and_returns_the_new_context(api, session):
    session.refresh_from_db()
    before = session.context_tokens
    response = api.post(
        url(session, "overflow/"),
        {"error_text": "prompt is too long: 212000 tokens > 200000 maximum", "status_code": 400},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["overflow"] is True and body["compacted"] is True, body
    assert body["compaction"]["reason"] == "overflow" and body["compaction"]["status"] == "succeeded"
    assert body["context"]["messages"][0]["content"].startswith("The conversation history before this point")
    assert orphan_tool_results(body["context"]["messages"]) == []
    session.refresh_from_db()
    assert session.active_compaction_id is not None
    assert session.context_tokens < before
    kinds = list(Event.objects.filter(session=session).values_list("kind", flat=True))
    assert kinds == [EventKind.OVERFLOW, EventKind.COMPACTION_FINISHED]


def test_overflow_without_any_field_is_a_400(api, session):
    response = api.post(url(session, "overflow/"), {}, format="json")
    assert response.status_code == 400 and "error_text" in response.json()["detail"]
    assert Session.objects.get(pk=session.pk).active_compaction_id is None


def test_schema_documents_the_compaction_endpoints(api):
    response = api.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    text = response.content.decode()
    for path in ("compactions/", "compactions/{compaction_id}/revert/", "overflow/", "events/"):
        assert path in text


def test_overflow_falls_back_to_extractive_when_the_llm_is_too_slow(api, session, settings):
    import time

    import anthropic  # noqa: F401 - imported before the clock starts: a cold import is not what is measured

    from tests.fake_anthropic import FakeAnthropic, Step

    with FakeAnthropic(default=Step.slow(20, "## Goal\n- too late")) as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-fake-slow"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.COMPACTION_OVERFLOW_LLM_TIMEOUT = 3
        settings.COMPACTION_OVERFLOW_TIME_BUDGET = 1.0
        started = time.monotonic()
        response = api.post(
            url(session, "overflow/"),
            {"error_text": "prompt is too long: 201000 tokens > 200000 maximum"},
            format="json",
        )
        elapsed = time.monotonic() - started
        assert len(server.requests) >= 1  # the LLM was tried first
        # The abandoned LLM call ends by its own (short) timeout; let it finish inside the test.
        import threading

        for thread in threading.enumerate():
            if thread.name.startswith("overflow-summarizer"):
                thread.join(10)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["compacted"] is True
    assert body["compaction"]["strategy"] == "extractive"
    assert "overflow time budget" in body["compaction"]["fallbacks"][0]["reason"]
    assert elapsed < 10, f"the agent waited {elapsed:.1f} s"


@pytest.mark.django_db(transaction=True)
def test_overflow_summarizes_with_no_transaction_open_and_writes_at_once(api, user, monkeypatch):
    """The emergency summary may take the whole overflow budget: it must not hold the session's
    row (on SQLite, the database's write lock) while it runs. An append from another request
    during the summary goes through, and the overflow's writes all land afterwards."""
    from django.db import connection

    from compaction.services import planning
    from sessions import services as session_services

    session = make_session(user)
    append(session, conversation(8))
    seen: dict[str, object] = {}
    real_compute = planning.outcome_compute

    def compute_while_someone_appends(*args, **kwargs):
        seen["in_atomic_block"] = connection.in_atomic_block
        seen["events_during"] = Event.objects.filter(session=session, kind=EventKind.OVERFLOW).count()
        # Another writer during the summary (PostgreSQL: would block on the row lock if held).
        session_services.messages_append(
            session=Session.objects.get(pk=session.pk),
            messages=[{"role": "user", "content": "one more thing while you compact"}],
        )
        return real_compute(*args, **kwargs)

    monkeypatch.setattr(planning, "outcome_compute", compute_while_someone_appends)
    response = api.post(
        url(session, "overflow/"), {"error_text": "prompt is too long", "status_code": 400}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert seen == {"in_atomic_block": False, "events_during": 0}
    assert response.json()["compacted"] is True
    assert Event.objects.filter(session=session, kind=EventKind.OVERFLOW).count() == 1
    served = response.json()["context"]["messages"]
    assert served[-1]["content"] in (
        "one more thing while you compact",
        [{"type": "text", "text": "one more thing while you compact"}],
    )
