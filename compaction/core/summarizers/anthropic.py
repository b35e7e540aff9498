"""LLM summarizer on the Anthropic Messages API (the real `anthropic` SDK).

One call for everything before the kept messages. The model is shown the whole history when it
fits the summarizer model's window (from the registry) less the output budget and the
instructions; beyond that the middles of the longest tool outputs are cut first
(compaction.core.conversation_text), and a history that does not fit even then is summarized
in chunks: chunk 1 with the initial prompt, every next chunk with the update prompt merging the
running summary, so a session that already overflowed can still be compacted (field notes:
claude-code #2119). A long autonomous turn cut inside is part of that one history: the prompt
says which request's work goes on in the kept messages, and the model writes one text.

Retries are the SDK's own (`max_retries`: 408/409/429/5xx and connection errors, `x-should-retry`
and `retry-after` honoured, exponential backoff). One deadline bounds a whole `summarize()` call —
every chunk, every retry — so a hung or throttling provider hands over to the extractive
summarizer well before the job's soft time limit: a middleware inside the SDK's retry loop gives
each attempt only the time left, starts none without time for it, and stops a retry whose
`retry-after` would end past the deadline; the call runs in a thread the deadline abandons (a
server trickling bytes keeps a socket read alive forever). When it gives up, the exception
propagates and the chain falls back.

The last prompt carries the work state as of the newest message (compaction.core.work, as
facts the summary must agree with, each citing its message number) and the must-keep ledger of
the range, so the model writes what the agreement check and the fidelity check look for instead
of those checks repairing it afterwards without context. The system prompt and the transcript
are marked for prompt caching (see compaction.core.prompts).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import Any

from compaction.core.conversation_text import DEFAULT_CAPS, Fitted, fit_conversation, serialize_message
from compaction.core.ledger import build_ledger
from compaction.core.overflow import detect_overflow
from compaction.core.prompts import (
    SYSTEM_PROMPT,
    PromptParts,
    build_prompt_parts,
    strip_file_tags,
    summary_from_response,
)
from compaction.core.registry import lookup
from compaction.core.summarizers.base import Draft, SummarizerError, SummaryInput, has_sections, normalize_output
from compaction.core.summarizers.extractive.render import facts
from compaction.core.tokens import count_text
from compaction.core.types import Msg

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "claude-haiku-4-5"
# Our offline tokenizer counts fewer tokens than Claude's for the same text: the prompt is
# planned at this share of what the window leaves after the output.
TOKENIZER_MARGIN = 0.85
_EMPTY_CONVERSATION = "<conversation>\n\n</conversation>"

MAX_OVERFLOW_SPLITS = 3
MIN_CHUNK_TOKENS = 1_000

# An attempt is not started with less time than this left: it could not finish.
MIN_ATTEMPT_SECONDS = 0.2
# The deadline abandons the SDK's call this much after it passed (its socket timeout ends an
# attempt; a server trickling bytes would keep it alive).
ATTEMPT_GRACE_SECONDS = 1.0
# Statuses the SDK retries (besides an `x-should-retry: true`).
_RETRIED_STATUSES = frozenset({408, 409, 429})

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


def chunk_messages(messages: list[Msg], budget_tokens: int) -> list[list[Msg]]:
    """Split `messages` into consecutive chunks whose serialized size fits `budget_tokens`.

    Sizes are measured on the serialization with the default cuts (a tool output at 4,000
    characters), not on stored token counts, so no chunk is planned around one huge output;
    each chunk is then shown as whole as its budget allows. A single message larger than the
    budget forms its own chunk.
    """
    chunks: list[list[Msg]] = []
    current: list[Msg] = []
    size = 0
    for msg in messages:
        tokens = count_text("\n\n".join(serialize_message(msg, DEFAULT_CAPS))) + 4
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
    if inp.state_now is None:
        return None
    try:
        return facts(inp.state_now)
    except Exception:  # noqa: BLE001 - a rendering bug costs the hint, never the summary
        logger.exception("Work-state facts for the summarizer prompt failed")
        return None


def turn_in_progress(inp: SummaryInput) -> int | None:
    """When the kept messages start inside a turn: the person's latest request before them (0
    when none is known); None when the kept part starts with a turn of its own."""
    if not inp.kept or inp.kept[0].is_user_turn_start:
        return None
    last = inp.messages[-1].seq if inp.messages else 0
    if inp.state is not None:
        # The person's words, not the harness's (an interruption notice, a reminder) nor a
        # message typed while the agent worked that arrived inside a tool result's turn.
        said = [p for p in inp.state.people.messages if p.seq <= last and p.kind != "chatter"]
        requests = [p.seq for p in said if p.kind == "request"] or [p.seq for p in said]
        if requests:
            return max(requests)
    return next((m.seq for m in reversed(inp.messages) if m.is_user_turn_start and m.provenance != "harness"), 0)


# --- the deadline, inside the SDK's retry loop ----------------------------------------------


class OutOfTime(SummarizerError):
    """The LLM time budget ran out before the provider answered."""


@dataclass
class _Deadline:
    """The time one summarize() call may take, shared by its requests and their retries."""

    seconds: float
    end: float = 0.0
    attempts: int = 0
    last: str = ""  # the last failure seen, for the reason

    def __post_init__(self) -> None:
        self.end = time.monotonic() + self.seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def exceeded(self) -> OutOfTime:
        tried = f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}"
        last = f"; last error: {self.last}" if self.last else ""
        return OutOfTime(f"no summary within the LLM time budget of {self.seconds:g} s ({tried}{last})")


def _retry_after(headers: Any) -> float | None:
    """The pause the provider asks for before a retry (`retry-after-ms`, `retry-after`), in s."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers.get(name)) * scale
        except (TypeError, ValueError):
            continue
    return None


