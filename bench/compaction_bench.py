"""Compaction benchmark on a real Claude Code transcript.

    DEBUG=1 .venv/bin/python bench/compaction_bench.py [--transcript PATH] [--window N] [--trigger N] [--no-prune]

Replays the transcript message by message through the services the API uses (usage reported
after each assistant message until the first compaction, compactions run inline), in a fresh
SQLite database under a temporary COMPACTOR_VAR_DIR (with DATABASE_URL, a throwaway
`test_<name>` database on that server, dropped at the end), then prints:
append throughput, context build time against a baseline of just reading the messages,
cut and summarize times, tokens before/after, compression ratio and summary fidelity.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compaction.core.ledger import Fidelity

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

DEFAULT_TRANSCRIPT = CORPUS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    """Median wall time in ms over `repeat` runs, and the last result."""
    times = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", type=Path, default=DEFAULT_TRANSCRIPT)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--trigger", type=int, default=167_000, help="auto_compact_token_limit")
    parser.add_argument(
        "--no-prune", action="store_true", help="Disable the tool-output pruning tier (always summarize)."
    )
    args = parser.parse_args()

    from _django import bench_database_until_exit, django_setup

    django_setup(prefix="compactor-bench-")
    from django.contrib.auth import get_user_model

    from compaction import services
    from compaction.core.cutpoint import plan_cut
    from compaction.core.summarizers import SummaryInput, build_chain, summarize
    from compaction.core.tokens import count_text
    from compaction.core.transcripts.claude_code import read_claude_code
    from compaction.core.types import Msg
    from project.celery import app as celery_app
    from sessions import services as session_services
    from sessions.models import Message
    from sessions.selectors import context_build

    bench_database_until_exit()  # a throwaway database, never DATABASE_URL's own
    celery_app.conf.task_always_eager = True  # compactions run inline, timed by the job itself
    user, _ = get_user_model().objects.get_or_create(username="bench")

    read_ms, transcript = timed(lambda: read_claude_code(args.transcript))
    transcript.messages = services.transcript_messages_for_api(transcript.messages)
    session = session_services.session_create(
        owner=user,
        title=f"bench {args.transcript.stem[:8]}",
        agent="claude-code",
        model=transcript.model or "",
        context_window=args.window,
        compaction_settings={"auto_compact_token_limit": args.trigger, "prune_tool_outputs": not args.no_prune},
    )
    started = time.perf_counter()
    result = services.transcript_replay(
        session=session,
        run_inline=True,
        messages=[{"role": m["role"], "content": m["content"], "usage": m.get("usage")} for m in transcript.messages],
    )
    replay_s = time.perf_counter() - started
    compaction_ms = sum(job.duration_ms or 0 for job in result.compactions)
    session.refresh_from_db()

    context_ms, context = timed(lambda: context_build(session=session).as_dict(), repeat=15)
    baseline_ms, _ = timed(
        lambda: list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content")),
        repeat=15,
    )

    # Cut and summarize on the full history, as a first compaction would see it.
    config = session_services.session_config(session)
    rows = Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content", "token_count")
    history = [Msg(*row) for row in rows]
    cut_ms, cut = timed(lambda: plan_cut(history, keep_recent_tokens=config.keep_recent_tokens), repeat=5)
    chain = build_chain(
        api_key=None, base_url=None, model=config.summarizer_model, timeout=30, max_retries=0, strategy="extractive"
    )
    inp = SummaryInput(
        messages=list(cut.summarized),
        output_budget=config.summary_budget,
        model=config.summarizer_model,
    )
    summarize_ms, summary = timed(lambda: summarize(inp, chain))
    summarized_tokens = cut.summarized_tokens
    summary_tokens = count_text(summary.summary)

    rows = [
        ("transcript", f"{args.transcript.name} ({len(transcript.messages)} messages, read in {read_ms:.0f} ms)"),
        (
            "append + usage report",
            f"{result.steps / replay_s:,.0f} messages/s ({replay_s:.1f} s incl. {compaction_ms:,} ms compacting)",
        ),
        (
            "auto-compactions",
            ", ".join(f"{j.strategy}: {j.tokens_before:,} → {j.tokens_after:,}" for j in result.compactions) or "none",
        ),
        (
            "first fired at",
            f"message {result.first_compaction_index} (Claude Code: {transcript.compactions[0]['before_message_index'] if transcript.compactions else '-'})",
        ),
        (
            "usage scale",
            _usage_scale(session_services.session_usage(session), result),
        ),
        (
            "context build",
            f"{context_ms:.1f} ms median ({len(context['messages'])} messages, {context['tokens']:,} tokens)",
        ),
        ("baseline: read messages", f"{baseline_ms:.1f} ms median ({session.message_count} rows)"),
        (
            "plan_cut (full history)",
            f"{cut_ms:.1f} ms median ({len(history)} messages, first kept #{cut.first_kept_seq})",
        ),
        (
            "extractive summarize",
            f"{summarize_ms:.0f} ms ({summarized_tokens:,} → {summary_tokens:,} tokens, ratio {summarized_tokens / max(1, summary_tokens):.1f}×)",
        ),
        ("fallbacks", ", ".join(f"{f.strategy}: {f.reason}" for f in summary.fallbacks) or "none"),
        ("fidelity", _fidelity(summary.fidelity)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


def _usage_scale(usage, result) -> str:
    """The meter's figure and what it is made of: every before/after above is on this scale."""
    cal = usage.calibration
    parts = f"{usage.tokens:,} tokens now ({usage.source}: estimate {usage.estimated_tokens:,}"
    parts += f"; calibration {cal.fixed:,} + {cal.ratio} × estimate, {cal.reports} reports)" if cal else ")"
    return f"{parts}; peak {result.peak_usage:,}; trigger {usage.trigger_tokens:,}"


def _fidelity(fidelity: Fidelity) -> str:
    before, after = fidelity.before, fidelity.after
    if before is None or after is None:
        return f"not checked: {fidelity.error}"
    parts = [f"score {after.score}", f"score_before_repair {before.score}"]
    parts += [f"{name} {check.kept}/{check.total}" for name, check in after.categories.items()]
    parts.append(f"resolved_errors {fidelity.resolved_errors}")
    return ", ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
