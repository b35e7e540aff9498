"""Cut-point benchmark: `plan_cut` against pi's algorithm on the shared Claude Code sessions.

    .venv/bin/python bench/cutpoint_bench.py [--rounds N] [--keep N ...] [--old-rev REV]

Loads every shared Claude Code transcript (`claude-code/*.jsonl` of the corpus: tests/corpus.py finds it)
into core messages with their token counts (outside the timing, as the service stores them),
then times, interleaved round by round so a busy machine slows all alike:

- `plan_cut` as it is now;
- pi's `prepareCompaction` cut planning (badlogic/pi-mono, packages/coding-agent,
  compaction.ts), ported algorithm for algorithm: `findValidCutPoints` forward over the whole
  range, `findCutPoint` walking back from the newest message accumulating token counts until
  `keepRecentTokens`, the linear search for the closest valid cut at or after that message,
  `findTurnStartIndex`, and the slices of messages to summarize and of the turn prefix. The
  port reads the same stored token counts (`--pi-estimate` makes it count chars/4 per message
  as pi does, pi stores no counts); its tool_result test looks at the blocks, because here a
  tool result is a user message, not a role of its own. Left out on both sides: pi's
  `tokensBefore` and file operations (the service does those outside `plan_cut`);
- `plan_cut` as it was at `--old-rev` (read with `git show`; skipped when git cannot).

Like with like: both sides get the same `Msg` lists (token counts and tool ids computed once,
before any timing, as the service stores them), one call per session and budget, results
not read (plan_cut's reason is written only when read; pi builds none). Prints per
implementation the median time of one pass over all sessions and the ratios.
Target: `plan_cut` at most pi's time (plan_cut / pi <= 1.0), and no slower than the previous one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

TRANSCRIPTS = CORPUS / "claude-code"
# The last plan_cut with three tiers (a walk back, a forward pass and an exhaustive scan, held
# equal by property tests) before the single forward pass replaced them.
OLD_REV = "4b12b83"


# --- pi's cut planning, ported (not called by the service; the baseline only) ----------------


def _pi_is_tool_result(m) -> bool:
    """pi's `role === "toolResult"`: from the stored result ids when given, else the blocks."""
    if m.stored_result_ids is not None:
        return m.role == "user" and bool(m.stored_result_ids)
    content = m.content
    if m.role != "user" or isinstance(content, str):
        return False
    for b in content:
        if b.get("type") == "tool_result":
            return True
    return False


def _pi_estimate(m) -> int:
    """pi's estimateTokens: chars/4 of text, thinking, tool call name + arguments JSON."""
    content = m.content
    if isinstance(content, str):
        return math.ceil(len(content) / 4)
    chars = 0
    for b in content:
        kind = b.get("type")
        if kind == "text":
            chars += len(b.get("text") or "")
        elif kind == "thinking":
            chars += len(b.get("thinking") or "")
        elif kind == "tool_use":
            chars += len(b.get("name") or "") + len(json.dumps(b.get("input"), separators=(",", ":")))
        elif kind == "tool_result":
            inner = b.get("content")
            if isinstance(inner, str):
                chars += len(inner)
            elif isinstance(inner, list):
                for part in inner:
                    if part.get("type") == "text":
                        chars += len(part.get("text") or "")
                    elif part.get("type") == "image":
                        chars += 4800
    return math.ceil(chars / 4)


def pi_prepare_cut(messages, keep_recent_tokens: int, estimate: bool = False):
    """(messages to summarize, turn prefix, first kept index, split turn?) the way pi plans it."""
    start, end = 0, len(messages)
    cut_points = [
        i
        for i in range(start, end)
        if messages[i].role in ("user", "assistant") and not _pi_is_tool_result(messages[i])
    ]
    if not cut_points:
        return [], [], start, False
    accumulated = 0
    cut_index = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        m = messages[i]
        accumulated += _pi_estimate(m) if estimate else m.tokens
        if accumulated >= keep_recent_tokens:
            for c in cut_points:
                if c >= i:
                    cut_index = c
                    break
            break
    cut = messages[cut_index]
    is_user = cut.role == "user" and not _pi_is_tool_result(cut)
    turn_start = -1
    if not is_user:
        for i in range(cut_index, start - 1, -1):
            m = messages[i]
            if m.role == "user" and not _pi_is_tool_result(m):
                turn_start = i
                break
    split = not is_user and turn_start != -1
    history_end = turn_start if split else cut_index
    to_summarize = messages[start:history_end]
    turn_prefix = messages[turn_start:cut_index] if split else []
    return to_summarize, turn_prefix, cut_index, split