def _failure(response: Any) -> str:
    """An error response in one line: status and the provider's message (never the body's rest)."""
    try:
        error = json.loads(response.http_response.read() or b"{}").get("error") or {}
        detail = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
    except (ValueError, AttributeError):
        detail = ""
    return f"HTTP {response.status_code}" + (f" {detail[:200]}" if detail else "")


def _deadline_guard(deadline: _Deadline, max_retries: int) -> Any:
    """SDK middleware (once per attempt): the attempt gets the time left and no more; none
    starts without time for it; a retry the provider asks to delay past the deadline is not
    waited for. Everything else about retrying is the SDK's."""
    import anthropic  # lazy: the SDK takes seconds to import (3.0 s measured), needed only with an API key

    def guard(request: Any, call_next: Any) -> Any:
        remaining = deadline.remaining()
        if remaining < MIN_ATTEMPT_SECONDS:
            raise deadline.exceeded()
        deadline.attempts += 1
        try:
            response = call_next(request.copy(timeout=remaining))
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            deadline.last = f"{type(exc).__name__}: {str(exc)[:200]}"
            raise
        if response.status_code < 400:
            return response
        deadline.last = _failure(response)
        should = response.headers.get("x-should-retry")
        retried = should == "true" or (
            should != "false" and (response.status_code in _RETRIED_STATUSES or response.status_code >= 500)
        )
        wait = _retry_after(response.headers)
        if retried and request.retries_taken < max_retries and wait is not None:
            if wait > deadline.remaining() - MIN_ATTEMPT_SECONDS:
                raise deadline.exceeded()
        return response

    return guard


# --- the summarizer --------------------------------------------------------------------------


@dataclass
class _Run:
    """One summarize() call: its deadline and its usage (also when it failed part-way: calls
    already made cost money)."""

    deadline: _Deadline
    usage: dict[str, Any] = field(default_factory=dict)
    # What the last prompt carries besides the transcript, read off the work state once per run.
    must_keep: dict[str, list[str]] | None = None
    facts: str | None = None
    turn: int | None = None


