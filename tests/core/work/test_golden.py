"""Golden handoffs: the offline summary of the shared Claude Code sessions at the point Claude
Code compacted them (default settings, the service's core path: policy plan, chain, checks), as
blind readers judged them beside Claude Code's own summary (the README's measures). A change
to any rule of the work model or the renderer shows here as a diff to read, not only as a
changed figure.

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/core/work/test_golden.py   # after reading the diff
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import summary_eval as se
from tests.services import TRANSCRIPTS

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", se.SESSIONS, ids=lambda n: n[:8])
def test_the_handoff_of_a_shared_session_is_the_golden_one(name: str) -> None:
    history, _claude = se.history_before_compaction(TRANSCRIPTS / "claude-code" / f"{name}.jsonl")
    _cut, result = se.compact_once(history)
    served = se.served_text(result)
    golden = GOLDEN / f"{name[:8]}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(served)
    assert served == golden.read_text(), f"the handoff changed: diff it against {golden}"
