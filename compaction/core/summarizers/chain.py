"""The fallback chain: try each summarizer, check its output, repair it, never raise."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from compaction.core.fileops import extract_file_ops, merge_file_ops, render_file_tags
from compaction.core.ledger import Fidelity, build_ledger, fidelity_report
from compaction.core.paths import SCRATCH_DIR_RE, common_root
from compaction.core.prompts import SECTION_HEADINGS
from compaction.core.summarizers.agree import Agreement, agree
from compaction.core.summarizers.anthropic import AnthropicSummarizer, cost_usd
from compaction.core.summarizers.base import (
    Draft,
    Summarizer,
    SummarizerError,
    SummaryInput,
    SummaryResult,
    check_summary_text,
    normalize_output,
    trim_to_budget,
)
from compaction.core.summarizers.extractive import ExtractiveSummarizer
from compaction.core.summarizers.truncate import TruncateSummarizer, truncate_summary
from compaction.core.tokens import count_text
from compaction.core.types import Fallback, FileOps, Msg
from compaction.core.work import file_ops, fold, to_json, work_root

logger = logging.getLogger(__name__)

STRATEGIES = ("auto", "anthropic", "extractive", "truncate")


def build_chain(
    *,
    api_key: str | None,
    base_url: str | None,
    model: str,
    timeout: float,
    max_retries: int,
    strategy: str = "auto",
    context_window: int | None = None,
) -> list[Summarizer]:
    """Summarizers to try in order. `context_window` overrides the summarizer model's window."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    chain: list[Summarizer] = []
    if strategy == "anthropic" or (strategy == "auto" and api_key):
        if api_key:
            chain.append(
                AnthropicSummarizer(
                    api_key=api_key,
                    base_url=base_url,
                    model=model,
                    timeout=timeout,
                    max_retries=max_retries,
                    context_window=context_window,
                )
            )
        else:
            chain.append(_Unavailable("anthropic", "no API key configured"))
    if strategy in ("auto", "anthropic", "extractive"):
        chain.append(ExtractiveSummarizer())
    chain.append(TruncateSummarizer())
    return chain


