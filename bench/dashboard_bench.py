"""Dashboard list and detail at scale: 10,000 sessions, one of them with 10,000 messages.

    DATABASE_URL=postgres://… .venv/bin/python bench/dashboard_bench.py [--sessions N] [--repeat N]

Runs in a throwaway database (with DATABASE_URL, a `test_<name>` database on that server,
dropped at the end; else a fresh SQLite file under a temporary COMPACTOR_VAR_DIR). Prints the
median time of the whole request (login session, view, queries, template) and the web
process's CPU time of it (steadier on a busy machine) for the session
list as it opens, sorted by usage, and filtered by each status, beside the session detail
(gauge, chart, history, first message page) of the 10,000-message session, and what the
live pages' polls cost: unchanged (204) against changed (rendered). The target for the sorted
and filtered list is 150 ms for 10,000 sessions.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

from _django import bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def explain_list(client, url: str, params: dict) -> None:
    """EXPLAIN ANALYZE of the queries one list request makes (PostgreSQL)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        client.get(url, params)
    with connection.cursor() as cursor:
        for query in ctx.captured_queries:
            cursor.execute("EXPLAIN ANALYZE " + query["sql"])
            plan = [row[0] for row in cursor.fetchall()]
            print("   ", query["sql"][:160])
            print("      " + "\n      ".join(plan[:12] + plan[-1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=10_000, help="messages of the detail page's session")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--profile", default="", help="cProfile the cases whose name contains this")
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE the list's queries (PostgreSQL)")
    args = parser.parse_args()

    django_setup(prefix="compactor-dashboard-bench-", secret_key="dashboard-bench-only")  # DEBUG off, as in production
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from sessions import services
    from sessions.models import Message, Session

    with bench_database():
        user = get_user_model().objects.create_user("dashboard-bench", password="x")
        now = timezone.now()
        models = ["claude-sonnet-4-5", "gpt-5", "gemini-2.5-pro", "unknown-model"]
        started = time.perf_counter()
        Session.objects.bulk_create(
            [
                Session(
                    owner=user,
                    title=f"Session {i}",
                    agent="claude-code" if i % 2 else "codex",
                    model=models[i % 4],
                    context_tokens=(i * 37) % 200_000,
                    message_count=i % 50,
                    last_activity_at=now - timezone.timedelta(seconds=i),
                    compaction_settings={"auto_compact_ratio": 0.5} if i % 7 == 0 else {},
                )
                for i in range(args.sessions - 1)
            ],
            batch_size=2000,
        )
        services.session_meter_refresh()  # what the write path stores on each session
        big = services.session_create(owner=user, title="Long session", model="claude-sonnet-4-5")
        text = "Looked at the parser again; the failing case is the nested quote. " * 3
        for start in range(0, args.messages, services.MAX_BATCH):
            batch = [
                {"role": "user" if (start + i) % 2 == 0 else "assistant", "content": f"{start + i}: {text}"}
                for i in range(min(services.MAX_BATCH, args.messages - start))
            ]
            services.messages_append(session=big, messages=batch)
        if connection.vendor == "postgresql":
            # Planner statistics, as autovacuum keeps them on a live database: without them the
            # planner takes 10,000 freshly inserted rows for one and sorts them all per page.
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
        print(
            f"database: {connection.vendor}; {Session.objects.count():,} sessions, "
            f"{Message.objects.filter(session=big).count():,} messages in one; "
            f"built in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        client = Client()
        client.force_login(user)
        list_url = reverse("dashboard:session-list")
        cases = [
            ("list (last activity)", list_url, {}),
            ("list sorted by usage", list_url, {"sort": "usage"}),
            ("list status=over", list_url, {"status": "over"}),
            ("list status=near", list_url, {"status": "near"}),
            ("list status=ok, by usage, p.4", list_url, {"status": "ok", "sort": "usage", "page": "4"}),
            ("detail, 10k-message session", reverse("dashboard:session-detail", args=[big.pk]), {}),
        ]
        for name, url, params in cases:
            times, cpu = [], []
            profiler = cProfile.Profile() if args.profile and args.profile in name else None
            for _ in range(args.repeat + 1):
                if profiler is not None:
                    profiler.enable()
                t0, c0 = time.perf_counter(), time.thread_time()
                response = client.get(url, params)
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.thread_time() - c0) * 1000)
                if profiler is not None:
                    profiler.disable()
                assert response.status_code == 200, (name, response.status_code)
            # The CPU time of this (the web) process moves less with other work on the machine
            # than the wall time; the database's share is in --explain.
            print(
                f"{name:<32} {statistics.median(times[1:]):7.1f} ms  (web process CPU {statistics.median(cpu[1:]):6.1f} ms)",
                flush=True,
            )
            if profiler is not None:
                stats = pstats.Stats(profiler).sort_stats("cumulative")
                stats.print_stats(40)
                stats.print_callers("query.py.*__iter__|execute_sql")
            if args.explain and connection.vendor == "postgresql" and url == list_url:
                explain_list(client, url, params)
        _live_polls(client, big, user, args.repeat)
    return 0


def _median_ms(client, url: str, params: dict, repeat: int, *, name: str, status: int = 200, **headers) -> float:
    times = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        response = client.get(url, params, **headers)
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == status, (name, response.status_code)
    return statistics.median(times[1:])


def _live_polls(client, big, user, repeat: int) -> None:
    """What an open page costs per poll (every 1.5 s per visible tab): unchanged (204, the
    usual answer) against a change (the fragment rendered), for the 10k-message session's
    overview and the 10,000-session list."""
    from django.urls import reverse

    from sessions.dashboard import queries
    from sessions.models import Session

    htmx = {"HTTP_HX_REQUEST": "true"}
    overview = reverse("dashboard:session-overview", args=[big.pk])
    version = queries.session_overview_version(session=Session.objects.get(pk=big.pk))
    changed = _median_ms(client, overview, {}, repeat, name="overview", **htmx)
    same = _median_ms(client, overview, {"v": version}, repeat, name="overview poll", status=204, **htmx)
    print(f"{'overview poll: changed (200)':<32} {changed:7.1f} ms", flush=True)
    print(f"{'overview poll: unchanged (204)':<32} {same:7.1f} ms  ({changed / same:.1f}x cheaper)", flush=True)
    listing = reverse("dashboard:session-list")
    version = queries.session_list_version(user=user)
    changed = _median_ms(client, listing, {}, repeat, name="list", **htmx)
    same = _median_ms(client, listing, {"v": version}, repeat, name="list poll", status=204, **htmx)
    print(f"{'list poll: changed (200)':<32} {changed:7.1f} ms", flush=True)
    print(f"{'list poll: unchanged (204)':<32} {same:7.1f} ms  ({changed / same:.1f}x cheaper)", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
