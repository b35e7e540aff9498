"""A hung provider end to end: a real Celery worker (prefork: the pool that enforces time
limits, as in production) with a small soft time limit and a provider that never answers. The
job must end with the extractive summary before the soft limit fires (a limit that fires inside
the SDK's retry loop kills the job at the hard limit with no summary, on every retry)."""

from __future__ import annotations

import subprocess
import time

import pytest

from compaction.models import Compaction, Status
from tests.compaction.factories import append, conversation, make_session
from tests.fake_anthropic import FakeAnthropic, Step

from . import conftest

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

# Seconds. Small, to bound the test, yet above a cold SDK import on a busy box (it counts
# against the LLM's share: 30 − 15 s left for the fallback = 15 s). The hard limit is 60 s later.
SOFT_LIMIT = 30


class PreforkWorker(conftest.Worker):
    """The shared e2e worker with the prefork pool: the solo pool ignores time limits."""

    def __init__(self, *args, **kwargs):
        real = subprocess.Popen

        def popen(cmd, **options):
            return real(["--pool=prefork" if arg == "--pool=solo" else arg for arg in cmd], **options)

        conftest.subprocess.Popen = popen
        try:
            super().__init__(*args, **kwargs)
        finally:
            conftest.subprocess.Popen = real


def test_a_worker_serves_the_extractive_summary_before_its_soft_limit(api, user, worker_factory, monkeypatch):
    monkeypatch.setattr(conftest, "Worker", PreforkWorker)
    with FakeAnthropic(default=Step.hang()) as server:
        worker_factory(
            "w1",
            ANTHROPIC_API_KEY="sk-ant-fake-hung",
            ANTHROPIC_BASE_URL=server.base_url,
            COMPACTOR_ANTHROPIC_TIMEOUT="120",
            COMPACTOR_ANTHROPIC_MAX_RETRIES="3",
            COMPACTOR_SOFT_TIME_LIMIT=str(SOFT_LIMIT),
        )
        session = make_session(user)
        append(session, conversation(8))
        # The API holds a request at most 30 s: follow the job until 45 s, past the soft limit.
        started = time.monotonic()
        response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"wait": 30}, format="json")
        assert response.status_code in (200, 202), response.json()
        job = response.json()
        while job["status"] in ("queued", "running") and time.monotonic() - started < 45:
            time.sleep(0.5)
            job = api.get(f"/api/v1/sessions/{session.pk}/compactions/{job['id']}/").json()
        assert len(server.requests) >= 1
    assert job["status"] == "succeeded", job
    assert job["strategy"] == "extractive"
    assert job["attempts"] == 1  # not killed and re-run
    assert "LLM time budget" in job["fallbacks"][0]["reason"]
    row = Compaction.objects.get(pk=job["id"])
    assert row.status == Status.SUCCEEDED and "## Goal" in row.summary
    assert row.duration_ms is not None and row.duration_ms < SOFT_LIMIT * 1000
