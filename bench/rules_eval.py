"""The offline summary on many cuts of every shared transcript, scored and written out, to show what
a change to the summarizer's text rules does (before/after, side by side).

    .venv/bin/python bench/rules_eval.py --out DIR [--cuts 6] [--transcripts DIR] [--against OLD_DIR]

Every transcript (Claude Code, pi, SWE-agent; $COMPACTOR_TRANSCRIPTS_DIR or the shared ones) is cut
at --cuts points spread over its history (never inside a tool pair; bench/kept_eval.cut_points),
each prefix compacted once with default settings through the core path a job takes
(bench/summary_eval.compact_once; a prefix the default keep budget holds whole keeps 30 % of its
tokens instead, so the small transcripts count too). Per cut: shared/tools/fidelity.py's ledger
recall over the summarized range (files, commands, error lines, requests), as served and in prose
lines only, and the summary's characters. Each summary is written to DIR/<transcript>@<cut>.md.

--against OLD_DIR (an earlier run, e.g. on main): per cut whose summary changed, recall before →
after and a unified diff's size; then the totals (mean recall before/after, cuts better/worse).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import kept_eval as ke  # noqa: E402
from bench import summary_eval as se  # noqa: E402
from compaction.core.config import resolve_config  # noqa: E402
from compaction.core.transcripts.detect import read_transcript  # noqa: E402

SMALL_KEEP = 0.3


def cut_summaries(path: Path, cuts: int, min_tokens: int) -> list[tuple[int, list[dict], str]]:
    """(cut, the summarized range as API messages, the served summary) per cut of one transcript."""
    history = se.messages_for_api(read_transcript(path).messages)
    messages = se.as_msgs(history)
    default_keep = resolve_config(context_window=se.WINDOW, defaults={}).keep_recent_tokens
    out = []
    for end in ke.cut_points(messages, cuts, min_tokens):
        total = sum(m.tokens for m in messages[:end])
        keep = int(SMALL_KEEP * total) if total <= default_keep else None
        cut, result = se.compact_once(history[:end], keep=keep)
        if cut.nothing_to_compact or not result.summary:
            continue
        summarized = [{"role": m.role, "content": m.content} for m in cut.summarized]
        out.append((end, summarized, se.served_text(result)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = os.environ.get("COMPACTOR_TRANSCRIPTS_DIR") or str(se.shared_dir() / "data/transcripts")
    parser.add_argument("--transcripts", type=Path, default=Path(default_dir))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cuts", type=int, default=6)
    parser.add_argument("--min-tokens", type=int, default=1_500)
    parser.add_argument("--against", type=Path, help="an earlier run's --out: compare")
    args = parser.parse_args()
    fidelity = se.load_fidelity()
    args.out.mkdir(parents=True, exist_ok=True)
    scores: dict[str, dict] = {}
    for path in ke.transcripts(args.transcripts):
        if "subagents" in path.parts:
            continue
        for end, summarized, text in cut_summaries(path, args.cuts, args.min_tokens):
            name = f"{path.stem[:40]}@{end}"
            (args.out / f"{name}.md").write_text(text, encoding="utf-8")
            scores[name] = {
                "recall": fidelity.score(summarized, text)["recall"],
                "prose_recall": fidelity.score(summarized, fidelity.prose_only(text))["recall"],
                "chars": len(text),
            }
            print(
                f"{name:48} recall {scores[name]['recall']}  prose {scores[name]['prose_recall']}  {len(text):>6,} chars"
            )
    (args.out / "scores.json").write_text(json.dumps(scores, indent=1), encoding="utf-8")
    transcripts = len({name.split("@")[0] for name in scores})
    recalls = [s["recall"] for s in scores.values() if s["recall"] is not None]
    print(f"\n{len(scores)} cuts of {transcripts} transcripts; mean recall {statistics.mean(recalls):.3f}")
    if args.against:
        compare(args.against, args.out, scores)
    return 0


def compare(old_dir: Path, new_dir: Path, new: dict[str, dict]) -> None:
    old = json.loads((old_dir / "scores.json").read_text(encoding="utf-8"))
    common = sorted(set(old) & set(new))
    changed, better, worse = 0, 0, 0
    print(f"\nagainst {old_dir}: {len(common)} cuts in both")
    for name in common:
        before = (old_dir / f"{name}.md").read_text(encoding="utf-8")
        after = (new_dir / f"{name}.md").read_text(encoding="utf-8")
        if before == after:
            continue
        changed += 1
        diff = [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)]
        lines = sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        a, b = old[name]["recall"], new[name]["recall"]
        better += (b or 0) > (a or 0)
        worse += (b or 0) < (a or 0)
        print(
            f"  {name:48} recall {a} → {b}  prose {old[name]['prose_recall']} → {new[name]['prose_recall']}  "
            f"chars {old[name]['chars']:,} → {new[name]['chars']:,}  {lines} lines differ"
        )
    mean = lambda d: statistics.mean(d[n]["recall"] or 0 for n in common)  # noqa: E731
    print(
        f"{changed} summaries changed; recall better on {better}, worse on {worse}; "
        f"mean recall {mean(old):.3f} → {mean(new):.3f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
