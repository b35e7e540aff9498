"""API load benchmark: append and context GET against gunicorn on PostgreSQL, beside a floor.

    .venv/bin/python bench/api_load.py [--duration S] [--clients N] [--workers N] [--rounds N] [--slices K]
        [--spread] [--keep-db] [--profile DIR]

Needs PostgreSQL: DATABASE_URL names the server (its database name is ignored; default
postgres://root@127.0.0.1:5432/). The bench creates its own database, `compactor_bench` or
the one API_LOAD_DB names (dropped first if left over, dropped again at the end), migrates it,
creates one user with an API key per client (as agents have; the per-key throttle stays on, as
in production), and a table for the floor endpoint. Message bodies are the real messages of the
shared Claude Code transcript 258c7280 (one client replays it into its own session, in order,
so every tool_result follows its tool_use; from its first message, or with --spread from a turn
start of its own, spread over the transcript: its first 80 messages average 3.6 KB, the rest
1.2 KB, so without it every phase measures whichever part the clients have reached together).

gunicorn `-w WORKERS` (sync workers) on 127.0.0.1, CLIENTS threads each sending requests back
to back for DURATION seconds per phase: floor (POST /bench/floor/: same middleware, DRF parsing
and API key authentication, one INSERT of the body; each client posts the transcript's
messages in order, the very bodies its appends send), essential append (POST
/bench/essential/{id}/: the same bodies stored with only what Compactor promises of every message,
its exact token count and search vector, under the session's row lock with the next seq and the
counters bumped, as two prepared plain-SQL round trips: the cost of an append without its
validation, tool pairing, meter and answer; bench/api_load_urls.py), append (POST
/api/v1/sessions/{id}/messages/, one message), context GET (sessions of 150 messages). An untimed warm-up phase of each kind
comes first (each worker loads its tokenizer and caches the key once, not inside a timed phase).
Prints req/s, p50 and p99 latency per phase and the ratios to the floor of the same round;
also the CPU per answered request of the gunicorn processes and of their PostgreSQL backends
(from /proc), and the floor's CPU per request over the phase's: the steadier figure on a shared
machine, where other work moves req/s but not the CPU a request costs; with
--rounds N, the phases run N times and the spread of the ratios is printed; with --slices K the
floor and the two append phases of a round take turns in K slices each, so the machine's drift weighs on
both alike (the steadier ratio when comparing two versions). The server is started
and stopped by the bench (its process group is killed at the end, whatever happens); every phase
stops by itself. The ratios are what to compare: other work on the machine moves the absolute
figures of all phases together.

The cost of one append in one process (time and SQL statements against a one-row floor) is
bench/append_bench.py's.

Targets: under 32 clients >= 300 req/s (or >= 0.6x the floor in the same run). The essential
append is the bound on the second: what any append that counts tokens exactly and indexes for
search costs, with none of the append's checks (0.61-0.64x the floor on the 2-core machine this
was written on, the real append 0.49-0.50x, its CPU per request 1.3x the essential's).
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
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

TRANSCRIPT = CORPUS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
# Its own database, dropped and created by the bench: API_LOAD_DB names another one, so two
# runs on one server (two checkouts) do not drop each other's.
DB_NAME = os.environ.get("API_LOAD_DB", "compactor_bench")
if not DB_NAME.replace("_", "").isalnum():
    raise SystemExit(f"API_LOAD_DB must be a plain database name (letters, digits, _), got {DB_NAME!r}")
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
    """User, one API key per client, the floor table, one append session per client, context sessions."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from sessions import services as session_services
    from sessions.models import ApiKey

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_floor (id bigserial PRIMARY KEY, body jsonb NOT NULL, created_at timestamptz)"
        )
    user = get_user_model().objects.create_user(username="bench", password=None)
    keys = [ApiKey.objects.create_key(owner=user, name=f"bench {i}")[1] for i in range(clients)]

    def new_session(title: str):
        # Auto-compaction off: the append path is measured, not compaction jobs.
        return session_services.session_create(
            owner=user,
            title=title,
            agent="claude-code",
            model="claude-sonnet-4-5",
            compaction_settings={"auto_compact": False},
        )

    append_sessions = [str(new_session(f"load {i}").pk) for i in range(clients)]
    essential_sessions = [str(new_session(f"essential {i}").pk) for i in range(clients)]
    context_sessions = []
    for i in range(CONTEXT_SESSIONS):
        session = new_session(f"context {i}")
        session_services.messages_append(session=session, messages=messages[:CONTEXT_MESSAGES])
        context_sessions.append(str(session.pk))
    return user, keys, append_sessions, essential_sessions, context_sessions


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
    """(answered 2xx per second, latencies in ms, non-2xx count) of CLIENTS threads for DURATION s."""
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
                headers = {"Authorization": f"Bearer {KEYS[index]}", "Content-Type": "application/json"}
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
    return (len(flat) - sum(errors)) / elapsed, flat, sum(errors)


