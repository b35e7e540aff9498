"""What every CLI's run must show, whatever its wire format (tests/agents)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from compaction.core.blocks import iter_blocks

# How the served summary opens (a CLI's own text may say "<summary>" too: Claude Code 2.1.332 does).
from tests.agents.harness import SUMMARY_MARK

# At most this many calls may go upstream uncompacted once the context crossed the trigger: the
# call that crossed it queues the job (run in the web process here, at once), the next carries it.
ON_TIME_CALLS = 2


def check_compacted_upstream(
    server,
    session_id: str,
    bodies: list[dict[str, Any]],
    *,
    trigger: int,
    tokens: list[int],
    system: Callable[[dict[str, Any]], Any],
    pairs_whole: Callable[[dict[str, Any]], bool],
    tools: str = "tools",
) -> None:
    """A threshold compaction became active; the upstream got it within ON_TIME_CALLS calls of the
    context crossing the trigger, with the agent's system prompt and tools as it sent them and tool
    pairs whole; the agent made calls after it (it continued)."""
    compactions = server.compactions(session_id)
    assert any(c["reason"] == "threshold" and c["status"] == "succeeded" for c in compactions), compactions
    crossed = next((i for i, n in enumerate(tokens) if n > trigger), None)
    assert crossed is not None, f"the context never crossed the trigger {trigger}: {tokens}"
    compacted = [i for i, body in enumerate(bodies) if SUMMARY_MARK in json.dumps(body)]
    assert compacted, "no call upstream carried a summary"
    assert compacted[0] <= crossed + ON_TIME_CALLS, (crossed, compacted[0], tokens)
    assert compacted[0] < len(bodies) - 1, "the agent made no call after the compaction"
    assert tokens[compacted[0]] < tokens[compacted[0] - 1], f"the compacted call was not smaller: {tokens}, {compacted}"
    first = bodies[0]
    for i in range(compacted[0], len(bodies)):
        body = bodies[i]
        assert system(body) == system(first), f"call {i}: the system prompt changed"
        assert body.get(tools) == first.get(tools), f"call {i}: the tools changed"
        assert pairs_whole(body), f"call {i}: a tool call without its result (or the reverse)"
    for i, body in enumerate(bodies):
        assert pairs_whole(body), f"call {i}: a tool call without its result (or the reverse)"


def _events(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The conversation as its tool calls, their results and the assistant's words."""
    out: list[tuple[Any, ...]] = []
    for message in messages:
        for block in iter_blocks(message.get("content")):
            kind = block.get("type")
            if kind == "tool_use":
                out.append(("call", block.get("id"), block.get("name")))
            elif kind == "tool_result":
                out.append(("result", block.get("tool_use_id")))
            elif kind == "text" and message.get("role") == "assistant" and str(block.get("text")).strip():
                out.append(("said", str(block["text"]).strip()))
    return out


def check_stored_like_transcript(stored: list[dict[str, Any]], imported: list[dict[str, Any]]) -> None:
    """The gateway stored every message the agent's own transcript holds: the same tool calls
    and results in the same order, the same words of the assistant, the user's words."""
    assert stored and imported
    assert _events(stored) == _events(imported)
    users = json.dumps([m["content"] for m in stored if m["role"] == "user"])
    for message in imported:
        for block in iter_blocks(message.get("content")) if message.get("role") == "user" else ():
            text = str(block.get("text") or "").strip()
            if text and not text.startswith("<"):
                assert json.dumps(text)[1:-1] in users, text[:200]
