"""What is served after a compaction, before and after the lean kept part, over many cuts.

    .venv/bin/python bench/kept_eval.py [--transcripts DIR] [--cuts 12] [--keep 20000,12000,10000,8000]

Every transcript in DIR (default $COMPACTOR_TRANSCRIPTS_DIR, else the shared transcripts: Claude
Code, pi, SWE-agent, every format the importers read) whose history exceeds --min-tokens is cut at
--cuts points spread over it (after whole exchanges: never inside a tool pair, at positions a
compaction may cut at), and each prefix is compacted once with default settings over a 200k
window through the pure core path a job takes (policy.plan → its cut → the offline summarizer).
Per cut, tokens of messages served right after the compaction (the summary message + the kept
messages; no tools, no system prompt — our estimate, cl100k):

- before: main's serving — the default keep budget of 20,000 tokens, the kept part's tool output
  beyond its newest 2,000 tokens trimmed by a prune boundary when that saved ≥ 1,000 tokens;
- lean@K: the kept part served lean (compaction.core.kept) with a default keep budget of K tokens
  (each --keep value; the first is the old default, to separate what trimming does from what the
  budget does).

Then, per column: the largest and median figures and how many cuts are over the target (15,000);
and what planning the lean kept part costs: its time against the old kept prune's and against the
whole compaction (plan + summarizer) in the same run, as ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compaction.core import policy  # noqa: E402
from compaction.core.config import resolve_config  # noqa: E402
from compaction.core.cutpoint import valid_cut_indices  # noqa: E402
from compaction.core.kept import plan_kept  # noqa: E402
from compaction.core.prune import plan_prune, prune_content, tool_names  # noqa: E402
from compaction.core.summarizers import SummaryInput, build_chain, summarize  # noqa: E402
from compaction.core.summary_message import render_summary_message  # noqa: E402
from compaction.core.tokens import count_content, get_tokenizer  # noqa: E402
from compaction.core.transcripts.detect import read_transcript  # noqa: E402
from compaction.core.types import Msg  # noqa: E402
from compaction.core.work import fold, work_start  # noqa: E402
from tests.corpus import TRANSCRIPTS, WINDOW, as_msgs, messages_for_api, transcripts  # noqa: E402

TARGET = 15_000
# main's kept-part prune (before compaction.core.kept): newest 2,000 tokens of output whole,
# applied only when it saved 1,000 tokens.
OLD_PROTECT, OLD_MIN_SAVINGS = 2_000, 1_000


def cut_points(messages: list[Msg], cuts: int, min_tokens: int) -> list[int]:
    """Prefix lengths spread over the history where a compaction may cut (a valid cut position
    of the whole history: never inside a tool pair), each prefix over `min_tokens`."""
    total, sums = 0, [0]
    for m in messages:
        total += m.tokens
        sums.append(total)
    valid = sorted({i for i in valid_cut_indices(messages) if sums[i] > min_tokens} | {len(messages)})
    valid = [i for i in valid if sums[i] > min_tokens]
    if not valid:
        return []
    picks = {valid[round(k * (len(valid) - 1) / max(1, cuts - 1))] for k in range(cuts)}
    return sorted(picks)


@dataclasses.dataclass
class Served:
    summary: int
    kept: int
    kept_messages: int

    @property
    def total(self) -> int:
        return self.summary + self.kept


class Cut:
    """One prefix of one transcript, compacted as a job compacts it."""

    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages
        self.total = sum(m.tokens for m in messages)
        self.names = tool_names(messages)
        self.start = work_start(fold(messages, None))
        self.summaries: dict[int, tuple[int, float]] = {}  # first kept seq → (tokens, seconds)
        self.timings: dict[str, float] = {"old prune": 0.0, "lean plan": 0.0, "compaction": 0.0}

    def plan(self, keep: int) -> Any:
        config = dataclasses.replace(resolve_config(context_window=WINDOW, defaults={}), keep_recent_tokens=keep)
        return policy.plan(
            policy.PolicyInputs(
                config=config,
                tokens_before=self.total,
                messages=self.messages,
                served_messages=self.messages,
                estimated_before=self.total,
                calibration=None,
                system_prompt_tokens=0,
                summary_framing_tokens=count_content(render_summary_message("")),
                strategy="extractive",
                work_start_seq=self.start,
            )
        )

    def summary_tokens(self, plan: Any) -> int:
        """The summary message's tokens; the summarizer's time is added to the compaction's
        (once per distinct cut: it is deterministic, its time is reused)."""
        cut = plan.cut
        if cut.first_kept_seq not in self.summaries:
            config = resolve_config(context_window=WINDOW, defaults={})
            chain = build_chain(
                api_key=None, base_url=None, model=config.summarizer_model, timeout=30, max_retries=0, strategy="auto"
            )
            started = time.perf_counter()
            result = summarize(
                SummaryInput(
                    messages=list(cut.summarized),
                    output_budget=config.summary_budget,
                    model=config.summarizer_model,
                    kept=list(cut.kept),
                ),
                chain,
            )
            seconds = time.perf_counter() - started
            text = render_summary_message(result.summary)
            self.summaries[cut.first_kept_seq] = (count_content(text), seconds)
        tokens, seconds = self.summaries[cut.first_kept_seq]
        self.timings["compaction"] += seconds
        return tokens

    def before(self) -> Served | None:
        started = time.perf_counter()
        plan = self.plan(20_000)
        self.timings["compaction"] += time.perf_counter() - started
        if plan.cut is None or plan.cut.nothing_to_compact:
            return None
        kept = list(plan.cut.kept)
        started = time.perf_counter()
        prune = plan_prune(kept, names=self.names, protect_tokens=OLD_PROTECT, min_savings=OLD_MIN_SAVINGS)
        self.timings["old prune"] += time.perf_counter() - started
        boundary = prune.prune_before_seq or 0
        tokens = sum(
            count_content(prune_content(m.content, tool_names=self.names, seq=m.seq))
            if m.seq < boundary and m.role == "user"
            else m.tokens
            for m in kept
        )
        return Served(self.summary_tokens(plan), tokens, len(kept))

    def lean(self, keep: int) -> Served | None:
        started = time.perf_counter()
        plan = self.plan(keep)
        self.timings["compaction"] += time.perf_counter() - started
        if plan.cut is None or plan.cut.nothing_to_compact:
            return None
        kept = list(plan.cut.kept)
        started = time.perf_counter()
        lean = plan_kept(kept, names=self.names, tokenizer=get_tokenizer())
        self.timings["lean plan"] += time.perf_counter() - started
        return Served(self.summary_tokens(plan), lean.kept_tokens, len(kept))


def row(name: str, end: int, before: Served | None, leans: list[Served | None]) -> str:
    def cell(s: Served | None) -> str:
        return "nothing to compact" if s is None else f"{s.summary:,}+{s.kept:,}={s.total:,}"

    return f"{name[:24]:24} {end:>5} " + " ".join(f"{cell(s):>20}" for s in (before, *leans))


def summarize_column(label: str, values: list[int]) -> str:
    if not values:
        return f"{label:>12}: no compaction"
    over = sum(v > TARGET for v in values)
    return (
        f"{label:>12}: max {max(values):>6,}  median {int(statistics.median(values)):>6,}  "
        f"over {TARGET:,}: {over} of {len(values)} cuts"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=Path, default=TRANSCRIPTS)
    parser.add_argument("--cuts", type=int, default=12)
    parser.add_argument("--keep", default="20000,12000,10000,8000")
    parser.add_argument("--min-tokens", type=int, default=12_000, help="smallest prefix compacted")
    args = parser.parse_args()
    keeps = [int(k) for k in args.keep.split(",")]
    default = resolve_config(context_window=WINDOW, defaults={}).keep_recent_tokens
    labels = ["before", *(f"lean@{k // 1000}k" + ("*" if k == default else "") for k in keeps)]
    print("served after a compaction: summary + kept messages = tokens (cl100k, no tools or system prompt)")
    print(f"{'transcript':24} {'cut':>5} " + " ".join(f"{label:>20}" for label in labels))
    columns: list[list[int]] = [[] for _ in labels]
    paired: list[tuple[int, int]] = []  # (before, at the default budget) on the cuts main compacted
    timings: dict[str, float] = {"old prune": 0.0, "lean plan": 0.0, "compaction": 0.0}
    used = set()
    rows = 0
    for path in transcripts(args.transcripts):
        try:
            history = messages_for_api(read_transcript(path).messages)
        except Exception as error:  # noqa: BLE001 - a file no importer reads is reported and skipped
            print(f"{path.name[:24]:24} skipped: {error}"[:120])
            continue
        messages = as_msgs(history)
        for end in cut_points(messages, args.cuts, args.min_tokens):
            cut = Cut(messages[:end])
            served = [cut.before(), *(cut.lean(k) for k in keeps)]
            for column, s in zip(columns, served, strict=True):
                if s is not None:
                    column.append(s.total)
            now = served[1 + keeps.index(default)] if default in keeps else None
            if served[0] is not None and now is not None:
                paired.append((served[0].total, now.total))
            for key, value in cut.timings.items():
                timings[key] += value
            used.add(path.name)
            rows += 1
            print(row(path.name, end, served[0], served[1:]), flush=True)
    print()
    print(f"{rows} cuts of {len(used)} transcripts; target ≤ {TARGET:,} tokens; * the default keep budget")
    for label, values in zip(labels, columns, strict=True):
        print(summarize_column(label, values))
    if paired:
        ratios = [after / before for before, after in paired]
        print(
            f"on the {len(paired)} cuts main compacted: before → default, median {int(statistics.median(b for b, _ in paired)):,}"
            f" → {int(statistics.median(a for _, a in paired)):,} tokens ({statistics.median(ratios):.2f}× median ratio)"
        )
    # Per compaction: the lean plan ran once per --keep value, the old prune once per cut, and a
    # whole compaction (policy plan + summarizer) once per column.
    compactions = sum(len(c) for c in columns)
    lean = timings["lean plan"] / max(1, sum(len(c) for c in columns[1:]))
    old = timings["old prune"] / max(1, len(columns[0]))
    whole = timings["compaction"] / max(1, compactions)
    print(
        f"planning the lean kept part: {lean * 1000:.1f} ms a compaction; {lean / max(old, 1e-9):.2f}× the old kept "
        f"prune ({old * 1000:.1f} ms), {lean / max(whole, 1e-9):.3f}× a whole compaction "
        f"(policy plan + offline summarizer, {whole * 1000:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