KEYS: list[str] = []  # one per client
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> tuple[int, float] | None:
    """(process group, user + system CPU seconds) of a live process, from /proc (Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[2]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class PhaseTotals:
    """One phase of a round, over its slices."""

    answered: float = 0.0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    web_cpu: float = 0.0
    db_cpu: float = 0.0


class CpuMeter:
    """CPU seconds used by the gunicorn processes (the server's process group) and by the
    PostgreSQL backends of the bench's database. Other work on the machine does not count, so CPU
    per request compares phases more steadily than req/s on a shared machine. Read per process:
    a process that started between two readings counts whole (a backend opened when a worker's
    connection reached its CONN_MAX_AGE), one that ended counts up to the first."""

    def __init__(self, server_group: int, admin_url: str) -> None:
        import psycopg

        self.server_group = server_group
        self.admin = psycopg.connect(admin_url, autocommit=True)

    def read(self) -> tuple[dict[int, float], dict[int, float]]:
        web: dict[int, float] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                found = _cpu_seconds(int(entry.name))
                if found is not None and found[0] == self.server_group:
                    web[int(entry.name)] = found[1]
        rows = self.admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [DB_NAME]).fetchall()
        db = {pid: found[1] for (pid,) in rows if (found := _cpu_seconds(pid)) is not None}
        return web, db

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())

    def close(self) -> None:
        self.admin.close()


def _turn_start(messages: list[dict], index: int) -> bool:
    """A session may begin here: a user message that answers no tool call, or an assistant
    message after a user one (its tool calls are answered by the messages after it)."""
    message = messages[index]
    if message["role"] == "user":
        content = message["content"]
        return isinstance(content, str) or not any(
            isinstance(block, dict) and block.get("type") == "tool_result" for block in content
        )
    return index == 0 or messages[index - 1]["role"] == "user"


def under_load(
    args,
    admin_url: str,
    env: dict,
    keys: list[str],
    messages: list[dict],
    append_sessions: list[str],
    essential_sessions: list[str],
    context_sessions: list[str],
):
    KEYS[:] = keys
    port = free_port()
    command = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "bench.api_load_wsgi:application",
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
        wait_until_up(port, keys[0])
        bodies = [json.dumps(m) for m in messages]
        per_client = len(bodies)
        # Where each client starts in the transcript: all at its first message, or (--spread)
        # at turn starts spread over it, so that at any moment the clients send a mix of the
        # transcript's early long messages and its later short ones instead of the same part.
        starts = [i for i, m in enumerate(messages) if _turn_start(messages, i)] if args.spread else [0]
        offsets = [starts[(k * len(starts)) // args.clients] for k in range(args.clients)]
        floor_sent = offsets[:]

        def floor(index: int, n: int):
            # The same bodies as the appends, in the same order: the floor stores each message
            # as one row, so both phases parse and store the same bytes (a fixed small body made
            # the floor cheaper than storing what the agents send).
            count = floor_sent[index]
            floor_sent[index] += 1
            return "POST", "/bench/floor/", bodies[count % per_client]

        essential_sent = offsets[:]

        def essential(index: int, n: int):
            # The same bodies again, into sessions of their own (seq goes on across phases).
            count = essential_sent[index]
            essential_sent[index] += 1
            return "POST", f"/bench/essential/{essential_sessions[index]}/", bodies[count % per_client]

        sent = offsets[:]  # each client's place in its replay, over all phases

        def append(index: int, n: int):
            # Each client replays the transcript into its own session, on and on across phases; a
            # later pass renames its tool ids (ids are unique per session).
            count = sent[index]
            sent[index] += 1
            body = bodies[count % per_client]
            if count >= per_client:
                body = body.replace('"toolu_', f'"toolu_p{count // per_client}_')
            return "POST", f"/api/v1/sessions/{append_sessions[index]}/messages/", body

        def context(index: int, n: int):
            return "GET", f"/api/v1/sessions/{context_sessions[index % len(context_sessions)]}/context/", None

        phases = (
            ("floor (1-row POST)", floor),
            ("essential append", essential),
            ("append (POST message)", append),
            ("context GET", context),
        )
        print(f"under load: gunicorn -w {args.workers} (sync), {args.clients} clients, 127.0.0.1:{port}")
        warm_up = min(1.0, args.duration)
        for _name, make in phases:
            run_phase(port, args.clients, warm_up, make)
        print(f"  warm-up {warm_up:g} s per phase done; {args.rounds} round(s) of {args.duration:g} s per phase")
        meter = CpuMeter(server.pid, admin_url)
        ratios: dict[str, list[float]] = {name: [] for name, _ in phases[1:]}
        cpu_ratios: dict[str, list[float]] = {name: [] for name, _ in phases[1:]}
        for round_number in range(1, args.rounds + 1):
            results = {}
            totals = {name: PhaseTotals() for name, _ in phases}
            # With --slices K the floor and the two appends take turns, K slices each, so the
            # machine's drift during a round weighs on all alike; the context phase runs whole after.
            order = [phases[:3]] * args.slices + [phases[3:]] if args.slices > 1 else [phases]
            for group in order:
                seconds = args.duration / args.slices if len(group) == 3 and args.slices > 1 else args.duration
                for name, make in group:
                    web_before, db_before = meter.read()
                    started = time.monotonic()
                    rps, lat, errors = run_phase(port, args.clients, seconds, make)
                    elapsed = time.monotonic() - started
                    web_after, db_after = meter.read()
                    total = totals[name]
                    total.answered += rps * elapsed
                    total.seconds += elapsed
                    total.latencies += lat
                    total.errors += errors
                    total.web_cpu += meter.used(web_before, web_after)
                    total.db_cpu += meter.used(db_before, db_after)
            for name, _ in phases:
                total = totals[name]
                rps, errors, answered = total.answered / total.seconds, total.errors, max(1.0, total.answered)
                web_ms, db_ms = total.web_cpu * 1000 / answered, total.db_cpu * 1000 / answered
                lat = total.latencies
                results[name] = (rps, percentile(lat, 0.5), percentile(lat, 0.99), web_ms + db_ms)
                print(
                    f"  {name:22} {rps:7.1f} req/s   p50 {results[name][1]:7.1f} ms   p99 {results[name][2]:7.1f} ms"
                    f"   CPU/req web {web_ms:5.2f} ms + db {db_ms:5.2f} ms" + (f"   {errors} errors" if errors else "")
                )
            floor_rps, floor_p50, _, floor_cpu = results[phases[0][0]]
            for name in ratios:
                rps, p50, _, cpu = results[name]
                ratios[name].append(rps / floor_rps)
                cpu_ratios[name].append(floor_cpu / cpu)
                print(
                    f"  {name:22} {rps / floor_rps:5.2f}x the floor's req/s, p50 {p50 / floor_p50:5.1f}x the floor's, "
                    f"floor's CPU/req / its own {floor_cpu / cpu:5.2f}"
                )
            if args.rounds > 1:
                print(f"  -- end of round {round_number}")
        if args.rounds > 1:
            for name, values in ratios.items():
                print(
                    f"  {name:22} req/s / floor over {args.rounds} rounds: median {statistics.median(values):.2f}, "
                    f"min {min(values):.2f}, max {max(values):.2f}; floor's CPU/req / its own: median "
                    f"{statistics.median(cpu_ratios[name]):.2f}"
                )
        print("  (targets: >= 300 req/s or >= 0.6x the floor's req/s; the essential append is the bound on the second)")
        meter.close()
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
    parser.add_argument("--rounds", type=int, default=1, help="run the three phases this many times")
    parser.add_argument(
        "--spread",
        action="store_true",
        help="start the clients at turns spread over the transcript, not all at its first message",
    )
    parser.add_argument(
        "--slices",
        type=int,
        default=1,
        help="in each round, alternate the floor and append phases in this many slices each (of "
        "DURATION/SLICES seconds): drift of a shared machine then weighs on both alike",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="cProfile the append requests in each gunicorn worker; stats in DIR/worker-<pid>.prof "
        "(read with python -m pstats); the figures of a profiled run are not comparable",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the bench's database in place at the end")
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
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        env["API_LOAD_PROFILE_DIR"] = str(Path(args.profile).resolve())
    os.environ.update(env)
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0)
        messages = transcript_messages()
        _user, keys, append_sessions, essential_sessions, context_sessions = setup_data(messages, args.clients)
        connections.close_all()
        under_load(args, admin_url, env, keys, messages, append_sessions, essential_sessions, context_sessions)
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
