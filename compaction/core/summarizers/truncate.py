"""Last-resort summarizer: counts, tool activity and the previous summary.

No model, no parsing that can fail: it always produces the section format, so the chain
always ends in a summary the service can serve.
"""

from __future__ import annotations

from collections import Counter

from compaction.core.blocks import TOOL_RESULT, TOOL_USE
from compaction.core.prompts import strip_file_tags
from compaction.core.summarizers.base import Draft, SummaryInput
from compaction.core.text_heuristics import user_texts
from compaction.core.types import Msg

MAX_GOAL_CHARS = 400


def compacted_line(messages: list[Msg]) -> str:
    users = sum(1 for m in messages if m.is_user_turn_start)
    assistants = sum(1 for m in messages if m.role == "assistant")
    tools: Counter[str] = Counter()
    errors = 0
    for m in messages:
        for b in m.blocks:
            if b.get("type") == TOOL_USE:
                tools[str(b.get("name", "tool"))] += 1
            elif b.get("type") == TOOL_RESULT and b.get("is_error"):
                errors += 1
    line = (
        f"[Compacted {len(messages)} messages: {users} user, {assistants} assistant, {sum(tools.values())} tool calls"
    )
    if tools:
        line += " (" + ", ".join(f"{name} ×{n}" for name, n in tools.most_common(8)) + ")"
    if errors:
        line += f", {errors} failed tool calls"
    return line + "]"


def _first_request(messages: list[Msg]) -> str:
    for m in messages:
        for text in user_texts(m):
            return text if len(text) <= MAX_GOAL_CHARS else text[:MAX_GOAL_CHARS].rstrip() + "…"
    return ""


def truncate_summary(inp: SummaryInput) -> str:
    line = compacted_line(inp.messages)
    previous = strip_file_tags(inp.previous_summary or "")
    if previous and "## Critical Context" in previous:
        # Carry the previous summary over whole; the new range is only counted.
        return previous.rstrip() + f"\n- {line}"
    goal = _first_request(inp.messages)
    parts = [
        "## Goal",
        f"- {goal}" if goal else "- (not recorded: summarized by the truncate fallback)",
        "",
        "## Constraints & Preferences",
        "- (not extracted: this fallback summary only counts the messages; the first request is under Goal)",
        "",
        "## Progress",
        "### Done",
        f"- {line}",
        "",
        "### In Progress",
        "- (not extracted by this fallback summary: the messages kept after it show the work)",
        "",
        "### Blocked",
        "- (not extracted by this fallback summary)",
        "",
        "## Key Decisions",
        "- (not extracted by this fallback summary)",
        "",
        "## Next Steps",
        "1. Continue from the messages kept after this summary; re-read the files listed below before changing them.",
        "",
        "## Critical Context",
        f"- {line}",
    ]
    if previous:
        parts += ["", "Previous summary (carried over):", "", previous]
    return "\n".join(parts)


class TruncateSummarizer:
    name = "truncate"

    def summarize(self, inp: SummaryInput) -> Draft:
        return Draft(summary=truncate_summary(inp), model="truncate")
