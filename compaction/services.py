"""Compaction services: request, run, activate, undo, overflow recovery (Django glue around core).

Life of a job:
    compaction_request → QUEUED row + compaction_queued event, Celery task enqueued on commit
    compaction_run     → claim (conditional UPDATE queued→running), snapshot the context,
                         prune or cut + summarize, then activate in one transaction, only if
                         the compaction the snapshot was based on is still the active one.
A job is never left RUNNING: failures are recorded, transient DB errors hand the job back to
the queue, and the sweeper (compaction_sweep_stuck) re-queues jobs whose worker died.

Overflow recovery (compaction_overflow) runs in the request with a bounded time and writes its
row only when it is finished, so it never waits behind a slow background job; if both finish,
the activation check lets exactly one of them win.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from compaction.core.calibration import calibrated_tokens
from compaction.core.config import CompactionConfig
from compaction.core.prune import plan_prune
from compaction.core.summarizers.anthropic import llm_time_budget
from compaction.core.tokens import count_text
from compaction.core.types import FileOps, Msg
from compaction.models import IN_FLIGHT, Compaction, Event, EventKind, Reason, ReviewStatus, Status
from compaction.selectors import compaction_in_flight
from sessions.models import Message, Session

logger = logging.getLogger(__name__)

STRATEGIES = ("auto", "anthropic", "extractive", "truncate", "prune")
# A QUEUED job older than this is re-enqueued by the sweeper (its message may have been
# lost, e.g. the broker was down at commit time). A duplicate delivery is a no-op.
REQUEUE_QUEUED_AFTER = timedelta(minutes=10)
# Loop guard (codex #40213, 48 compactions in a row): after a compaction that could not bring
# usage under the trigger, auto-compaction waits until a real share of the trigger was appended
# since its snapshot — re-summarizing (nearly) the same context would only give the same
# result again. A fixed 2,000 let a 60k trigger re-compact every couple of messages
# (acceptance replay: 17 compactions of 2–25 messages each); proportional to the trigger it
# scales with how much room a compaction is expected to make.
LOOP_GUARD_TRIGGER_SHARE = 0.10
LOOP_GUARD_MIN_NEW_TOKENS = 2_000  # floor for tiny triggers


def loop_guard_new_tokens(trigger: int) -> int:
    """Tokens that must be appended after a compaction left usage over the trigger."""
    return max(LOOP_GUARD_MIN_NEW_TOKENS, int(trigger * LOOP_GUARD_TRIGGER_SHARE))


# Keep-budget cap (planned compactions without an explicit keep setting). The default keep
# budget (20,000 tokens, our estimate) is sized for Claude-Code-like triggers (~167k of 200k).
# Under a low trigger it does not fit: after a compaction the provider sees
#     fixed (tool definitions, the agent's own system prompt: only the provider counts them)
#     + ratio × (system prompt + summary + kept)
# and with fixed ≈ 26–31k, a 20k keep and the summary that is ≈ a 60k trigger already — every
# compaction landed just under (or over) it and the next few messages triggered the next one.
# So the kept tail is capped to land the result at about TARGET_AFTER_SHARE of the trigger,
# leaving ~45% of the trigger of room for new work before the next compaction:
#     keep ≤ (TARGET_AFTER_SHARE × trigger − fixed) / ratio − system − expected summary
# but never below KEEP_FLOOR_TOKENS (the recent work must survive verbatim; plan_cut also
# keeps at least one message and never splits a tool pair). Overflow (force) has its own
# budget; an explicit keep_recent_tokens / preserve_messages (request or session) is honoured.
TARGET_AFTER_SHARE = 0.55
KEEP_FLOOR_TOKENS = 4_000


class CompactionError(Exception):
    """A request the current state does not allow (e.g. undoing a compaction that is not active)."""

    def __init__(self, message: str, *, field: str | None = None, code: str = "conflict"):
        super().__init__(message)
        self.field = field
        self.code = code


def _session_services():
    # sessions.services imports this module (messages_append → compaction_maybe_auto);
    # importing it at call time keeps the two modules free of an import cycle.
    from sessions import services

    return services


# --- helpers -----------------------------------------------------------------------------


def _event(
    session_id, kind: str, message: str, *, compaction: Compaction | None = None, data: dict | None = None
) -> Event:
    return Event.objects.create(
        session_id=session_id, kind=kind, compaction=compaction, message=message[:500], data=data or {}
    )


def _enqueue(compaction_id, *, mark: bool = True) -> None:
    """Hand the job's message to the broker, recording when (`enqueued_at`, which the sweeper
    measures staleness from). `mark=False`: the caller already recorded it (the sweeper does,
    in the transaction that decides to re-send, so two sweeps cannot both send)."""
    from compaction.tasks import run_compaction

    if mark:
        # Recorded even when the broker is down: the sweeper then retries one stale period later.
        Compaction.objects.filter(pk=compaction_id, status=Status.QUEUED).update(enqueued_at=timezone.now())
    try:
        run_compaction.delay(compaction_id=str(compaction_id))
    except Exception:  # noqa: BLE001 - broker down: the row stays QUEUED and the sweeper re-enqueues it
        logger.exception("Could not enqueue compaction %s; the sweeper will retry", compaction_id)


def _deadline_seconds() -> int:
    # One lease, renewed by the running task (compaction.lease) up to the hard time limit.
    return int(settings.COMPACTION_LEASE_SECONDS)


def _max_attempts() -> int:
    return settings.COMPACTION_MAX_ATTEMPTS


def describe(job: Compaction) -> str:
    """The one-line outcome people read in events, the API and the dashboard."""
    before = f"{job.tokens_before:,}" if job.tokens_before is not None else "?"
    after = f"{job.tokens_after:,}" if job.tokens_after is not None else "?"
    if job.status == Status.SUCCEEDED and job.strategy == "prune":
        return f"Tool output pruned (before #{job.prune_before_seq}), {before} → {after} tokens"
    if job.status == Status.SUCCEEDED:
        noun = "message" if job.messages_summarized == 1 else "messages"
        return f"Conversation compacted: {job.messages_summarized:,} {noun} → summary, {before} → {after} tokens"
    if job.status == Status.SKIPPED:
        return f"Nothing compacted: {job.detail}"
    if job.status == Status.FAILED:
        return f"Compaction failed: {job.error}"
    if job.status == Status.RUNNING:
        return "Compaction running"
    return "Compaction queued"


# --- request / auto trigger --------------------------------------------------------------


def compaction_request(
    *,
    session: Session,
    reason: str,
    requested_by=None,
    strategy: str = "auto",
    instructions: str = "",
    overrides: dict[str, Any] | None = None,
    force: bool = False,
) -> Compaction:
    """Queue a compaction, or return the one already in flight for this session.

    The returned row carries `created` (True when this call queued it). The database allows
    one QUEUED/RUNNING compaction per session; two racing requests both see none, one insert
    wins, the other gets an IntegrityError and returns the winner.
    """
    if strategy not in STRATEGIES:
        raise CompactionError(
            f"unknown strategy {strategy!r}; allowed: {', '.join(STRATEGIES)}", field="strategy", code="invalid"
        )
    params: dict[str, Any] = {"overrides": dict(overrides or {}), "force": bool(force)}
    if requested_by is not None:
        params["requested_by"] = requested_by.get_username()
    for _ in range(5):
        existing = compaction_in_flight(session_id=session.pk)
        if existing is not None:
            existing.created = False
            return existing
        active_id = Session.objects.filter(pk=session.pk).values_list("active_compaction_id", flat=True).first()
        try:
            with transaction.atomic():
                job = Compaction.objects.create(
                    session_id=session.pk,
                    reason=reason,
                    status=Status.QUEUED,
                    based_on_id=active_id,
                    strategy_requested=strategy,
                    instructions=instructions or "",
                    params=params,
                )
                _event(
                    session.pk,
                    EventKind.COMPACTION_QUEUED,
                    f"Compaction queued ({job.get_reason_display().lower()})",
                    compaction=job,
                    data={"reason": reason, "strategy": strategy},
                )
                transaction.on_commit(partial(_enqueue, job.pk))
        except IntegrityError:
            # Lost the race for the one in-flight slot; loop to return the winner.
            continue
        job.created = True
        return job
    raise CompactionError("could not queue a compaction: the in-flight job kept changing; retry")


def _loop_guard(*, session: Session, tokens: int, trigger: int) -> tuple[str, Compaction] | None:
    """(why auto-compaction must not fire now, the compaction that caused it), or None."""
    last = (
        Compaction.objects.filter(session=session, status__in=[Status.SUCCEEDED, Status.SKIPPED, Status.FAILED])
        .order_by("-created_at")
        .first()
    )
    if last is None:
        return None
    snapshot_seq = (last.params or {}).get("snapshot_seq")
    if snapshot_seq is None:
        return None
    if last.status == Status.SUCCEEDED and last.tokens_after is not None and last.tokens_after <= trigger:
        return None
    new_tokens = (
        Message.objects.filter(session=session, seq__gt=snapshot_seq).aggregate(total=Sum("token_count"))["total"] or 0
    )
    needed = loop_guard_new_tokens(trigger)
    if new_tokens >= needed:
        return None
    left = last.tokens_after if last.status == Status.SUCCEEDED else last.tokens_before
    outcome = {Status.SUCCEEDED: "left", Status.SKIPPED: "could not reduce", Status.FAILED: "failed at"}[last.status]
    return (
        f"Auto-compaction held back: the last compaction {outcome} {left or tokens:,} tokens, above the trigger "
        f"{trigger:,}, and only {new_tokens:,} tokens were appended since (needs {needed:,})"
    ), last


def compaction_maybe_auto(*, session: Session) -> Compaction | None:
    """After an append or a usage report: queue an auto compaction when usage crossed the trigger.

    Returns the queued (or already in-flight) job, or None.
    """
    # session_usage resolves the session's config too: its auto_compact and trigger_tokens
    # are the config's, so the config is not resolved a second time on every append.
    usage = _session_services().session_usage(session)
    if not usage["auto_compact"]:
        return None
    # A report made on the context from before the active compaction never reaches this
    # figure: activation drops the report, and usage_report does not record a later-arriving
    # one for a call made before the snapshot (sessions.services._reported_before_active_compaction).
    tokens = int(usage["tokens"])
    trigger = int(usage["trigger_tokens"])
    if tokens <= trigger:
        return None
    in_flight = compaction_in_flight(session_id=session.pk)
    if in_flight is not None:
        return in_flight
    guard = _loop_guard(session=session, tokens=tokens, trigger=trigger)
    if guard is not None:
        message, last = guard
        # Record why once per compaction that caused the hold, not on every append.
        if not Event.objects.filter(compaction=last, data__loop_guard=True).exists():
            _event(
                session.pk,
                EventKind.COMPACTION_SKIPPED,
                message,
                compaction=last,
                data={"loop_guard": True, "tokens": tokens, "trigger_tokens": trigger},
            )
        logger.info("Auto-compaction of session %s held back by the loop guard", session.pk)
        return None
    return compaction_request(session=session, reason=Reason.THRESHOLD)


# --- planning (shared by dry run, background run and overflow) --------------------------


# One measure everywhere (field notes: "same token figure for the trigger and for the meter"):
# every token figure the engine compares with the trigger, stores as tokens_before/after or
# predicts in a dry run is session_usage()["tokens"] — what the provider will see. It is the
# provider's last report plus estimates since, or, after a (de)activation dropped the report,
# the session's affine calibration of our estimate of the served context, fixed + ratio ×
# estimate (fixed: what only the provider counts — tool definitions, the agent's own system
# prompt; ratio: the provider's tokenizer against ours; compaction.core.calibration). A figure
# we compute ourselves (served-context estimates, prune savings) is brought onto that scale
# the same way, never compared raw; stored (unpruned) message counts are never mixed with
# served ones.


def _calibration(usage: dict[str, Any]) -> dict[str, Any] | None:
    """session_usage()["calibration"]: {fixed, ratio, reports, fitted}, None before any report."""
    return usage.get("calibration")


def _on_provider_scale(usage: dict[str, Any], estimated: int) -> int:
    """A served-context estimate as session_usage shows it once no current report covers it."""
    return calibrated_tokens(_calibration(usage), estimated)


def _tokenizer(session: Session):
    # The session's per-model tokenizer: count like the meter does.
    return _session_services().session_tokenizer(session)


@dataclass
class _Snapshot:
    session: Session
    based_on: Compaction | None
    config: CompactionConfig
    tokens_before: int  # session_usage()["tokens"]: the provider's scale
    messages: list[Msg]  # in context, as stored (what is cut and summarized)
    snapshot_seq: int
    estimated_before: int = 0  # our estimate of the served context, uncalibrated
    # session_usage()["calibration"]: maps an estimate of the served context to the provider's
    # scale after (de)activation (fixed + ratio × estimate); None before any report.
    calibration: dict[str, Any] | None = None
    calibration_offset: int = 0  # the last report's additive offset (informational, dry run)
    served_tokens: dict[int, int] = field(default_factory=dict)  # seq → tokens as served now
    # keep_recent_tokens / preserve_messages set by the request or the session (not a default):
    # honoured as given, never capped (see TARGET_AFTER_SHARE).
    keep_explicit: bool = False

    def on_provider_scale(self, estimated: int) -> int:
        """A served-context estimate as the meter will show it once this overlay is active."""
        return calibrated_tokens(self.calibration, estimated)


def _snapshot(session_id, overrides: dict[str, Any] | None) -> _Snapshot:
    ss = _session_services()
    session = Session.objects.select_related("active_compaction").get(pk=session_id)
    config = ss.session_config(session, overrides or None)
    usage = ss.session_usage(session)
    messages = ss.context_messages(session)
    # Pruned tool results and truncated replies are served smaller than stored: budgets about
    # what stays in context (keep_recent_tokens, the overflow cut) are measured as served.
    served = {m.seq: m.tokens for m in ss.context_messages(session, served=True)}
    snapshot_seq = max([m.seq for m in messages], default=session.last_seq)
    keep_keys = {"keep_recent_tokens", "preserve_messages"}
    keep_explicit = any(
        (layer or {}).get(key) is not None for layer in (overrides, session.compaction_settings) for key in keep_keys
    )
    return _Snapshot(
        session,
        session.active_compaction,
        config,
        int(usage["tokens"]),
        messages,
        snapshot_seq,
        estimated_before=int(usage["estimated_tokens"]),
        calibration=_calibration(usage),
        calibration_offset=int(usage.get("calibration_offset") or 0),
        served_tokens=served,
        keep_explicit=keep_explicit,
    )


def _keep_budget(snap: _Snapshot, *, force: bool) -> tuple[int, int | None]:
    """(keep budget for plan_cut, expected tokens after at that budget on the provider's
    scale or None when not predicted) — the configured budget capped as TARGET_AFTER_SHARE
    explains, unless forced (overflow) or set explicitly."""
    from compaction.core.summary_message import render_summary_message
    from compaction.core.tokens import count_content

    config = snap.config
    keep = config.keep_recent_tokens
    if force:
        return keep, None
    cal = snap.calibration or {}
    fixed = int(cal.get("fixed") or 0)
    ratio = float(cal.get("ratio") or 1.0) or 1.0
    in_context = sum(snap.served_tokens.get(m.seq, m.tokens) for m in snap.messages)
    framing = count_content(render_summary_message("", ""), _tokenizer(snap.session))
    summary = _estimate_summary_tokens(config, snap.based_on, max(0, in_context - keep)) + framing
    overhead = snap.session.system_prompt_tokens + summary

    def expected(kept: int) -> int:
        return snap.on_provider_scale(overhead + kept)

    if snap.keep_explicit or snap.config.preserve_messages:
        return keep, expected(keep)
    room = int((TARGET_AFTER_SHARE * config.trigger_tokens - fixed) / ratio) - overhead
    capped = max(min(keep, KEEP_FLOOR_TOKENS), min(keep, room))
    return capped, expected(capped)


def _cut(snap: _Snapshot, *, force: bool):
    """Plan the cut with each message weighed as served (the keep budget is about what stays
    in the context), then hand back the stored messages: the summarizer reads them in full."""
    from dataclasses import replace

    from compaction.core.cutpoint import plan_cut

    measured = [
        m if snap.served_tokens.get(m.seq, m.tokens) == m.tokens else replace(m, tokens=snap.served_tokens[m.seq])
        for m in snap.messages
    ]
    keep, _expected = _keep_budget(snap, force=force)
    plan = plan_cut(
        measured,
        keep_recent_tokens=keep,
        preserve_messages=snap.config.preserve_messages,
        force=force,
        context_window=snap.config.context_window,
    )
    stored = {m.seq: m for m in snap.messages}
    return replace(
        plan,
        to_summarize=[stored[m.seq] for m in plan.to_summarize],
        turn_prefix=[stored[m.seq] for m in plan.turn_prefix],
        kept=[stored[m.seq] for m in plan.kept],
    )


def _previous_summary(based_on: Compaction | None) -> str | None:
    if based_on is None or not based_on.summary.strip():
        return None
    text = based_on.summary
    if based_on.turn_prefix_summary.strip():
        # The old turn-prefix summary describes messages that are now being summarized too:
        # hand it to the update prompt so it is merged, not dropped.
        text += "\n\n## Earlier part of the turn that was in progress\n\n" + based_on.turn_prefix_summary.strip()
    return text


# Dry-run guess of a new summary's size: the previous summary (the update prompt keeps what it
# held) plus this share of the served tokens summarized now, at least SUMMARY_MIN_TOKENS, at
# most the summary budget (the summarizer's output limit). Observed on the real Claude Code
# sessions: the offline extractive summary of 100k-150k served tokens is 2k-4k tokens, an LLM
# summary rarely more than a few thousand; the budget caps the worst case.
SUMMARY_SHARE = 0.02
SUMMARY_MIN_TOKENS = 400


def _estimate_summary_tokens(config: CompactionConfig, based_on: Compaction | None, tokens_summarized: int) -> int:
    previous = based_on.summary_tokens if based_on else 0
    return min(config.summary_budget, previous + max(SUMMARY_MIN_TOKENS, int(tokens_summarized * SUMMARY_SHARE)))


def build_summarizer_chain(*, config: CompactionConfig, strategy: str, timeout: float, max_retries: int) -> list:
    """The summarizer chain for one job (a seam tests replace to make a summarizer slow)."""
    from compaction.core.summarizers import build_chain

    return build_chain(
        api_key=settings.ANTHROPIC_API_KEY or None,
        base_url=settings.ANTHROPIC_BASE_URL,
        model=config.summarizer_model,
        timeout=timeout,
        max_retries=max_retries,
        strategy=strategy,
    )


def _summarize_within(inp, chain: list, *, config: CompactionConfig, budget: float):
    from compaction.core.summarizers import summarize

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="overflow-summarizer")
    try:
        # Pure core code in the thread (no database), so abandoning it on timeout is safe; its
        # HTTP call ends by itself within the (short) LLM timeout.
        return pool.submit(summarize, inp, chain).result(timeout=budget)
    except FuturesTimeout:
        logger.warning("Overflow summarizer exceeded its %.0f s budget; using the extractive summarizer", budget)
        offline = build_summarizer_chain(config=config, strategy="extractive", timeout=budget, max_retries=0)
        result = summarize(inp, offline)
        reason = f"no summary within the overflow time budget of {budget:g} s"
        result.fallbacks = [{"strategy": chain[0].name, "reason": reason}, *result.fallbacks]
        return result
    finally:
        pool.shutdown(wait=False)


@dataclass
class _Outcome:
    kind: str  # "skip" | "prune" | "summary"
    based_on_id: Any
    tokens_before: int
    snapshot_seq: int
    detail: str = ""
    values: dict[str, Any] = field(default_factory=dict)
    # The usage right after this compaction when the meter at activation is not it (an import
    # activated after messages that came later are already stored); else measured in _apply.
    tokens_after: int | None = None
    trigger: int | None = None  # set for a summary: the job detail notes a result still over it


def _compute(
    snap: _Snapshot,
    *,
    reason: str,
    strategy: str,
    instructions: str,
    force: bool,
    llm_timeout: float,
    max_retries: int,
    time_budget: float | None = None,
) -> _Outcome:
    """Decide and produce the new overlay from a snapshot. No writes.

    `time_budget` (overflow recovery, an agent is waiting): if the LLM chain has not produced a
    summary within it, the offline extractive summarizer does, and the fallback is recorded.
    """
    based_on = snap.based_on
    config = snap.config
    trigger = config.trigger_tokens
    outcome = partial(
        _Outcome,
        based_on_id=based_on.pk if based_on else None,
        tokens_before=snap.tokens_before,
        snapshot_seq=snap.snapshot_seq,
    )
    if reason == Reason.THRESHOLD and not force and snap.tokens_before <= trigger:
        return outcome("skip", detail=f"usage {snap.tokens_before:,} is already under the trigger {trigger:,}")
    if not snap.messages:
        return outcome("skip", detail="nothing to compact: no messages in context")

    # Cheap tier first: serve old tool output as placeholders, no LLM call.
    prune_tier = strategy == "prune" or (
        strategy == "auto"
        and reason == Reason.THRESHOLD
        and not instructions
        and not force
        and config.prune_tool_outputs
    )
    if prune_tier:
        # Planned over the context as served (current prune overlay applied), so results that
        # are already placeholders are not counted as savings again.
        plan = plan_prune(_session_services().context_messages(snap.session, served=True))
        old_boundary = based_on.prune_before_seq if based_on and based_on.prune_before_seq else 0
        # Pruning alone is enough only if the figure the meter will show afterwards (served
        # estimate minus the savings, + the calibration offset) is under the trigger.
        after_prune = snap.on_provider_scale(snap.estimated_before - plan.tokens_saved)
        if (
            plan.prune_before_seq is not None
            and plan.prune_before_seq > old_boundary
            and (strategy == "prune" or after_prune <= trigger)
        ):
            return outcome(
                "prune",
                detail=plan.reason,
                values={
                    "strategy": "prune",
                    "summary": based_on.summary if based_on else "",
                    "turn_prefix_summary": based_on.turn_prefix_summary if based_on else "",
                    "summary_tokens": based_on.summary_tokens if based_on else 0,
                    "first_kept_seq": based_on.first_kept_seq if based_on else snap.messages[0].seq,
                    "split_turn": based_on.split_turn if based_on else False,
                    "read_files": list(based_on.read_files) if based_on else [],
                    "modified_files": list(based_on.modified_files) if based_on else [],
                    "prune_before_seq": plan.prune_before_seq,
                    "usage": {"tokens_saved_estimate": plan.tokens_saved, "tool_results_pruned": plan.pruned},
                },
            )
        if strategy == "prune":
            return outcome("skip", detail=f"nothing to prune: {plan.reason}")

    cut = _cut(snap, force=force)
    if cut.nothing_to_compact:
        return outcome("skip", detail=cut.reason)
    detail = cut.reason
    keep, expected = _keep_budget(snap, force=force)
    if expected is not None and expected > trigger:
        # Say so up front: an explicit keep setting (or the floor) leaves the result over the
        # trigger, so auto-compaction will wait for the loop guard rather than re-fire.
        source = "the explicit keep setting" if snap.keep_explicit or config.preserve_messages else "the minimum kept"
        detail = (
            f"expected ≈{expected:,} tokens after, above the trigger {trigger:,}: {source} "
            f"({keep:,} tokens) does not fit; {detail}"
        )

    chain = build_summarizer_chain(config=config, strategy=strategy, timeout=llm_timeout, max_retries=max_retries)
    from compaction.core.summarizers import SummaryInput, summarize

    inp = SummaryInput(
        messages=list(cut.to_summarize),
        turn_prefix=list(cut.turn_prefix),
        previous_summary=_previous_summary(based_on),
        previous_files=FileOps(read=list(based_on.read_files), modified=list(based_on.modified_files))
        if based_on
        else FileOps(),
        instructions=instructions or None,
        custom_prompt=config.compact_prompt,
        output_budget=config.summary_budget,
        model=config.summarizer_model,
    )
    if time_budget is not None and chain and chain[0].name not in ("extractive", "truncate"):
        result = _summarize_within(inp, chain, config=config, budget=time_budget)
    else:
        result = summarize(inp, chain)
    summarized = list(cut.to_summarize) + list(cut.turn_prefix)
    old_prune = based_on.prune_before_seq if based_on else None
    return outcome(
        "summary",
        detail=detail,
        trigger=trigger,
        values={
            "strategy": result.strategy,
            "fallbacks": result.fallbacks,
            "summary": result.summary,
            "turn_prefix_summary": result.turn_prefix_summary,
            "summary_tokens": count_text(result.summary, _tokenizer(snap.session))
            + count_text(result.turn_prefix_summary, _tokenizer(snap.session)),
            "read_files": result.read_files,
            "modified_files": result.modified_files,
            "first_summarized_seq": min(m.seq for m in summarized),
            "last_summarized_seq": max(m.seq for m in summarized),
            "first_kept_seq": cut.first_kept_seq,
            "split_turn": cut.split_turn,
            "messages_summarized": len(summarized),
            # A prune boundary inside the kept part still saves tokens; below the cut it is moot.
            "prune_before_seq": old_prune if old_prune and old_prune > cut.first_kept_seq else None,
            "summarizer_model": result.model,
            "usage": result.usage,
            "fidelity": result.fidelity,
        },
    )


# --- activation --------------------------------------------------------------------------


def _apply(job: Compaction, outcome: _Outcome, *, attempt: int | None, started: float) -> Compaction | None:
    """Write the outcome and, for a new overlay, activate it — atomically and only if the
    compaction the snapshot was based on is still the active one.

    `attempt` is the claim this worker holds (None for the in-request overflow run, whose row
    is inserted here). A worker whose claim was taken over (the sweeper re-queued it and
    another worker claimed it) writes nothing: returns None.
    """
    ss = _session_services()
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=job.session_id)
        if attempt is not None:
            current = Compaction.objects.select_for_update().filter(pk=job.pk).values("status", "attempts").first()
            if current is None or current["status"] != Status.RUNNING or current["attempts"] != attempt:
                logger.warning("Compaction %s: attempt %s lost its claim; result discarded", job.pk, attempt)
                return None
        now = timezone.now()
        for name, value in outcome.values.items():
            setattr(job, name, value)
        job.based_on_id = outcome.based_on_id
        job.tokens_before = outcome.tokens_before
        job.params = {**(job.params or {}), "snapshot_seq": outcome.snapshot_seq}
        job.finished_at = now
        job.duration_ms = int((time.monotonic() - started) * 1000)
        job.detail = outcome.detail[:300]
        if outcome.kind == "skip":
            job.status = Status.SKIPPED
            job.review_status = ReviewStatus.NOT_APPLICABLE
            job.save()
            _event(
                session.pk,
                EventKind.COMPACTION_SKIPPED,
                describe(job),
                compaction=job,
                data={"detail": job.detail, "tokens_before": job.tokens_before},
            )
            return job
        if session.active_compaction_id != outcome.based_on_id:
            job.status = Status.FAILED
            job.review_status = ReviewStatus.NOT_APPLICABLE
            job.error = (
                f"superseded: another compaction ({session.active_compaction_id or 'none'}) became active while "
                f"this one was running from {outcome.based_on_id or 'the full history'}; not activated"
            )
            job.save()
            _event(session.pk, EventKind.COMPACTION_FAILED, describe(job), compaction=job, data={"superseded": True})
            return job
        job.status = Status.SUCCEEDED
        job.activated_at = now
        job.save()
        session.active_compaction = job
        session.save(update_fields=["active_compaction", "updated_at"])
        ss.session_recompute_usage(session=session)  # also brings `session`'s counters up to date
        job.tokens_after = (
            outcome.tokens_after if outcome.tokens_after is not None else int(ss.session_usage(session)["tokens"])
        )
        update = ["tokens_after"]
        if outcome.trigger is not None and job.tokens_after > outcome.trigger and "above the trigger" not in job.detail:
            job.detail = (f"still above the trigger {outcome.trigger:,} after compacting; " + job.detail)[:300]
            update.append("detail")
        job.save(update_fields=update)
        _event(
            session.pk,
            EventKind.COMPACTION_FINISHED,
            describe(job),
            compaction=job,
            data={
                "tokens_before": job.tokens_before,
                "tokens_after": job.tokens_after,
                "messages_summarized": job.messages_summarized,
                "strategy": job.strategy,
                "fallbacks": len(job.fallbacks or []),
            },
        )
        return job


def _fail_claimed(job_id, *, attempt: int, error: str, started: float) -> None:
    now = timezone.now()
    with transaction.atomic():
        updated = Compaction.objects.filter(pk=job_id, status=Status.RUNNING, attempts=attempt).update(
            status=Status.FAILED,
            review_status=ReviewStatus.NOT_APPLICABLE,
            error=error[:5000],
            finished_at=now,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        if updated == 1:
            job = Compaction.objects.get(pk=job_id)
            _event(
                job.session_id, EventKind.COMPACTION_FAILED, describe(job), compaction=job, data={"attempt": attempt}
            )


# --- run ---------------------------------------------------------------------------------


def compaction_run(*, compaction_id, now=None) -> Compaction | None:
    """Run one queued compaction (the Celery task's body). A re-delivery is a no-op (None)."""
    now = now or timezone.now()
    claimed = Compaction.objects.filter(pk=compaction_id, status=Status.QUEUED).update(
        status=Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=now,
        deadline_at=now + timedelta(seconds=_deadline_seconds()),
        error="",
    )
    if claimed != 1:
        logger.info("Compaction %s not claimed: already taken or finished", compaction_id)
        return None
    job = Compaction.objects.get(pk=compaction_id)
    attempt = job.attempts
    started = time.monotonic()
    _event(
        job.session_id,
        EventKind.COMPACTION_STARTED,
        f"Compaction started ({job.get_reason_display().lower()}" + (f", attempt {attempt})" if attempt > 1 else ")"),
        compaction=job,
        data={"attempt": attempt},
    )
    try:
        params = job.params or {}
        snap = _snapshot(job.session_id, params.get("overrides"))
        if (snap.based_on.pk if snap.based_on else None) != job.based_on_id:
            # The active compaction changed between request and run (undo, overflow): the
            # snapshot is what this job builds on, so that is its base.
            Compaction.objects.filter(pk=job.pk).update(based_on=snap.based_on)
        outcome = _compute(
            snap,
            reason=job.reason,
            strategy=job.strategy_requested,
            instructions=job.instructions,
            force=bool(params.get("force")),
            llm_timeout=llm_time_budget(
                configured=settings.ANTHROPIC_TIMEOUT, soft_limit=settings.COMPACTION_SOFT_TIME_LIMIT
            ),
            max_retries=int(settings.ANTHROPIC_MAX_RETRIES),
        )
        _apply(job, outcome, attempt=attempt, started=started)
    except (OperationalError, InterfaceError):
        # Transient database trouble: hand the job back so the task's retry can claim it
        # again. If even that fails, the sweeper re-queues it after its deadline.
        try:
            # The task's autoretry re-sends the message: that counts as an enqueue.
            Compaction.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=attempt).update(
                status=Status.QUEUED, started_at=None, deadline_at=None, enqueued_at=timezone.now()
            )
        except Exception:  # noqa: BLE001
            logger.exception("Compaction %s: could not hand the job back to the queue", job.pk)
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is recorded on the row
        logger.exception("Compaction %s failed", job.pk)
        _fail_claimed(job.pk, attempt=attempt, error=f"{type(exc).__name__}: {exc}", started=started)
    return Compaction.objects.get(pk=job.pk)


