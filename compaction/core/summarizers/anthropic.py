"""LLM summarizer on the Anthropic Messages API (the real `anthropic` SDK).

One deadline bounds a whole `summarize()` call — every chunk, the turn prefix, every retry —
so a hung or throttling provider hands over to the extractive summarizer well before the
job's soft time limit (a limit that fires inside the SDK's retry loop is retried as a
connection error, and the job dies at its hard limit with no summary). The retries are ours for
that reason, modelled on the SDK's own: 408/409/429/5xx (529 overloaded included) and
connection errors, `retry-after(-ms)` honoured, exponential backoff otherwise, `x-should-retry`
obeyed; a wait that would end past the deadline is not started. When it gives up the exception propagates and the chain falls back.

A history larger than the summarizer's own window is summarized in chunks: chunk 1 with the
initial prompt, every next chunk with the update prompt merging the running summary, so a
session that already overflowed can still be compacted (field notes: claude-code #2119).

The last prompt carries the work state as of the newest message (compaction.core.work, as
facts the summary must agree with: statuses, commits, the person's own words) and the
must-keep ledger of the range (the person's instructions, exact error lines, files), so the
model writes what the agreement check and the fidelity check look for instead of those checks
repairing it afterwards without context. The system prompt and the transcript are marked for
prompt caching (see compaction.core.prompts).
"""

from __future__ import annotations

import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

from compaction.core.prompts import (
    SYSTEM_PROMPT,
    PromptParts,
    build_prompt_parts,
    serialize_message,
    strip_file_tags,
    summary_from_response,
)
from compaction.core.registry import lookup
from compaction.core.summarizers.base import Draft, SummarizerError, SummaryInput, has_sections, normalize_output
from compaction.core.tokens import count_text
from compaction.core.types import Msg

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "claude-haiku-4-5"
# Instructions, format and rules around the transcript, plus a safety margin for the gap
# between our offline tokenizer and Claude's.
PROMPT_OVERHEAD_TOKENS = 2_000
TOKENIZER_MARGIN = 0.85

MAX_OVERFLOW_SPLITS = 3
MIN_CHUNK_TOKENS = 1_000

# Retry pacing, as the SDK does it: 0.5 s doubling up to 8 s, minus up to 25 % jitter.
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
# A provider asking for a longer pause than this is not waited for (the SDK's own bound).
MAX_RETRY_AFTER = 60.0
# An attempt is not started with less time than this left: it could not finish.
MIN_ATTEMPT_SECONDS = 0.2
# The socket timeout of an attempt ends it; this much later the attempt is abandoned anyway
# (a server trickling bytes keeps a socket read alive forever).
ATTEMPT_GRACE_SECONDS = 1.0
_RETRY_STATUSES = frozenset({408, 409, 429})

# Share of a job's soft time limit the LLM summarizer may use; the rest is for the extractive
# fallback (about a second on a 150k-token range), the checks and activation.
LLM_SHARE_OF_SOFT_LIMIT = 0.6
LLM_RESERVE_MAX_SECONDS = 30.0


def llm_time_budget(*, configured: float, soft_limit: float) -> float:
    """Seconds the LLM summarizer may take in one job, retries included: the configured
    timeout, but never so close to the job's soft time limit that the extractive fallback could
    not run after it (at least min(30 s, half the limit) or 40 % of it are left over)."""
    reserve = max(soft_limit * (1 - LLM_SHARE_OF_SOFT_LIMIT), min(LLM_RESERVE_MAX_SECONDS, soft_limit / 2))
    return max(MIN_ATTEMPT_SECONDS, min(configured, soft_limit - reserve))


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


# Prompt caching prices relative to the input price: a 5-minute cache write costs 1.25×, a read 0.1×.
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1


def cost_usd(
    model: str, input_tokens: int, output_tokens: int, *, cache_write_tokens: int = 0, cache_read_tokens: int = 0
) -> float | None:
    """USD of one or more calls; `input_tokens` is the uncached input, as the API reports it."""
    name = lookup(model).name or model
    best = max((p for p in PRICES if name.startswith(p)), key=len, default=None)
    if best is None:
        return None
    price_in, price_out = PRICES[best]
    cached = cache_write_tokens * CACHE_WRITE_FACTOR + cache_read_tokens * CACHE_READ_FACTOR
    return round(((input_tokens + cached) * price_in + output_tokens * price_out) / 1_000_000, 6)


