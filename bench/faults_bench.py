"""Faults bench: what a client sees when things break, and what is stored.

    DEBUG=1 .venv/bin/python bench/faults_bench.py [--redis-seconds S] [--lines 10000,40000,160000]
        [--only streams,redis,broker,restart,slowclients,pgrestart,idempotency,imports] [--running N] [--queued N]

One process, a throwaway database (SQLite under a temporary COMPACTOR_VAR_DIR, or a `test_<name>`
database with DATABASE_URL), and a private `redis-server` on a free port as cache and broker
(REDIS_URL is pointed at it before Django starts). Prints:
- streams: the stand-in upstream (tests/gateway/upstream.py) stalls past the timeout, resets or
  cuts each streamed and whole answer after its headers: error events / 502-504 answers, and the
  assistant fragments stored (must be 0);
- redis: the private Redis stopped for S seconds while reads, appends and gateway calls run:
  requests, 5xx (must be 0), and the Redis-backed cache warnings logged;
- broker: a compaction's message deleted from its queue before a worker (a `celery worker`
  subprocess) took it: seconds until the job finished (the sweeper, run here every second, re-sends
  it after COMPACTOR_REQUEUE_QUEUED_SECONDS, set to 5 s for the bench);
- restart: a worker (`celery worker`, concurrency = --running) SIGKILLed while --running jobs are
  inside their summary call (a stand-in Messages API holds them) and --queued wait, started again
  after 1 s as make serve's supervisor does, beat's sweeper running at COMPACTOR_SWEEP_SECONDS:
  seconds from the kill until the new worker is ready (and the CPU seconds its main process
  spent until then: the start's cost, which a loaded machine multiplies), until each queued job
  starts, and until each interrupted job starts again (issue 35: all within 10 s), with the load
  average;
- slowclients: gunicorn as deployed (deploy/gunicorn.conf.py) on the bench's database while
  --slow connections hold a request body (headers with `Content-Length: 100`, 10 bytes sent):
  ordinary requests' p50/p99 alone and with them (bench/slow_clients_bench.py's round; issue 35:
  p99 under 1 s with 70);
- pgrestart: a real PostgreSQL restart under --writers agents appending and --jobs compactions:
  answers by status (500s: must be 0), acknowledged appends against rows stored, and how long
  after the database's return the jobs in flight finished (issue 35: within 10 s);
- idempotency: duplicate POSTs with one Idempotency-Key (sequential, and concurrent on
  PostgreSQL): messages stored (must be 1);
- imports: chained JSONL logs of user lines, N lines each: seconds, and seconds per 10k lines
  (flat = linear).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

FAULTS = ("stall", "reset", "cut")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    """redis-server on a free port, no persistence; stopped and started again on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("faults_bench: needs the redis-server binary")
        command = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None


def _post_gateway(key: str, body: dict):
    from django.test import Client

    return Client().post("/anthropic/v1/messages", data=json.dumps(body), content_type="application/json",
                         HTTP_X_API_KEY=key)  # fmt: skip


def _turn(text: str, *, stream: bool) -> dict:
    return {"model": "bench-model", "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": text}]}


@contextlib.contextmanager
def fake_upstream() -> Iterator[object]:
    from django.conf import settings

    from tests.gateway.upstream import FakeUpstream, Reply

    fake = FakeUpstream().start()
    fake.reply = lambda rec: Reply(text="A reply of several words streamed one by one to the client.")
    settings.GATEWAY_UPSTREAM_URL, settings.GATEWAY_UPSTREAM_API_KEY = fake.url, "upstream-secret"
    try:
        yield fake
    finally:
        fake.stop()


def bench_streams(key: str, calls: int) -> None:
    from django.conf import settings

    from sessions.models import Message

    settings.GATEWAY_UPSTREAM_TIMEOUT = 1.0
    print(f"streams ({calls} streamed + {calls} whole calls per fault; upstream timeout 1 s):")
    with fake_upstream() as fake:
        for fault in FAULTS:
            fake.fault = fault
            before = Message.objects.filter(role="assistant").count()
            errors = statuses = 0
            started = time.perf_counter()
            for i in range(calls):
                response = _post_gateway(key, _turn(f"{fault} stream {i} {uuid.uuid4().hex}", stream=True))
                raw = b"".join(response.streaming_content)
                errors += raw.count(b"event: error\n") if b"message_stop" not in raw else 0
                whole = _post_gateway(key, _turn(f"{fault} whole {i} {uuid.uuid4().hex}", stream=False))
                statuses += whole.status_code in (502, 504) and whole.json()["type"] == "error"
            fragments = Message.objects.filter(role="assistant").count() - before
            elapsed = time.perf_counter() - started
            print(
                f"  {fault:5}: {errors}/{calls} streams ended with an error event, {statuses}/{calls} whole answers "
                f"a 502/504 in the Messages shape; fragments stored: {fragments}  ({elapsed:.1f} s)"
            )
        fake.fault = None


