"""How an active summary is served to the model: one user message before the kept messages."""

from __future__ import annotations

SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary. "
    "Continue the work from where it left off; re-read any file you need instead of guessing "
    "its contents. Numbers like #12 are message numbers in the session's stored history.\n\n"
)
TURN_PREFIX_HEADING = "\n\n---\n\n**The turn in progress began before this point; its earlier part:**\n\n"


def render_summary_message(summary: str, turn_prefix_summary: str = "") -> str:
    """The summary as the model reads it. `turn_prefix_summary` is only ever set on compactions
    made before every summary was one text (a split turn's second layer): they are served as
    they were made."""
    text = f"{SUMMARY_PREFIX}<summary>\n{summary.strip()}\n</summary>"
    if turn_prefix_summary.strip():
        text += f"{TURN_PREFIX_HEADING}<turn-prefix-summary>\n{turn_prefix_summary.strip()}\n</turn-prefix-summary>"
    return text
