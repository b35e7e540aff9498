"""A real Celery worker's heartbeat: /readyz is 200 while it runs, 503 within the heartbeat's max
age after a SIGKILL (no clean-up ran), 200 again once a worker is restarted, and 503 at once when
a worker stops cleanly (it removes its own heartbeat)."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from ops.models import WorkerHeartbeat

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


def test_readyz_follows_a_real_worker_through_a_sigkill_and_a_restart(worker_factory, settings, not_eager):
    settings.WORKER_HEARTBEAT_MAX_AGE = MAX_AGE
    assert readyz()[0] == 503  # no worker yet

    worker = worker_factory("hb", **HEARTBEAT_ENV)
    seconds_until(200, 5)
    row = WorkerHeartbeat.objects.get()
    assert row.worker.startswith("hb@") and row.pid == worker.process.pid

    # Still ready well past the max age: the heartbeat keeps it fresh.
    time.sleep(MAX_AGE + 1)
    assert readyz()[0] == 200

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

    restarted.stop()  # SIGTERM: a clean stop removes its heartbeat
    assert seconds_until(503, 2) < 2
    assert not WorkerHeartbeat.objects.exists()
