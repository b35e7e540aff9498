"""Golden handoffs: the offline summary of the shared Claude Code sessions at the point Claude
Code compacted them (default settings, the service's core path: policy plan, chain, checks), as
blind readers judged them beside Claude Code's own summary (the README's measures). Compared as
sections and facts (tests/handoff_facts.py: headings in order; per section the quoted
identifiers and paths, commit hashes, listed files), not as whole texts: a change of wording
passes, a change of what the handoff states shows here as a diff of facts to read.

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/core/work/test_golden.py   # after reading the diff
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.corpus import SESSIONS, TRANSCRIPTS, compact_once, corpus, history_before_compaction, served_text
from tests.handoff_facts import facts, harness_lines, narration_lines

GOLDEN = Path(__file__).parent / "golden"


def _diff(golden: dict[str, list[str]], now: dict[str, list[str]]) -> list[str]:
    out = []
    if list(golden) != list(now):
        out.append(f"sections: {list(golden)} → {list(now)}")
    for section in golden.keys() & now.keys():
        lost, gained = set(golden[section]) - set(now[section]), set(now[section]) - set(golden[section])
        if lost or gained:
            out.append(f"{section}: lost {sorted(lost)}, gained {sorted(gained)}")
    return out


@corpus
@pytest.mark.parametrize("name", SESSIONS, ids=lambda n: n[:8])
def test_the_handoff_of_a_shared_session_states_the_golden_facts(name: str) -> None:
    history, _claude = history_before_compaction(TRANSCRIPTS / "claude-code" / f"{name}.jsonl")
    _cut, result = compact_once(history)
    served = served_text(result)
    now = facts(served)
    golden = GOLDEN / f"{name[:8]}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(now, indent=1, ensure_ascii=False) + "\n")
    assert _diff(json.loads(golden.read_text()), now) == [], f"the handoff's facts changed (golden: {golden})"
    assert narration_lines(served) == [] and harness_lines(served) == []


def test_facts_are_read_per_section_and_ignore_wording() -> None:
    text = (
        "Intro line\n<summary>\n## Where Things Stand\n- Committed 99b497c on `spotter-gqc`, see `lib/a.ex`.\n"
        "## Next Steps\n- Run `mix test` again\n<read-files>\nlib/a.ex\n</read-files>\n</summary>"
    )
    reworded = text.replace("Committed", "Made commit").replace("see", "look at")
    assert (
        facts(text)
        == facts(reworded)
        == {
            "": [],
            "## Where Things Stand": ["99b497c", "lib/a.ex", "spotter-gqc"],
            "## Next Steps": [],  # `mix test` holds a space: a command quoted, its wording
            "<read-files>": ["lib/a.ex"],
        }
    )
    assert _diff(facts(text), facts(text.replace("99b497c", "1234abc"))) == [
        "## Where Things Stand: lost ['99b497c'], gained ['1234abc']"
    ]
