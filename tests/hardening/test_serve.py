"""`make serve` started the way README.md "Deploy" says (gunicorn + Celery worker + beat on
PostgreSQL and Redis, the documented production settings), answering over the proxy's HTTPS,
running a compaction on its own worker, and leaving no process behind when stopped."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from compaction.models import Compaction, Status
from sessions.models import ApiKey
from tests.compaction.factories import append, conversation, make_session
from tests.services import redis_url, require_postgres

from .servers import ROOT, free_port, server_env, stop, wait_for_port
from .test_security import PRODUCTION_ENV

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _request(port: int, method: str, path: str, *, headers: dict, body: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_serve_refuses_to_start_without_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        ["make", "-s", "serve"], cwd=ROOT, env={**env, "COMPACTOR_VAR_DIR": str(tmp_path)}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_make_serve_answers_runs_jobs_and_stops_cleanly(user, tmp_path):
    require_postgres()
    port = free_port()
    env = server_env(
        **{**PRODUCTION_ENV, "ALLOWED_HOSTS": "127.0.0.1"},
        REDIS_URL=redis_url(),
        HOST="127.0.0.1",
        PORT=str(port),
        COMPACTOR_VAR_DIR=str(tmp_path / "var"),
        CELERY_CONCURRENCY="1",
        WEB_WORKERS="1",
        COMPACTOR_METRICS_TOKEN="serve-metrics-token-0123456789",
    )
    env.pop("MAKEFLAGS", None)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["make", "-s", "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_port(port, process, log, timeout=90)
        _, key = ApiKey.objects.create_key(owner=user, name="serve")
        https = {"Authorization": f"Bearer {key}", "X-Forwarded-Proto": "https", "Host": "127.0.0.1"}

        # Plain HTTP is redirected to HTTPS; through the proxy's HTTPS the API answers, with HSTS.
        status, headers, _ = _request(port, "GET", "/api/v1/sessions/", headers={"Host": "127.0.0.1"})
        assert status == 301 and headers["Location"].startswith("https://")
        status, headers, body = _request(port, "GET", "/api/v1/sessions/", headers=https)
        assert status == 200, body
        assert "max-age=31536000" in headers["Strict-Transport-Security"]
        assert "Content-Security-Policy" in headers

        # The worker and broker run too: a compaction finishes while the request waits.
        session = make_session(user)
        append(session, conversation(8))
        status, _, body = _request(
            port, "POST", f"/api/v1/sessions/{session.pk}/compactions/", headers=https, body={"wait": 30}
        )
        assert status == 200, (body, log.read_text()[-3000:])
        job = json.loads(body)
        assert job["status"] == "succeeded", job
        assert Compaction.objects.get(pk=job["id"]).status == Status.SUCCEEDED

        # Probes and the scrape over plain HTTP to the host's address (no redirect, no host check):
        # ready with the worker and Redis, and the worker's compaction in the web's /metrics.
        status, _, body = _request(port, "GET", "/readyz", headers={"Host": "10.0.0.5"})
        assert status == 200, body
        assert json.loads(body)["checks"]["broker"]["transport"] == "redis"
        bearer = {"Host": "10.0.0.5", "Authorization": "Bearer serve-metrics-token-0123456789"}
        status, _, body = _request(port, "GET", "/metrics", headers=bearer)
        assert status == 200
        counted = {
            tuple(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples
            if sample.name == "compactor_compactions_total"
        }
        assert counted[(("outcome", "succeeded"), ("reason", "manual"), ("strategy", job["strategy"]))] == 1
    finally:
        stop(process, timeout=40)
    # Nothing of it is left running: make, gunicorn, the worker and beat were one process group,
    # and each shuts down on the SIGTERM (the worker and gunicorn finish gracefully first).
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        left = subprocess.run(["pgrep", "-g", str(process.pid), "-a"], capture_output=True, text=True).stdout
        if not left:
            break
        time.sleep(0.5)
    else:
        os.killpg(process.pid, 9)
        raise AssertionError(f"still running after SIGTERM:\n{left}")
    assert "Compactor serving on" in log.read_text()


def _pid(path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped) is not a running worker.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_dead_worker_is_restarted_while_the_web_server_keeps_serving(user, tmp_path):
    require_postgres()
    port = free_port()
    var = tmp_path / "var"
    env = server_env(
        **{**PRODUCTION_ENV, "ALLOWED_HOSTS": "127.0.0.1"},
        REDIS_URL=redis_url(),
        HOST="127.0.0.1",
        PORT=str(port),
        COMPACTOR_VAR_DIR=str(var),
        CELERY_CONCURRENCY="1",
        WEB_WORKERS="1",
    )
    env.pop("MAKEFLAGS", None)
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["make", "-s", "serve"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_port(port, process, log, timeout=90)
        _, key = ApiKey.objects.create_key(owner=user, name="supervised")
        https = {"Authorization": f"Bearer {key}", "X-Forwarded-Proto": "https", "Host": "127.0.0.1"}
        worker_pid_file = var / "run" / "worker.pid"
        first = _pid(worker_pid_file)
        assert _alive(first), log.read_text()[-3000:]

        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        answers = []
        while time.monotonic() < deadline:
            answers.append(_request(port, "GET", "/api/v1/sessions/", headers=https)[0])
            current = _pid(worker_pid_file)
            if current != first and _alive(current):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the worker was not restarted:\n{log.read_text()[-3000:]}")
        assert set(answers) == {200}  # the web server served throughout
        assert process.poll() is None
        assert "worker (pid" in log.read_text() and "restarting" in log.read_text()

        # The new worker runs jobs.
        session = make_session(user)
        append(session, conversation(8))
        status, _, body = _request(
            port, "POST", f"/api/v1/sessions/{session.pk}/compactions/", headers=https, body={"wait": 30}
        )
        assert status == 200 and json.loads(body)["status"] == "succeeded", (body, log.read_text()[-3000:])
    finally:
        stop(process, timeout=40)
