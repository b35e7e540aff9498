"""Append cost in one process: POST /api/v1/sessions/{id}/messages/ against a one-row floor.

    DATABASE_URL=postgres://… .venv/bin/python bench/append_bench.py [--repeat N]

Runs in a throwaway database (with DATABASE_URL, a `test_<name>` database on that server,
dropped at the end; else a fresh SQLite file under a temporary COMPACTOR_VAR_DIR). Through
the whole Django stack (middleware, API key authentication, view, serializer, JSON), it
appends, turn after turn, a user message, an assistant reply with a tool_use and the user's
tool_result, and prints per kind the median time and the SQL queries of one append, beside
the floor: a minimal DRF endpoint (no authentication) that inserts one row. The ratio
append / floor is the figure the append path is held to (≤ 3×, ≤ 5 queries). Statements are counted
without transaction control (BEGIN/COMMIT, savepoints), the API key lookup included (one query
while it is not cached). `--profile --profile-kind KIND` shows where one kind's time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONTROL = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK")
TEXT = "Run the parser tests again and tell me which ones still fail; then fix the first one. " * 4
OUTPUT = "\n".join(f"tests/test_parser.py::test_case_{n} PASSED" for n in range(40))


def _floor_urls():
    """The project's URLs plus the floor endpoint (built after django.setup())."""
    from django.urls import include, path
    from rest_framework.permissions import AllowAny
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from compaction.models import Event

    class FloorView(APIView):
        authentication_classes: list = []
        permission_classes = [AllowAny]

        def post(self, request, session_id):
            row = Event.objects.create(session_id=session_id, kind="overflow", message=str(request.data.get("m", "")))
            return Response({"id": row.pk}, status=201)

    return [path("floor/<uuid:session_id>/", FloorView.as_view()), path("", include("project.urls"))]


urlpatterns: list = []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=200, help="turns (each: 3 appends)")
    parser.add_argument("--profile", action="store_true", help="cProfile the appends of one kind (--profile-kind)")
    parser.add_argument(
        "--profile-kind", default="tool_result", help="floor, user text, assistant tool_use, tool_result"
    )
    parser.add_argument("--profile-sort", default="tottime", help="pstats sort key (tottime, cumulative)")
    parser.add_argument("--profile-callees", default="", help="regex: print what these functions call")
    parser.add_argument("--show-queries", action="store_true", help="print the SQL of the last append of each kind")
    args = parser.parse_args()

    django_setup(prefix="compactor-append-bench-", secret_key="append-bench-only")  # DEBUG off, as in production
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sessions import services

    global urlpatterns
    urlpatterns = _floor_urls()
    settings.ROOT_URLCONF = __name__
    with bench_database(celery_eager=False):
        user, _, client = api_user(username="append-bench")
        # Auto-compaction off: this measures the append, not a compaction's enqueue.
        session = services.session_create(owner=user, title="bench", compaction_settings={"auto_compact": False})
        url = f"/api/v1/sessions/{session.pk}/messages/"
        floor_url = f"/floor/{session.pk}/"
        times: dict[str, list[float]] = {"floor": [], "user text": [], "assistant tool_use": [], "tool_result": []}
        queries: dict[str, list[int]] = {name: [] for name in times}
        last_sql: dict[str, list[str]] = {}

        profiler = cProfile.Profile() if args.profile else None

        def timed(name: str, target: str, body: dict) -> None:
            with CaptureQueriesContext(connection) as ctx:
                if profiler is not None and name == args.profile_kind:
                    profiler.enable()
                started = time.perf_counter()
                response = client.post(target, body, format="json")
                elapsed = (time.perf_counter() - started) * 1000
                if profiler is not None and name == args.profile_kind:
                    profiler.disable()
            assert response.status_code == 201, (name, response.status_code, response.content[:300])
            times[name].append(elapsed)
            # SQL queries (round trips), those of transaction control only (BEGIN/COMMIT, the
            # savepoint of an atomic block inside the request's) aside, as
            # tests/api/test_append_path.py counts: a BEGIN or COMMIT sent along with a statement
            # does not make it control.
            queries[name].append(
                sum(
                    1
                    for q in ctx.captured_queries
                    if not all(part.strip().startswith(CONTROL) for part in q["sql"].split(";\n"))
                )
            )
            last_sql[name] = [q["sql"] for q in ctx.captured_queries]

        for turn in range(args.repeat + 5):
            tool_id = f"toolu_{turn:06d}"
            timed("floor", floor_url, {"m": TEXT})
            timed("user text", url, {"role": "user", "content": TEXT})
            timed(
                "assistant tool_use",
                url,
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Running the tests."},
                        {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "pytest -x"}},
                    ],
                },
            )
            timed(
                "tool_result",
                url,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": OUTPUT}]},
            )
        print(f"database: {connection.vendor}; {args.repeat} turns (first 5 warm-up, not counted)")
        floor = statistics.median(times["floor"][5:])
        for name in times:
            ms = statistics.median(times[name][5:])
            q = statistics.median(queries[name][5:])
            print(f"{name:<20} {ms:7.2f} ms  {ms / floor:5.2f}× floor  {q:g} statements (max {max(queries[name][5:])})")
        if profiler is not None:
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out).sort_stats(args.profile_sort)
            stats.print_stats(45)
            stats.print_callees(args.profile_callees) if args.profile_callees else None
            print(out.getvalue())
        if args.show_queries:
            for name, sqls in last_sql.items():
                print(f"--- {name}")
                for sql in sqls:
                    print("   ", sql[:220])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
