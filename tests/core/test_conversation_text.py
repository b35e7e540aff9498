"""The history as the summarizer model reads it: numbered, whole when it fits, cut longest-first."""

from __future__ import annotations

import re

import pytest

from compaction.core.conversation_text import (
    PROSE_FLOOR_CHARS,
    TOOL_FLOOR_CHARS,
    Caps,
    fit_conversation,
    serialize_conversation,
    water_level,
)
from compaction.core.tokens import count_text
from compaction.core.types import Msg


def _output(tag: str, chars: int) -> str:
    """A tool output of about `chars` characters whose every line names it and its line number."""
    lines, size, n = [], 0, 0
    while size < chars:
        line = f"{tag} line {n}: checked the module tree, nothing to report here"
        lines.append(line)
        size += len(line) + 1
        n += 1
    return "\n".join(lines)


def _history(sizes: dict[str, int], *, prose: int = 200) -> list[Msg]:
    msgs = [Msg(1, "user", "Audit the repository and report what you find.", 12)]
    seq = 2
    for tag, size in sizes.items():
        use = {"type": "tool_use", "id": tag, "name": "Bash", "input": {"command": f"audit {tag}"}}
        text = f"Looking at {tag}. " + "Reasoning about it. " * (prose // 20)
        msgs.append(Msg(seq, "assistant", [{"type": "text", "text": text}, use], 0))
        msgs.append(
            Msg(seq + 1, "user", [{"type": "tool_result", "tool_use_id": tag, "content": _output(tag, size)}], 0)
        )
        seq += 2
    return msgs


def _shown(text: str, tag: str) -> int:
    """How many characters of `tag`'s output the transcript shows (the cut's marker aside)."""
    body = text.removesuffix("\n</conversation>")
    entry = next(
        e for e in body.split("\n\n#") if e.split("]", 1)[0].endswith("[Tool result") and f"{tag} line 0:" in e
    )
    return len(re.sub(r"\n\[\.\.\. \d+ characters \(\d+ lines\) truncated[^\]]*\]\n", "", entry.split(": ", 1)[1]))


@pytest.mark.parametrize(
    ("lengths", "reduction", "floor", "cap"),
    [
        ([100, 50, 10], 60, 0, 45),  # (100 - 45) + (50 - 45) = 60: the two longest meet at 45
        ([100, 50, 10], 30, 0, 70),  # only the longest is cut
        ([100, 50, 10], 500, 20, 20),  # never below the floor, even when that is not enough
        ([100, 100, 100], 30, 0, 90),  # equals share the cut
        ([], 10, 5, 5),
    ],
)
def test_water_level_cuts_the_longest_first_and_only_as_far_as_needed(lengths, reduction, floor, cap):
    assert water_level(lengths, reduction, floor) == cap


def test_a_history_that_fits_is_shown_whole():
    msgs = _history({"alpha": 30_000, "beta": 12_000, "gamma": 500})
    fitted = fit_conversation(msgs, 50_000)
    assert fitted.fits and not fitted.cut and fitted.caps == Caps()
    assert fitted.text == serialize_conversation(msgs, Caps()) and fitted.tokens == count_text(fitted.text)
    assert "truncated" not in fitted.text
    assert _shown(fitted.text, "alpha") == len(_output("alpha", 30_000))


def test_beyond_the_budget_the_longest_outputs_are_cut_first():
    sizes = {"huge": 60_000, "large": 30_000, "medium": 6_000, "small": 1_500}
    msgs = _history(sizes)
    whole = count_text(serialize_conversation(msgs, Caps()))
    budget = whole // 3
    fitted = fit_conversation(msgs, budget)
    assert fitted.fits and fitted.tokens <= budget and fitted.tokens > budget * 0.9  # no more cut than needed
    assert fitted.caps.prose is None and TOOL_FLOOR_CHARS < fitted.caps.tool < 30_000
    # The two longest are cut to one cap (head and tail kept); the shorter ones are read whole.
    assert _shown(fitted.text, "huge") == _shown(fitted.text, "large") == fitted.caps.tool
    assert _shown(fitted.text, "medium") == len(_output("medium", 6_000))
    assert _shown(fitted.text, "small") == len(_output("small", 1_500))
    assert "huge line 0:" in fitted.text and _output("huge", 60_000).splitlines()[-1] in fitted.text
    assert fitted.text.count("truncated") == 2


def test_texts_are_cut_only_when_every_tool_output_is_at_its_floor():
    msgs = _history({"a": 2_000, "b": 2_000}, prose=40_000)
    whole = count_text(serialize_conversation(msgs, Caps()))
    fitted = fit_conversation(msgs, whole // 2)
    assert fitted.fits and fitted.caps.tool == TOOL_FLOOR_CHARS and PROSE_FLOOR_CHARS <= fitted.caps.prose < 40_000


def test_a_history_that_cannot_fit_says_so():
    msgs = _history({f"out{i}": 3_000 for i in range(40)})
    fitted = fit_conversation(msgs, 2_000)
    assert not fitted.fits and fitted.caps.tool == TOOL_FLOOR_CHARS and fitted.tokens > 2_000
