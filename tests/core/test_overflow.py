"""Overflow detection: every pattern with a realistic message, and near misses that must not match."""

from __future__ import annotations

import json

import pytest

from compaction.core.overflow import PATTERNS, detect_overflow, discard_truncated_tool_uses

# (message as a provider or SDK renders it, pattern expected to fire first)
REAL_MESSAGES = [
    ("prompt is too long: 213462 tokens > 200000 maximum", "anthropic-prompt-too-long"),
    (
        '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208331 tokens > '
        '200000 maximum"},"request_id":"req_011CU"}',
        "anthropic-prompt-too-long",
    ),
    (
        "input length and `max_tokens` exceed context limit: 195000 + 21333 > 200000, decrease input length or "
        "`max_tokens` and try again",
        "anthropic-input-and-max-tokens",
    ),
    (
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 128000 tokens. However, "
        "your messages resulted in 130212 tokens. Please reduce the length of the messages.\", 'type': "
        "'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
        "openai-model-max-context",
    ),
    (
        '{"error":{"message":"This model\\u0027s maximum context length is 65536 tokens. However, you requested '
        '70123 tokens (70123 in the messages, 0 in the completion).","type":"invalid_request_error"}}',
        "openai-model-max-context",
    ),
    (
        '{"error": {"code": "context_length_exceeded", "message": "Request exceeds limits"}}',
        "openai-context-length-exceeded-code",
    ),
    (
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "openai-input-exceeds-context-window",
    ),
    (
        "Invalid 'input[3].content': string too long. Expected a string with maximum length 10485760, but got a "
        "string with length 10600000 instead.",
        "openai-string-above-max-length",
    ),
    (
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        "google-input-token-count",
    ),
    (
        "An error occurred (ValidationException) when calling the InvokeModel operation: Input is too long for "
        "requested model.",
        "bedrock-input-too-long",
    ),
    ("ValidationException: too many input tokens", "bedrock-too-many-input-tokens"),
    (
        "400 This endpoint's maximum context length is 1048576 tokens. However, you requested about 1293741 tokens",
        "openrouter-endpoint-max-context",
    ),
    (
        '{"object":"error","message":"Prompt contains 33012 tokens and 0 draft tokens, too large for model with '
        '32768 maximum context length","type":"invalid_request_invalid_args"}',
        "mistral-too-large-for-model",
    ),
    (
        '{"error":{"message":"Please reduce the length of the messages or completion.","type":'
        '"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
        "groq-reduce-length",
    ),
    (
        "This model's maximum prompt length is 131072 but the request contains 135210 tokens.",
        "xai-max-prompt-length",
    ),
    (
        '{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",'
        '"type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}',
        "llamacpp-exceeds-available-context",
    ),
    ("llama_decode: context size exceeded", "llamacpp-context-size-exceeded"),
    ('{"error":"prompt too long; exceeded max context length by 1423 tokens"}', "ollama-exceeded-max-context-length"),
    ('{"error":"the input length exceeds the context length"}', "ollama-input-exceeds-context-length"),
    (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the "
        "messages, 1000 in the completion). Please reduce the length of the messages or completion.",
        "openai-model-max-context",
    ),
    (
        "'max_tokens' or 'max_completion_tokens' is too large: 2048. This model's maximum context length is 8192 "
        "tokens and your request has 7000 input tokens (2048 > 8192 - 7000).",
        "vllm-max-tokens-too-large",
    ),
    (
        "The decoder prompt (length 9001) is longer than the maximum model length of 8192.",
        "vllm-decoder-prompt-too-long",
    ),
    (
        "Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with context "
        "length of only 8192 tokens, which is not enough. Try to load the model with a larger context length",
        "lmstudio-greater-than-context-length",
    ),
    (
        "The number of tokens to keep from the initial prompt is greater than the context length",
        "lmstudio-greater-than-context-length",
    ),
    ("prompt token count of 131229 exceeds the limit of 128000", "copilot-token-count-exceeds-limit"),
    ("invalid params, context window exceeds limit (2013)", "minimax-context-window-exceeds-limit"),
    ("Your request exceeded model token limit: 262144 (requested: 270021)", "moonshot-exceeded-model-token-limit"),
    ("The prompt is too long: 40213, model maximum context length: 32768", "fireworks-prompt-too-long"),
    ("Range of input length should be [1, 129024]", "qwen-range-of-input-length"),
    ('{"error":{"code":"1261","message":"Prompt exceeds max length"}}', "zhipu-prompt-exceeds-max-length"),
    (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 33012 `inputs` tokens "
        "and 1024 `max_new_tokens`",
        "tgi-inputs-plus-max-new-tokens",
    ),
    ("upstream returned: 413 Request Entity Too Large", "generic-request-entity-too-large"),
    ("Error: request_too_large: Request exceeds the maximum size", "generic-request-entity-too-large"),
    ("proxy error: token limit exceeded for model claude-sonnet", "generic-token-limit-exceeded"),
    ("litellm.BadRequestError: context window exceeded", "generic-context-window-full"),
    ("too many tokens: total number of tokens in the prompt cannot exceed 4081", "generic-too-many-tokens"),
    ("Requested input exceeds the maximum context length supported", "generic-maximum-context-length"),
    ("error: input too long for this deployment", "generic-input-too-long"),
]

