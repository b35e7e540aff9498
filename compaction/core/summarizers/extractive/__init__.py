"""Offline, deterministic summarizer: the handoff rendered from a model of the work.

No model and no network. The messages are folded into a typed work state (compaction.core.work:
tasks, files, commits, checks, errors, decisions, the person's words, the turn) and every
line of the summary is rendered from that state (render.py, one function per section), as of
the newest message: the status sections agree with the messages kept after the summary. The
agent's words appear only quoted and labelled, attached to the fact they explain.

The summary is fitted to its budget by compressing old finished work (level by level, see
view.py), never by dropping the person's words or a commit.
"""

from __future__ import annotations

from compaction.core.summarizers.base import SIZE_CHECK_FLOOR_TOKENS, Draft, SummaryInput
from compaction.core.summarizers.extractive.render import REQUIRED_HEADINGS, render
from compaction.core.summarizers.extractive.view import FULL, MINIMAL, TINY, Focus, View
from compaction.core.tokens import count_text
from compaction.core.types import Msg
from compaction.core.work import WorkState, fold

# The body's share of the characters a served summary may take (chain.MAX_SUMMARY_CHARS): the
# chain fits the file tags into what is left.
MAX_BODY_CHARS = 10_400


def handoff(
    state: WorkState,
    *,
    instructions: str | None = None,
    budget: int = 13_107,
    max_chars: int = MAX_BODY_CHARS,
    cut: int = 0,
) -> str:
    """The handoff of `state`, at the most detail that fits `budget` tokens and `max_chars`."""
    focus = Focus.of(instructions)
    text = ""
    # With a focus, what it selects is gathered in full under Focus and the rest is compressed.
    for level in range(MINIMAL if focus else FULL, TINY + 1):
        text = render(View(state, focus, level, cut))
        if len(text) <= max_chars and count_text(text) <= budget:
            break
    return text


def extractive_summary(
    messages: list[Msg],
    *,
    kept: list[Msg] | None = None,
    previous: WorkState | None = None,
    instructions: str | None = None,
    budget: int = 13_107,
    max_chars: int = MAX_BODY_CHARS,
) -> str:
    """The handoff of `messages` (continuing `previous`), stated as of the last of `kept`."""
    state = fold([*messages, *(kept or [])], previous)
    cut = kept[0].seq if kept else 0
    return handoff(state, instructions=instructions, budget=budget, max_chars=max_chars, cut=cut)


class ExtractiveSummarizer:
    name = "extractive"
    exact_budget = True  # fits its output to inp.output_budget itself
    required_headings = REQUIRED_HEADINGS

    def summarize(self, inp: SummaryInput) -> Draft:
        # A summary of a tiny range must still be smaller than the range (the chain checks it).
        budget = max(256, min(inp.output_budget, max(SIZE_CHECK_FLOOR_TOKENS, inp.input_tokens - 1)))
        now = inp.state_now if inp.state_now is not None else fold([*inp.messages, *inp.kept], inp.previous_state)
        cut = inp.kept[0].seq if inp.kept else 0
        summary = handoff(now, instructions=inp.instructions, budget=budget, cut=cut)
        return Draft(summary=summary, model="extractive")


__all__ = ["MAX_BODY_CHARS", "ExtractiveSummarizer", "extractive_summary", "handoff"]
