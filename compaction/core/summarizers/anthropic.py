"""LLM summarizer on the Anthropic Messages API (the real `anthropic` SDK).

The SDK retries 408/409/429/5xx — including 529 overloaded — with exponential backoff and
honours `retry-after`; when it gives up, the exception propagates and the chain falls back.
A history larger than the summarizer's own window is summarized in chunks: chunk 1 with the
initial prompt, every next chunk with the update prompt merging the running summary, so a
session that already overflowed can still be compacted (field notes: claude-code #2119).
"""

from __future__ import annotations

from typing import Any

from compaction.core.prompts import SYSTEM_PROMPT, build_prompt, serialize_message, strip_file_tags
from compaction.core.registry import lookup
from compaction.core.summarizers.base import Draft, SummarizerError, SummaryInput, has_sections, normalize_output
from compaction.core.tokens import count_text
from compaction.core.types import Msg

DEFAULT_MODEL = "claude-haiku-4-5"
# Instructions, format and rules around the transcript, plus a safety margin for the gap
# between our offline tokenizer and Claude's.
PROMPT_OVERHEAD_TOKENS = 2_000
TOKENIZER_MARGIN = 0.85

MAX_OVERFLOW_SPLITS = 3
MIN_CHUNK_TOKENS = 1_000


def _is_overflow(exc: BaseException) -> bool:
    from compaction.core.overflow import detect_overflow

    status = getattr(exc, "status_code", None)
    if status not in (400, 413):
        return False
    return detect_overflow(error_text=str(exc), status_code=status).is_overflow


# USD per million tokens (input, output), matched by longest model-name prefix.
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-opus": (15.0, 75.0),
}


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    name = lookup(model).name or model
    best = max((p for p in PRICES if name.startswith(p)), key=len, default=None)
    if best is None:
        return None
    price_in, price_out = PRICES[best]
    return round((input_tokens * price_in + output_tokens * price_out) / 1_000_000, 6)


def chunk_messages(messages: list[Msg], budget_tokens: int) -> list[list[Msg]]:
    """Split `messages` into consecutive chunks whose serialized size fits `budget_tokens`.

    Sizes are measured on the serialization (tool outputs already cut), not on stored token
    counts, because that is what the summarizer actually receives. A single message larger
    than the budget forms its own chunk.
    """
    chunks: list[list[Msg]] = []
    current: list[Msg] = []
    size = 0
    for msg in messages:
        tokens = count_text("\n\n".join(serialize_message(msg))) + 4
        if current and size + tokens > budget_tokens:
            chunks.append(current)
            current, size = [], 0
        current.append(msg)
        size += tokens
    if current:
        chunks.append(current)
    return chunks