def compaction_sweep_stuck(*, now=None) -> dict[str, int]:
    """Re-queue RUNNING jobs past their deadline (their worker died), fail them after N attempts,
    and re-enqueue QUEUED jobs whose message may have been lost: those last handed to the broker
    (`enqueued_at`, else `created_at`) more than REQUEUE_QUEUED_AFTER ago. Each re-send records
    `enqueued_at`, so a job is re-sent at most once per stale period however often this runs."""
    now = now or timezone.now()
    requeued: list = []
    failed = 0
    for job in Compaction.objects.filter(status=Status.RUNNING, deadline_at__lt=now):
        with transaction.atomic():
            still_stuck = Compaction.objects.filter(pk=job.pk, status=Status.RUNNING, attempts=job.attempts)
            if job.attempts >= _max_attempts():
                error = f"worker lost or timed out {job.attempts} times (deadline {job.deadline_at:%H:%M:%S}); gave up"
                gave_up = still_stuck.update(
                    status=Status.FAILED, review_status=ReviewStatus.NOT_APPLICABLE, error=error, finished_at=now
                )
                if gave_up == 1:
                    job.refresh_from_db()
                    _event(
                        job.session_id,
                        EventKind.COMPACTION_FAILED,
                        describe(job),
                        compaction=job,
                        data={"attempt": job.attempts, "swept": True},
                    )
                    failed += 1
            elif still_stuck.update(status=Status.QUEUED, started_at=None, deadline_at=None, enqueued_at=now) == 1:
                _event(
                    job.session_id,
                    EventKind.COMPACTION_QUEUED,
                    f"Compaction re-queued: attempt {job.attempts} passed its deadline (worker lost)",
                    compaction=job,
                    data={"attempt": job.attempts, "swept": True},
                )
                requeued.append(job.pk)
    stale_before = now - REQUEUE_QUEUED_AFTER
    candidates = (
        Compaction.objects.filter(status=Status.QUEUED)
        .filter(Q(enqueued_at__lt=stale_before) | Q(enqueued_at__isnull=True, created_at__lt=stale_before))
        .exclude(pk__in=requeued)
        .values_list("pk", "enqueued_at")
    )
    lost: list = []
    for job_id, enqueued_at in candidates:
        # Conditional on the value just read: of two overlapping sweeps, one re-sends.
        if (
            Compaction.objects.filter(pk=job_id, status=Status.QUEUED, enqueued_at=enqueued_at).update(enqueued_at=now)
            == 1
        ):
            lost.append(job_id)
    for job_id in [*requeued, *lost]:
        transaction.on_commit(partial(_enqueue, job_id, mark=False))
    if requeued or failed or lost:
        logger.info("Sweeper: %d re-queued, %d failed, %d re-enqueued", len(requeued), failed, len(lost))
    return {"requeued": len(requeued), "failed": failed, "reenqueued": len(lost)}


