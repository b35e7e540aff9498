"""The session page's context breakdown against the served view it explains, on a 10,000-message
session under a prune overlay (the one case where the breakdown reads more than the session row).

    DATABASE_URL=postgres://… .venv/bin/python bench/breakdown_bench.py [--messages N] [--repeat N]

Prints the median time of sessions.breakdown.session_context_breakdown (the row, the active
compaction, one SUM over the kept messages' stored sizes) beside context_build's breakdown (every
kept message read and served: the baseline), with the ratio, and the whole overview fragment
(gauge, chart, breakdown card, history) as the page polls it.
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


def median_ms(fn, repeat: int) -> float:
    fn()  # warm (tokenizer, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def tool_turn(i: int) -> list[dict]:
    tool_id = f"toolu_{i:06d}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": "Read", "input": {"path": f"f{i}.py"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": f"def f{i}():\n    return {i}\n" * 40}
            ],
        },
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    django_setup(prefix="compactor-breakdown-bench-", secret_key="breakdown-bench-only")
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from compaction.models import Compaction, Reason, Status
    from sessions import services
    from sessions.breakdown import session_context_breakdown
    from sessions.models import Session
    from sessions.selectors import context_build

    with bench_database():
        user = get_user_model().objects.create_user("breakdown-bench", password="x")
        session = services.session_create(
            owner=user, title="Long session", model="claude-sonnet-4-5", context_window=2_000_000
        )
        turns = [m for i in range(args.messages // 2) for m in tool_turn(i)]
        for start in range(0, len(turns), services.MAX_BATCH):
            services.messages_append(session=session, messages=turns[start : start + services.MAX_BATCH])
        prune = Compaction.objects.create(
            session=session,
            reason=Reason.MANUAL,
            status=Status.SUCCEEDED,
            strategy="prune",
            first_kept_seq=1,
            prune_before_seq=args.messages * 8 // 10,
            usage={"tool_results_pruned": args.messages * 4 // 10},
        )
        Session.objects.filter(pk=session.pk).update(active_compaction=prune)
        session.refresh_from_db()
        services.session_recompute_usage(session=session)
        session = Session.objects.select_related("active_compaction").get(pk=session.pk)

        breakdown = session_context_breakdown(session=session)
        served = context_build(session=session).as_dict()["breakdown"]
        assert breakdown.breakdown.pruned.saved_estimated_tokens == served["pruned_tool_results_saved"]
        print(
            f"database: {connection.vendor}; {session.last_seq:,} messages, prune before "
            f"#{prune.prune_before_seq:,} saving {served['pruned_tool_results_saved']:,} tokens",
            flush=True,
        )
        row = median_ms(lambda: session_context_breakdown(session=session), args.repeat)
        full = median_ms(lambda: context_build(session=session).as_dict(), args.repeat)
        print(f"breakdown (row + one SUM)        {row:8.1f} ms")
        print(f"context_build (every message)    {full:8.1f} ms   ratio {full / row:.0f}x")
        client = Client()
        client.force_login(user)
        url = reverse("dashboard:session-overview", args=[session.pk])
        page = median_ms(lambda: client.get(url, HTTP_HX_REQUEST="true"), args.repeat)
        print(f"overview fragment (as polled)    {page:8.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