# --- harness ----------------------------------------------------------------------------------


def load_old_plan_cut(rev: str):
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:compaction/core/cutpoint.py"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(tempfile.mkdtemp(prefix="cutpoint-old-")) / "cutpoint_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("cutpoint_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cutpoint_old"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module.plan_cut


def load_sessions(stored_ids: bool = True) -> list[tuple[str, list]]:
    from compaction.core.tokens import count_content
    from compaction.core.transcripts import read_claude_code
    from compaction.core.types import Msg

    sessions = []
    for path in sorted(TRANSCRIPTS.glob("*.jsonl")):
        transcript = read_claude_code(path)
        messages = [
            Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(transcript.messages)
        ]
        if stored_ids:
            # As the service hands them over: Message.tool_use_ids / tool_result_ids, stored at append.
            messages = [
                Msg(
                    m.seq,
                    m.role,
                    m.content,
                    m.tokens,
                    m.tool_use_ids if m.role == "assistant" else [],
                    m.tool_result_ids if m.role == "user" else [],
                )
                for m in messages
            ]
        if len(messages) >= 2:
            sessions.append((path.stem[:24], messages))
    return sessions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="timed passes over all sessions per implementation")
    parser.add_argument("--keep", type=int, nargs="+", default=[20_000, 2_000], help="keep_recent_tokens budgets")
    parser.add_argument("--pi-estimate", action="store_true", help="pi port counts chars/4 as pi does")
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the previous plan_cut")
    parser.add_argument(
        "--no-stored-ids", action="store_true", help="messages without their stored tool ids: read from the blocks"
    )
    args = parser.parse_args()

    from compaction.core.cutpoint import plan_cut

    sessions = load_sessions(stored_ids=not args.no_stored_ids)
    total_messages = sum(len(m) for _, m in sessions)
    print(
        f"{len(sessions)} Claude Code sessions, {total_messages:,} messages; budgets {args.keep}; "
        f"tool ids {'read from the blocks' if args.no_stored_ids else 'as stored'}"
    )

    impls = {
        "plan_cut": lambda msgs, keep: plan_cut(msgs, keep_recent_tokens=keep),
        "pi port": lambda msgs, keep: pi_prepare_cut(msgs, keep, estimate=args.pi_estimate),
    }
    old = load_old_plan_cut(args.old_rev)
    if old is not None:
        impls[f"plan_cut@{args.old_rev}"] = lambda msgs, keep: old(msgs, keep_recent_tokens=keep)
    else:
        print(f"(plan_cut@{args.old_rev} not available: no git history)")

    # Same first kept message as the old plan_cut wherever no tool_use is left waiting: a check
    # that the timing compares equal work, not a test (tests/core/test_cutpoint*.py are).
    if old is not None:
        for name, msgs in sessions:
            for keep in args.keep:
                a, b = plan_cut(msgs, keep_recent_tokens=keep), old(msgs, keep_recent_tokens=keep)
                if a.first_kept_seq != b.first_kept_seq:
                    print(f"  note: {name} keep={keep}: first kept seq {a.first_kept_seq} (was {b.first_kept_seq})")

    def one_pass(fn) -> float:
        started = time.perf_counter()
        for _, msgs in sessions:
            for keep in args.keep:
                fn(msgs, keep)
        return (time.perf_counter() - started) * 1000

    for fn in impls.values():  # warm up
        one_pass(fn)
    times: dict[str, list[float]] = {name: [] for name in impls}
    order = list(impls)
    for _ in range(args.rounds):
        order.append(order.pop(0))  # each implementation in each position in turn: none always runs first
        for name in order:
            times[name].append(one_pass(impls[name]))
    medians = {name: statistics.median(t) for name, t in times.items()}
    passes = len(sessions) * len(args.keep)
    for name, ms in medians.items():
        print(f"{name:>22}: {ms:8.2f} ms per pass ({ms / passes * 1000:7.1f} µs per cut)")
    pi = medians["pi port"]
    print(f"plan_cut / pi port = {medians['plan_cut'] / pi:.2f}  (target <= 1.00)")
    if old is not None:
        old_ms = medians[f"plan_cut@{args.old_rev}"]
        print(
            f"plan_cut@{args.old_rev} / pi port = {old_ms / pi:.2f}; plan_cut / plan_cut@{args.old_rev} = {medians['plan_cut'] / old_ms:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
