"""Property test: whatever order tool results arrive in (or fail to), the assembled
history is API-valid — results right after their tool_use, no orphans, no duplicates."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.transcripts.base import ImportedTranscript, assemble
from tests.core.test_transcripts_claude_code import assert_tool_pairs_intact


@st.composite
def raw_logs(draw) -> list[dict]:
    raw: list[dict] = []
    issued: list[str] = []
    counter = 0
    for _ in range(draw(st.integers(min_value=0, max_value=25))):
        kind = draw(st.sampled_from(["user", "assistant", "result", "orphan", "duplicate", "blank", "marker"]))
        if kind == "user":
            raw.append({"role": "user", "content": draw(st.sampled_from(["do it", "and this", " "]))})
        elif kind == "assistant":
            blocks = [{"type": "text", "text": "ok"}] if draw(st.booleans()) else []
            for _ in range(draw(st.integers(min_value=0, max_value=3))):
                counter += 1
                issued.append(f"t{counter}")
                blocks.append({"type": "tool_use", "id": f"t{counter}", "name": "Bash", "input": {}})
            raw.append({"role": "assistant", "content": blocks, "usage": None, "reported": draw(st.integers(1, 10**6))})
        elif kind == "result" and issued:
            tool_id = draw(st.sampled_from(issued))
            extra = [{"type": "text", "text": "note"}] if draw(st.booleans()) else []
            raw.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "r"}, *extra]}
            )
        elif kind == "orphan":
            raw.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "r"}]})
        elif kind == "duplicate":
            raw.append({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]})
        elif kind == "blank":
            raw.append({"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]})
        elif kind == "marker":
            raw.append({"role": "marker", "marker": {"trigger": "auto", "pre_tokens": 1, "summary": "s"}})
    return raw


@settings(max_examples=400, deadline=None)
@given(raw=raw_logs())
def test_assembled_history_is_always_api_valid(raw: list[dict]) -> None:
    stats: Counter[str] = Counter()
    messages, reported, markers, _ = assemble(raw, stats)
    transcript = ImportedTranscript(messages=messages, reported_context_tokens=reported)
    assert_tool_pairs_intact(transcript)
    for marker in markers:
        assert 0 <= marker["before_message_index"] <= len(messages)
    assert [m["before_message_index"] for m in markers] == sorted(m["before_message_index"] for m in markers)
    # Only the very last message may hold a tool_use still waiting for its result.
    for index, message in enumerate(messages[:-1]):
        if message["role"] == "assistant" and any(b.get("type") == "tool_use" for b in message["content"]):
            assert messages[index + 1]["role"] == "user"