def _retry_after(headers: Any) -> float | None:
    """The provider's requested pause in seconds (`retry-after-ms` or `retry-after`), if sane."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 < seconds <= MAX_RETRY_AFTER:
            return seconds
    return None


def _backoff(retry: int) -> float:
    return min(INITIAL_RETRY_DELAY * 2.0**retry, MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


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


def _must_keep(inp: SummaryInput) -> dict[str, list[str]] | None:
    """The fidelity ledger of the range (read off the work state), for the prompt."""
    from compaction.core.ledger import build_ledger

    if inp.state_now is None:
        return None
    try:
        previous = inp.previous_summary if inp.previous_state is None else None
        through = inp.state.through if inp.state is not None else None
        items = build_ledger(inp.state_now, through=through, previous_summary=previous).items
    except Exception:  # noqa: BLE001 - a ledger bug costs the hint, never the summary
        logger.exception("Ledger for the summarizer prompt failed")
        return None
    return {category: list(items.get(category) or []) for category in ("instructions", "errors", "files")}


def _facts(inp: SummaryInput) -> str | None:
    """The work state as of the newest message, as facts the summary must agree with."""
    from compaction.core.summarizers.extractive.render import facts

    if inp.state_now is None:
        return None
    try:
        return facts(inp.state_now)
    except Exception:  # noqa: BLE001 - a rendering bug costs the hint, never the summary
        logger.exception("Work-state facts for the summarizer prompt failed")
        return None


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
        """`timeout` bounds one whole summarize() call in seconds — all its requests, retries
        and waits between them; `max_retries` is the retries per request."""
        # Imported here so the core stays importable without the SDK, and at construction (before
        # any deadline starts: a cold import takes seconds on a busy worker, once per process).
        import anthropic

        self.model = model or DEFAULT_MODEL
        info = lookup(self.model)
        self.context_window = context_window or info.context_window
        self.max_output_tokens = info.max_output_tokens
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        # Usage of the latest run, also when it failed part-way: calls already made cost money.
        self.last_usage: dict[str, Any] = {}
        # The SDK does not retry: our loop does, within the deadline (module doc).
        self.client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)
        self._deadline = time.monotonic() + self.timeout

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

    def _remaining(self) -> float:
        return self._deadline - time.monotonic()

    def _out_of_time(self, attempts: int, last: BaseException | None) -> SummarizerError:
        detail = f"; last error: {type(last).__name__}: {str(last).splitlines()[0][:200] if str(last) else ''}"
        return SummarizerError(
            f"no summary within the LLM time budget of {self.timeout:g} s "
            f"({attempts} attempt{'s' if attempts != 1 else ''}{detail if last else ''})"
        )

    def _attempt(self, request: dict[str, Any], seconds: float) -> Any:
        """One request, over after `seconds` whatever the server does."""
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="anthropic-summarizer")
        try:
            # Pure HTTP in the thread: abandoning it is safe, its socket timeout ends it.
            future = pool.submit(self.client.messages.create, **request, timeout=seconds)
            return future.result(timeout=seconds + ATTEMPT_GRACE_SECONDS)
        except FuturesTimeout:
            import anthropic

            raise anthropic.APITimeoutError(request=None) from None  # type: ignore[arg-type]
        finally:
            pool.shutdown(wait=False)

    def _create(self, request: dict[str, Any]) -> Any:
        """messages.create with retries, all within the deadline of the current summarize()."""
        import anthropic

        attempts = 0
        last: BaseException | None = None
        while True:
            remaining = self._remaining()
            if remaining < MIN_ATTEMPT_SECONDS:
                raise self._out_of_time(attempts, last)
            attempts += 1
            try:
                return self._attempt(request, remaining)
            except anthropic.APIStatusError as exc:
                should = exc.response.headers.get("x-should-retry") if exc.response is not None else None
                retry = should == "true" or (
                    should != "false" and (exc.status_code in _RETRY_STATUSES or exc.status_code >= 500)
                )
                wait = _retry_after(exc.response.headers if exc.response is not None else None)
                last = exc
            except anthropic.APIConnectionError as exc:  # includes APITimeoutError
                retry, wait, last = True, None, exc
            if not retry or attempts > self.max_retries:
                if self._remaining() < MIN_ATTEMPT_SECONDS and isinstance(last, anthropic.APITimeoutError):
                    # The deadline, not the provider, ended it: say so.
                    raise self._out_of_time(attempts, last) from last
                raise last
            wait = wait if wait is not None else _backoff(attempts - 1)
            if self._remaining() - wait < MIN_ATTEMPT_SECONDS:
                raise self._out_of_time(attempts, last) from last
            logger.info("Summarizer call failed (%s); retry %d in %.1f s", type(last).__name__, attempts, wait)
            time.sleep(wait)

    def _call(self, prompt: PromptParts, max_tokens: int, usage: dict[str, Any]) -> str:
        # Cache breakpoints on the stable prefix: the system prompt and the transcript.
        ephemeral = {"type": "ephemeral"}
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.cached, "cache_control": ephemeral}]
        if prompt.rest.strip():
            content.append({"type": "text", "text": prompt.rest})
        message = self._create(
            {
                "model": self.model,
                "max_tokens": max_tokens,
                "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": ephemeral}],
                "messages": [{"role": "user", "content": content}],
            }
        )
        usage["calls"] += 1
        usage["input_tokens"] += message.usage.input_tokens or 0
        usage["output_tokens"] += message.usage.output_tokens or 0
        usage["cache_creation_input_tokens"] += getattr(message.usage, "cache_creation_input_tokens", None) or 0
        usage["cache_read_input_tokens"] += getattr(message.usage, "cache_read_input_tokens", None) or 0
        usage["model"] = message.model
        request_id = getattr(message, "_request_id", None)
        if request_id:
            usage["request_ids"].append(request_id)
        usage["stop_reasons"].append(message.stop_reason)
        text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
        return normalize_output(summary_from_response(text))

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
        must_keep = _must_keep(inp) if kind == "history" else None
        facts = _facts(inp) if kind == "history" else None
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            prompt = build_prompt_parts(
                messages=chunk,
                previous_summary=running,
                instructions=inp.instructions,
                custom_prompt=custom,
                kind=kind,
                must_keep=must_keep if last else None,
                facts=facts if last else None,
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
        self._deadline = time.monotonic() + self.timeout
        # The API rejects max_tokens above the model's output limit; a bigger budget is moot.
        budget = max(256, min(inp.output_budget, self.max_output_tokens))
        usage: dict[str, Any] = {
            "calls": 0,
            "chunks": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
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
        usage["cost_usd"] = cost_usd(
            usage["model"],
            usage["input_tokens"],
            usage["output_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
        )
        if usage["stop_reasons"] and usage["stop_reasons"][-1] == "max_tokens":
            usage["truncated"] = True
        return Draft(summary=summary, turn_prefix_summary=turn, model=usage["model"], usage=usage)