NOT_OVERFLOW = [
    "rate limit exceeded, retry in 20s",
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 25000, "
    "Requested 8000. Please try again in 6s.",
    "Request too large for gpt-4-turbo-preview in organization org-abc on tokens per min (TPM): Limit 30000, "
    "Requested 36000. The input or output tokens must be reduced in order to run successfully.",
    "This request would exceed the rate limit for your organization of 400,000 input tokens per minute.",
    '{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your '
    'per-minute rate limit"}}',
    "You exceeded your current quota, please check your plan and billing details.",
    '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
    "Incorrect API key provided: sk-abc***. You can find your API key at https://platform.openai.com/account/api-keys.",
    "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5",
    "Your credit balance is too low to access the Anthropic API.",
    "messages.3: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01",
    "Internal server error",
    "The model `gpt-5-mini` does not exist or you do not have access to it.",
    "Token limit exceeded: 40000 tokens per minute rate limit",
    "Connection reset by peer",
    "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
    "max_tokens must be less than or equal to 8192",
    "The response was truncated because the maximum number of output tokens was reached",
    "Your prompt was flagged as potentially violating our usage policy.",
    "messages: text content blocks must contain non-whitespace text",
    "Request timed out.",
    "429 Too Many Requests: retry after 30 seconds",
]


def test_there_are_at_least_twenty_patterns_with_unique_names() -> None:
    assert len(PATTERNS) >= 20
    assert len({p.name for p in PATTERNS}) == len(PATTERNS)


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.name)
def test_each_pattern_example_matches_that_pattern(pattern) -> None:
    check = detect_overflow(error_text=pattern.example, status_code=400)
    assert check.is_overflow
    assert check.pattern == pattern.name
    assert check.provider == pattern.provider


@pytest.mark.parametrize(("text", "expected"), REAL_MESSAGES)
def test_real_overflow_messages(text: str, expected: str) -> None:
    check = detect_overflow(error_text=text, status_code=400)
    assert check.is_overflow, text
    assert check.pattern == expected
    assert check.reason


def test_every_pattern_is_exercised_by_a_real_message() -> None:
    assert {name for _, name in REAL_MESSAGES} == {p.name for p in PATTERNS}


@pytest.mark.parametrize("text", NOT_OVERFLOW)
@pytest.mark.parametrize("status", [None, 400, 429, 500])
def test_near_misses_are_not_overflow(text: str, status: int | None) -> None:
    check = detect_overflow(error_text=text, status_code=status)
    assert not check.is_overflow, (text, check)
    assert check.pattern is None and check.reason.startswith("not an overflow")


def test_http_413_is_always_an_overflow() -> None:
    check = detect_overflow(error_text="rate limit exceeded", status_code=413)
    assert check.is_overflow and check.pattern == "http-413"
    assert detect_overflow(error_text=None, status_code=413).is_overflow


@pytest.mark.parametrize("status", [400, 413, 429])
@pytest.mark.parametrize("body", [None, "", "   ", "{}", f"{400} status code (no body)", "(no body)"])
def test_bodiless_errors_are_overflow(status: int, body: str | None) -> None:
    check = detect_overflow(error_text=body, status_code=status)
    assert check.is_overflow
    assert check.provider == "http"