# --- dry run -----------------------------------------------------------------------------


def compaction_dry_run(
    *,
    session: Session,
    strategy: str = "auto",
    instructions: str = "",
    overrides: dict[str, Any] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """What a compaction would summarize now, and the estimated tokens after. Changes nothing.

    `estimated_tokens_after` is on the same scale as `tokens_before` and as the real run's
    `tokens_after` (session_usage()["tokens"], see the note above _calibration): it is built
    from what will be served — system prompt + the summary message (its size estimated, see
    _estimate_summary_tokens) + the kept messages as served (prune overlay applied) — mapped by
    the session's calibration (fixed + ratio × estimate). `tokens_summarized` is what the summarizer reads (messages
    as stored); `tokens_kept` is what stays in context (as served).
    """
    from compaction.core.summary_message import render_summary_message
    from compaction.core.tokens import count_content

    ss = _session_services()
    snap = _snapshot(session.pk, overrides)
    config = snap.config
    base = {
        "dry_run": True,
        "tokens_before": snap.tokens_before,
        "trigger_tokens": config.trigger_tokens,
        "context_window": config.context_window,
        "messages_in_context": len(snap.messages),
        "based_on": str(snap.based_on.pk) if snap.based_on else None,
        "calibration_offset": snap.calibration_offset,
        "calibration": snap.calibration,
    }
    if strategy == "prune":
        plan = plan_prune(ss.context_messages(snap.session, served=True))
        old_boundary = snap.based_on.prune_before_seq if snap.based_on and snap.based_on.prune_before_seq else 0
        if plan.prune_before_seq is None or plan.prune_before_seq <= old_boundary:
            return {**base, "would_compact": False, "reason": f"nothing to prune: {plan.reason}"}
        return {
            **base,
            "would_compact": True,
            "strategy": "prune",
            "reason": plan.reason,
            "prune_before_seq": plan.prune_before_seq,
            "tool_results_pruned": plan.pruned,
            "estimated_tokens_after": snap.on_provider_scale(snap.estimated_before - plan.tokens_saved),
        }
    cut = _cut(snap, force=force)
    if cut.nothing_to_compact:
        return {**base, "would_compact": False, "reason": cut.reason}
    summarized = list(cut.to_summarize) + list(cut.turn_prefix)
    summarized_seqs = {m.seq for m in summarized}
    tokens_summarized = sum(m.tokens for m in summarized)
    served_summarized = sum(snap.served_tokens.get(seq, 0) for seq in summarized_seqs)
    kept_served = sum(tokens for seq, tokens in snap.served_tokens.items() if seq >= cut.first_kept_seq)
    estimated_summary = _estimate_summary_tokens(config, snap.based_on, served_summarized)
    tokenizer = _tokenizer(snap.session)
    # The summary is served as one user message with a fixed preamble (and a heading for a
    # split turn's prefix summary): count that framing exactly, estimate only the summary text.
    framing = count_content(render_summary_message("", "x" if cut.split_turn else ""), tokenizer)
    estimated_after = snap.session.system_prompt_tokens + framing + estimated_summary + kept_served
    return {
        **base,
        "would_compact": True,
        "strategy": strategy,
        "reason": cut.reason,
        "first_summarized_seq": min(summarized_seqs),
        "last_summarized_seq": max(summarized_seqs),
        "first_kept_seq": cut.first_kept_seq,
        "split_turn": cut.split_turn,
        "messages_summarized": len(summarized),
        "tokens_summarized": tokens_summarized,
        "messages_kept": len(cut.kept),
        "tokens_kept": kept_served,
        "estimated_summary_tokens": estimated_summary,
        "estimated_tokens_after": snap.on_provider_scale(estimated_after),
    }


# --- undo --------------------------------------------------------------------------------


def compaction_revert(*, compaction: Compaction, user=None) -> Compaction | None:
    """Undo: reactivate the compaction this one was based on (None = the full history).

    Only the active compaction can be undone, so undo steps back one overlay at a time and
    never skips over a newer one. Returns the compaction that is active afterwards.
    """
    ss = _session_services()
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=compaction.session_id)
        if session.active_compaction_id != compaction.pk:
            raise CompactionError(
                "only the active compaction can be undone"
                + (
                    f"; the active one is {session.active_compaction_id}"
                    if session.active_compaction_id
                    else "; none is active"
                )
            )
        usage_before = int(ss.session_usage(session)["tokens"])
        previous = compaction.based_on
        if previous is not None and previous.status != Status.SUCCEEDED:
            previous = None
        session.active_compaction = previous
        session.save(update_fields=["active_compaction", "updated_at"])
        ss.session_recompute_usage(session=session)  # also brings `session`'s counters up to date
        usage_after = int(ss.session_usage(session)["tokens"])
        who = f" by {user.get_username()}" if user is not None else ""
        target = f"compaction {previous.pk}" if previous else "the full history"
        _event(
            session.pk,
            EventKind.COMPACTION_REVERTED,
            f"Compaction undone{who}: back to {target}, {usage_before:,} → {usage_after:,} tokens",
            compaction=compaction,
            data={
                "active": str(previous.pk) if previous else None,
                "tokens_before": usage_before,
                "tokens_after": usage_after,
            },
        )
        return previous


