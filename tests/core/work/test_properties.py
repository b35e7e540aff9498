"""Properties of the work model over every shared transcript (Claude Code, pi, SWE-agent).

Folding is incremental: a state folded in two parts equals the state folded at once, so a
merge continues the stored state instead of re-reading the history. The stored state survives
its JSON round trip. The handoff rendered from any state fits its budget at every level, keeps
the agent's words inside quotes and the harness's injected text out of the person's sections.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.core.summarizers.extractive import MAX_BODY_CHARS, handoff
from compaction.core.summarizers.extractive.render import REQUIRED_HEADINGS, render
from compaction.core.summarizers.extractive.view import FULL, TINY, Focus, View
from compaction.core.transcripts.detect import read_transcript
from compaction.core.types import Msg
from compaction.core.work import fold, from_json, to_json
from tests.corpus import TRANSCRIPTS, corpus
from tests.handoff_facts import harness_lines, narration_lines

pytestmark = corpus

FILES = sorted(
    p
    for p in TRANSCRIPTS.rglob("*")
    if p.suffix in (".jsonl", ".traj") and "subagents" not in p.parts and p.stat().st_size < 4_000_000
)


def _msgs(path: Path) -> list[Msg]:
    out = []
    for i, m in enumerate(read_transcript(path).messages, 1):
        role = m["role"] if isinstance(m, dict) else m.role
        content = m["content"] if isinstance(m, dict) else m.content
        out.append(Msg(i, role, content, 0))
    return out


@pytest.fixture(scope="module", params=FILES, ids=lambda p: f"{p.parent.name}/{p.stem[:24]}")
def session(request) -> list[Msg]:
    return _msgs(request.param)


def test_the_shared_transcripts_are_all_read() -> None:
    assert {p.parent.name for p in FILES} >= {"pi", "swe-agent"}
    assert len([p for p in FILES if "claude-code" in p.parts]) >= 10


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.9])
def test_folding_in_two_parts_equals_folding_at_once(session: list[Msg], fraction: float) -> None:
    at = max(1, int(len(session) * fraction))
    whole = fold(session)
    resumed = fold(session[at:], fold(session[:at]))
    assert to_json(resumed) == to_json(whole)


def test_folding_again_skips_what_the_state_has_read(session: list[Msg]) -> None:
    state = fold(session)
    assert to_json(fold(session, state)) == to_json(state)


def test_the_stored_state_survives_its_json_round_trip(session: list[Msg]) -> None:
    state = fold(session)
    data = to_json(state)
    assert to_json(from_json(data)) == data


def test_the_handoff_fits_and_quotes_at_every_level(session: list[Msg]) -> None:
    state = fold(session)
    for level in range(FULL, TINY + 1):
        text = render(View(state, Focus.of(None), level))
        assert all(h in text for h in REQUIRED_HEADINGS), level
        assert narration_lines(text) == [], level
        assert harness_lines(text) == [], level
    fitted = handoff(state)
    assert len(fitted) <= MAX_BODY_CHARS


def test_a_focus_changes_the_handoff(session: list[Msg]) -> None:
    state = fold(session)
    if not state.files:
        pytest.skip("no files to focus on")
    path = max(state.files.values(), key=lambda f: (f.edits, f.last)).path
    focused = handoff(state, instructions=f"focus on {path}")
    assert focused != handoff(state)
    assert "## Focus" in focused
