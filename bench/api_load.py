"""API load benchmark: append and context GET against gunicorn on PostgreSQL, beside a floor.

    .venv/bin/python bench/api_load.py [--duration S] [--clients N] [--workers N] [--appends N]
                                       [--single-only | --load-only] [--keep-db]

Needs PostgreSQL: DATABASE_URL names the server (its database name is ignored; default
postgres://root@127.0.0.1:5432/). The bench creates its own database, `compactor_bench`
(dropped first if left over, dropped again at the end), migrates it, creates one user with an
API key, and a table for the floor endpoint. Message bodies are the real messages of the
shared Claude Code transcript 258c7280 (one client replays it into its own session, in order,
so every tool_result follows its tool_use).

1. Single process (Django's test client, no network): the median time of one append through
   the real API view (POST /api/v1/sessions/{id}/messages/, one message) against the floor
   endpoint (POST /bench/floor/: same middleware, DRF parsing and API key authentication, one
   INSERT of the body), their ratio, and the SQL queries per append.
2. Under load: gunicorn `-w WORKERS` (sync workers) on 127.0.0.1, CLIENTS threads each
   sending requests back to back for DURATION seconds per phase: floor, append, context GET
   (sessions of 150 messages). Prints req/s, p50 and p99 latency per phase and the ratios to
   the floor. The server is started and stopped by the bench (its process group is killed at
   the end, whatever happens); every phase stops by itself.

Issue 8 targets: one append <= 3x the floor with <= 5 queries; under 32 clients >= 300 req/s
(or >= 0.6x the floor in the same run).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TRANSCRIPT = Path("/work/shared/data/transcripts/claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl")
DB_NAME = "compactor_bench"
CONTEXT_SESSIONS = 4
CONTEXT_MESSAGES = 150


def server_url(database_url: str | None, name: str) -> str:
    parts = urlsplit(database_url or "postgres://root@127.0.0.1:5432/postgres")
    if parts.scheme not in ("postgres", "postgresql"):
        raise SystemExit(f"api_load needs PostgreSQL; DATABASE_URL is {parts.scheme}://…")
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def recreate_database(admin_url: str, *, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        # Connections left by an interrupted run would block DROP DATABASE.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB_NAME],
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}"')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def transcript_messages() -> list[dict]:
    from compaction import services
    from compaction.core.transcripts.claude_code import read_claude_code

    transcript = read_claude_code(TRANSCRIPT)
    return [
        {"role": m["role"], "content": m["content"]} for m in services.transcript_messages_for_api(transcript.messages)
    ]


def setup_data(messages: list[dict], clients: int):
    """User, API key, the floor table, one append session per client, context sessions."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from sessions import services as session_services
    from sessions.models import ApiKey

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_floor (id bigserial PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz)"
        )
    user = get_user_model().objects.create_user(username="bench", password=None)
    _, key = ApiKey.objects.create_key(owner=user, name="bench")

    def new_session(title: str):
        # Auto-compaction off: the append path is measured, not compaction jobs.
        return session_services.session_create(
            owner=user,
            title=title,
            agent="claude-code",
            model="claude-sonnet-4-5",
            compaction_settings={"auto_compact": False},
        )

    append_sessions = [str(new_session(f"load {i}").pk) for i in range(clients * 2)]
    context_sessions = []
    for i in range(CONTEXT_SESSIONS):
        session = new_session(f"context {i}")
        session_services.messages_append(session=session, messages=messages[:CONTEXT_MESSAGES])
        context_sessions.append(str(session.pk))
    return user, key, append_sessions, context_sessions


