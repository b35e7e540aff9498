"""Offline, deterministic summarizer that writes a handoff an engineer could continue from.

No model and no network. It tracks the state of the work through the range (analysis.py:
one handler per source of evidence, then a reconciliation on the latest event of each item)
and writes it in the sections the LLM is asked for (sections.py: one function per section):

- the user's words: every message of the range (queued ones too), verbatim when short,
  the rules among them quoted under Constraints, the latest request standing out;
- progress in the agent's own words: its turn-final reports and diagnoses, deduplicated,
  grouped by the commit they led to, files with the purpose the agent stated for the edit;
- status reconciled to the latest event: a closed issue, a passing re-run, a fixed error
  overrides earlier mentions; next steps only from what is open at the end;
- the repository state (commits with hashes, pushed or not, uncommitted files, branch),
  decisions with their reasons, and exact error lines with whether and how they were fixed.

Everything is bounded by the output budget and a character cap; the least important and
oldest items go first, the user's own words last. One linear pass, regexes only.
"""

from __future__ import annotations

from compaction.core.prompts import SECTION_HEADINGS
from compaction.core.summarizers.base import SIZE_CHECK_FLOOR_TOKENS, Draft, SummaryInput
from compaction.core.summarizers.extractive.analysis import analyze
from compaction.core.summarizers.extractive.sections import MAX_BODY_CHARS, build_sections, fit_budget
from compaction.core.summarizers.extractive.turn_prefix import covered_turn_prefix, extractive_turn_prefix
from compaction.core.types import FileOps, Msg


def extractive_summary(
    messages: list[Msg],
    *,
    previous_summary: str | None = None,
    instructions: str | None = None,
    budget: int = 13_107,
    max_chars: int = MAX_BODY_CHARS,
    file_ops: FileOps | None = None,
) -> str:
    analysis = analyze(messages, file_ops)
    sections = build_sections(analysis, previous_summary=previous_summary, instructions=instructions)
    return fit_budget(sections, budget, max_chars)


class ExtractiveSummarizer:
    name = "extractive"
    exact_budget = True  # fits its output to inp.output_budget itself

    def summarize(self, inp: SummaryInput) -> Draft:
        # A summary of a tiny range must still be smaller than the range (the chain checks it).
        budget = max(256, min(inp.output_budget, max(SIZE_CHECK_FLOOR_TOKENS, inp.input_tokens - 1)))
        # One state over the whole range: the early part of a split turn is where issues get
        # closed and failures fixed, so the history's summary must see it to report the
        # status at the end, and summarizing it again apart would say the same things twice.
        history = [*inp.messages, *inp.turn_prefix]
        summary = extractive_summary(
            history,
            previous_summary=inp.previous_summary,
            instructions=inp.instructions,
            budget=budget,
            file_ops=inp.file_ops,  # history is the chain's whole range: its operations as extracted
        )
        turn = covered_turn_prefix(inp.turn_prefix) if inp.turn_prefix else ""
        return Draft(summary=summary, turn_prefix_summary=turn, model="extractive")


__all__ = ["ExtractiveSummarizer", "extractive_summary", "extractive_turn_prefix", "SECTION_HEADINGS"]