class _CountWarnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def bench_redis(redis_server: PrivateRedis, client, key: str, seconds: float) -> None:
    from sessions.models import Message

    session_id = client.post("/api/v1/sessions/", {"title": "outage"}, format="json").json()["id"]
    warnings = _CountWarnings()
    logging.getLogger("project.cache").addHandler(warnings)
    redis_server.stop()
    counts = {"read": 0, "append": 0, "gateway": 0}
    server_errors = 0
    deadline = time.monotonic() + seconds
    try:
        with fake_upstream():
            i = 0
            while time.monotonic() < deadline:
                answers = {
                    "read": client.get(f"/api/v1/sessions/{session_id}/messages/").status_code,
                    "append": client.post(
                        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": f"step {i}"},
                        format="json",
                    ).status_code,
                    "gateway": _post_gateway(key, _turn(f"outage call {i} {uuid.uuid4().hex}", stream=False)).status_code,
                }  # fmt: skip
                for kind, status in answers.items():
                    counts[kind] += 1
                    server_errors += status >= 500
                i += 1
    finally:
        logging.getLogger("project.cache").removeHandler(warnings)
        redis_server.start()
    stored = Message.objects.filter(session_id=session_id).count()
    print(
        f"redis down {seconds:g} s: {sum(counts.values())} requests ({counts['read']} reads, {counts['append']} appends "
        f"[{stored} stored], {counts['gateway']} gateway calls), 5xx: {server_errors}, cache warnings logged: "
        f"{warnings.count}"
    )


