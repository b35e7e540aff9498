"""Served-context benchmark: GET /api/v1/sessions/{id}/context/, the agents' hot path.

    DEBUG=1 .venv/bin/python bench/context_bench.py [--messages N] [--repeat N] [--profile]

Builds two sessions in a temporary database (a fresh SQLite file under a temporary
COMPACTOR_VAR_DIR; with DATABASE_URL set, a throwaway `test_<name>` database on that server,
dropped at the end):
- synthetic: N messages (default 10,000) of user turns and tool pairs (some parallel), with an
  active compaction that summarized the first fifth and prunes tool output before the last
  tenth (`prune_before_seq`);
- real: the 258c7280 Claude Code transcript replayed through the services until its
  auto-compaction, as bench/compaction_bench.py does.
For each it prints the median time of `context_build` and of the whole HTTP request (auth,
view, serializer, JSON rendering), the baseline of just reading the same rows
(seq, role, content), their ratio, and the SQL queries per request.
`--profile` adds a cProfile listing of one HTTP request per session.
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
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

TRANSCRIPT = CORPUS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
TOOLS = ("Read", "Bash", "Grep", "Edit", "skill")


def median_ms(fn, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def _output(i: int) -> str:
    """Tool output of varied size (a few lines to a few thousand tokens), deterministic."""
    lines = 3 + (i * 37) % 160
    return "\n".join(f"{i}:{n} def handler_{n}(request): return render(request, 'page_{n}.html')" for n in range(lines))


def synthetic_messages(count: int) -> list[dict]:
    """User turns followed by tool pairs; every 7th tool call is two parallel calls, some errors."""
    messages: list[dict] = []
    call = 0
    while len(messages) < count:
        turn = len(messages)
        messages.append({"role": "user", "content": f"Turn {turn}: fix the failing handler tests, then run them."})
        for _ in range(8):
            if len(messages) + 2 > count:
                break
            call += 1
            ids = [f"toolu_{call:06d}a"] + ([f"toolu_{call:06d}b"] if call % 7 == 0 else [])
            uses = [
                {
                    "type": "tool_use",
                    "id": tid,
                    "name": TOOLS[(call + k) % len(TOOLS)],
                    "input": {"path": f"app/h{call}.py"},
                }
                for k, tid in enumerate(ids)
            ]
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Step {call}."}, *uses]})
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": tid,
                    "content": _output(call + k),
                    **({"is_error": True} if call % 11 == 0 else {}),
                }
                for k, tid in enumerate(ids)
            ]
            messages.append({"role": "user", "content": results})
        if len(messages) < count:
            messages.append({"role": "assistant", "content": f"Done with turn {turn}."})
    return messages[:count]


def build_synthetic(user, count: int):
    from compaction.models import Compaction
    from sessions import services
    from sessions.models import Message

    session = services.session_create(
        owner=user,
        title=f"synthetic {count}",
        agent="bench",
        model="claude-sonnet-4-5",
        context_window=10_000_000,
        compaction_settings={"auto_compact": False},
    )
    messages = synthetic_messages(count)
    for start in range(0, len(messages), services.MAX_BATCH):
        services.messages_append(session=session, messages=messages[start : start + services.MAX_BATCH])
    first_kept = count // 5 + 1
    while (
        Message.objects.get(session=session, seq=first_kept).role != "user"
        or Message.objects.get(session=session, seq=first_kept).tool_result_ids
    ):
        first_kept += 1
    summary = "\n".join(
        f"## Section {n}\n- Fixed handler_{n} in app/h{n}.py; tests pass after `pytest tests/h{n}`." for n in range(120)
    )
    compaction = Compaction.objects.create(
        session=session,
        reason="manual",
        status="succeeded",
        summary=summary,
        turn_prefix_summary="",
        first_kept_seq=first_kept,
        prune_before_seq=count - count // 10,
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    return services.session_recompute_usage(session=session)


def build_real(user):
    from compaction import services
    from compaction.core.transcripts.claude_code import read_claude_code
    from sessions import services as session_services

    transcript = read_claude_code(TRANSCRIPT)
    messages = services.transcript_messages_for_api(transcript.messages)
    session = session_services.session_create(
        owner=user,
        title="real 258c7280",
        agent="claude-code",
        model=transcript.model or "",
        context_window=200_000,
        compaction_settings={"auto_compact_token_limit": 167_000},
    )
    result = services.transcript_replay(
        session=session,
        run_inline=True,
        messages=[{"role": m["role"], "content": m["content"], "usage": m.get("usage")} for m in messages],
    )
    session.refresh_from_db()
    return session, result


def measure(name: str, session, client, repeat: int, profile: bool) -> list[tuple[str, str]]:
    from django.db import connection

    from sessions import selectors
    from sessions.models import Message

    url = f"/api/v1/sessions/{session.pk}/context/"

    def build():
        # What the view does before rendering: load the session (with its active compaction).
        fresh = selectors.session_get(user=session.owner, session_id=session.pk)
        return selectors.context_build(session=fresh).as_dict()

    def request():
        response = client.get(url)
        assert response.status_code == 200, response.content[:300]
        return response

    def baseline():
        return list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content"))

    request()  # warm caches (tokenizer, URL resolver)
    build_ms, context = median_ms(build, repeat)
    http_ms, response = median_ms(request, repeat)
    base_ms, rows = median_ms(baseline, repeat)
    queries: list[str] = []

    def record(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        request()
    per_request = len(queries)
    queries.clear()
    with connection.execute_wrapper(record):
        build()
    per_build = len(queries)
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        request()
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(f"--- profile: {name}\n{out.getvalue()}")
    active = context["active_compaction"] or {}
    return [
        (
            f"{name}",
            f"{session.message_count:,} messages stored, {len(context['messages']):,} served "
            f"(first kept #{active.get('first_kept_seq')}, prune before #{active.get('prune_before_seq')}), "
            f"{context['estimated_tokens']:,} tokens, {len(response.content) / 1e6:.1f} MB JSON",
        ),
        ("  context_build", f"{build_ms:.1f} ms median ({build_ms / base_ms:.1f}× baseline)"),
        ("  GET context/", f"{http_ms:.1f} ms median ({http_ms / base_ms:.1f}× baseline)"),
        ("  baseline: read rows", f"{base_ms:.1f} ms median ({len(rows):,} rows)"),
        (
            "  queries",
            f"{per_request} per request ({per_build} in the build)",
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--profile", action="store_true", help="cProfile one request per session")
    parser.add_argument("--no-real", action="store_true", help="skip the real transcript")
    args = parser.parse_args()

    django_setup(prefix="compactor-context-bench-")
    from django.db import connection

    with bench_database(celery_eager=True):
        user, _, client = api_user(username="context-bench")
        print(f"database: {connection.vendor}", flush=True)
        started = time.perf_counter()
        synthetic = build_synthetic(user, args.messages)
        print(f"built the synthetic session in {time.perf_counter() - started:.1f} s", flush=True)
        rows = measure(f"synthetic {args.messages:,}", synthetic, client, args.repeat, args.profile)
        if not args.no_real and TRANSCRIPT.exists():
            real, result = build_real(user)
            rows += measure(
                f"real {TRANSCRIPT.stem[:8]} ({', '.join(j.strategy for j in result.compactions) or 'no'} compaction)",
                real,
                client,
                args.repeat * 3,
                args.profile,
            )
        width = max(len(name) for name, _ in rows)
        for name, value in rows:
            print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