def test_status_in_sdk_text_counts_as_bodiless() -> None:
    assert detect_overflow(error_text="413 status code (no body)").is_overflow
    assert detect_overflow(error_text="429 status code (no body)").pattern == "http-429-no-body"
    assert not detect_overflow(error_text="500 status code (no body)").is_overflow
    assert not detect_overflow(error_text=None, status_code=500).is_overflow
    assert not detect_overflow(error_text="", status_code=401).is_overflow
    assert not detect_overflow(error_text=None).is_overflow


def test_rate_limit_with_a_body_is_not_overflow_even_on_429() -> None:
    check = detect_overflow(error_text="rate limit exceeded, retry in 20s", status_code=429)
    assert not check.is_overflow


def test_generic_phrase_vetoed_by_rate_limit_wording_is_explained() -> None:
    check = detect_overflow(error_text="token limit exceeded: 40000 tokens per minute", status_code=429)
    assert not check.is_overflow
    assert "rate limit" in check.reason


def test_silent_overflow_from_usage() -> None:
    check = detect_overflow(error_text=None, input_tokens=210_000, context_window=200_000)
    assert check.is_overflow and check.pattern == "usage-exceeds-window"
    assert "210,000" in check.reason
    assert not detect_overflow(error_text=None, input_tokens=199_999, context_window=200_000).is_overflow
    assert not detect_overflow(error_text=None, input_tokens=210_000, context_window=None).is_overflow


def test_huge_echoing_body_is_scanned_quickly() -> None:
    import time

    body = json.dumps(
        {"error": {"message": "prompt is too long: 300000 tokens > 200000 maximum"}, "echo": "x" * 5_000_000}
    )
    start = time.perf_counter()
    assert detect_overflow(error_text=body).is_overflow
    junk = "tokens exceed " * 400_000
    assert not detect_overflow(error_text=junk).is_overflow
    assert time.perf_counter() - start < 2.0


def test_discard_truncated_tool_uses_drops_the_trailing_run() -> None:
    content = [
        {"type": "thinking", "thinking": "plan"},
        {"type": "text", "text": "Let me read both files."},
        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}},
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "t2", "name": "Read", "input": '{"file_path": "b.'},
    ]
    result = discard_truncated_tool_uses(content)
    assert result == content[:2]
    assert len(content) == 5  # not modified in place


def test_discard_keeps_complete_tool_uses_followed_by_text() -> None:
    content = [
        {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}},
        {"type": "text", "text": "and then I was about to say"},
    ]
    assert discard_truncated_tool_uses(content) == content


def test_discard_drops_unparseable_partial_input_anywhere() -> None:
    content = [
        {"type": "tool_use", "id": "t1", "name": "Read", "input": '{"file_path": "a'},
        {"type": "text", "text": "more"},
    ]
    assert discard_truncated_tool_uses(content) == [{"type": "text", "text": "more"}]
    complete_raw = [
        {"type": "tool_use", "id": "t1", "name": "Read", "input": '{"file_path": "a.py"}'},
        {"type": "text", "text": "x"},
    ]
    assert discard_truncated_tool_uses(complete_raw) == complete_raw


def test_discard_edge_cases() -> None:
    assert discard_truncated_tool_uses([]) == []
    only_tools = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]
    assert discard_truncated_tool_uses(only_tools) == []
    assert discard_truncated_tool_uses("plain text") == "plain text"  # type: ignore[arg-type]


def test_a_parsed_json_body_is_accepted() -> None:
    body = {"error": {"type": "invalid_request_error", "message": "prompt is too long: 201000 tokens > 200000 maximum"}}
    check = detect_overflow(error_text=body, status_code=400)  # type: ignore[arg-type]
    assert check.is_overflow and check.provider == "anthropic"


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("prompt is too long: 2515 tokens > 2500 maximum", 2500),
        ("prompt is too long: 212,345 tokens > 200,000 maximum", 200_000),
        ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000", 8192),
        ("request_too_large: the request exceeds the maximum size", None),
    ],
)
def test_the_limit_a_provider_states_is_read_from_its_message(text, limit) -> None:
    check = detect_overflow(error_text=text, status_code=400 if limit else 413)
    assert check.is_overflow
    assert check.limit_tokens == limit