def start_worker(queue: str, log_path: Path, *, concurrency: int = 1, **extra_env: str) -> subprocess.Popen:
    """`celery worker` on the bench's database and broker, consuming `queue` (and sending there:
    COMPACTOR_CELERY_QUEUE), named faults-bench@<host> however often it is started again.
    Returns once it logged " ready."."""
    from gateway_bench import worker_database_url

    env = {**os.environ, "DATABASE_URL": worker_database_url(), "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": "",
           "COMPACTOR_CELERY_QUEUE": queue, **extra_env}  # fmt: skip
    command = [sys.executable, "-m", "celery", "-A", "project", "worker", f"--concurrency={concurrency}", "-Q", queue,
               "-n", "faults-bench@%h", "--without-gossip", "--without-mingle", "--loglevel=INFO"]  # fmt: skip
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while " ready." not in log_path.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the worker did not start:\n{log_path.read_text()[-2000:]}")
        time.sleep(0.05)
    return process


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def stop_worker(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@contextlib.contextmanager
def worker(queue: str, log_path: Path) -> Iterator[None]:
    process = start_worker(queue, log_path)
    try:
        yield
    finally:
        stop_worker(process)


def _compactable_session(client, title: str) -> str:
    overrides = {"keep_recent_tokens": 400}  # a small session that still has something to compact
    created = client.post("/api/v1/sessions/", {"title": title, "compaction_settings": overrides}, format="json")
    session_id = created.json()["id"]
    path = f"/api/v1/sessions/{session_id}/messages/"
    for i in range(6):
        client.post(path, {"role": "user", "content": f"step {i}: " + "work words " * 80}, format="json")
        client.post(path, {"role": "assistant", "content": f"done {i}: " + "reply words " * 80}, format="json")
    return session_id


def bench_restart(client, *, running: int, queued: int) -> None:
    """SIGKILL a worker (concurrency = `running`) while `running` jobs are inside their summary
    call and `queued` wait; start it again after 1 s (make serve's supervisor); time when the new
    worker is ready and when each job starts again, with beat's sweeper running at its interval."""
    from django.conf import settings

    from compaction import services
    from compaction.models import Compaction, Status
    from project.celery import app as celery_app
    from tests.e2e.conftest import VALID_SUMMARY
    from tests.fake_anthropic import FakeAnthropic, Step

    queue = f"faults-bench-{uuid.uuid4().hex[:8]}"
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    log = Path(settings.VAR_DIR) / "faults-bench-restart.log"
    stop = threading.Event()

    def sweeper() -> None:  # beat's schedule
        from django.db import connection

        while not stop.wait(settings.COMPACTION_SWEEP_SECONDS):
            with contextlib.suppress(Exception):
                services.compaction_sweep_stuck()
        connection.close()

    process = None
    try:
        with FakeAnthropic(default=Step.success(VALID_SUMMARY)) as llm:
            llm.push(*[Step.success(VALID_SUMMARY, delay=120) for _ in range(running)])  # the killed attempts
            env = {"ANTHROPIC_API_KEY": "sk-ant-faults-bench", "ANTHROPIC_BASE_URL": llm.base_url}
            sessions = [_compactable_session(client, f"restart {i}") for i in range(running + queued)]
            process = start_worker(queue, log, concurrency=running, **env)
            ids = [client.post(f"/api/v1/sessions/{sid}/compactions/", {}, format="json").json()["id"]
                   for sid in sessions]  # fmt: skip
            deadline = time.monotonic() + 60
            while len(llm.requests) < running:
                if time.monotonic() > deadline:
                    raise RuntimeError("the jobs never reached their summary call")
                time.sleep(0.05)
            sweeping = threading.Thread(target=sweeper, daemon=True)
            sweeping.start()
            os.kill(process.pid, 9)  # SIGKILL: its pool processes die with it (PDEATHSIG)
            process.wait(10)
            killed_wall = time.time()
            killed = time.monotonic()
            interrupted = {str(j) for j in Compaction.objects.filter(pk__in=ids, status=Status.RUNNING).values_list("pk", flat=True)}  # fmt: skip
            time.sleep(1.0)
            process = start_worker(queue, log, concurrency=running, **env)
            ready = time.monotonic() - killed
            start_cpu = cpu_seconds(process.pid)
            load_at_start = load_average()
            started: dict[str, float] = {}
            requeued: dict[str, float] = {}  # an interrupted job back in the queue (or running again)
            while len(started) < len(ids) and time.monotonic() - killed < 120:
                for job in Compaction.objects.filter(pk__in=ids):
                    moment = job.started_at or job.finished_at
                    if str(job.pk) not in started and moment is not None and moment.timestamp() > killed_wall:
                        started[str(job.pk)] = moment.timestamp() - killed_wall
                    if (
                        str(job.pk) in interrupted
                        and str(job.pk) not in requeued
                        and (job.status != Status.RUNNING or str(job.pk) in started)
                    ):
                        requeued[str(job.pk)] = time.time() - killed_wall
                time.sleep(0.05)
        again = sorted(v for k, v in started.items() if k in interrupted)
        waited = sorted(v for k, v in started.items() if k not in interrupted)
        missing = len(ids) - len(started)
        figures = lambda values: ", ".join(f"{v:.1f}" for v in values) or "-"  # noqa: E731
        print(
            f"worker restart (SIGKILL, {running} running + {queued} queued, concurrency {running}, restarted after 1 s; "
            f"lease {settings.COMPACTION_LEASE_SECONDS} s, sweep every {settings.COMPACTION_SWEEP_SECONDS} s): "
            f"ready {ready:.1f} s after the kill (its start: {start_cpu:.2f} s of CPU; load average {load_at_start}); "
            f"queued jobs started after {figures(waited)} s; interrupted jobs "
            f"back in the queue after {figures(sorted(requeued.values()))} s, started again after {figures(again)} s"
            + (f"; {missing} not started within 120 s" if missing else "")
        )
    finally:
        stop.set()
        if process is not None:
            stop_worker(process)
        celery_app.conf.task_default_queue = previous


def bench_broker(redis_server: PrivateRedis, client) -> None:
    import redis
    from django.conf import settings

    from compaction import services
    from compaction.models import IN_FLIGHT, Compaction
    from project.celery import app as celery_app

    settings.COMPACTION_REQUEUE_QUEUED_SECONDS = 5
    queue = f"faults-bench-{uuid.uuid4().hex[:8]}"
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    broker = redis.Redis.from_url(redis_server.url)
    try:
        session_id = _compactable_session(client, "lost")
        job_id = client.post(f"/api/v1/sessions/{session_id}/compactions/", {}, format="json").json()["id"]
        assert broker.llen(queue) == 1, "the job's message did not reach the broker"
        broker.delete(queue)  # the message is lost
        lost_at = time.monotonic()
        with worker(queue, Path(settings.VAR_DIR) / "faults-bench-worker.log"):
            ready_at = time.monotonic()
            while time.monotonic() - lost_at < 120:
                services.compaction_sweep_stuck()  # beat's job, every second here
                job = Compaction.objects.get(pk=job_id)
                if job.status not in IN_FLIGHT:
                    break
                time.sleep(1)
        finished = time.monotonic() - lost_at
        print(
            f"lost broker message: job {job.status} {finished:.1f} s after its message was deleted (re-sent after "
            f"{settings.COMPACTION_REQUEUE_QUEUED_SECONDS} s; the worker was ready after {ready_at - lost_at:.1f} s)"
        )
    finally:
        celery_app.conf.task_default_queue = previous
        broker.delete(queue)
        broker.close()


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _gunicorn_workers(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children")
    return [int(pid) for pid in children.read_text().split()] if children.exists() else []


def bench_memory(redis_server: PrivateRedis, key: str, *, seconds: float, clients: int, web_env: list[str]) -> None:
    """gunicorn as deployed (deploy/gunicorn.conf.py, 2 processes × 32 threads) on the bench's
    database, `clients` agents for `seconds`: each appends through the REST API and calls the
    gateway (/anthropic/v1/messages, a stand-in upstream) with its whole history, which grows by two
    messages of ~2 KB a call (a new conversation past 300 messages). Prints each web process's
    resident memory after start-up, after the load and what /metrics reports."""
    import http.client

    from django.conf import settings
    from gateway_bench import worker_database_url

    from tests.gateway.upstream import FakeUpstream, Reply

    port = free_port()
    token = "faults-bench-metrics-token-0123456789"
    metrics_dir = Path(tempfile.mkdtemp(prefix="faults-bench-prom-"))
    fake = FakeUpstream().start()
    fake.reply = lambda rec: Reply(text="Done: the step ran and its output was read; next step follows.")
    env = {**os.environ, "DATABASE_URL": worker_database_url(), "REDIS_URL": redis_server.url, "DEBUG": "0",
           "SECRET_KEY": "faults-bench-secret-" + "x" * 40, "ALLOWED_HOSTS": "127.0.0.1", "PORT": str(port),
           "WEB_ACCESS_LOG": "0", "COMPACTOR_UPSTREAM_URL": fake.url, "COMPACTOR_UPSTREAM_API_KEY": "upstream-secret",
           "COMPACTOR_METRICS_TOKEN": token, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
           "COMPACTOR_API_THROTTLE_RATE": "off"}  # fmt: skip
    env.update(item.split("=", 1) for item in web_env)
    log = Path(settings.VAR_DIR) / "faults-bench-gunicorn.log"
    with open(log, "w") as out:
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py",
                                "project.wsgi:application"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip

    def call(method: str, path: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            data = json.dumps(body).encode() if body is not None else None
            connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError):
                if call("GET", "/healthz")[0] == 200 and len(_gunicorn_workers(web.pid)) >= 2:
                    break
            if time.monotonic() > deadline or web.poll() is not None:
                raise RuntimeError(f"gunicorn did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.2)
        time.sleep(2)  # both workers warmed up
        started = {pid: _rss_bytes(pid) for pid in _gunicorn_workers(web.pid)}
        auth = {"Authorization": f"Bearer {key}"}
        statuses: dict[int, int] = {}
        lock = threading.Lock()
        stop_at = time.monotonic() + seconds

        def agent(n: int) -> None:
            session_id = None
            history: list[dict] = []
            i = 0
            while time.monotonic() < stop_at:
                if session_id is None or len(history) >= 300:
                    status, body = call("POST", "/api/v1/sessions/", {"title": f"memory {n}"}, auth)
                    session_id, history = json.loads(body)["id"], []
                text = f"agent {n} step {i}: " + " ".join(f"word{(i * 7 + j) % 997}" for j in range(300))
                status, _ = call("POST", f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": text},
                                 auth)  # fmt: skip
                history += [{"role": "user", "content": text}]
                gateway, _ = call("POST", "/anthropic/v1/messages",
                                  {"model": "bench-model", "max_tokens": 64, "messages": history},
                                  {"x-api-key": key})  # fmt: skip
                history += [{"role": "assistant", "content": f"Done with step {i}. " + text[:1500]}]
                with lock:
                    for code in (status, gateway):
                        statuses[code] = statuses.get(code, 0) + 1
                i += 1

        threads = [threading.Thread(target=agent, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(1)
        after = {pid: _rss_bytes(pid) for pid in _gunicorn_workers(web.pid)}
        status, body = call("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
        reported = [line for line in body.decode().splitlines() if line.startswith("compactor_web_process_resident")]
        mb = lambda n: f"{n / 2**20:.0f} MB"  # noqa: E731
        print(
            f"web memory ({clients} agents × {seconds:g} s, REST appends + gateway calls resending their history; "
            f"{sum(statuses.values())} requests, statuses {dict(sorted(statuses.items()))}"
            + (f"; env {' '.join(web_env)}" if web_env else "")
            + "): "
            + "; ".join(
                f"pid {pid}: {mb(rss)} after start-up → {mb(after.get(pid, 0))} after the load"
                for pid, rss in started.items()
            )  # fmt: skip
            + (f"; restarted since: {sorted(set(after) - set(started))}" if set(after) - set(started) else "")
        )
        print("  /metrics: " + ("; ".join(reported) if reported else "no compactor_web_process_resident_* series"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(web.pid, 15)
        with contextlib.suppress(subprocess.TimeoutExpired):
            web.wait(30)
        if web.poll() is None:
            os.killpg(web.pid, 9)
        fake.stop()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def bench_slow_clients(redis_server: PrivateRedis, key: str, *, slow: int, requests: int) -> None:
    """gunicorn as deployed on the bench's database and Redis; bench/slow_clients_bench.py's round:
    `requests` ordinary requests alone, then while `slow` connections hold a request body."""
    from django.conf import settings
    from gateway_bench import worker_database_url
    from slow_clients_bench import slow_body_round

    from tests.hardening.servers import start_gunicorn, stop

    port = free_port()
    idle_timeout = 10.0  # deploy/gunicorn.conf.py's WEB_READ_IDLE_TIMEOUT, stated for the run
    env = {**os.environ, "DATABASE_URL": worker_database_url(), "REDIS_URL": redis_server.url, "DEBUG": "0",
           "SECRET_KEY": "faults-bench-secret-" + "x" * 40, "ALLOWED_HOSTS": "127.0.0.1", "PORT": str(port),
           "WEB_ACCESS_LOG": "0", "WEB_READ_IDLE_TIMEOUT": str(idle_timeout),
           "COMPACTOR_API_THROTTLE_RATE": "off"}  # fmt: skip
    env.pop("DJANGO_SETTINGS_MODULE", None)
    web = start_gunicorn(env, Path(settings.VAR_DIR) / "faults-bench-slow-gunicorn.log", timeout=120)
    try:
        print(f"slow clients (gunicorn as deployed, {slow} slow-body connections, {requests} ordinary requests "
              f"per round; load average {load_average()}):")  # fmt: skip
        slow_body_round(port, key, slow=slow, requests=requests, idle_timeout=idle_timeout)
    finally:
        stop(web, timeout=5)


def bench_pgrestart(redis_server: PrivateRedis, *, writers: int, jobs: int, seconds_before: float,
                    seconds_after: float) -> None:  # fmt: skip
    """A real PostgreSQL restart under load: a cluster of the bench's own (tests/hardening/servers.
    PrivatePostgres), gunicorn as deployed (2 × 32 threads), a Celery worker (concurrency 2) and
    beat's sweeper on it; `writers` agents append through the REST API while `jobs` compactions
    (each summary call held 1 s by a stand-in Messages API) are queued and running, and the cluster is
    restarted (`pg_ctl restart -m fast`). Prints the answers by status (500: must be 0), how many
    answers sent after the restart failed, acknowledged appends against rows stored, and how long
    after the database's return every job in flight finished."""
    import http.client

    import psycopg

    from tests.e2e.conftest import VALID_SUMMARY
    from tests.fake_anthropic import FakeAnthropic, Step
    from tests.hardening.servers import PrivatePostgres

    cluster = PrivatePostgres().start()
    web = worker_process = None
    folder = Path(tempfile.mkdtemp(prefix="faults-bench-pg-"))
    stop = threading.Event()
    try:
        url = cluster.create_database("compactor")
        port = free_port()
        queue = "celery"  # the default queue: the Redis is the bench's own, and every version sends there
        llm = FakeAnthropic(default=Step.success(VALID_SUMMARY, delay=1)).start()
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_server.url, "DEBUG": "0",
               "SECRET_KEY": "faults-bench-secret-" + "x" * 40, "ALLOWED_HOSTS": "127.0.0.1", "PORT": str(port),
               "WEB_ACCESS_LOG": "0", "COMPACTOR_VAR_DIR": str(folder), "COMPACTOR_API_THROTTLE_RATE": "off",
               "PROMETHEUS_MULTIPROC_DIR": str(folder / "prometheus"), "COMPACTOR_CELERY_QUEUE": queue,
               "ANTHROPIC_API_KEY": "sk-ant-faults-bench", "ANTHROPIC_BASE_URL": llm.base_url}  # fmt: skip
        env.pop("DJANGO_SETTINGS_MODULE", None)

        def manage(*args: str) -> str:
            done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=600)  # fmt: skip
            if done.returncode:
                raise RuntimeError(done.stderr[-3000:])
            return done.stdout

        manage("migrate", "--noinput", "-v", "0")
        key = manage("shell", "-c", "from django.contrib.auth import get_user_model; from sessions.models import "
                     "ApiKey; u = get_user_model().objects.create_user('bench'); "
                     "print('KEY', ApiKey.objects.create_key(owner=u, name='b')[1])").split("KEY ")[-1].strip()  # fmt: skip
        with open(folder / "gunicorn.log", "w") as out:
            web = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py",
                                    "project.wsgi:application"], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        worker_log = folder / "worker.log"
        with open(worker_log, "w") as out:
            worker_process = subprocess.Popen([sys.executable, "-m", "celery", "-A", "project", "worker",
                                               "--concurrency=2", "-Q", queue, "--without-mingle", "--without-gossip",
                                               "--loglevel=INFO"], cwd=ROOT, env=env, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

        def call(method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                data = json.dumps(body).encode() if body is not None else None
                conn.request(method, path, body=data, headers={"Content-Type": "application/json",
                                                               "Authorization": f"Bearer {key}"})  # fmt: skip
                response = conn.getresponse()
                return response.status, response.read()
            finally:
                conn.close()

        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(OSError):
                if call("GET", "/healthz")[0] == 200 and " ready." in worker_log.read_text():
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn or the worker did not start")
            time.sleep(0.2)

        def sweeper() -> None:  # beat's schedule; a broken connection dropped before each run, as Celery does per task
            beat_env = {**env, "DJANGO_SETTINGS_MODULE": "project.settings"}
            code = ("import django, time; django.setup(); from django.conf import settings; "
                    "import project.celery; from django.db import close_old_connections; from compaction import services\nwhile True:\n    time.sleep(settings.COMPACTION_SWEEP_SECONDS)\n"
                    "    try:\n        close_old_connections()\n        services.compaction_sweep_stuck()\n"
                    "    except Exception: pass")  # fmt: skip
            beat = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=beat_env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            stop.wait()
            beat.kill()
            beat.wait(10)

        threading.Thread(target=sweeper, daemon=True).start()
        sessions = [json.loads(call("POST", "/api/v1/sessions/", {"title": f"w{n}"})[1])["id"] for n in range(writers)]
        job_sessions = []
        for n in range(jobs):
            sid = json.loads(call("POST", "/api/v1/sessions/", {"title": f"job {n}",
                                  "compaction_settings": {"keep_recent_tokens": 400}})[1])["id"]  # fmt: skip
            for i in range(6):
                call("POST", f"/api/v1/sessions/{sid}/messages/", {"role": "user", "content": f"{i} " + "work " * 80})
                call(
                    "POST",
                    f"/api/v1/sessions/{sid}/messages/",
                    {"role": "assistant", "content": f"{i} " + "done " * 80},
                )
            job_sessions.append(sid)

        answers: list[tuple[float, int]] = []
        acked = dict.fromkeys(sessions, 0)
        lock = threading.Lock()

        def writer(sid: str) -> None:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    status, _ = call("POST", f"/api/v1/sessions/{sid}/messages/",
                                     {"role": "user", "content": f"step {uuid.uuid4().hex}"})  # fmt: skip
                except OSError:
                    status = -1
                with lock:
                    answers.append((sent, status))
                    acked[sid] += status == 201

        threads = [threading.Thread(target=writer, args=(sid,)) for sid in sessions]
        for thread in threads:
            thread.start()
        time.sleep(seconds_before / 2)
        for sid in job_sessions:
            call("POST", f"/api/v1/sessions/{sid}/compactions/", {})
        time.sleep(seconds_before / 2)
        down = time.monotonic()
        restart = cluster.restart()
        up = time.monotonic()
        time.sleep(seconds_after)
        stop.set()
        for thread in threads:
            thread.join(60)
        # Every job in flight at the restart: how long after the database's return until it finished.
        finished_after = None
        with psycopg.connect(url, autocommit=True) as conn:
            while time.monotonic() - up < 120:
                rows = conn.execute(
                    "SELECT count(*) FROM compaction_compaction WHERE status IN ('queued', 'running')"
                ).fetchone()
                if rows[0] == 0:
                    break
                time.sleep(0.1)
            # From the rows: when each job finished, after the database's return (wall clock).
            up_wall = time.time() - (time.monotonic() - up)
            ends = [row[0].timestamp() - up_wall for row in conn.execute(
                "SELECT finished_at FROM compaction_compaction WHERE finished_at IS NOT NULL").fetchall()]  # fmt: skip
            if rows[0] == 0:
                finished_after = max(ends, default=0.0)
            timeline = [
                tuple(None if t is None else round(t.timestamp() - up_wall, 1) for t in row[:3]) + (row[3],)
                for row in conn.execute("SELECT created_at, first_started_at, finished_at, attempts "
                                        "FROM compaction_compaction ORDER BY created_at").fetchall()
            ]  # fmt: skip
            outcomes = dict(conn.execute("SELECT status, count(*) FROM compaction_compaction GROUP BY 1").fetchall())
            stored = dict(
                conn.execute("SELECT session_id::text, count(*) FROM agent_sessions_message GROUP BY 1").fetchall()
            )
        statuses: dict[int, int] = {}
        for _, status in answers:
            statuses[status] = statuses.get(status, 0) + 1
        late_failures = sum(1 for sent, status in answers if sent >= up and status != 201)
        lost = sum(max(0, acked[sid] - stored.get(sid, 0)) for sid in sessions)
        extra = sum(max(0, stored.get(sid, 0) - acked[sid]) for sid in sessions)
        jobs_line = (f"{finished_after:.1f} s" if finished_after is not None else "not within 120 s") + (
            " (each: " + ", ".join(f"{end:.1f}" for end in sorted(ends)) + " s)")  # fmt: skip
        print(
            f"postgres restart ({writers} writers, {jobs} compactions in flight; pg_ctl restart -m fast took "
            f"{restart:.2f} s): answers {dict(sorted(statuses.items()))} (500s: {statuses.get(500, 0)}); sent after "
            f"the restart and not 201: {late_failures}; acknowledged appends {sum(acked.values())}, lost {lost}, "
            f"stored beyond the acknowledged {extra}; every job in flight finished {jobs_line} after the database's "
            f"return (jobs {outcomes}); down {up - down:.2f} s"
        )
        print("  jobs (s from the database's return: queued, first started, finished, attempts): " + "; ".join(
            f"{c}, {st}, {f}, {a}" for c, st, f, a in timeline))  # fmt: skip
        if os.environ.get("FAULTS_BENCH_LOG"):
            print(f"  database back at {datetime.fromtimestamp(up_wall):%H:%M:%S.%f}; worker log:")
            for line in (folder / "worker.log").read_text().splitlines():
                if line.startswith("[20"):
                    print("   ", line[:200])
    finally:
        stop.set()
        for process in (web, worker_process):
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, 15)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(30)
                if process.poll() is None:
                    os.killpg(process.pid, 9)
        with contextlib.suppress(NameError):
            llm.stop()
        cluster.destroy()
        shutil.rmtree(folder, ignore_errors=True)


def bench_idempotency(client, key: str, repeats: int) -> None:
    from django.db import connection
    from rest_framework.test import APIClient

    from sessions.models import Message

    session_id = client.post("/api/v1/sessions/", {"title": "retries"}, format="json").json()["id"]
    path = f"/api/v1/sessions/{session_id}/messages/"
    body = {"role": "user", "content": "the one message"}
    statuses = [
        client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k-seq").status_code for _ in range(repeats)
    ]
    stored = Message.objects.filter(session_id=session_id).count()
    line = f"idempotency: {repeats} identical POSTs, one key → {stored} stored (answers {sorted(set(statuses))})"
    if connection.vendor == "postgresql":
        barrier = threading.Barrier(8)
        answers: list[int] = []

        def send() -> None:
            other = APIClient()
            other.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            barrier.wait()
            answers.append(
                other.post(
                    path, {"role": "user", "content": "raced"}, format="json", HTTP_IDEMPOTENCY_KEY="k-race"
                ).status_code
            )
            connection.close()

        threads = [threading.Thread(target=send) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        raced = Message.objects.filter(session_id=session_id, content="raced").count()
        line += f"; 8 concurrent → {raced} stored (answers {sorted(set(answers))})"
    print(line)


def chained_log(path: Path, lines: int) -> None:
    previous = None
    with open(path, "w") as handle:
        for i in range(lines):
            current = str(uuid.uuid4())
            entry = {"type": "user", "uuid": current, "parentUuid": previous, "sessionId": "bench",
                     "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": f"line {i} of the log"}}  # fmt: skip
            handle.write(json.dumps(entry) + "\n")
            previous = current


def bench_imports(user, sizes: list[int]) -> None:
    from compaction.importing import transcript_import

    folder = Path(tempfile.mkdtemp(prefix="faults-bench-import-"))
    rows = []
    try:
        for lines in sizes:
            path = folder / f"chained-{lines}.jsonl"
            chained_log(path, lines)
            started = time.perf_counter()
            report = transcript_import(owner=user, path=path)
            elapsed = time.perf_counter() - started
            rows.append(f"{lines:,} lines {elapsed:.1f} s ({elapsed / lines * 10_000:.2f} s per 10k, "
                        f"{report.messages} message)")  # fmt: skip
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("chained import: " + "; ".join(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-seconds", type=float, default=3.0, help="how long Redis stays down")
    parser.add_argument("--stream-calls", type=int, default=2, help="calls per upstream fault")
    parser.add_argument("--lines", default="10000,40000,160000", help="chained import sizes")
    parser.add_argument("--only", default="streams,redis,broker,restart,slowclients,pgrestart,idempotency,imports")
    parser.add_argument("--running", type=int, default=2, help="restart: jobs running when the worker is killed")
    parser.add_argument("--queued", type=int, default=2, help="restart: jobs queued when the worker is killed")
    parser.add_argument("--slow", type=int, default=70, help="slowclients: connections holding a request body")
    parser.add_argument("--requests", type=int, default=100, help="slowclients: ordinary requests per round")
    parser.add_argument("--writers", type=int, default=32, help="pgrestart: agents appending at once")
    parser.add_argument("--jobs", type=int, default=4, help="pgrestart: compactions in flight at the restart")
    parser.add_argument("--memory-seconds", type=float, default=60.0, help="memory: how long the load runs")
    parser.add_argument("--memory-clients", type=int, default=32, help="memory: agents at once")
    parser.add_argument("--web-env", action="append", default=[], help="memory: NAME=VALUE for gunicorn (repeat)")
    args = parser.parse_args()
    parts = set(args.only.split(","))

    redis_server = PrivateRedis()
    redis_server.start()
    os.environ["REDIS_URL"] = redis_server.url  # cache and broker, before the settings are read
    try:
        django_setup(prefix="compactor-faults-bench-")
        # The faults are the point: their per-request log lines would bury the figures.
        for name in ("django.request", "gateway", "compaction.services", "celery"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        with bench_database(celery_eager=False):
            user, key, client = api_user(username="faults-bench")
            if "streams" in parts:
                bench_streams(key, args.stream_calls)
            if "redis" in parts:
                bench_redis(redis_server, client, key, args.redis_seconds)
            if "broker" in parts:
                bench_broker(redis_server, client)
            if "restart" in parts:
                bench_restart(client, running=args.running, queued=args.queued)
            if "slowclients" in parts:
                bench_slow_clients(redis_server, key, slow=args.slow, requests=args.requests)
            if "pgrestart" in parts:
                bench_pgrestart(redis_server, writers=args.writers, jobs=args.jobs, seconds_before=4.0,
                                seconds_after=6.0)  # fmt: skip
            if "memory" in parts:
                bench_memory(redis_server, key, seconds=args.memory_seconds, clients=args.memory_clients,
                             web_env=args.web_env)  # fmt: skip
            if "idempotency" in parts:
                bench_idempotency(client, key, repeats=20)
            if "imports" in parts:
                bench_imports(user, [int(n) for n in args.lines.split(",") if n])
    finally:
        redis_server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
