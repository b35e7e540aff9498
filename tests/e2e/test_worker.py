"""End to end: API → Redis → a real Celery worker → active compaction, and a worker killed with
SIGKILL mid-job (the sweeper re-queues it; a new worker completes it exactly once)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from compaction import services
from compaction.models import Compaction, Event, EventKind, Status
from tests.compaction.factories import append, conversation, make_session
from tests.fake_anthropic import FakeAnthropic, Step

from .conftest import VALID_SUMMARY

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


def wait_until(predicate, timeout: float, message: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(message)


@pytest.fixture
def fake_llm():
    state = {"delay": 0.0}
    server = FakeAnthropic(default=lambda record: Step.success(VALID_SUMMARY, delay=state["delay"])).start()
    server.state = state
    yield server
    server.stop()


def llm_env(server) -> dict[str, str]:
    return {
        "ANTHROPIC_API_KEY": "sk-ant-fake-e2e",
        "ANTHROPIC_BASE_URL": server.base_url,
        "COMPACTOR_ANTHROPIC_MAX_RETRIES": "0",
        "COMPACTOR_ANTHROPIC_TIMEOUT": "120",
    }


def test_api_queue_worker_activates_the_compaction(api, user, worker_factory, fake_llm):
    worker_factory("w1", **llm_env(fake_llm))
    session = make_session(user)
    append(session, conversation(8))
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"wait": 30}, format="json")
    assert response.status_code == 200, response.json()
    job = response.json()
    assert job["status"] == "succeeded", job
    assert job["strategy"] == "anthropic" and job["attempts"] == 1
    assert len(fake_llm.requests) >= 1
    # The worker used its own settings: the key from its environment reached the server.
    assert any("sk-ant-fake-e2e" in value for value in fake_llm.requests[0].headers.values())
    session.refresh_from_db()
    assert str(session.active_compaction_id) == job["id"]


def test_a_worker_killed_mid_job_is_completed_exactly_once(api, user, worker_factory, fake_llm):
    fake_llm.state["delay"] = 120.0  # the first summarizer call hangs
    first = worker_factory("w1", **llm_env(fake_llm))
    session = make_session(user)
    append(session, conversation(8))
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {}, format="json")
    assert response.status_code == 202
    job_id = response.json()["id"]
    wait_until(lambda: fake_llm.requests, 45, "the worker never called the summarizer")
    assert Compaction.objects.get(pk=job_id).status == Status.RUNNING

    # Alive past its first lease: the worker renews it, so the sweeper leaves the job alone.
    started = Compaction.objects.get(pk=job_id).started_at
    time.sleep(
        max(0.0, (started + timedelta(seconds=settings.COMPACTION_LEASE_SECONDS + 3) - timezone.now()).total_seconds())
    )
    assert services.compaction_sweep_stuck()["requeued"] == 0
    assert Compaction.objects.get(pk=job_id).status == Status.RUNNING

    first.kill()
    killed_at = time.monotonic()
    fake_llm.state["delay"] = 0.0
    worker_factory("w2", **llm_env(fake_llm))
    # The sweeper as beat runs it (every COMPACTION_SWEEP_SECONDS, real time): the dead worker's
    # lease lapses and the job is re-queued within a minute of the kill.
    requeued_after = None
    while time.monotonic() - killed_at < 90:
        if services.compaction_sweep_stuck()["requeued"]:
            requeued_after = time.monotonic() - killed_at
            break
        time.sleep(settings.COMPACTION_SWEEP_SECONDS)
    assert requeued_after is not None and requeued_after <= 60, requeued_after
    print(f"re-queued {requeued_after:.1f} s after the worker was killed")

    job = wait_until(
        lambda: Compaction.objects.filter(pk=job_id, status=Status.SUCCEEDED).first(), 60, "the job never completed"
    )
    assert job.attempts == 2
    time.sleep(1.0)  # give any duplicate delivery a chance to show up
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk
    assert Compaction.objects.filter(session=session).count() == 1
    assert Compaction.objects.filter(session=session, status=Status.SUCCEEDED).count() == 1
    events = Event.objects.filter(session=session)
    assert events.filter(kind=EventKind.COMPACTION_FINISHED).count() == 1
    assert events.filter(kind=EventKind.COMPACTION_STARTED).count() == 2  # one per attempt
    assert events.filter(kind=EventKind.COMPACTION_FAILED).count() == 0
