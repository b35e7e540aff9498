"""What a compaction serves on real transcripts, at default settings: the summary message and
the kept messages (served lean) come to at most 15,000 tokens of messages (our estimate, no
tools or system prompt). bench/kept_eval.py prints the same figures over more cuts."""

from __future__ import annotations

import pytest

from compaction.core.cutpoint import valid_cut_indices
from compaction.core.transcripts.detect import read_transcript
from compaction.core.types import Msg
from tests.corpus import (
    SESSIONS,
    TRANSCRIPTS,
    as_msgs,
    compact_once,
    corpus,
    history_before_compaction,
    messages_for_api,
    served_tokens,
    transcripts,
)

pytestmark = corpus

TARGET = 15_000
CUTS = 3  # spread over each transcript, the last at its end
MIN_TOKENS = 12_000  # the smallest prefix compacted


def cut_points(messages: list[Msg], cuts: int, min_tokens: int) -> list[int]:
    """Prefix lengths spread over the history where a compaction may cut (a valid cut position
    of the whole history: never inside a tool pair), each prefix over `min_tokens`."""
    total, sums = 0, [0]
    for m in messages:
        total += m.tokens
        sums.append(total)
    valid = sorted(i for i in {*valid_cut_indices(messages), len(messages)} if sums[i] > min_tokens)
    if not valid:
        return []
    return sorted({valid[round(k * (len(valid) - 1) / max(1, cuts - 1))] for k in range(cuts)})


def _history(name: str) -> list[dict]:
    return messages_for_api(read_transcript(TRANSCRIPTS / name).messages)


def _cases() -> list[tuple[str, int]]:
    cases = []
    for path in transcripts(TRANSCRIPTS):
        for end in cut_points(as_msgs(_history(str(path.relative_to(TRANSCRIPTS)))), CUTS, MIN_TOKENS):
            cases.append((str(path.relative_to(TRANSCRIPTS)), end))
    return cases


CASES = _cases()


def test_the_cuts_cover_claude_code_pi_and_swe_agent():
    assert {case.split("/")[0] for case, _ in CASES} >= {"claude-code", "pi", "swe-agent"}
    assert len({case for case, _ in CASES}) >= 8


@pytest.mark.parametrize(("name", "end"), CASES, ids=[f"{n}@{e}" for n, e in CASES])
def test_served_after_a_compaction_is_at_most_15000_tokens(name, end):
    history = _history(name)[:end]
    cut, result = compact_once(history)
    if cut.nothing_to_compact:  # the whole history is what the cut would keep
        assert sum(m.tokens for m in as_msgs(history)) <= TARGET
        return
    assert served_tokens(cut, result, history) <= TARGET, result.summary


@pytest.mark.parametrize("session", SESSIONS)
def test_at_claude_codes_own_compaction_point_too(session):
    history, _ = history_before_compaction(TRANSCRIPTS / "claude-code" / f"{session}.jsonl")
    cut, result = compact_once(history)
    assert served_tokens(cut, result, history) <= TARGET
