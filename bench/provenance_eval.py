"""Whose words the shared transcripts' user messages carry, as the importers and shapes say.

    .venv/bin/python bench/provenance_eval.py [--transcripts DIR]

For every shared transcript (Claude Code main and subagent logs, pi, SWE-agent), read with the
importers: user messages by provenance ("" = tool results only), the harness's text by kind, the
person's words by kind, and the words that reading each text block by its shape alone would give
to the person though the importer (Claude Code's meta lines) or the block's place (the text
right after a slash command) says they are the harness's. Pure Python, no database.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compaction.core.provenance import HARNESS, PERSON, message_parts, split_text, user_words  # noqa: E402
from compaction.core.transcripts import read_transcript  # noqa: E402
from compaction.core.types import Msg  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "data" / "transcripts"


def evaluate(path: Path) -> tuple[Counter[str], Counter[str], Counter[str], list[str]]:
    """(user messages by provenance, harness parts by kind, person's words by kind, words that
    shape alone gives to the person but the transcript says are the harness's)."""
    transcript = read_transcript(path)
    by_provenance: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    said: Counter[str] = Counter()
    misread: list[str] = []
    for index, message in enumerate(transcript.messages):
        if message["role"] != "user":
            continue
        msg = Msg(index, "user", message["content"], 0, provenance=message.get("provenance", ""))
        by_provenance[msg.provenance or '""'] += 1
        kinds.update(part.kind or "unknown" for part in message_parts(msg) if part.provenance == HARNESS)
        words = user_words(msg)
        said.update(kind or "typed" for _words, kind in words)
        person = {w for w, _kind in words}
        texts = [b.get("text", "") for b in msg.blocks if b.get("type") == "text"]
        blind = [p.words for text in texts for p in split_text(text) if p.provenance == PERSON and p.words]
        misread += [text for text in blind if text not in person]
    return by_provenance, kinds, said, misread


def _shown(counts: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.most_common()) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transcripts", type=Path, default=DEFAULT)
    args = parser.parse_args()
    files = sorted(p for p in args.transcripts.rglob("*") if p.suffix in (".jsonl", ".traj"))
    totals: Counter[str] = Counter()
    all_kinds: Counter[str] = Counter()
    all_said: Counter[str] = Counter()
    for path in files:
        by_provenance, kinds, said, misread = evaluate(path)
        totals.update(by_provenance)
        all_kinds.update(kinds)
        all_said.update(said)
        print(f"{path.relative_to(args.transcripts)}: user messages {_shown(by_provenance)}; harness {_shown(kinds)}")
        for text in misread:
            print(f"    by shape alone the user's, stated the harness's: {' '.join(text.split())[:90]!r}")
    print(f"\nall files: user messages {_shown(totals)}")
    print(f"the person's words by kind: {_shown(all_said)}")
    print(f"harness text by kind: {_shown(all_kinds)}")


if __name__ == "__main__":
    main()
