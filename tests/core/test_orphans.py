from __future__ import annotations

from compaction.core.orphans import ORPHAN_RESULT_HEADER, orphaned_results, results_as_text
from compaction.core.types import Msg


def test_only_results_without_an_earlier_tool_use_are_orphaned() -> None:
    messages = [
        Msg(5, "user", [{"type": "tool_result", "tool_use_id": "gone", "content": "x"}], 3),
        Msg(6, "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], 3),
        Msg(
            7,
            "user",
            [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "tool_result", "tool_use_id": "slow", "content": "late"},
            ],
            3,
        ),
        Msg(8, "user", "plain text", 3),
    ]
    assert orphaned_results(messages) == {5: {"gone"}, 7: {"slow"}}
    assert orphaned_results(messages[1:2]) == {}


def test_an_orphaned_result_becomes_text_with_its_output_and_images() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    content = [
        {"type": "tool_result", "tool_use_id": "t1", "content": "kept as is"},
        {
            "type": "tool_result",
            "tool_use_id": "slow",
            "is_error": True,
            "content": [{"type": "text", "text": "build failed"}, image],
        },
        {"type": "text", "text": "and then?"},
    ]
    out = results_as_text(content, {"slow"})
    assert out[0] == content[0] and out[-1] == content[-1]
    assert out[1] == {
        "type": "text",
        "text": ORPHAN_RESULT_HEADER.format(tool_use_id="slow", error=", it failed") + "\nbuild failed",
    }
    assert out[2] == image
    assert content[1]["type"] == "tool_result"  # the input is not modified
    empty = results_as_text([{"type": "tool_result", "tool_use_id": "slow"}], {"slow"})
    assert empty == [{"type": "text", "text": ORPHAN_RESULT_HEADER.format(tool_use_id="slow", error="")}]
