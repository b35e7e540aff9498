"""Is a provider error a context overflow?

Three ways to tell:
1. the error text matches a known overflow message (`PATTERNS`, provider-specific first,
   generic fallbacks last);
2. HTTP 413, or a 400/413/429 that came back without a body (some OpenAI-compatible
   servers — Cerebras, Mistral, proxies — reject an oversized request with no body at all);
3. silent overflow: the provider accepted the request but reported more input tokens than
   the window holds (it truncated the prompt without saying so).

Rate limits, quotas and auth errors also talk about "tokens" and "limits"; they must never
trigger an emergency compaction, so the generic fallbacks are vetoed when the text reads like
one of those, and every provider pattern names the context/prompt/input explicitly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from compaction.core.blocks import TOOL_CALL_KINDS, TOOL_USE

# Error bodies sometimes echo the request; the known messages all sit near the start.
MAX_SCAN_CHARS = 50_000


@dataclass(frozen=True)
class OverflowPattern:
    name: str
    provider: str
    regex: re.Pattern[str]
    example: str  # a real-world message of this shape (documentation, and checked by the tests)
    generic: bool = False  # a fallback phrase: vetoed when the text reads like a rate limit


def _p(name: str, provider: str, pattern: str, example: str, *, generic: bool = False) -> OverflowPattern:
    return OverflowPattern(name, provider, re.compile(pattern, re.IGNORECASE | re.DOTALL), example, generic)


PATTERNS: tuple[OverflowPattern, ...] = (
    # --- Anthropic ---------------------------------------------------------------------
    _p(
        "anthropic-input-and-max-tokens",
        "anthropic",
        r"input length and .{0,2}max_tokens.{0,2} exceed context limit",
        "input length and `max_tokens` exceed context limit: 187000 + 20000 > 200000, "
        "decrease input length or `max_tokens` and try again",
    ),
    _p(
        "fireworks-prompt-too-long",
        "fireworks",
        r"prompt is too long: \d+, model maximum context length",
        "The prompt is too long: 40213, model maximum context length: 32768",
    ),
    _p(
        "anthropic-prompt-too-long",
        "anthropic",
        r"prompt is too long",
        "prompt is too long: 213462 tokens > 200000 maximum",
    ),
    # --- OpenAI and OpenAI-compatible servers ---------------------------------------------
    _p(
        "openai-input-exceeds-context-window",
        "openai",
        r"exceeds the context window",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ),
    _p(
        "openrouter-endpoint-max-context",
        "openrouter",
        r"endpoint'?s maximum context length is \d+",
        "This endpoint's maximum context length is 200000 tokens. However, you requested about 231547 tokens "
        "(215163 of text input, 16384 in the output). Please reduce the length of either one, or use the "
        '"middle-out" transform to compress your prompt automatically.',
    ),
    _p(
        "vllm-max-tokens-too-large",
        "vllm",
        r"max_(?:completion_)?tokens.{0,40}is too large.{0,120}maximum context length is \d+",
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length is "
        "32768 tokens and your request has 30122 input tokens (4096 > 32768 - 30122).",
    ),
    _p(
        "vllm-decoder-prompt-too-long",
        "vllm",
        r"prompt \(length \d+\) is longer than the maximum model length",
        "The decoder prompt (length 40001) is longer than the maximum model length of 32768. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens.",
    ),
    _p(
        "openai-model-max-context",
        "openai",
        r"model'?s maximum context length is \d+",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131843 "
        "tokens. Please reduce the length of the messages.",
    ),
    _p(
        "openai-string-above-max-length",
        "openai",
        r"string_above_max_length|expected a string with maximum length \d+",
        "Invalid 'messages[12].content': string too long. Expected a string with maximum length 10485760, "
        "but got a string with length 11534336 instead.",
    ),
    # --- Google ----------------------------------------------------------------------------
    _p(
        "google-input-token-count",
        "google",
        r"input token count.{0,40}exceeds the maximum number of tokens",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    ),
    # --- AWS Bedrock -----------------------------------------------------------------------
    _p(
        "bedrock-input-too-long",
        "bedrock",
        r"input is too long for requested model",
        "ValidationException: An error occurred (ValidationException) when calling the Converse operation: "
        "Input is too long for requested model.",
    ),
    _p(
        "bedrock-too-many-input-tokens",
        "bedrock",
        r"too many input tokens",
        "ValidationException: Too many input tokens. Max input tokens: 200000, request input token count: 204011",
    ),
    # --- Mistral, Groq, xAI, Copilot, Chinese providers -------------------------------------
    _p(
        "mistral-too-large-for-model",
        "mistral",
        r"too large for model with \d+ maximum context length",
        "Prompt contains 40105 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    ),
    _p(
        "groq-reduce-length",
        "groq",
        r"reduce the length of the messages",
        "Please reduce the length of the messages or completion.",
    ),
    _p(
        "xai-max-prompt-length",
        "xai",
        r"maximum prompt length is \d+",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    ),
    _p(
        "copilot-token-count-exceeds-limit",
        "github-copilot",
        r"token count of \d+ exceeds the limit of \d+",
        "prompt token count of 131229 exceeds the limit of 128000",
    ),
    _p(
        "minimax-context-window-exceeds-limit",
        "minimax",
        r"context window exceeds limit",
        "invalid params, context window exceeds limit (2013)",
    ),
    _p(
        "moonshot-exceeded-model-token-limit",
        "moonshot",
        r"exceeded model token limit",
        "Invalid request: Your request exceeded model token limit: 262144 (requested: 270021)",
    ),
    _p(
        "qwen-range-of-input-length",
        "dashscope",
        r"range of input length should be \[\d+, ?\d+\]",
        "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 129024]",
    ),
    _p(
        "zhipu-prompt-exceeds-max-length",
        "zhipu",
        r"prompt exceeds max length",
        '{"error":{"code":"1261","message":"Prompt exceeds max length"}}',
    ),
    _p(
        "tgi-inputs-plus-max-new-tokens",
        "huggingface-tgi",
        r"inputs.{0,3} tokens \+ .{0,3}max_new_tokens.{0,3} must be <= \d+",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 33012 `inputs` "
        "tokens and 1024 `max_new_tokens`",
    ),
    # --- Local servers ---------------------------------------------------------------------
    _p(
        "llamacpp-exceeds-available-context",
        "llama.cpp",
        r"exceeds the available context size",
        "the request exceeds the available context size, try increasing it",
    ),
    _p(
        "llamacpp-context-size-exceeded",
        "llama.cpp",
        r"context size (?:has been )?exceeded",
        "context size exceeded",
    ),
    _p(
        "ollama-exceeded-max-context-length",
        "ollama",
        r"exceeded max context length by \d+ tokens",
        "prompt too long; exceeded max context length by 1423 tokens",
    ),
    _p(
        "ollama-input-exceeds-context-length",
        "ollama",
        r"input length exceeds (?:the )?(?:maximum )?context length",
        "the input length exceeds the context length",
    ),
    _p(
        "lmstudio-greater-than-context-length",
        "lm-studio",
        r"greater than the context length|model is loaded with context length of only \d+",
        "The number of tokens to keep from the initial prompt is greater than the context length. Try to load "
        "the model with a larger context length, or provide a shorter input",
    ),
    # The OpenAI error code, also sent by Groq, DeepSeek and most compatible servers.
    _p(
        "openai-context-length-exceeded-code",
        "openai",
        r"context[_ ]length[_ ]exceeded",
        '{"error": {"message": "Request exceeds model limits", "type": "invalid_request_error", '
        '"param": "messages", "code": "context_length_exceeded"}}',
    ),
    # --- Generic fallbacks (proxies, gateways, SDK wrappers) ---------------------------------
    _p(
        "generic-maximum-context-length",
        "generic",
        r"maximum context (?:length|size|window)",
        "Requested input exceeds the maximum context length of the model",
        generic=True,
    ),
    _p(
        "generic-context-window-full",
        "generic",
        r"context window (?:is )?(?:full|exceeded)|(?:exceeds?|exceeded|over) (?:the )?(?:model'?s? )?context "
        r"(?:window|length|limit|size)",
        "upstream error: context window exceeded",
        generic=True,
    ),
    _p(
        "generic-token-limit-exceeded",
        "generic",
        r"token limit (?:exceeded|reached)|exceeds? (?:the )?(?:model'?s? )?(?:maximum )?token limit",
        "token limit exceeded",
        generic=True,
    ),
    _p(
        "generic-too-many-tokens",
        "generic",
        r"too many tokens",
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 5120",
        generic=True,
    ),
    _p(
        "generic-request-entity-too-large",
        "generic",
        r"request entity too large|payload too large|request_too_large|request (?:is )?too large|"
        r"request payload size exceeds the limit",
        "413 Request Entity Too Large",
        generic=True,
    ),
    _p(
        "generic-input-too-long",
        "generic",
        r"\b(?:input|prompt|context) (?:is )?too long\b",
        "Error: input too long for this model",
        generic=True,
    ),
)

# Texts that talk about limits but are not about the context window.
NOT_OVERFLOW = re.compile(
    r"rate[_ -]?limit|per[- ]minute|per min\b|\b[TR]PM\b|\bTPD\b|quota|retry (?:in|after)|try again in|"
    r"too many requests|overloaded|unauthori[sz]ed|invalid (?:x-)?api[_ -]?key|authentication|"
    r"permission denied|forbidden|billing|credit balance",
    re.IGNORECASE,
)
# "400 status code (no body)" is how the Anthropic/OpenAI SDKs render a bodiless error.
NO_BODY = re.compile(r"^\s*(?:error:?\s*)?(?:\d{3}\s*)?(?:status code\s*)?\(no body\)\s*$", re.IGNORECASE)
BODILESS_OVERFLOW_STATUSES = (400, 413, 429)
_STATUS_IN_TEXT = re.compile(r"^\s*(?:error:?\s*)?(\d{3})\b")


@dataclass(frozen=True)
class OverflowCheck:
    is_overflow: bool
    provider: str | None
    pattern: str | None
    reason: str
    # The provider's own limit when its message states it ("2515 tokens > 2500 maximum",
    # "maximum context length is 8192 tokens"): the real window, which may be smaller than
    # the one the session believes in.
    limit_tokens: int | None = None


# Limits as providers state them in their overflow messages (group 1 = the limit).
_STATED_LIMITS = (
    re.compile(r"\d[\d,]*\s*tokens?\s*>\s*(\d[\d,]*)\s*maximum", re.IGNORECASE),
    re.compile(r"maximum context length is\s*(\d[\d,]*)\s*tokens", re.IGNORECASE),
    re.compile(r"context (?:window|length) (?:of|is)\s*(\d[\d,]*)\s*tokens", re.IGNORECASE),
)


def stated_limit(text: str) -> int | None:
    """The token limit a provider's overflow message states, if it states one."""
    for regex in _STATED_LIMITS:
        if match := regex.search(text):
            limit = int(match.group(1).replace(",", ""))
            if limit > 0:
                return limit
    return None


