"""What a compaction serves on real transcripts, at default settings: the summary message and
the kept messages (served lean) come to at most 15,000 tokens of messages (our estimate, no
tools or system prompt). bench/kept_eval.py prints the same figures over more cuts."""

from __future__ import annotations

import pytest

from bench import kept_eval as ke
from bench import summary_eval as se
from compaction.core.transcripts.detect import read_transcript
from tests.services import TRANSCRIPTS

TARGET = 15_000
CUTS = 3  # spread over each transcript, the last at its end


def _cases() -> list[tuple[str, int]]:
    cases = []
    for path in ke.transcripts(TRANSCRIPTS):
        messages = se.as_msgs(se.messages_for_api(read_transcript(path).messages))
        for end in ke.cut_points(messages, CUTS, 12_000):
            cases.append((str(path.relative_to(TRANSCRIPTS)), end))
    return cases


CASES = _cases()


def test_the_cuts_cover_claude_code_pi_and_swe_agent():
    assert {case.split("/")[0] for case, _ in CASES} >= {"claude-code", "pi", "swe-agent"}
    assert len({case for case, _ in CASES}) >= 8


@pytest.mark.parametrize(("name", "end"), CASES, ids=[f"{n}@{e}" for n, e in CASES])
def test_served_after_a_compaction_is_at_most_15000_tokens(name, end):
    messages = se.as_msgs(se.messages_for_api(read_transcript(TRANSCRIPTS / name).messages))
    served = ke.Cut(messages[:end]).lean(ke.resolve_config(context_window=ke.WINDOW, defaults={}).keep_recent_tokens)
    if served is None:  # nothing to compact: the whole history is what the cut would keep
        assert sum(m.tokens for m in messages[:end]) <= TARGET
        return
    assert served.total <= TARGET, (served.summary, served.kept)


@pytest.mark.parametrize("session", se.SESSIONS)
def test_at_claude_codes_own_compaction_point_too(session):
    history, _ = se.history_before_compaction(TRANSCRIPTS / "claude-code" / f"{session}.jsonl")
    cut, result = se.compact_once(history)
    assert se.served_tokens(cut, result, history) <= TARGET
