"""The block vocabulary and the provider's usage figures, as the rest of the code reads them."""

from __future__ import annotations

import pytest

from compaction.core import blocks
from compaction.core.blocks import as_blocks, block_text, iter_blocks, text_of
from compaction.core.types import ProviderUsage


def test_a_string_is_one_text_block_and_an_empty_one_none() -> None:
    assert as_blocks("hello") == [{"type": "text", "text": "hello"}]
    assert as_blocks("") == []


def test_a_list_yields_its_objects_only() -> None:
    tool_use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
    assert list(iter_blocks([tool_use, "stray", 3, None, {"type": "text", "text": "x"}])) == [
        tool_use,
        {"type": "text", "text": "x"},
    ]


@pytest.mark.parametrize("content", [None, 7, {"type": "text", "text": "not in a list"}])
def test_other_content_has_no_blocks(content: object) -> None:
    assert as_blocks(content) == []


@pytest.mark.parametrize(
    ("block", "words"),
    [
        ({"type": "text", "text": "hi"}, "hi"),
        ({"type": "thinking", "thinking": "let me see", "signature": "sig"}, "let me see"),
        ({"type": "redacted_thinking", "data": "EqQBCkYIARgC"}, "EqQBCkYIARgC"),
        ({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}, ""),
        ({"type": "tool_result", "tool_use_id": "t1", "content": "output"}, ""),
        ({"type": "text", "text": None}, ""),
        ({"type": "text", "text": ["not", "a", "string"]}, ""),
        ({"type": "thinking"}, ""),
        ("not a block", ""),
    ],
)
def test_block_text_reads_the_words_of_text_and_thinking_blocks(block: object, words: str) -> None:
    assert block_text(block) == words


def test_text_of_reads_any_field_but_only_a_string() -> None:
    block = {"type": "tool_use", "name": "Bash", "input": {}}
    assert text_of(block, "name") == "Bash"
    assert text_of(block, "input") == ""
    assert text_of(None, "name") == ""


def test_every_stored_kind_has_its_fields() -> None:
    assert set(blocks.FIELDS) == set(blocks.STORED_KINDS)
    for kind, fields in blocks.FIELDS.items():
        assert {"type", "cache_control"} <= fields, kind
    assert blocks.FIELDS["tool_use"] == {"type", "cache_control", "id", "name", "input", "caller"}
    assert blocks.FIELDS["tool_result"] == {"type", "cache_control", "tool_use_id", "content", "is_error"}


def test_kind_groups_hold_only_known_kinds() -> None:
    assert set(blocks.TOOL_RESULT_CONTENT_KINDS) < set(blocks.STORED_KINDS)
    assert set(blocks.THINKING_KINDS) < set(blocks.STORED_KINDS)
    assert blocks.TEXT not in blocks.ANTHROPIC_ONLY_KINDS
    assert blocks.ANTHROPIC_ONLY_KINDS < set(blocks.STORED_KINDS)
    assert set(blocks.ROLE_ONLY) < set(blocks.STORED_KINDS)
    assert blocks.TOOL_USE in blocks.TOOL_CALL_KINDS and blocks.PI_TOOL_CALL in blocks.TOOL_CALL_KINDS


def test_the_prompt_is_input_plus_cache_read_plus_cache_write() -> None:
    usage = ProviderUsage(
        input_tokens=12, output_tokens=500, cache_read_input_tokens=40_000, cache_creation_input_tokens=800
    )
    assert usage.prompt_tokens == 40_812


def test_usage_from_a_record_counts_missing_and_null_fields_as_zero() -> None:
    usage = ProviderUsage.of({"input_tokens": 7, "cache_read_input_tokens": None, "output_tokens": "3"})
    assert usage == ProviderUsage(input_tokens=7, output_tokens=3)
    assert usage.prompt_tokens == 7
