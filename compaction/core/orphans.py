"""Tool results served without their tool_use.

The Anthropic API rejects a tool_result block whose tool_use is not in the assistant message
before it. The cut never summarizes a tool_use that is still waiting for its result
(`cutpoint.plan_cut`), so a new compaction makes none; but an overlay the cut did not place
(an imported agent's own compaction boundary, a row written by an older version) can hold a
result whose tool_use is in the summary. Such a result is served as a user text block instead:
the model keeps the output it asked for, the request stays valid, and nothing stored changes
(a later compaction summarizes it as usual).
"""

from __future__ import annotations

from typing import Any

from compaction.core.blocks import TOOL_RESULT
from compaction.core.types import Msg

ORPHAN_RESULT_HEADER = "[Result of tool call {tool_use_id}; the call itself is in the summary above{error}]"


def orphaned_results(messages: list[Msg]) -> dict[int, set[str]]:
    """seq → the tool_result ids in that user message whose tool_use is in no earlier message.

    Only a served context that starts after some tool_uses (an active compaction) can have
    any: appends are refused a result without an earlier tool_use in the session.
    """
    used: set[str] = set()
    orphaned: dict[int, set[str]] = {}
    for m in messages:
        if m.role == "assistant":
            used.update(m.tool_use_ids)
        elif m.role == "user":
            missing = {tool_id for tool_id in m.tool_result_ids if tool_id not in used}
            if missing:
                orphaned[m.seq] = missing
    return orphaned


def results_as_text(content: list[dict[str, Any]], orphaned: set[str]) -> list[dict[str, Any]]:
    """The content with each orphaned tool_result block turned into a text block carrying its
    output (and its images as image blocks after it); every other block unchanged."""
    out: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") != TOOL_RESULT or block.get("tool_use_id") not in orphaned:
            out.append(block)
            continue
        header = ORPHAN_RESULT_HEADER.format(
            tool_use_id=block["tool_use_id"], error=", it failed" if block.get("is_error") else ""
        )
        inner = block.get("content")
        texts: list[str] = []
        images: list[dict[str, Any]] = []
        if isinstance(inner, str):
            texts.append(inner)
        elif isinstance(inner, list):
            for part in inner:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(str(part.get("text", "")))
                elif part.get("type") == "image":
                    images.append(part)
        body = "\n".join(t for t in texts if t.strip())
        out.append({"type": "text", "text": f"{header}\n{body}" if body else header})
        out.extend(images)
    return out