# --- overflow recovery -------------------------------------------------------------------


def compaction_overflow(
    *,
    session: Session,
    error_text: str | None,
    status_code: int | None = None,
    input_tokens: int | None = None,
    now=None,
) -> dict[str, Any]:
    """The agent's provider refused the prompt: if it is a context overflow, compact at once
    (forced, short LLM timeout, extractive fallback) and answer with the new context."""
    from compaction.core.overflow import detect_overflow

    ss = _session_services()
    check = detect_overflow(
        error_text=error_text, status_code=status_code, input_tokens=input_tokens, context_window=session.context_window
    )
    if not check.is_overflow:
        return {"overflow": False, "reason": check.reason}
    _event(
        session.pk,
        EventKind.OVERFLOW,
        f"Provider reported a context overflow ({check.provider or 'unknown provider'}): {check.reason}"[:500],
        data={
            "provider": check.provider,
            "pattern": check.pattern,
            "status_code": status_code,
            "input_tokens": input_tokens,
        },
    )
    # A queued (not yet started) job would only redo this work: retire it. A running one is
    # left alone; whichever activates first wins and the other is recorded as superseded.
    for queued in Compaction.objects.filter(session_id=session.pk, status=Status.QUEUED):
        if Compaction.objects.filter(pk=queued.pk, status=Status.QUEUED).update(
            status=Status.SKIPPED,
            review_status=ReviewStatus.NOT_APPLICABLE,
            detail="superseded by an overflow compaction",
            finished_at=timezone.now(),
        ):
            _event(
                session.pk,
                EventKind.COMPACTION_SKIPPED,
                "Queued compaction superseded by an overflow compaction",
                compaction=queued,
            )

    started = time.monotonic()
    job = Compaction(
        session_id=session.pk,
        reason=Reason.OVERFLOW,
        status=Status.RUNNING,
        strategy_requested="auto",
        params={"force": True, "provider": check.provider, "pattern": check.pattern},
        attempts=1,
        started_at=now or timezone.now(),
    )
    try:
        snap = _snapshot(session.pk, None)
        if input_tokens and input_tokens > snap.tokens_before:
            snap.tokens_before = input_tokens
        outcome = _compute(
            snap,
            reason=Reason.OVERFLOW,
            strategy="auto",
            instructions="",
            force=True,
            llm_timeout=settings.COMPACTION_OVERFLOW_LLM_TIMEOUT,
            max_retries=0,
            time_budget=settings.COMPACTION_OVERFLOW_TIME_BUDGET,
        )
        applied = _apply(job, outcome, attempt=None, started=started)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - record it; the agent still gets an answer
        logger.exception("Overflow compaction for session %s failed", session.pk)
        job.status = Status.FAILED
        job.review_status = ReviewStatus.NOT_APPLICABLE
        job.error = f"{type(exc).__name__}: {exc}"[:5000]
        job.finished_at = timezone.now()
        job.duration_ms = int((time.monotonic() - started) * 1000)
        job.save()
        _event(session.pk, EventKind.COMPACTION_FAILED, describe(job), compaction=job)
        applied = job
    session.refresh_from_db()
    compacted = applied is not None and applied.status == Status.SUCCEEDED
    reason = check.reason
    if applied is not None and applied.status == Status.SKIPPED:
        reason = applied.detail
    elif applied is not None and applied.status == Status.FAILED:
        reason = applied.error
    return {
        "overflow": True,
        "compacted": compacted,
        "reason": reason,
        "provider": check.provider,
        "pattern": check.pattern,
        "compaction": applied,
        "context": ss.context_build(session=session),
    }


