"""Context windows and output limits of current models.

Names are matched exactly, then by the longest registered prefix, so dated snapshots
("claude-sonnet-4-5-20250929") and provider prefixes ("anthropic/claude-opus-4-1") resolve.
Unknown models get a 128k window, overridable per session.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT = 16_384


@dataclass(frozen=True)
class ModelInfo:
    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    known: bool = True


_MODELS: dict[str, tuple[str, int, int]] = {
    # Anthropic
    "claude-opus-4-5": ("anthropic", 200_000, 64_000),
    "claude-opus-4-1": ("anthropic", 200_000, 32_000),
    "claude-opus-4": ("anthropic", 200_000, 32_000),
    "claude-sonnet-4-5": ("anthropic", 200_000, 64_000),
    "claude-sonnet-4": ("anthropic", 200_000, 64_000),
    "claude-haiku-4-5": ("anthropic", 200_000, 64_000),
    "claude-3-7-sonnet": ("anthropic", 200_000, 64_000),
    "claude-3-5-sonnet": ("anthropic", 200_000, 8_192),
    "claude-3-5-haiku": ("anthropic", 200_000, 8_192),
    "claude-3-opus": ("anthropic", 200_000, 4_096),
    "claude-3-haiku": ("anthropic", 200_000, 4_096),
    # OpenAI
    "gpt-5.1": ("openai", 400_000, 128_000),
    "gpt-5": ("openai", 400_000, 128_000),
    "gpt-5-mini": ("openai", 400_000, 128_000),
    "gpt-5-nano": ("openai", 400_000, 128_000),
    "gpt-5-codex": ("openai", 400_000, 128_000),
    "gpt-5.1-codex": ("openai", 400_000, 128_000),
    "gpt-5.1-codex-mini": ("openai", 400_000, 128_000),
    "gpt-5-pro": ("openai", 400_000, 272_000),
    "codex-mini": ("openai", 200_000, 100_000),
    "gpt-oss-120b": ("openai", 131_072, 131_072),
    "gpt-oss-20b": ("openai", 131_072, 131_072),
    "chatgpt-4o": ("openai", 128_000, 16_384),
    "gpt-4.1": ("openai", 1_047_576, 32_768),
    "gpt-4.1-mini": ("openai", 1_047_576, 32_768),
    "gpt-4.1-nano": ("openai", 1_047_576, 32_768),
    "gpt-4o": ("openai", 128_000, 16_384),
    "gpt-4o-mini": ("openai", 128_000, 16_384),
    "o3": ("openai", 200_000, 100_000),
    "o3-mini": ("openai", 200_000, 100_000),
    "o3-pro": ("openai", 200_000, 100_000),
    "o4-mini": ("openai", 200_000, 100_000),
    "o1": ("openai", 200_000, 100_000),
    # Google
    "gemini-3-pro": ("google", 1_048_576, 65_536),
    "gemini-2.5-pro": ("google", 1_048_576, 65_536),
    "gemini-2.5-flash": ("google", 1_048_576, 65_536),
    "gemini-2.5-flash-lite": ("google", 1_048_576, 65_536),
    "gemini-2.0-flash": ("google", 1_048_576, 8_192),
}


def _normalize(name: str) -> str:
    name = name.strip().lower()
    # Drop routing prefixes such as "anthropic/", "openrouter/openai/", "bedrock:".
    for sep in ("/", ":"):
        if sep in name:
            name = name.rsplit(sep, 1)[-1]
    # Bedrock ids: "anthropic.claude-sonnet-4-5-20250929-v1" -> "claude-sonnet-4-5-20250929-v1"
    if name.startswith("anthropic."):
        name = name[len("anthropic.") :]
    return name


def lookup(model: str | None) -> ModelInfo:
    """Registry entry for `model`, or a 128k default marked `known=False`."""
    if not model:
        return ModelInfo("", "unknown", DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT, known=False)
    name = _normalize(model)
    if name in _MODELS:
        provider, window, max_out = _MODELS[name]
        return ModelInfo(name, provider, window, max_out)
    best = ""
    for key in _MODELS:
        if name.startswith(key) and len(key) > len(best):
            # "gpt-4o-mini-2024" must not match "gpt-4o" when "gpt-4o-mini" exists: longest wins.
            best = key
    if best:
        provider, window, max_out = _MODELS[best]
        return ModelInfo(best, provider, window, max_out)
    return ModelInfo(name, "unknown", DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT, known=False)