def _new_usage(model: str) -> dict[str, Any]:
    return {
        "calls": 0,
        "chunks": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "model": model,
        "request_ids": [],
        "stop_reasons": [],
        # Per call: tokens, latency, and what the model was shown of the history.
        "per_call": [],
    }


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
        and waits between them; `max_retries` is the SDK's retries per request."""
        # Imported here so the core stays importable without the SDK, and at construction (before
        # any deadline starts: a cold import takes seconds on a busy worker, once per process).
        import anthropic

        self.model = model or DEFAULT_MODEL
        info = lookup(self.model)
        self.context_window = context_window or info.context_window
        self.max_output_tokens = info.max_output_tokens
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.last_usage: dict[str, Any] = {}
        self.client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=self.timeout, max_retries=self.max_retries
        )

    def _create(self, request: dict[str, Any], run: _Run) -> Any:
        """messages.create with the SDK's retries, all within the deadline of the current run."""
        deadline = run.deadline
        if deadline.remaining() < MIN_ATTEMPT_SECONDS:
            raise deadline.exceeded()
        client = self.client.with_middleware(_deadline_guard(deadline, self.max_retries))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="anthropic-summarizer")
        try:
            # Pure HTTP in the thread: abandoning it is safe, its guard ends it at its next attempt.
            future = pool.submit(lambda: client.messages.create(**request))
            return future.result(timeout=max(0.0, deadline.remaining()) + ATTEMPT_GRACE_SECONDS)
        except FuturesTimeout:
            raise deadline.exceeded() from None
        finally:
            pool.shutdown(wait=False)

    def _call(self, prompt: PromptParts, fitted: Fitted | None, max_tokens: int, run: _Run) -> str:
        # Cache breakpoints on the stable prefix: the system prompt and the transcript.
        ephemeral = {"type": "ephemeral"}
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt.cached, "cache_control": ephemeral}]
        if prompt.rest.strip():
            content.append({"type": "text", "text": prompt.rest})
        started = time.monotonic()
        message = self._create(
            {
                "model": self.model,
                "max_tokens": max_tokens,
                "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": ephemeral}],
                "messages": [{"role": "user", "content": content}],
            },
            run,
        )
        _record(run.usage, message, fitted, ms=int((time.monotonic() - started) * 1000))
        text = "".join(block.text for block in message.content if getattr(block, "type", "") == "text")
        return normalize_output(summary_from_response(text))

    def _window(self, max_tokens: int, scale: float) -> int:
        """Tokens (our count) the prompt may take beside `max_tokens` of output."""
        return int((self.context_window - max_tokens) * TOKENIZER_MARGIN * scale)

    def _prompt(
        self, inp: SummaryInput, run: _Run, conversation: str, *, previous: str | None, last: bool
    ) -> PromptParts:
        return build_prompt_parts(
            conversation=conversation,
            previous_summary=previous,
            instructions=inp.instructions,
            custom_prompt=inp.custom_prompt,
            must_keep=run.must_keep if last else None,
            facts=run.facts if last else None,
            turn_in_progress=run.turn if last else None,
            kept=inp.kept if last else None,
        )

    def _overhead(self, inp: SummaryInput, run: _Run, *, previous: str | None, last: bool) -> int:
        """Tokens of the system prompt and the user message around an empty transcript."""
        prompt = self._prompt(inp, run, _EMPTY_CONVERSATION, previous=previous, last=last)
        return count_text(SYSTEM_PROMPT) + count_text(prompt.text)

    def _summarize_range(self, inp: SummaryInput, max_tokens: int, run: _Run) -> str:
        scale = 1.0
        for _attempt in range(MAX_OVERFLOW_SPLITS + 1):
            try:
                return self._summarize_fitted(inp, max_tokens, run, scale)
            except Exception as exc:
                # Our offline tokenizer only approximates Claude's: when the provider still says
                # the prompt is too long, plan with half the room and go again instead of failing.
                if not _is_overflow(exc) or self._window(max_tokens, scale / 2) < 2 * MIN_CHUNK_TOKENS:
                    raise
                run.usage["overflow_retries"] = run.usage.get("overflow_retries", 0) + 1
                scale /= 2
        raise SummarizerError("summarizer prompt still too long after splitting the history")

    def _summarize_fitted(self, inp: SummaryInput, max_tokens: int, run: _Run, scale: float) -> str:
        """One call when the history fits the window (cut longest-outputs-first if need be),
        else the chunks."""
        window = self._window(max_tokens, scale)
        budget = window - self._overhead(inp, run, previous=inp.previous_summary, last=True)
        if budget >= MIN_CHUNK_TOKENS:
            fitted = fit_conversation(inp.messages, budget)
            if fitted.fits:
                prompt = self._prompt(inp, run, fitted.text, previous=inp.previous_summary, last=True)
                text = self._call(prompt, fitted, max_tokens, run)
                if not text.strip():
                    raise SummarizerError("empty response")
                run.usage["chunks"] += 1
                return text
        return self._summarize_chunks(inp, max_tokens, run, window)

    def _summarize_chunks(self, inp: SummaryInput, max_tokens: int, run: _Run, window: int) -> str:
        # Every chunk but the first carries the running summary, which can grow to the output.
        previous = count_text(inp.previous_summary) if inp.previous_summary else 0
        planned = window - self._overhead(inp, run, previous=None, last=True) - max(previous, max_tokens)
        if planned < MIN_CHUNK_TOKENS:
            raise SummarizerError(f"summarizer window {self.context_window} too small for output budget {max_tokens}")
        chunks = chunk_messages(inp.messages, planned)
        running = inp.previous_summary
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            budget = window - self._overhead(inp, run, previous=running, last=last)
            fitted = fit_conversation(chunk, max(MIN_CHUNK_TOKENS, budget))
            prompt = self._prompt(inp, run, fitted.text, previous=running, last=last)
            text = self._call(prompt, fitted, max_tokens, run)
            if not text.strip():
                raise SummarizerError(f"empty response for chunk {index + 1} of {len(chunks)}")
            if not inp.custom_prompt and not last and has_sections(text):
                # A broken intermediate summary would poison every later merge.
                raise SummarizerError(f"chunk {index + 1} of {len(chunks)} returned no structured summary")
            running = text
        run.usage["chunks"] += len(chunks)
        return running or ""

    def summarize(self, inp: SummaryInput) -> Draft:
        run = _Run(
            _Deadline(self.timeout),
            _new_usage(self.model),
            must_keep=_must_keep(inp),
            facts=_facts(inp),
            turn=turn_in_progress(inp),
        )
        self.last_usage = run.usage
        # The API rejects max_tokens above the model's output limit; a bigger budget is moot.
        budget = max(256, min(inp.output_budget, self.max_output_tokens))
        if inp.messages:
            summary = self._summarize_range(inp, budget, run)
        elif inp.previous_summary:
            summary = strip_file_tags(inp.previous_summary)  # nothing new: the summary stands
        else:
            raise SummarizerError("nothing to summarize")
        usage = run.usage
        usage["cost_usd"] = cost_usd(
            usage["model"],
            usage["input_tokens"],
            usage["output_tokens"],
            cache_write_tokens=usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
        )
        if usage["stop_reasons"] and usage["stop_reasons"][-1] == "max_tokens":
            usage["truncated"] = True
        return Draft(summary=summary, model=usage["model"], usage=usage)