# --- import ------------------------------------------------------------------------------


def compaction_record_import(
    *, session: Session, summary: str, first_kept_seq: int, tokens_before: int | None = None, detail: str = ""
) -> Compaction:
    """Record a compaction another agent already made (e.g. Claude Code's compact_boundary) and
    activate it, so the imported session serves the same context the agent had."""
    from compaction.core.summary_message import render_summary_message
    from compaction.core.tokens import count_content

    started = time.monotonic()
    with transaction.atomic():
        session = Session.objects.select_related("active_compaction").get(pk=session.pk)
        based_on = session.active_compaction
        usage = _session_services().session_usage(session)
        # Right after the agent compacted, its context was the system prompt and the summary
        # (the messages after the boundary came later): on the provider's scale, like tokens_before.
        tokens_after = _on_provider_scale(
            usage,
            session.system_prompt_tokens + count_content(render_summary_message(summary), _tokenizer(session)),
        )
        summarized = Message.objects.filter(session=session, seq__lt=first_kept_seq)
        if based_on and based_on.first_kept_seq:
            summarized = summarized.filter(seq__gte=based_on.first_kept_seq)
        seqs = list(summarized.values_list("seq", flat=True))
        job = Compaction(
            session_id=session.pk,
            reason=Reason.IMPORT,
            status=Status.RUNNING,
            strategy_requested="import",
            attempts=1,
            started_at=timezone.now(),
        )
        outcome = _Outcome(
            "summary",
            based_on_id=based_on.pk if based_on else None,
            # The agent's own figure (provider's scale), else the meter's: never the raw estimate.
            tokens_before=tokens_before if tokens_before is not None else int(usage["tokens"]),
            # The agent compacted when the messages before the boundary were all it had: calls
            # made after the boundary ran on the compacted context (their usage reports count).
            snapshot_seq=max(0, first_kept_seq - 1),
            detail=detail or "imported from the agent's own compaction",
            values={
                "strategy": "import",
                "summary": summary,
                "summary_tokens": count_text(summary, _tokenizer(session)),
                "first_summarized_seq": min(seqs) if seqs else None,
                "last_summarized_seq": max(seqs) if seqs else None,
                "first_kept_seq": first_kept_seq,
                "messages_summarized": len(seqs),
            },
            tokens_after=tokens_after,
        )
        applied = _apply(job, outcome, attempt=None, started=started)
    assert applied is not None
    return applied


