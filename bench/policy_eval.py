"""Compaction policy on the shared long Claude Code sessions, beside Claude Code's own numbers.

    DEBUG=1 .venv/bin/python bench/policy_eval.py [--transcript PATH ...] [--window N] [--trigger N]

Each session is replayed whole through the services the API uses (the replay of
import_transcript --replay: the recorded usage reported after each assistant reply until the
service has compacted once, compactions run inline), at the trigger where Claude Code compacted
(window 200k, trigger 167k), in a fresh SQLite database under a temporary COMPACTOR_VAR_DIR (or
with DATABASE_URL, a throwaway `test_<name>` database on that server). Printed per session:

- every Compactor compaction: strategy, tokens before → after (share of the trigger), the first
  changed message, the cache tokens it invalidates, the runway it bought (tokens until the
  trigger is crossed again) and why the policy chose it;
- Claude Code's own compactions from the same transcript: preTokens → the first reported prompt
  after it, the cache it wrote again (input + cache_creation of that first reply), its runway;
- the usage at the end of the replay and the peak after the last compaction.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

SHARED = CORPUS / "claude-code"
# The shared sessions long enough for Claude Code to have compacted.
DEFAULT_TRANSCRIPTS = [
    SHARED / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    SHARED / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
]


def claude_code_compactions(messages: list[dict], compactions: list[dict], trigger: int) -> list[dict]:
    """Claude Code's compactions with what its recorded usage says about each: the first reply
    after the boundary (its prompt = tokens after, its input + cache writes = the cache it
    re-billed) and the peak before the next compaction (runway used)."""
    from compaction.core.transcripts.base import context_tokens

    rows = []
    boundaries = [c["before_message_index"] for c in compactions] + [len(messages)]
    for record, end in zip(compactions, boundaries[1:], strict=True):
        start = record["before_message_index"]
        after = cache = None
        peak = 0
        for message in messages[start:end]:
            usage = message.get("usage") if message["role"] == "assistant" else None
            prompt = context_tokens(usage)
            if prompt is None:
                continue
            if after is None:
                after = prompt
                cache = int(usage.get("input_tokens") or 0) + int(usage.get("cache_creation_input_tokens") or 0)
            peak = max(peak, prompt)
        rows.append(
            {
                "index": start,
                "before": record.get("pre_tokens"),
                "after": after,
                "cache": cache,
                "runway": trigger - after if after is not None else None,
                "peak": peak,
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", type=Path, action="append", default=None)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--trigger", type=int, default=167_000, help="auto_compact_token_limit")
    args = parser.parse_args()

    from _django import bench_database_until_exit, django_setup

    django_setup(prefix="compactor-policy-")
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from compaction import services
    from compaction.core.transcripts.claude_code import read_claude_code
    from project.celery import app as celery_app
    from sessions import services as session_services

    settings.ANTHROPIC_API_KEY = None  # the offline summarizer: the same figures on every run
    bench_database_until_exit()  # a throwaway database, never DATABASE_URL's own
    celery_app.conf.task_always_eager = True
    user, _ = get_user_model().objects.get_or_create(username="policy-eval")

    status = 0
    for path in args.transcript or DEFAULT_TRANSCRIPTS:
        transcript = read_claude_code(path)
        messages = services.transcript_messages_for_api(transcript.messages)
        session = session_services.session_create(
            owner=user,
            title=f"policy {path.stem[:8]}",
            agent="claude-code",
            model=transcript.model or "",
            context_window=args.window,
            compaction_settings={"auto_compact_token_limit": args.trigger},
        )
        peak = {"active": None, "tokens": 0}

        def on_step(step, peak=peak, session=session) -> None:
            # The peak usage since the last compaction: how much of its runway was used.
            if session.active_compaction_id != peak["active"]:
                peak["active"], peak["tokens"] = session.active_compaction_id, 0
            peak["tokens"] = max(peak["tokens"], step.usage_tokens)

        started = time.perf_counter()
        result = services.transcript_replay(
            session=session,
            run_inline=True,
            on_step=on_step,
            messages=[{"role": m["role"], "content": m["content"], "usage": m.get("usage")} for m in messages],
        )
        elapsed = time.perf_counter() - started
        session.refresh_from_db()
        usage = session_services.session_usage(session).as_dict()
        trigger = usage["trigger_tokens"]
        print(
            f"=== {path.name}: {len(messages)} messages, window {args.window:,}, trigger {trigger:,} ({elapsed:.0f} s)"
        )
        print(f"  Compactor: {len(result.compactions)} compaction(s)")
        for job in result.compactions:
            share = (job.tokens_after or 0) / trigger
            print(
                f"    #{job.snapshot_seq:>4} {job.strategy:<10} {job.tokens_before:>9,} → {job.tokens_after:>9,}"
                f" ({share:.0%} of trigger)"
                f"  first changed #{_field(job, 'first_changed_seq')}"
                f"  cache invalidated {_num(_field(job, 'cache_invalidated_tokens'))}"
                f"  runway {_num(_field(job, 'runway_tokens'))}"
            )
            why = _field(job, "policy_reason")
            if why not in ("-", ""):
                print(f"         why: {why}")
        print(f"    usage at the end {usage['tokens']:,}; peak since the last compaction {peak['tokens']:,}")
        cc = claude_code_compactions(messages, transcript.compactions, trigger)
        print(f"  Claude Code: {len(cc)} compaction(s)")
        for row in cc:
            share = (row["after"] or 0) / trigger
            print(
                f"    @msg {row['index']:>4} {'summary':<10} {_num(row['before']):>9} → {_num(row['after']):>9}"
                f" ({share:.0%} of trigger)  first changed: all  cache invalidated {_num(row['cache'])}"
                f"  runway {_num(row['runway'])}  (peak after {row['peak']:,})"
            )
        over = [j for j in result.compactions if (j.tokens_after or 0) > trigger // 2]
        if len(result.compactions) > max(1, len(cc)) or over:
            status = 1
            print("  ! more compactions than Claude Code, or one left usage above half the trigger")
    return status


def _field(job, name: str):
    value = getattr(job, name, None)
    return "-" if value is None else value


def _num(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


if __name__ == "__main__":
    raise SystemExit(main())
