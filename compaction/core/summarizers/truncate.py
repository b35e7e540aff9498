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

# The person's first request is carried whole up to this many characters (a cut request reads as
# the whole of what was asked); a longer one is cut at a line, saying how much was left out.
MAX_GOAL_CHARS = 4_000


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
    """The first request's words, their lines kept, whole up to MAX_GOAL_CHARS; cut at a line
    boundary (a sentence's end for one long line) with how many characters were left out."""
    for m in messages:
        for text in user_texts(m):
            lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
            shown: list[str] = []
            used = 0
            for line in lines:
                if used + len(line) > MAX_GOAL_CHARS:
                    if not shown:  # one long line: up to its last sentence end that fits
                        head = line[:MAX_GOAL_CHARS]
                        end = max(head.rfind(". "), head.rfind("? "), head.rfind("! "))
                        shown.append(head[: end + 1] if end > 0 else head[: head.rfind(" ")].rstrip())
                        used += len(shown[-1])
                    break
                shown.append(line)
                used += len(line) + 1
            left = len("\n".join(lines)) - len("\n".join(shown))
            more = f"\n  […] ({left:,} more characters in #{m.seq})" if left > 0 else ""
            return "\n  ".join(shown) + more
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
