"""Building generated sessions for the summary tests: messages as the API stores them, tool calls
with their results, and a summary's section by its heading."""

from __future__ import annotations

from compaction.core.tokens import count_content
from compaction.core.types import Msg


def msgs(raw: list[dict]) -> list[Msg]:
    """Raw {role, content} messages as core messages, numbered from 1 with their token counts."""
    return [Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(raw)]


def section(summary: str, start: str, end: str) -> str:
    """The text between the heading `start` and the next `end` ("" when the heading is absent)."""
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def tool(raw: list[dict], name: str, inputs: dict, output: str, *, error: bool = False, text: str = "") -> None:
    """An assistant tool call (after `text`, when given) and the user message with its result."""
    tool_id = f"toolu_{len(raw):04d}"
    said = [{"type": "text", "text": text}] if text else []
    use = {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
    raw.append({"role": "assistant", "content": [*said, use]})
    raw.append({"role": "user", "content": [result]})