def single_process(user, key: str, messages: list[dict], appends: int) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from sessions import services as session_services

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    session = session_services.session_create(owner=user, title="single", compaction_settings={"auto_compact": False})
    path = f"/api/v1/sessions/{session.pk}/messages/"
    bodies = [json.dumps(m) for m in messages[:appends]]

    def post(url: str, body: str) -> float:
        started = time.perf_counter()
        response = client.post(url, body, content_type="application/json")
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 201:
            raise SystemExit(f"{url} answered {response.status_code}: {response.content[:300]!r}")
        return elapsed

    client.post("/bench/floor/", bodies[0], content_type="application/json")  # warm up (imports, key cache)
    append_ms, floor_ms, queries = [], [], []
    for body in bodies:
        with CaptureQueriesContext(connection) as captured:
            append_ms.append(post(path, body))
        queries.append(len(captured.captured_queries))
        floor_ms.append(post("/bench/floor/", body))
    a, f = statistics.median(append_ms), statistics.median(floor_ms)
    print(f"single process, {len(bodies)} appends of the transcript's messages (Django test client, no network):")
    print(f"  append  median {a:6.2f} ms   floor median {f:6.2f} ms   append / floor = {a / f:.1f}  (target <= 3)")
    print(
        f"  queries per append: median {statistics.median(queries):.0f}, max {max(queries)}, "
        f"first {queries[0]}  (target <= 5)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(port: int, key: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/api/v1/sessions/", headers={"Authorization": f"Bearer {key}"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer within 60 s")


def run_phase(port: int, clients: int, duration: float, make_request) -> tuple[float, list[float], int]:
    """(requests per second, latencies in ms, non-2xx count) of CLIENTS threads for DURATION s."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    deadline = time.monotonic() + duration

    def worker(index: int) -> None:
        n = 0
        while time.monotonic() < deadline:
            method, path, body = make_request(index, n)
            n += 1
            started = time.perf_counter()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                conn.close()
                ok = 200 <= response.status < 300
            except OSError:
                ok = False
            latencies[index].append((time.perf_counter() - started) * 1000)
            if not ok:
                errors[index] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration + 120)
    elapsed = time.monotonic() - started
    flat = [x for per in latencies for x in per]
    return len(flat) / elapsed, flat, sum(errors)


KEY = ""


def under_load(
    args, env: dict, key: str, messages: list[dict], append_sessions: list[str], context_sessions: list[str]
):
    global KEY
    KEY = key
    port = free_port()
    command = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "project.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(args.workers),
        "--worker-class",
        "sync",
        "--backlog",
        "2048",
        "--timeout",
        "120",
        "--log-level",
        "warning",
        "--chdir",
        str(ROOT),
    ]
    log = tempfile.NamedTemporaryFile(prefix="api-load-gunicorn-", suffix=".log", delete=False)
    server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_up(port, key)
        bodies = [json.dumps(m) for m in messages]
        per_client = len(bodies)
        floor_body = bodies[1]

        def floor(index: int, n: int):
            return "POST", "/bench/floor/", floor_body

        def append(index: int, n: int):
            # Each client replays the transcript into its own session; past the end, a second one.
            session = append_sessions[index * 2 + (n // per_client) % 2]
            return "POST", f"/api/v1/sessions/{session}/messages/", bodies[n % per_client]

        def context(index: int, n: int):
            return "GET", f"/api/v1/sessions/{context_sessions[index % len(context_sessions)]}/context/", None

        print(
            f"under load: gunicorn -w {args.workers} (sync), {args.clients} clients, {args.duration:g} s per phase, "
            f"127.0.0.1:{port}"
        )
        results = {}
        for name, make in (("floor (1-row POST)", floor), ("append (POST message)", append), ("context GET", context)):
            rps, lat, errors = run_phase(port, args.clients, args.duration, make)
            results[name] = (rps, percentile(lat, 0.5), percentile(lat, 0.99))
            print(
                f"  {name:22} {rps:7.1f} req/s   p50 {results[name][1]:7.1f} ms   p99 {results[name][2]:7.1f} ms"
                + (f"   {errors} errors" if errors else "")
            )
        floor_rps, floor_p50, _ = results["floor (1-row POST)"]
        for name in ("append (POST message)", "context GET"):
            rps, p50, _ = results[name]
            print(f"  {name:22} {rps / floor_rps:5.2f}x the floor's req/s, p50 {p50 / floor_p50:5.1f}x the floor's")
        print("  (targets for append: >= 300 req/s or >= 0.6x the floor's req/s)")
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            server.wait(timeout=10)
        log.close()
        if server.returncode not in (0, -signal.SIGTERM):
            tail = Path(log.name).read_text(errors="replace")[-2000:]
            print(f"  gunicorn exited with {server.returncode}; log {log.name}:\n{tail}")
        Path(log.name).unlink(missing_ok=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per load phase")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--appends", type=int, default=200, help="appends timed in the single-process mode")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--single-only", action="store_true")
    mode.add_argument("--load-only", action="store_true")
    parser.add_argument("--keep-db", action="store_true", help="leave compactor_bench in place at the end")
    args = parser.parse_args()

    admin_url = server_url(os.environ.get("DATABASE_URL"), "postgres")
    bench_url = server_url(os.environ.get("DATABASE_URL"), DB_NAME)
    try:
        recreate_database(admin_url)
    except Exception as exc:  # noqa: BLE001 - any connection problem: say so and skip
        print(f"api_load: PostgreSQL not reachable ({type(exc).__name__}); skipped")
        return 0
    var_dir = tempfile.mkdtemp(prefix="compactor-api-load-")
    (Path(var_dir) / "staticfiles").mkdir()  # the API serves no static file; quiets WhiteNoise
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "DJANGO_SETTINGS_MODULE": "bench.api_load_settings",
        "DEBUG": "0",  # production-like: no query log, no debug pages
        "SECRET_KEY": "api-load-bench-not-a-secret",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "COMPACTOR_VAR_DIR": var_dir,
    }
    os.environ.update(env)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        messages = transcript_messages()
        user, key, append_sessions, context_sessions = setup_data(messages, args.clients)
        if not args.load_only:
            single_process(user, key, messages, min(args.appends, len(messages)))
        connections.close_all()
        if not args.single_only:
            under_load(args, env, key, messages, append_sessions, context_sessions)
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # noqa: BLE001 - Django may not be set up yet
            pass
        if not args.keep_db:
            recreate_database(admin_url, drop_only=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
