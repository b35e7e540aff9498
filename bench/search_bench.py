"""History search over HTTP: a session of N messages (default 40,000), a term only one message
holds, and the queries that cost most (a one-letter prefix, the commonest words, punctuation only).

    [DATABASE_URL=postgres://…] .venv/bin/python bench/search_bench.py [--messages N] [--repeat R]

Runs in a throwaway database (see _django.bench_database): PostgreSQL with DATABASE_URL, else
SQLite. Fills one session through the append service (user text, assistant tool calls, tool
results with log-like output, as agents write), plus a second session of the same owner, then
serves the project over a real socket (wsgiref, one thread) and times GET requests with an
HTTP client: the median, p95 and p99 of R requests per query. The unique-term query must return
exactly that one message; every query is held to a p99 ≤ 150 ms (issue 35: every search has a cost
bound), a query with no letter or digit (`%`, `[`, `_`, `/`) answered with its 400 within it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BOUND_MS = 150.0
UNIQUE_TERM = "zanzibarquux"
UNIQUE_IDENTIFIER = "spotter-fum.4242"
WORDS = (
    "parser test migration table column index query session import export fixture module function "
    "error warning retry timeout cache worker queue schema model field value config deploy build"
).split()


# Tool outputs of 12 to 400 lines (~0.5 to 20 KB), as agents' test runs and file reads are.
OUTPUT_LINES = (12, 12, 40, 40, 120, 400)


def _conversation(count: int, rng: random.Random) -> list[dict]:
    """`count` messages in turns of four: request, tool call, tool result, reply."""
    messages: list[dict] = []
    turn = 0
    while len(messages) < count:
        words = " ".join(rng.choice(WORDS) for _ in range(40))
        tool_id = f"toolu_{turn:06d}"
        path = f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{turn % 97}.py"
        output = "\n".join(
            f"{path}:{n}: {rng.choice(WORDS)} {rng.choice(WORDS)} {rng.choice(WORDS)} {n * 7 % 1000} ok"
            for n in range(rng.choice(OUTPUT_LINES))
        )
        messages += [
            {"role": "user", "content": f"Turn {turn}: {words}"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking {path}."},
                    {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"pytest {path} -q"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]},
            {"role": "assistant", "content": f"Done with turn {turn}: {rng.choice(WORDS)} fixed."},
        ]
        turn += 1
    return messages[:count]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the stdlib's signature
        pass


def _serve():
    from django.core.wsgi import get_wsgi_application

    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _fill(session, messages: list[dict], *, unique_at: int) -> None:
    from sessions import services

    messages[unique_at - 1] = {
        "role": "user",
        "content": f"Remember the {UNIQUE_TERM} flag and issue {UNIQUE_IDENTIFIER} before the release.",
    }
    for start in range(0, len(messages), 500):
        services.messages_append(session=session, messages=messages[start : start + 500])


def _time(http, path: str, params: dict, repeat: int, status: int) -> tuple[list[float], dict]:
    http.get(path, params=params)  # warm-up (connection, caches)
    times: list[float] = []
    body: dict = {}
    for _ in range(repeat):
        started = time.perf_counter()
        response = http.get(path, params=params)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == status, (response.status_code, response.text[:300])
        body = response.json()
    return times, body


def _percentile(times: list[float], fraction: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, max(0, round(len(ordered) * fraction) - 1))]


def _report(base: str, key: str, queries: list[tuple[str, str, str, int]], repeat: int, *, unique_seq: int) -> bool:
    """Times each query, prints median, p95 and p99; True when one misses its bound."""
    import httpx2 as httpx

    failed = False
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for name, path, q, status in queries:
            times, body = _time(http, path, {"q": q}, repeat, status)
            median, p95, p99 = statistics.median(times), _percentile(times, 0.95), _percentile(times, 0.99)
            shown = f"{len(body['hits'])} hits" if status == 200 else f"{status}: {body['error'][:60]}"
            ok = p99 <= BOUND_MS
            print(
                f"{name:<24} q={q!r:<20} {median:7.1f} ms median {p95:7.1f} ms p95 {p99:7.1f} ms p99"
                f"  {'ok' if ok else 'OVER'}  {shown}"
            )
            if name == "unique term":
                seqs = [hit["seq"] for hit in body["hits"]]
                ok = ok and seqs == [unique_seq]
                print(f"  exactly message #{unique_seq}: {'OK' if seqs == [unique_seq] else 'FAILED'} ({seqs})")
            if name == "all sessions, unique":
                assert sorted(hit["seq"] for hit in body["hits"]) == [9, unique_seq], body["hits"]
            failed |= not ok
    print(f"bound: every query's p99 ≤ {BOUND_MS:.0f} ms: {'FAILED' if failed else 'OK'}")
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=40_000, help="messages in the searched session")
    parser.add_argument("--repeat", type=int, default=100, help="requests per query")
    parser.add_argument(
        "--no-word-status", type=int, default=400, help="what a query of punctuation only answers (200 before issue 35)"
    )
    args = parser.parse_args()

    # One API key sends every query R times within seconds: far past the per-key rate a deployment
    # throttles at (1200/min), which would answer 429s and stop the run. The bench measures search.
    os.environ.setdefault("COMPACTOR_API_THROTTLE_RATE", "1000000/min")
    django_setup(prefix="compactor-search-bench-", secret_key="search-bench-only")  # DEBUG off, as in production
    from django.db import connection

    from sessions import services

    with bench_database(celery_eager=False):
        user, key, _ = api_user(username="search-bench")
        rng = random.Random(22)
        session = services.session_create(owner=user, title="bench", compaction_settings={"auto_compact": False})
        started = time.perf_counter()
        _fill(session, _conversation(args.messages, rng), unique_at=args.messages // 2 + 1)
        other = services.session_create(owner=user, title="other", compaction_settings={"auto_compact": False})
        _fill(other, _conversation(2_000, rng), unique_at=9)
        print(
            f"database: {connection.vendor}; filled {args.messages:,} + 2,000 messages in {time.perf_counter() - started:.1f} s"
        )
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE agent_sessions_message")
        server = _serve()
        base = f"http://127.0.0.1:{server.server_port}/api/v1"
        one = f"/sessions/{session.pk}/search/"
        queries = [
            ("unique term", one, UNIQUE_TERM, 200),
            ("unique identifier", one, UNIQUE_IDENTIFIER, 200),
            ("phrase", one, '"migration table"', 200),
            ("common word", one, "parser", 200),
            ("two common words", one, "parser test", 200),
            ("one-letter prefix", one, "t", 200),
            ("digit prefix", one, "1", 200),
            ("path identifier", one, "src/parser/", 200),
            ("common word + %", one, "ok %", 200),
            ("all sessions, unique", "/search/", UNIQUE_TERM, 200),
            ("all sessions, letter", "/search/", "e", 200),
            *[(f"punctuation {q}", one, q, args.no_word_status) for q in ("%", "[", "_", "/", "--")],
            ("all sessions, %", "/search/", "%", args.no_word_status),
        ]
        failed = _report(base, key, queries, args.repeat, unique_seq=args.messages // 2 + 1)
        server.shutdown()
        server.server_close()
        if connection.vendor == "postgresql":
            # The server thread's connection is persistent (CONN_MAX_AGE): end it, or the
            # throwaway database cannot be dropped.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