class AnthropicSummarizer:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        model: str = DEFAULT_MODEL,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_window: int | None = None,
    ) -> None:
        import anthropic  # imported here so the core stays importable without the SDK

        self.model = model or DEFAULT_MODEL
        info = lookup(self.model)
        self.context_window = context_window or info.context_window
        self.max_output_tokens = info.max_output_tokens
        # Usage of the latest run, also when it failed part-way: calls already made cost money.
        self.last_usage: dict[str, Any] = {}
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _input_budget(self, output_budget: int, previous_summary: str | None) -> int:
        previous = count_text(previous_summary) if previous_summary else 0
        # The running summary of earlier chunks can grow up to the output budget.
        reserved = output_budget + PROMPT_OVERHEAD_TOKENS + max(previous, output_budget)
        budget = int((self.context_window - reserved) * TOKENIZER_MARGIN)
        if budget < MIN_CHUNK_TOKENS:
            raise SummarizerError(
                f"summarizer window {self.context_window} too small for output budget {output_budget}"
            )
        return budget

    def _call(self, prompt: str, max_tokens: int, usage: dict[str, Any]) -> str:
        message = self.client.messages.create(
            model=self.model,
            max_tokens=max_tokens,
            system=SYSTEM_PROMPT,
            messages=[{"role": "user", "content": prompt}],
        )
        usage["calls"] += 1
        usage["input_tokens"] += message.usage.input_tokens or 0
        usage["output_tokens"] += message.usage.output_tokens or 0
        usage["model"] = message.model
        request_id = getattr(message, "_request_id", None)
        if request_id:
            usage["request_ids"].append(request_id)
        usage["stop_reasons"].append(message.stop_reason)
        text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
        return normalize_output(text)

    def _summarize_range(
        self,
        messages: list[Msg],
        *,
        inp: SummaryInput,
        kind: str,
        max_tokens: int,
        usage: dict[str, Any],
    ) -> str:
        previous = inp.previous_summary if kind == "history" else None
        budget = self._input_budget(max_tokens, previous)
        for _attempt in range(MAX_OVERFLOW_SPLITS + 1):
            try:
                return self._summarize_chunks(
                    messages, inp=inp, kind=kind, max_tokens=max_tokens, usage=usage, budget=budget
                )
            except Exception as exc:
                # Our offline tokenizer only approximates Claude's: when the provider still says
                # the prompt is too long, halve the chunks and go again instead of failing.
                if not _is_overflow(exc) or budget < 2 * MIN_CHUNK_TOKENS:
                    raise
                usage["overflow_retries"] = usage.get("overflow_retries", 0) + 1
                budget //= 2
        raise SummarizerError("summarizer prompt still too long after splitting the history")

    def _summarize_chunks(
        self,
        messages: list[Msg],
        *,
        inp: SummaryInput,
        kind: str,
        max_tokens: int,
        usage: dict[str, Any],
        budget: int,
    ) -> str:
        previous = inp.previous_summary if kind == "history" else None
        custom = inp.custom_prompt if kind == "history" else None
        chunks = chunk_messages(messages, budget)
        running = previous
        for index, chunk in enumerate(chunks):
            prompt = build_prompt(
                messages=chunk,
                previous_summary=running,
                instructions=inp.instructions,
                custom_prompt=custom,
                kind=kind,
            )
            text = self._call(prompt, max_tokens, usage)
            if not text.strip():
                raise SummarizerError(f"empty response for chunk {index + 1} of {len(chunks)}")
            if kind == "history" and not custom and index < len(chunks) - 1 and has_sections(text):
                # A broken intermediate summary would poison every later merge.
                raise SummarizerError(f"chunk {index + 1} of {len(chunks)} returned no structured summary")
            running = text
        usage["chunks"] += len(chunks)
        return running or ""

    def summarize(self, inp: SummaryInput) -> Draft:
        # The API rejects max_tokens above the model's output limit; a bigger budget is moot.
        budget = max(256, min(inp.output_budget, self.max_output_tokens))
        usage: dict[str, Any] = {
            "calls": 0,
            "chunks": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "model": self.model,
            "request_ids": [],
            "stop_reasons": [],
        }
        self.last_usage = usage
        if inp.messages or not inp.previous_summary:
            # A split first turn has no history before it: its prefix is the history then.
            history = inp.messages or inp.turn_prefix
            summary = self._summarize_range(history, inp=inp, kind="history", max_tokens=budget, usage=usage)
        else:
            # Only a turn prefix is new (a long turn cut again): the history summary stands as is.
            summary = strip_file_tags(inp.previous_summary)
        turn = ""
        if inp.turn_prefix:
            turn = self._summarize_range(
                inp.turn_prefix,
                inp=inp,
                kind="turn_prefix",
                max_tokens=max(256, budget // 2),
                usage=usage,
            )
        usage["cost_usd"] = cost_usd(usage["model"], usage["input_tokens"], usage["output_tokens"])
        if usage["stop_reasons"] and usage["stop_reasons"][-1] == "max_tokens":
            usage["truncated"] = True
        return Draft(summary=summary, turn_prefix_summary=turn, model=usage["model"], usage=usage)