def _record(usage: dict[str, Any], message: Any, fitted: Fitted | None, *, ms: int) -> None:
    """One call's usage added to the run's, and kept per call."""
    reported = message.usage
    call = {
        "input_tokens": reported.input_tokens or 0,
        "output_tokens": reported.output_tokens or 0,
        "cache_creation_input_tokens": getattr(reported, "cache_creation_input_tokens", None) or 0,
        "cache_read_input_tokens": getattr(reported, "cache_read_input_tokens", None) or 0,
        "ms": ms,
        "stop_reason": message.stop_reason,
    }
    if fitted is not None:
        # What the model was shown of the history (our count) and where outputs were cut.
        call["transcript_tokens"] = fitted.tokens
        call["tool_output_cap"] = fitted.caps.tool
    usage["calls"] += 1
    for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        usage[key] += call[key]
    usage["model"] = message.model
    request_id = getattr(message, "_request_id", None)
    if request_id:
        usage["request_ids"].append(request_id)
    usage["stop_reasons"].append(message.stop_reason)
    call["cost_usd"] = cost_usd(
        message.model,
        call["input_tokens"],
        call["output_tokens"],
        cache_write_tokens=call["cache_creation_input_tokens"],
        cache_read_tokens=call["cache_read_input_tokens"],
    )
    usage["per_call"].append(call)
