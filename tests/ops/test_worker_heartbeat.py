"""A real Celery worker's heartbeat: /readyz is 200 while it runs, busy with a compaction longer
than the max age included, 503 within the heartbeat's max age after a SIGKILL (no clean-up ran),
200 again once a worker is restarted, and 503 at once when a worker stops cleanly (it removes its
own heartbeat)."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from compaction.models import Compaction, Status
from ops.models import WorkerHeartbeat
from tests.compaction.factories import append, conversation, make_session
from tests.e2e.conftest import VALID_SUMMARY
from tests.fake_anthropic import FakeAnthropic, Step

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

INTERVAL = 0.5  # seconds between heartbeats
MAX_AGE = 3.0  # a worker silent this long is gone
HEARTBEAT_ENV = {
    "COMPACTOR_WORKER_HEARTBEAT_SECONDS": str(INTERVAL),
    "COMPACTOR_WORKER_HEARTBEAT_MAX_AGE": str(MAX_AGE),
}


def readyz() -> tuple[int, dict]:
    response = Client().get("/readyz")
    return response.status_code, response.json()


def seconds_until(status: int, timeout: float) -> float:
    """Poll /readyz until it answers `status`; how long that took."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        code, body = readyz()
        if code == status:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"/readyz not {status} after {timeout} s: {readyz()}")


@pytest.fixture
def slow_llm():
    """A summarizer that takes longer than the heartbeat's max age to answer."""
    # Only the first call is slow: the restarted worker resumes the job the SIGKILL interrupted
    # (compaction.tasks), and its clean stop must not wait on another slow call.
    with FakeAnthropic(default=Step.success(VALID_SUMMARY)) as server:
        server.push(Step.success(VALID_SUMMARY, delay=MAX_AGE + 3))
        yield server


def test_readyz_follows_a_real_worker_through_a_sigkill_and_a_restart(
    worker_factory, settings, not_eager, api, user, slow_llm
):
    settings.WORKER_HEARTBEAT_MAX_AGE = MAX_AGE
    assert readyz()[0] == 503  # no worker yet

    llm = {"ANTHROPIC_API_KEY": "sk-ant-fake-heartbeat", "ANTHROPIC_BASE_URL": slow_llm.base_url}
    worker = worker_factory("hb", **HEARTBEAT_ENV, **llm)  # --pool=solo: the task runs in its main thread
    seconds_until(200, 5)
    row = WorkerHeartbeat.objects.get()
    assert row.worker.startswith("hb@") and row.pid == worker.process.pid

    # Busy for longer than the max age with a compaction, the worker still counts as alive.
    session = make_session(user)
    append(session, conversation(8))
    assert api.post(f"/api/v1/sessions/{session.pk}/compactions/", {}, format="json").status_code == 202
    # Counted from the summarizer call's start (the stand-in got the request), not from the claim:
    # on a loaded machine the job's own work before that call can itself take seconds.
    inside_since = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert readyz()[0] == 200, readyz()
        if inside_since is None and slow_llm.requests:
            inside_since = time.monotonic()
        if inside_since is not None and time.monotonic() - inside_since > MAX_AGE + 0.5:
            break  # inside one call longer than the max age, and ready all along
        time.sleep(0.2)
    else:
        raise AssertionError("the compaction never sat in its summarizer call longer than the heartbeat's max age")
    assert Compaction.objects.get(session=session).status == Status.RUNNING  # the call lasts MAX_AGE + 3 s

    worker.kill()  # SIGKILL: no shutdown step runs, the row stays and only ages
    to_unready = seconds_until(503, MAX_AGE + 3)
    code, body = readyz()
    assert body["down"] == ["worker"], body
    assert "no worker heartbeat in the last 3 s" in body["checks"]["worker"]["error"]
    assert WorkerHeartbeat.objects.filter(pid=worker.process.pid).exists()
    # Not before the last heartbeat had aged past the max age.
    assert MAX_AGE - INTERVAL - 0.5 <= to_unready <= MAX_AGE + 1, to_unready

    restarted = worker_factory("hb", **HEARTBEAT_ENV)
    to_ready = seconds_until(200, 5)
    assert WorkerHeartbeat.objects.get().pid == restarted.process.pid  # the name's row taken over
    print(
        f"/readyz: 503 {to_unready:.1f} s after the SIGKILL (max age {MAX_AGE} s), 200 {to_ready:.1f} s after restart"
    )

    job = Compaction.objects.get(session=session)
    deadline = time.monotonic() + 30
    while job.status in (Status.QUEUED, Status.RUNNING) and time.monotonic() < deadline:
        time.sleep(0.2)
        job.refresh_from_db()
    assert job.attempts == 2 and job.status == Status.SUCCEEDED, job.status  # resumed by the restarted worker
    restarted.stop()  # SIGTERM: a clean stop removes its heartbeat
    assert seconds_until(503, 2) < 2
    assert not WorkerHeartbeat.objects.exists()
