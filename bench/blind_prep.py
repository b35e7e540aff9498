"""Prepare blind reads of our handoff beside Claude Code's own summary, for a judge (a subagent).

    DEBUG=1 .venv/bin/python bench/blind_prep.py OUT_DIR [--focus TEXT]

For each shared Claude Code session holding its own compaction: one compaction of the history
before Claude Code's boundary with default settings (bench/summary_eval.py's core path), our
served summary in OUT_DIR/<session>/ours.txt and the messages we keep after it, as served (lean:
compaction.core.kept), rendered as text in tail.txt. Then ../shared/tools/blind_pair.py prepares
two folders per session: <session>-summary (summary against summary) and <session>-served
(summary + kept messages against Claude Code's summary alone). Hand each folder's JUDGE.md to
a judge that has not seen this code; `blind_pair.py reveal FOLDER` says which was ours.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import summary_eval as se  # noqa: E402
from compaction.core.kept import plan_kept  # noqa: E402
from compaction.core.kept import served_kept as lean_kept  # noqa: E402
from compaction.core.prune import tool_names  # noqa: E402
from compaction.core.tokens import get_tokenizer  # noqa: E402
from compaction.core.types import Msg  # noqa: E402


def served_kept(kept: list[Msg], names: dict[str, str]) -> list[Msg]:
    """The kept messages as the service serves them after a summary (compaction.core.kept)."""
    return lean_kept(kept, plan_kept(kept, names=names, tokenizer=get_tokenizer()))


def render_messages(messages: list[Msg]) -> str:
    """Messages as text a reader can follow: each block under its message number."""
    out = []
    for m in messages:
        for block in m.blocks:
            kind = block.get("type")
            if kind == "text" and str(block.get("text", "")).strip():
                out.append(f"#{m.seq} {m.role}: {block['text']}")
            elif kind == "tool_use":
                out.append(
                    f"#{m.seq} assistant calls {block.get('name')}: {json.dumps(block.get('input'), ensure_ascii=False)}"
                )
            elif kind == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
                error = " (error)" if block.get("is_error") else ""
                out.append(f"#{m.seq} tool result{error}: {content}")
            elif kind == "thinking" and str(block.get("thinking", "")).strip():
                out.append(f"#{m.seq} assistant (thinking): {block['thinking']}")
    return "\n\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--focus", default=None)
    args = parser.parse_args()
    tool = se.TRANSCRIPTS.parent.parent / "tools/blind_pair.py"
    for name in se.SESSIONS:
        path = se.TRANSCRIPTS / "claude-code" / f"{name}.jsonl"
        history, _claude = se.history_before_compaction(path)
        cut, result = se.compact_once(history, instructions=args.focus)
        folder = args.out / name[:8]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ours.txt").write_text(se.served_text(result))
        names = tool_names(se.as_msgs(history))
        (folder / "tail.txt").write_text(render_messages(served_kept(list(cut.kept), names)))
        for variant, extra in (("summary", []), ("served", ["--tail", str(folder / "tail.txt")])):
            target = args.out / f"{name[:8]}-{variant}"
            subprocess.run(
                [sys.executable, str(tool), "prepare", str(path), str(folder / "ours.txt"), str(target), *extra],
                check=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