class _Unavailable:
    """Stands in for a requested summarizer that cannot run, so the reason is recorded."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason

    def summarize(self, inp: SummaryInput) -> Draft:
        raise SummarizerError(self.reason)


# File tags may take at most this share of the output budget in the stored text; the full
# lists are stored with the compaction (read_files/modified_files) either way.
MAX_TAG_SHARE = 0.25
# Below this the summary body gets no smaller, whatever the tags cost.
MIN_BODY_BUDGET = 256
# The summary (body, file tags, repairs) stays under this many characters, about what Claude
# Code's own run (11-16k): past that a handoff stops being read and starts being skimmed. The
# kept tail beside it is the task in progress (policy.keep_budget), so what is served after a
# compaction is ~8k tokens on real sessions, where it was 16k with a fixed 20k tail
# (bench/kept_eval.py measures it; tests/core/test_kept_shared.py holds it under 15k).
MAX_SUMMARY_CHARS = 11_700


def _capped_tags(ops: FileOps, limit: int, max_chars: int | None = None, root: str | None = None) -> str:
    """File tags within `limit` tokens (and `max_chars`): the oldest read files go first, then
    the oldest modified. A file read in scratch space (a task's output under /tmp) is not listed:
    it is gone or stale by the time the summary is read (the compaction still stores it)."""
    ops = FileOps(read=[p for p in ops.read if not SCRATCH_DIR_RE.match(p)], modified=list(ops.modified))
    # Paths relative to the project's directory (the summary names it under Repository State).
    root = root if root is not None else common_root(list(ops.modified) or list(ops.read))
    tags = render_file_tags(ops, root)

    def over(text: str) -> bool:
        return count_text(text) > limit or (max_chars is not None and len(text) > max_chars)

    if not over(tags):
        return tags
    read, modified = list(ops.read), list(ops.modified)
    while read and over(tags):
        read = read[len(read) // 4 or 1 :]
        tags = render_file_tags(FileOps(read=read, modified=modified), root)
    while modified and over(tags):
        modified = modified[len(modified) // 4 or 1 :]
        tags = render_file_tags(FileOps(read=read, modified=modified), root)
    return tags


def _root(inp: SummaryInput) -> str | None:
    """The project's directory as the summary's body names it (the work state's), for the tags."""
    return (work_root(inp.state_now) or inp.state_now.git.cwd) if inp.state_now is not None else None


def _tags_within(summary: str, tags: str, ops: FileOps, inp: SummaryInput) -> str:
    """The fidelity repair may add lines to a summary whose body and tags already filled
    MAX_SUMMARY_CHARS (measured on the audit's pi cut: 11,786 served, 12,066 with the message's
    preamble): the file tags at its end give that space back (oldest read files first, as
    _capped_tags drops them), so the served message stays under 12,000 characters."""
    over = len(summary) - MAX_SUMMARY_CHARS
    if over <= 0 or not tags or not summary.endswith(tags):
        return summary
    fewer = _capped_tags(
        ops, int(inp.output_budget * MAX_TAG_SHARE), max_chars=max(0, len(tags) - over), root=_root(inp)
    ).strip()
    head = summary[: len(summary) - len(tags)].rstrip()
    return f"{head}\n\n{fewer}" if fewer else head


def _check(draft: Draft, inp: SummaryInput, summarizer: Summarizer, body_budget: int | None = None) -> str | None:
    reason = check_summary_text(
        draft.summary,
        input_tokens=inp.input_tokens,
        require_sections=not inp.custom_prompt,
        headings=getattr(summarizer, "required_headings", SECTION_HEADINGS),
        output_budget=body_budget,
    )
    return reason


def _cost_fields(usage: dict[str, Any]) -> dict[str, Any]:
    fields = {k: usage.get(k) for k in ("calls", "input_tokens", "output_tokens", "model")}
    fields["cost_usd"] = usage.get("cost_usd") or cost_usd(
        str(usage.get("model") or ""), usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
    )
    return fields


def _error_reason(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc).splitlines()[0] if str(exc) else ""
    name = type(exc).__name__
    reason = f"{name} (HTTP {status})" if status else name
    return f"{reason}: {text[:300]}" if text else reason


def _agree(draft: Draft, inp: SummaryInput, summarizer: Summarizer) -> Agreement:
    """A model's draft made to agree with the work state. The extractive summary is rendered
    from that state, and the truncate text states no status: both are left as they are. A
    custom prompt's format is the user's: nothing is added to it but lost commits."""
    if summarizer.name in ("extractive", "truncate"):
        return Agreement(draft.summary)
    return agree(draft.summary, inp.state_now, add_where=not inp.custom_prompt)


def _file_ops(inp: SummaryInput, summarized: list[Msg]) -> FileOps:
    """The files read and changed, as of the newest message: from the work state, or (when it
    could not be folded) extracted from the messages and merged with the previous lists."""
    if inp.state_now is not None:
        return merge_file_ops(inp.previous_files, file_ops(inp.state_now))
    try:
        return merge_file_ops(inp.previous_files, inp.file_ops or extract_file_ops(summarized))
    except Exception:  # noqa: BLE001 - odd content must not cost the summary; keep what was known
        logger.exception("File-op extraction failed")
        return inp.previous_files


def _with_state(inp: SummaryInput, summarized: list[Msg]) -> SummaryInput:
    """The work state folded once per job: through the summarized range (stored for the next
    compaction) and on through the kept messages (the status the summary states)."""
    if inp.state is not None and inp.state_now is not None:
        return inp
    try:
        state = inp.state if inp.state is not None else fold(summarized, inp.previous_state)
        return replace(inp, state=state, state_now=fold(inp.kept, state))
    except Exception:  # noqa: BLE001 - odd content must not cost the summary; the chain falls back
        logger.exception("Folding the work state failed")
        return inp


@dataclass
class _Attempt:
    """One summarizer's try: its draft (None when it raised), why it was refused (None: accepted),
    the bullet lines trimmed to fit, and the agreement repairs made to it."""

    draft: Draft | None
    reason: str | None
    dropped: int = 0
    agreement: Agreement = field(default_factory=lambda: Agreement(""))


def _attempt(summarizer: Summarizer, inp: SummaryInput, body_budget: int) -> _Attempt:
    try:
        # Summarizers that size their output exactly are given the body's budget.
        run_inp = replace(inp, output_budget=body_budget) if getattr(summarizer, "exact_budget", False) else inp
        draft = summarizer.summarize(run_inp)
        draft.summary = normalize_output(draft.summary)
        # What the summarizer wrote is checked as it is first: a continuation of the
        # conversation must not pass because the repairs below gave it headings.
        reason = _check(draft, inp, summarizer)
        if reason is not None:
            return _Attempt(draft, reason)
        # A model writes from a transcript that ends at the cut: made to agree with the work
        # state as of the newest message (stale statuses out, lost commits back).
        agreement = _agree(draft, inp, summarizer)
        draft.summary = agreement.summary
        # An over-budget summary is trimmed (least important bullets first); one that still
        # does not fit is rejected like any other bad summary.
        draft.summary, dropped = trim_to_budget(draft.summary, body_budget)
        return _Attempt(draft, _check(draft, inp, summarizer, body_budget), dropped, agreement)
    except Exception as exc:  # noqa: BLE001 - any failure means "fall back", recorded by the caller
        logger.warning("Summarizer %s failed: %s", summarizer.name, type(exc).__name__)
        return _Attempt(None, _error_reason(exc))


def _fidelity(summary: str, inp: SummaryInput) -> tuple[str, Fidelity]:
    """The summary checked against the ledger of the work state, repaired within the budget
    and the cap: (summary, report)."""
    try:
        if inp.state_now is None:
            raise ValueError("no work state to check the summary against")
        ledger = build_ledger(
            inp.state_now,
            through=inp.state.through if inp.state is not None else None,
            previous_summary=inp.previous_summary if inp.previous_state is None else None,
            instructions=inp.instructions,
        )
        return fidelity_report(
            summary,
            ledger,
            budget=max(inp.output_budget, count_text(summary)),
            max_chars=max(MAX_SUMMARY_CHARS, len(summary)),
        )
    except Exception as exc:  # noqa: BLE001 - a ledger bug must not lose a valid summary
        logger.exception("Fidelity check failed")
        return summary, Fidelity(error=_error_reason(exc))


def summarize(inp: SummaryInput, chain: list[Summarizer]) -> SummaryResult:
    """Run the chain; the first summary that passes the checks wins. Never raises."""
    fallbacks: list[Fallback] = []
    failed_usage: list[dict[str, Any]] = []
    timings: dict[str, int] = {}
    inp = _with_state(inp, inp.messages)
    ops = _file_ops(inp, inp.messages)
    # File tags are part of the stored summary: the body gets what they leave of the budget.
    tags = _capped_tags(ops, int(inp.output_budget * MAX_TAG_SHARE), root=_root(inp)).strip()
    body_budget = max(MIN_BODY_BUDGET, inp.output_budget - (count_text(tags) + 2 if tags else 0))

    accepted, strategy = _Attempt(None, "no summarizer"), "truncate"
    for summarizer in chain:
        started = time.monotonic()
        attempt = _attempt(summarizer, inp, body_budget)
        timings[summarizer.name] = int((time.monotonic() - started) * 1000)
        if attempt.reason is None and attempt.draft is not None:
            accepted, strategy = attempt, summarizer.name
            break
        fallbacks.append(Fallback(summarizer.name, attempt.reason or "unknown failure"))
        spent = attempt.draft.usage if attempt.draft is not None else getattr(summarizer, "last_usage", None)
        if spent and spent.get("calls"):
            failed_usage.append({"strategy": summarizer.name, **_cost_fields(spent)})
    if accepted.draft is None:
        # Every strategy failed its checks: the truncate text is still a valid summary to serve.
        text, trimmed = trim_to_budget(truncate_summary(inp), body_budget)
        accepted = _Attempt(Draft(summary=text, model="truncate"), None, trimmed)
        fallbacks.append(Fallback("truncate", "all strategies failed; unchecked truncate output used"))
    draft = accepted.draft
    assert draft is not None  # accepted above, or the truncate text
    summary = draft.summary.rstrip()
    # The served summary stays under MAX_SUMMARY_CHARS: the file tags get what the body
    # leaves (the full lists are stored with the compaction either way).
    tags = _capped_tags(
        ops, int(inp.output_budget * MAX_TAG_SHARE), max_chars=MAX_SUMMARY_CHARS - len(summary) - 2, root=_root(inp)
    )
    summary, fidelity = _fidelity(f"{summary}\n\n{tags}" if tags else summary, inp)
    summary = _tags_within(summary, tags, ops, inp)
    fidelity = replace(fidelity, agreement=tuple(accepted.agreement.repairs))
    usage = dict(draft.usage, duration_ms=timings)
    if accepted.dropped:
        usage["trimmed_to_budget_lines"] = accepted.dropped
    if failed_usage:
        # Tokens spent on attempts that were rejected or failed are still billed.
        usage["failed_attempts"] = failed_usage
    return SummaryResult(
        summary=summary,
        strategy=strategy,
        model=draft.model or strategy,
        usage=usage,
        fallbacks=fallbacks,
        read_files=list(ops.read),
        modified_files=list(ops.modified),
        fidelity=fidelity,
        work_state=to_json(inp.state) if inp.state is not None else None,
    )
