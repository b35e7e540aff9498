"""The production server (gunicorn gthread, deploy/gunicorn.conf.py) in a subprocess, on its own
SQLite file, with the fake upstream: a stream in progress does not hold up other requests; the
`compactor` CLI (python -m compactor_client) compacts a session on it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.gateway.upstream import FakeUpstream, Reply

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fake():
    upstream = FakeUpstream().start()
    yield upstream
    upstream.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory, fake):
    """(url, api key) of a gunicorn started with the same config as `make run`."""
    var = tmp_path_factory.mktemp("server")
    port = _free_port()
    env = {
        **os.environ,
        "SECRET_KEY": "server-test",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
        "COMPACTOR_VAR_DIR": str(var),
        "COMPACTOR_UPSTREAM_URL": fake.url,
        "COMPACTOR_UPSTREAM_API_KEY": "upstream-secret",
        "ANTHROPIC_API_KEY": "",
        # No broker in this test: compaction jobs run in the web process when they are queued.
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_WORKERS": "1",  # one process: only its threads can serve requests side by side
        "WEB_THREADS": "4",
        "WEB_ACCESS_LOG": "0",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "ensure_admin"], cwd=ROOT, env=env, check=True, capture_output=True)
    out = subprocess.run(
        [*manage, "create_api_key", "admin", "--name", "test"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = out.stdout.strip().splitlines()[-1]
    log = open(var / "gunicorn.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "project.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/api/v1/sessions/", timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None:
                    raise RuntimeError((var / "gunicorn.log").read_text()) from None
                time.sleep(0.1)
        yield url, key, env
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_a_stream_in_progress_does_not_block_other_requests(server, fake):
    url, key, _ = server
    fake.reply = lambda rec: Reply(text="a slow answer, word by word")
    fake.gate = threading.Event()
    chunks: list[bytes] = []
    first_chunk = threading.Event()
    finished = threading.Event()

    def slow_stream() -> None:
        body = {"model": "m", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "slow one"}]}
        with httpx.stream(
            "POST", f"{url}/anthropic/v1/messages", json=body, headers={"x-api-key": key}, timeout=60
        ) as r:
            for chunk in r.iter_raw():
                chunks.append(chunk)
                if b"text_delta" in chunk:
                    first_chunk.set()
        finished.set()

    thread = threading.Thread(target=slow_stream)
    thread.start()
    try:
        # The first delta reached the client while upstream is still writing: passed through live.
        assert first_chunk.wait(30), "no SSE bytes before the upstream finished"
        assert not finished.is_set()
        # Meanwhile other requests are served: REST, and other gateway calls, several at once.
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(timeout=30) as http:
            assert http.get(f"{url}/api/v1/sessions/", headers=auth).status_code == 200
            for n in range(3):
                body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": f"quick {n}"}]}
                response = http.post(f"{url}/anthropic/v1/messages", json=body, headers={"x-api-key": key})
                assert response.status_code == 200
        assert not finished.is_set(), "the slow stream ended before the other requests were served"
    finally:
        fake.gate.set()
        thread.join(30)
        fake.gate = None
    raw = b"".join(chunks).decode()
    assert raw.rstrip().endswith('data: {"type": "message_stop"}')
    # A lone call no conversation continued is listed among the single calls.
    sessions = httpx.get(
        f"{url}/api/v1/sessions/?search=slow&one_off=true", headers={"Authorization": f"Bearer {key}"}
    ).json()
    sid = sessions["results"][0]["id"]
    messages = httpx.get(f"{url}/api/v1/sessions/{sid}/messages/", headers={"Authorization": f"Bearer {key}"}).json()
    assert messages["results"][1]["content"] == [{"type": "text", "text": "a slow answer, word by word"}]


def test_a_whole_answer_is_stored_after_it_went_out(server, fake):
    """Under gunicorn the reply and usage of a non-streamed call are stored when the server
    closes the response, after the client has the answer (gateway.views.AnswerThenRecord)."""
    url, key, _ = server
    fake.reply = lambda rec: Reply(text="stored after the answer")
    body = {"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "a whole answer please"}]}
    answer = httpx.post(f"{url}/anthropic/v1/messages", json=body, headers={"x-api-key": key}, timeout=30)
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "stored after the answer"
    sid = answer.headers["x-compactor-session"]
    auth = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + 15
    while True:
        stored = httpx.get(f"{url}/api/v1/sessions/{sid}/messages/", headers=auth, timeout=10).json()["results"]
        if (len(stored) == 2 and stored[1]["provider_usage"]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[1]["content"] == [{"type": "text", "text": "stored after the answer"}]
    assert stored[1]["provider_usage"]["output_tokens"] > 0  # the usage report, hung on the reply


def test_the_cli_compacts_a_session_on_the_running_server(server, fake):
    url, key, _ = server
    fake.reply = lambda rec: Reply(text="Done with that step. " * 5)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        sid = http.post(
            "/api/v1/sessions/", json={"title": "cli", "compaction_settings": {"keep_recent_tokens": 200}}
        ).json()["id"]
        claude = {"x-api-key": key, "x-compactor-session": sid}
        history: list[dict] = []
        for i in range(8):
            history.append({"role": "user", "content": f"Step {i}: edit src/m{i}.py " + "carefully " * 40})
            reply = http.post(
                "/anthropic/v1/messages", json={"model": "m", "max_tokens": 50, "messages": history}, headers=claude
            )
            history.append({"role": "assistant", "content": reply.json()["content"]})
    cli_env = {**os.environ, "COMPACTOR_URL": url, "COMPACTOR_API_KEY": key}
    done = subprocess.run(
        [sys.executable, "-m", "compactor_client", "--json", "compact", sid, "focus", "on", "m3", "--wait", "30"],
        cwd=ROOT,
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["status"] == "succeeded" and job["instructions"] == "focus on m3"
    assert job["messages_summarized"] > 0
    shown = subprocess.run(
        [sys.executable, "-m", "compactor_client", "show", sid], cwd=ROOT, env=cli_env, capture_output=True, text=True
    )
    assert f"active compaction {job['id']}" in shown.stdout
    # The next gateway call sends the compacted context upstream.
    history.append({"role": "user", "content": "next"})
    httpx.post(
        f"{url}/anthropic/v1/messages",
        json={"model": "m", "max_tokens": 50, "messages": history},
        headers={"x-api-key": key, "x-compactor-session": sid},
        timeout=30,
    )
    sent = fake.message_calls[-1].body["messages"]
    assert "<summary>" in json.dumps(sent[0]) and len(sent) < len(history)
