"""A real PostgreSQL restart under load (issue 35: "208 HTTP 500s over 4.2 s, six of them for
requests that started after PostgreSQL was back"): gunicorn as deployed, writers appending
through the REST API, and the database restarted (`pg_ctl restart -m fast`) in the middle.

No answer is a 500: a request the outage reaches answers 503 with Retry-After in the API's shape;
every request that starts once PostgreSQL is back succeeds (pooled connections are health-checked
before reuse); every acknowledged append is stored. The cluster is the test's own
(servers.PrivatePostgres), so the restart touches no other database."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import uuid

import pytest

from .servers import ROOT, PrivatePostgres, free_port, server_env, start_gunicorn, stop

pytestmark = pytest.mark.slow

WRITERS = 8


@pytest.fixture
def cluster():
    pg = PrivatePostgres().start()
    yield pg
    pg.destroy()


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _post(port: int, path: str, body: dict, key: str) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_a_postgres_restart_under_load_answers_503_never_500_and_heals(cluster, tmp_path):
    url = cluster.create_database("compactor")
    port = free_port()
    env = server_env(
        DATABASE_URL=url,
        COMPACTOR_VAR_DIR=str(tmp_path / "var"),
        PORT=str(port),
        WEB_WORKERS="2",
        WEB_THREADS="8",
        WEB_ACCESS_LOG="0",
        COMPACTOR_API_THROTTLE_RATE="off",
        COMPACTOR_API_KEY_CACHE_SECONDS="0",  # every request reads the database (the key included)
    )
    env.pop("REDIS_URL", None)
    _manage(env, "migrate", "--noinput", "-v", "0")
    key = (
        _manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; from sessions.models import ApiKey; "
            "u = get_user_model().objects.create_user('writer'); print('KEY', ApiKey.objects.create_key(owner=u, name='w')[1])",
        )
        .split("KEY ")[-1]
        .strip()
    )
    log = tmp_path / "gunicorn.log"
    web = start_gunicorn(env, log, timeout=120)
    try:
        sessions = []
        for n in range(WRITERS):
            status, _, body = _post(port, "/api/v1/sessions/", {"title": f"writer {n}"}, key)
            assert status == 201, body
            sessions.append(json.loads(body)["id"])

        answers: list[tuple[float, float, int, dict, bytes]] = []  # (sent, answered, status, headers, body)
        acked: dict[str, int] = {sid: 0 for sid in sessions}
        lock = threading.Lock()
        stop_writing = threading.Event()

        def writer(session_id: str) -> None:
            while not stop_writing.is_set():
                sent = time.monotonic()
                text = f"step {uuid.uuid4().hex}"
                try:
                    status, headers, body = _post(
                        port, f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": text}, key
                    )
                except OSError as exc:  # the server must answer, even during the outage
                    status, headers, body = -1, {}, repr(exc).encode()
                with lock:
                    answers.append((sent, time.monotonic(), status, headers, body))
                    acked[session_id] += status == 201

        threads = [threading.Thread(target=writer, args=(sid,)) for sid in sessions]
        for thread in threads:
            thread.start()
        time.sleep(3)
        down = time.monotonic()
        restart_seconds = cluster.restart()
        up = time.monotonic()
        time.sleep(4)
        stop_writing.set()
        for thread in threads:
            thread.join(60)
    finally:
        stop(web)
    log_text = log.read_text()

    statuses = {}
    for *_, status, _, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    summary = f"restart {restart_seconds:.2f} s; answers {statuses}"
    print(summary)
    assert set(statuses) <= {201, 503}, f"{summary}\n{log_text[-3000:]}"
    for _, _, status, headers, body in answers:
        if status == 503:
            assert int(headers["Retry-After"]) >= 1
            assert "database is unavailable" in json.loads(body)["error"]
    after = [status for sent, _, status, _, _ in answers if sent >= up]
    assert after and all(status == 201 for status in after), summary  # the first request after it succeeds
    assert sum(1 for sent, _, _, _, _ in answers if sent < down) > 0

    stored = json.loads(
        _manage(
            env,
            "shell",
            "-c",
            "import json; from django.db.models import Count; from sessions.models import Message; "
            "print('JSON', json.dumps({str(r['session_id']): r['n'] for r in "
            "Message.objects.values('session_id').annotate(n=Count('id'))}))",
        ).split("JSON ")[-1]
    )
    for session_id in sessions:
        # Every acknowledged append is stored; a 503 stored nothing (nothing beyond the 201s).
        assert stored.get(session_id, 0) == acked[session_id], (session_id, stored, acked, summary)
