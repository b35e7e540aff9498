"""Issue trackers list issues in rows (`bd list`, `bd ready`, the children under `bd show`): the
next issue named is the open child the work comes to next, never the epic that closes only
when its children are done, and never an unrelated issue of the backlog."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages, _section

CUTS_PER_TRANSCRIPT = 12


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem[:30]}")
def test_an_epic_is_never_next_before_its_open_children(path: Path) -> None:
    msgs = _messages(path)
    cuts = [i + 1 for i, m in enumerate(msgs) if m.role == "assistant"]
    for cut in cuts[:: max(1, len(cuts) // CUTS_PER_TRANSCRIPT)]:
        summary = extractive_summary(msgs[:cut])
        states = dict(
            re.findall(r"`([\w.-]+)` (open|in_progress|closed|blocked)", summary.split("Issue states", 1)[-1])
        )
        next_steps = _section(summary, "## Next Steps", "## Critical Context")
        for issue_id, line in re.findall(r"(?m)^\d+\. Then the open issue `([\w.-]+)`(.*)$", next_steps):
            children = [c for c, state in states.items() if c.startswith(issue_id + ".") and state != "closed"]
            if children:
                assert "once its open children" in line, (path.name, cut, issue_id, children)


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=6)


def _bd(n: int, command: str, output: str) -> list[dict]:
    use = {"type": "tool_use", "id": f"b{n}", "name": "Bash", "input": {"command": command}}
    result = {"type": "tool_result", "tool_use_id": f"b{n}", "content": output}
    return [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.integers(min_value=3, max_value=5))
def test_the_next_issue_is_the_open_child_not_the_epic_nor_the_backlog(project, other, current):
    epic, backlog = f"{project}-epic", f"{other}x-zzz"
    children = [
        f"  ↳ {'✓' if n < current else '○'} {epic}.{n}: Child task number {n} ● P2" for n in range(1, current + 3)
    ]
    show = f"○ {epic} [EPIC] · The epic title   [● P2 · OPEN]\n\nCHILDREN\n" + "\n".join(children)
    ready = f"📋 Ready work (2 issues with no blockers):\n\n1. [● P1] [task] {backlog}: Unrelated backlog work\n"
    raw: list[dict] = [{"role": "user", "content": f"Work on {epic}."}]
    raw += _bd(1, f"bd show {epic}", show)
    raw += _bd(2, "bd ready", ready)
    raw += _bd(3, f"bd update {epic}.{current} --status in_progress", f"✓ Updated issue: {epic}.{current}")
    next_steps = _section(extractive_summary(se.as_msgs(raw)), "## Next Steps", "## Critical Context")
    then = re.findall(r"Then the open issue `([\w.-]+)`", next_steps)
    assert then[:2] == [f"{epic}.{current + 1}", f"{epic}.{current + 2}"]
    assert then[-1] == epic and backlog not in next_steps
