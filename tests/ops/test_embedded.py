"""The embedded default (`make run`: SQLite, the filesystem broker, gunicorn with two workers and
a Celery worker) started by scripts/run.sh: /readyz turns 200 once its worker is up and 503 when
the worker is SIGKILLed, and /metrics adds up every process (prometheus_client's multiprocess
mode): requests answered by either web worker, and a compaction run by the Celery worker."""

from __future__ import annotations

import http.client
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.compaction.factories import conversation
from tests.hardening.servers import free_port, stop, wait_for_port

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "embedded-metrics-token-0123456789"
MAX_AGE = 3.0


def request(port: int, method: str, path: str, headers: dict | None = None, body: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def samples(port: int) -> dict[tuple[str, frozenset], float]:
    status, body = request(port, "GET", "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200, body
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"{what} after {timeout} s")


@pytest.fixture
def embedded(tmp_path):
    """scripts/run.sh in its own process group, on a fresh var directory; stopped afterwards."""
    port = free_port()
    var = tmp_path / "var"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PROMETHEUS_"))
        and key not in ("CELERY_TASK_ALWAYS_EAGER", "SECRET_KEY")
    }
    env.update(
        DEBUG="1",
        HOST="127.0.0.1",
        PORT=str(port),
        COMPACTOR_VAR_DIR=str(var),
        COMPACTOR_METRICS_TOKEN=TOKEN,
        COMPACTOR_WORKER_HEARTBEAT_SECONDS="0.5",
        COMPACTOR_WORKER_HEARTBEAT_MAX_AGE=str(MAX_AGE),
        WEB_WORKERS="2",
        WEB_THREADS="4",
        WEB_ACCESS_LOG="0",
        ANTHROPIC_API_KEY="",
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["bash", "scripts/run.sh"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_port(port, process, log, timeout=120)
        yield port, var, env, log
    finally:
        stop(process, timeout=40)


def api_key(env: dict) -> str:
    result = subprocess.run(
        [str(ROOT / ".venv/bin/python"), "manage.py", "create_api_key", "admin", "--name", "embedded"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return result.stdout.strip().splitlines()[-1]


def test_the_embedded_default_is_ready_with_its_worker_and_serves_every_process_metrics(embedded):
    port, var, env, log = embedded
    wait_for(lambda: request(port, "GET", "/readyz")[0] == 200, 60, "/readyz never 200")
    status, body = request(port, "GET", "/readyz")
    checks = json.loads(body)["checks"]
    assert checks["broker"] == {"ok": True, "transport": "filesystem"}
    assert checks["worker"]["alive"] == 1

    # Requests spread over both web workers are all counted.
    before = samples(port)
    login = {"view": "login", "method": "GET", "status": "200"}
    for _ in range(12):
        assert request(port, "GET", "/accounts/login/")[0] == 200
    after = samples(port)
    counted = ("compactor_http_requests_total", frozenset(login.items()))
    assert after.get(counted, 0) - before.get(counted, 0) == 12

    # A compaction run by the Celery worker shows in the web's /metrics.
    key = {"Authorization": f"Bearer {api_key(env)}"}
    status, body = request(
        port,
        "POST",
        "/api/v1/sessions/",
        key,
        {
            "title": "embedded",
            "context_window": 20000,
            "compaction_settings": {"keep_recent_tokens": 2000, "reserve_tokens": 2000, "auto_compact": False},
        },
    )
    assert status == 201, body
    session = json.loads(body)["id"]
    status, body = request(port, "POST", f"/api/v1/sessions/{session}/messages/", key, {"messages": conversation(8)})
    assert status == 201, body
    status, body = request(port, "POST", f"/api/v1/sessions/{session}/compactions/", key, {"wait": 30})
    assert status == 200, body
    job = json.loads(body)
    assert job.get("status") == "succeeded", job
    labels = frozenset({"strategy": job["strategy"], "outcome": "succeeded", "reason": "manual"}.items())
    assert samples(port).get(("compactor_compactions_total", labels)) == 1
    assert list((var / "prometheus").glob("*.db")), "no multiprocess files"

    # The worker SIGKILLed: its heartbeat ages past the max age and /readyz says so.
    with sqlite3.connect(var / "compactor.sqlite3") as db:
        (pid,) = db.execute("SELECT pid FROM ops_workerheartbeat").fetchone()
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: request(port, "GET", "/readyz")[0] == 503, MAX_AGE + 5, "/readyz never 503 after the SIGKILL")
    assert time.monotonic() - killed <= MAX_AGE + 2
    status, body = request(port, "GET", "/readyz")
    assert json.loads(body)["down"] == ["worker"]
    assert samples(port).get(("compactor_workers_alive", frozenset())) == 0