def _normalize(text: str) -> str:
    # JSON bodies escape the apostrophe in "model's"; curly quotes come from some proxies.
    return (
        text[:MAX_SCAN_CHARS]
        .replace("\\u0027", "'")
        .replace("\\'", "'")
        .replace("\u2019", "'")
        .replace('\\"', '"')
        .replace("\\n", " ")
    )


def _is_bodiless(text: str) -> bool:
    stripped = text.strip()
    return not stripped or stripped in ("{}", "null", '""') or bool(NO_BODY.match(stripped))


def detect_overflow(
    *,
    error_text: str | None,
    status_code: int | None = None,
    input_tokens: int | None = None,
    context_window: int | None = None,
) -> OverflowCheck:
    """Classify one provider response. Pure and total: any input gives an answer."""
    if error_text is not None and not isinstance(error_text, str):
        # A parsed JSON body handed over as-is: match on its text form.
        error_text = json.dumps(error_text) if isinstance(error_text, dict | list) else str(error_text)
    text = _normalize(error_text or "")
    if status_code is None and (match := _STATUS_IN_TEXT.match(text)):
        status_code = int(match.group(1))

    vetoed: OverflowPattern | None = None
    if text.strip():
        looks_like_other_limit = NOT_OVERFLOW.search(text)
        for pattern in PATTERNS:
            if not pattern.regex.search(text):
                continue
            if pattern.generic and looks_like_other_limit:
                vetoed = vetoed or pattern
                continue
            return OverflowCheck(
                True, pattern.provider, pattern.name, f"matched {pattern.provider} overflow message", stated_limit(text)
            )

    if status_code == 413:
        return OverflowCheck(True, "http", "http-413", "HTTP 413: the request is too large for the provider")
    if status_code in BODILESS_OVERFLOW_STATUSES and _is_bodiless(text):
        return OverflowCheck(
            True,
            "http",
            f"http-{status_code}-no-body",
            f"HTTP {status_code} without a body (how several OpenAI-compatible servers reject an oversized prompt)",
        )
    if input_tokens is not None and context_window and input_tokens > context_window:
        return OverflowCheck(
            True,
            None,
            "usage-exceeds-window",
            f"silent overflow: the provider reported {input_tokens:,} input tokens for a {context_window:,}-token "
            "window (the prompt was truncated)",
        )
    if vetoed is not None:
        return OverflowCheck(
            False,
            None,
            None,
            f"not an overflow: '{vetoed.name}' matched but the error reads like a rate limit, quota or auth error",
        )
    if not text.strip():
        return OverflowCheck(False, None, None, "not an overflow: no error text, status and usage within the window")
    return OverflowCheck(False, None, None, "not an overflow: no known context-overflow message matched")


def _tool_input_incomplete(block: dict[str, Any]) -> bool:
    """A tool_use whose input is still raw (partial) JSON text that does not parse."""
    raw = block.get("input")
    if isinstance(raw, str):
        try:
            json.loads(raw)
        except ValueError:
            return True
    return False


def discard_truncated_tool_uses(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """After a `max_tokens` stop, drop the trailing tool_use blocks.

    The last tool_use of a truncated response may hold incomplete JSON, and executing only
    part of a parallel batch the model never finished is worse than re-asking; so the whole
    trailing run of tool_use blocks (and empty text between them) goes, as does any tool_use
    whose input is unparseable partial JSON. Text and thinking before it stay. Returns a new
    list (possibly empty); the input is not modified.
    """
    if not isinstance(content, list):
        return content
    kept = list(content)
    while kept:
        last = kept[-1]
        kind = last.get("type") if isinstance(last, dict) else None
        if kind in TOOL_CALL_KINDS:
            kept.pop()
        elif kind == "text" and not str(last.get("text", "")).strip():
            kept.pop()
        else:
            break
    return [b for b in kept if not (isinstance(b, dict) and b.get("type") == TOOL_USE and _tool_input_incomplete(b))]
