"""What a probe and a scrape cost with a large job table: /healthz, /readyz and /metrics.

    DATABASE_URL=postgres://… REDIS_URL=redis://… .venv/bin/python bench/ops_bench.py [--jobs N] [--repeat N]

Runs in a throwaway database (see _django.py). Fills the job table with N finished compactions
and 50 queued ones, records worker heartbeats, then prints the median time of each endpoint
through Django's test client (the whole request: middleware, checks, the database queries and,
for /readyz, the broker connection), and the number of queries each makes. /metrics reads the
queue figures with one aggregate over the in-flight jobs (the status index), so its cost should
not grow with the finished jobs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _django import bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "ops-bench-metrics-token-0123456789"


def fill(jobs: int) -> None:
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from compaction.models import Compaction, Status
    from ops.models import WorkerHeartbeat
    from sessions.models import Session

    owner, _ = get_user_model().objects.get_or_create(username="ops-bench")
    sessions = Session.objects.bulk_create(Session(owner=owner, title=f"bench {i}") for i in range(50))
    batch = [
        Compaction(session=sessions[i % 50], reason="manual", status=Status.SUCCEEDED, strategy="extractive")
        for i in range(jobs)
    ]
    Compaction.objects.bulk_create(batch, batch_size=2000)
    Compaction.objects.bulk_create(Compaction(session=s, reason="threshold", status=Status.QUEUED) for s in sessions)
    now = timezone.now()  # after the inserts: heartbeats as fresh as a running worker's
    WorkerHeartbeat.objects.bulk_create(
        WorkerHeartbeat(worker=f"celery@host{i}", pid=100 + i, started_at=now, seen_at=now - timedelta(seconds=i))
        for i in range(5)
    )


def timed(client, path: str, repeat: int, **headers) -> tuple[float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(path, **headers)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, response.status_code, len(queries.captured_queries)


def explain_queue() -> None:
    """The plan of the scrape's queue query (PostgreSQL)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from ops.scrape import queue_read

    if connection.vendor != "postgresql":
        return
    with CaptureQueriesContext(connection) as ctx:
        queue_read(now=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN ANALYZE " + ctx.captured_queries[0]["sql"])
        print("  queue query plan:\n    " + "\n    ".join(row[0] for row in cursor.fetchall()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    django_setup(prefix="compactor-ops-bench-")
    from django.conf import settings
    from django.test import Client

    settings.METRICS_TOKEN = TOKEN
    with bench_database(celery_eager=False):
        fill(args.jobs)
        client = Client()
        print(
            f"{args.jobs:,} finished jobs, 50 queued, 5 heartbeats; broker {settings.CELERY_BROKER_URL.split(':')[0]}"
        )
        for path, headers in (
            ("/healthz", {}),
            ("/readyz", {}),
            ("/metrics", {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}),
        ):
            median_ms, status, queries = timed(client, path, args.repeat, **headers)
            print(f"  {path:9} {status}  median {median_ms:7.2f} ms  {queries} queries")
            if status != 200:
                print("   ", client.get(path, **headers).content.decode()[:400])
        explain_queue()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