__all__ = [
    "IN_FLIGHT",
    "STRATEGIES",
    "CompactionError",
    "build_summarizer_chain",
    "compaction_dry_run",
    "compaction_maybe_auto",
    "compaction_overflow",
    "compaction_record_import",
    "compaction_request",
    "compaction_revert",
    "compaction_run",
    "compaction_sweep_stuck",
    "describe",
]


# --- transcript replay (import_transcript --replay, the replay tests' twin, the bench) ----


@dataclass
class ReplayStep:
    index: int
    seq: int
    role: str
    reported_tokens: int | None
    usage_tokens: int
    compaction: Compaction | None


@dataclass
class ReplayResult:
    steps: int = 0
    reports: int = 0
    compactions: list[Compaction] = field(default_factory=list)
    first_compaction_index: int | None = None
    usage_before_first: int | None = None
    # The highest usage (session_usage()["tokens"], the figure the trigger compares) after
    # any step or just before a compaction (its tokens_before), and the step: tells why a
    # replay that never compacted did not.
    peak_usage: int = 0
    peak_index: int | None = None


def transcript_messages_for_api(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded messages as an agent would send them: whitespace-only text blocks (Claude Code
    logs "\n\n" blocks between thinking and text) are dropped, as the Messages API rejects them;
    a message left with no content is skipped."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [b for b in content if not (b.get("type") == "text" and not str(b.get("text", "")).strip())]
            if not content:
                continue
        elif isinstance(content, str) and not content.strip():
            continue
        out.append({**message, "content": content})
    return out


def _reported_prompt_tokens(usage: dict[str, Any] | None) -> int | None:
    if not usage or usage.get("input_tokens") is None:
        return None
    return (
        int(usage.get("input_tokens") or 0)
        + int(usage.get("cache_read_input_tokens") or 0)
        + int(usage.get("cache_creation_input_tokens") or 0)
    )


def usage_report_recorded(*, session: Session, usage: dict[str, Any], message_seq: int):
    """Report a transcript's recorded provider usage for the assistant message at `message_seq`."""
    return _session_services().usage_report(
        session=session,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_input_tokens=int(usage.get("cache_read_input_tokens") or 0),
        cache_creation_input_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        message_seq=message_seq,
    )


def transcript_replay(
    *, session: Session, messages: list[dict[str, Any]], run_inline: bool = False, on_step=None
) -> ReplayResult:
    """Append a recorded conversation one message at a time through the services the API uses.

    After each assistant message its recorded usage is reported (calibrating the hybrid
    estimate, so auto-compaction fires where the recorded agent's context really was) until
    the service has compacted once: after that the recorded figures describe a context the
    service no longer serves, and reporting them would make it compact again and again.
    Compaction jobs run wherever Celery runs them, or here right after the step that queued
    them with `run_inline` (the queued task then finds the job claimed and does nothing).
    """
    ss = _session_services()
    result = ReplayResult()
    earlier = set(Compaction.objects.filter(session=session).values_list("pk", flat=True))
    new_succeeded = Compaction.objects.filter(session=session, status=Status.SUCCEEDED).exclude(pk__in=earlier)
    for index, message in enumerate(messages):
        appended = ss.messages_append(
            session=session, messages=[{"role": message["role"], "content": message["content"]}]
        )
        seq = appended.messages[-1].seq
        job = appended.compaction
        reported = None
        # Stop reporting as soon as the service has compacted (even if this very append did it).
        compacted = bool(result.compactions) or new_succeeded.exists()
        if run_inline and job is not None and not compacted:
            compaction_run(compaction_id=job.pk)
            compacted = new_succeeded.exists()
        if message["role"] == "assistant" and not compacted:
            reported = _reported_prompt_tokens(message.get("usage"))
            if reported is not None:
                report = usage_report_recorded(session=session, usage=message["usage"], message_seq=seq)
                result.reports += 1
                job = report.compaction or job
        if run_inline:
            queued = Compaction.objects.filter(session=session, status=Status.QUEUED).first()
            if queued is not None:
                compaction_run(compaction_id=queued.pk)
        session.refresh_from_db()
        # A compaction may also activate later, in a worker: the active one is what counts.
        if (
            session.active_compaction_id
            and session.active_compaction_id not in earlier
            and all(c.pk != session.active_compaction_id for c in result.compactions)
        ):
            activated = Compaction.objects.get(pk=session.active_compaction_id)
            result.compactions.append(activated)
            if (activated.tokens_before or 0) > result.peak_usage:
                result.peak_usage, result.peak_index = activated.tokens_before, index
            if result.first_compaction_index is None:
                result.first_compaction_index = index
                result.usage_before_first = activated.tokens_before
        result.steps += 1
        usage_tokens = int(ss.session_usage(session)["tokens"])
        if result.peak_index is None or usage_tokens > result.peak_usage:
            result.peak_usage, result.peak_index = usage_tokens, index
        if on_step is not None:
            on_step(ReplayStep(index, seq, message["role"], reported, usage_tokens, job))
    return result
