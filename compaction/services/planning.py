"""Planning: snapshot the context, decide prune or cut + summarize, run the summarizer chain
(shared by the dry run, the background run and overflow recovery). No writes."""

from __future__ import annotations

import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from django.conf import settings

from compaction.core.calibration import calibrated_tokens
from compaction.core.config import CompactionConfig
from compaction.core.cutpoint import plan_cut
from compaction.core.policy import (
    DEFAULT_TARGET_RATIO,
    PRUNE,
    PRUNE_SUMMARIZE,
    SUMMARIZE,
    Candidate,
    Decision,
    choose,
)
from compaction.core.prune import KEPT_MIN_SAVINGS, KEPT_PROTECT_TOKENS, plan_prune, tool_names
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content, count_text
from compaction.core.types import FileOps, Msg
from compaction.core.work import WorkState, fold, from_json
from compaction.models import Compaction, Reason, WorkStateRecord
from sessions import services as ss
from sessions.models import Message, Session

logger = logging.getLogger("compaction.services")


# Keep-budget cap (planned compactions without an explicit keep setting). The default keep
# budget (20,000 tokens, our estimate) is sized for Claude-Code-like triggers (~167k of 200k).
# Under a low trigger it does not fit: after a compaction the provider sees
#     fixed (tool definitions, the agent's own system prompt: only the provider counts them)
#     + ratio × (system prompt + summary + kept)
# and with fixed ≈ 26–31k, a 20k keep and the summary that is ≈ a 60k trigger already — every
# compaction landed just under (or over) it and the next few messages triggered the next one.
# So the kept tail is capped to land the result at the session's target_ratio of the trigger
# (compaction.core.policy: at or below half of it by default, so the next compaction is far away):
#     keep ≤ (target_ratio × trigger − fixed) / ratio − system − expected summary
# but never below KEEP_FLOOR_TOKENS (the recent work must survive verbatim; plan_cut also
# keeps at least one message and never splits a tool pair). Overflow (force) has its own
# budget; an explicit keep_recent_tokens / preserve_messages (request or session) is honoured.
TARGET_AFTER_SHARE = DEFAULT_TARGET_RATIO  # the default; config.target_ratio is what applies
KEEP_FLOOR_TOKENS = 4_000
# The kept tail is sized to land this share of the trigger below the target: the summary's size
# is only estimated (_estimate_summary_tokens), and the cut lands at a turn start, not on the budget.
LANDING_MARGIN = 0.05


# --- planning (shared by dry run, background run and overflow) --------------------------


# One measure everywhere (field notes: "same token figure for the trigger and for the meter"):
# every token figure the engine compares with the trigger, stores as tokens_before/after or
# predicts in a dry run is session_usage().tokens — what the provider will see. It is the
# provider's last report plus estimates since, or, after a (de)activation dropped the report,
# the session's affine calibration of our estimate of the served context, fixed + ratio ×
# estimate (fixed: what only the provider counts — tool definitions, the agent's own system
# prompt; ratio: the provider's tokenizer against ours; compaction.core.calibration). A figure
# we compute ourselves (served-context estimates, prune savings) is brought onto that scale
# the same way, never compared raw; stored (unpruned) message counts are never mixed with
# served ones.


def _tokenizer(session: Session):
    # The session's per-model tokenizer: count like the meter does.
    return ss.session_tokenizer(session)


@dataclass
class _Snapshot:
    session: Session
    based_on: Compaction | None
    config: CompactionConfig
    tokens_before: int  # session_usage().tokens: the provider's scale
    messages: list[Msg]  # in context, as stored (what is cut and summarized)
    snapshot_seq: int
    estimated_before: int = 0  # our estimate of the served context, uncalibrated
    # session_usage().calibration: maps an estimate of the served context to the provider's
    # scale after (de)activation (fixed + ratio × estimate); None before any report.
    calibration: dict[str, Any] | None = None
    calibration_offset: int = 0  # the last report's additive offset (informational, dry run)
    served_tokens: dict[int, int] = field(default_factory=dict)  # seq → tokens as served now
    served_messages: list[Msg] = field(default_factory=list)  # in context, as served (pruning plans)
    # keep_recent_tokens / preserve_messages set by the request or the session (not a default):
    # honoured as given, never capped (see TARGET_AFTER_SHARE).
    keep_explicit: bool = False

    def on_provider_scale(self, estimated: int) -> int:
        """A served-context estimate as the meter will show it once this overlay is active."""
        return calibrated_tokens(self.calibration, estimated)


def _snapshot(session_id, overrides: dict[str, Any] | None) -> _Snapshot:
    session = Session.objects.select_related("active_compaction").get(pk=session_id)
    config = ss.session_config(session, overrides or None)
    usage = ss.session_usage(session)
    # One read of the messages in context, as stored (what is cut and summarized) and as served.
    messages, served_messages = ss.context_messages_both(session)
    # Pruned tool results and truncated replies are served smaller than stored: budgets about
    # what stays in context (keep_recent_tokens, the overflow cut) are measured as served.
    served = {m.seq: m.tokens for m in served_messages}
    snapshot_seq = max([m.seq for m in messages], default=session.last_seq)
    keep_keys = {"keep_recent_tokens", "preserve_messages"}
    keep_explicit = any(
        (layer or {}).get(key) is not None for layer in (overrides, session.compaction_settings) for key in keep_keys
    )
    return _Snapshot(
        session,
        session.active_compaction,
        config,
        usage.tokens,
        messages,
        snapshot_seq,
        estimated_before=usage.estimated_tokens,
        calibration=usage.calibration,
        calibration_offset=usage.calibration_offset or 0,
        served_tokens=served,
        served_messages=served_messages,
        keep_explicit=keep_explicit,
    )


def _keep_budget(snap: _Snapshot, *, force: bool) -> tuple[int, int | None]:
    """(keep budget for plan_cut, expected tokens after at that budget on the provider's
    scale or None when not predicted) — the configured budget capped as TARGET_AFTER_SHARE
    explains, unless forced (overflow) or set explicitly."""

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
    aim = (config.target_ratio - LANDING_MARGIN) * config.trigger_tokens
    room = int((aim - fixed) / ratio) - overhead
    capped = max(min(keep, KEEP_FLOOR_TOKENS), min(keep, room))
    return capped, expected(capped)


def _cut(snap: _Snapshot, *, force: bool, keep: int | None = None):
    """Plan the cut with each message weighed as served (the keep budget is about what stays
    in the context), then hand back the stored messages: the summarizer reads them in full."""

    measured = [
        m if snap.served_tokens.get(m.seq, m.tokens) == m.tokens else replace(m, tokens=snap.served_tokens[m.seq])
        for m in snap.messages
    ]
    if keep is None:
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


@dataclass
class _PolicyPlan:
    """The candidates a compaction could be (compaction.core.policy) and the one chosen."""

    decision: Decision | None
    nothing: str = ""  # why there is nothing to compact (decision is None)
    prune: Any = None  # PrunePlan of a prune alone
    cut: Any = None  # CutPlan of a summary
    kept_prune: Any = None  # PrunePlan over the kept part (prune + summarize)
    summary_tokens: int = 0  # the summary's estimated size
    framing: int = 0


def _served(snap: _Snapshot, seq: int, default: int) -> int:
    return snap.served_tokens.get(seq, default)


def _summary_candidate(snap: _Snapshot, cut: Any, out: _PolicyPlan) -> Candidate:
    """The summarize candidate for `cut`, estimated as the dry run reports it."""
    summarized = list(cut.to_summarize) + list(cut.turn_prefix)
    served_summarized = sum(_served(snap, m.seq, m.tokens) for m in summarized)
    kept_served = sum(m.tokens for m in snap.served_messages if m.seq >= cut.first_kept_seq)
    out.summary_tokens = _estimate_summary_tokens(snap.config, snap.based_on, served_summarized)
    # The summary is served as one user message with a fixed preamble (and a heading for a
    # split turn's prefix summary): that framing is counted exactly.
    out.framing = count_content(render_summary_message("", "x" if cut.split_turn else ""), _tokenizer(snap.session))
    estimated = snap.session.system_prompt_tokens + out.framing + out.summary_tokens + kept_served
    # The summary message replaces the start of the conversation: only the system prompt (and
    # what only the provider counts) stays cached.
    return _SummaryCandidate(
        SUMMARIZE,
        snap.on_provider_scale(estimated),
        snap.on_provider_scale(snap.session.system_prompt_tokens),
        min(m.seq for m in summarized),
        cut.reason,
        tokens_estimated=estimated,
    )


@dataclass(frozen=True)
class _SummaryCandidate(Candidate):
    tokens_estimated: int = 0  # our estimate (uncalibrated), for the prune + summarize variant


def _policy_plan(snap: _Snapshot, *, strategy: str, instructions: str, force: bool) -> _PolicyPlan:
    """Estimate every candidate the request allows and choose one, the same way for an auto
    compaction, a manual one and a dry run. `strategy="prune"` forces a prune; a summarizer
    strategy, instructions or force (overflow) rule a prune alone out."""

    config = snap.config
    trigger = config.trigger_tokens
    candidates: list[Candidate] = []
    out = _PolicyPlan(None)
    reasons: list[str] = []
    estimate_after = snap.on_provider_scale

    def prefix_before(seq: int) -> int:
        # Everything served before `seq` stays byte-identical: still cached after the change.
        after = sum(_served(snap, m.seq, m.tokens) for m in snap.messages if m.seq >= seq)
        return estimate_after(max(0, snap.estimated_before - after))

    allow_prune = strategy == "prune" or (
        strategy == "auto" and not instructions and not force and config.prune_tool_outputs
    )
    if allow_prune:
        # Planned over the context as served (current prune overlay applied), so results that
        # are already placeholders are not counted as savings again.
        prune = plan_prune(snap.served_messages)
        old_boundary = snap.based_on.prune_before_seq if snap.based_on and snap.based_on.prune_before_seq else 0
        if prune.prune_before_seq is not None and prune.prune_before_seq > old_boundary:
            out.prune = prune
            first = prune.first_pruned_seq or prune.prune_before_seq
            candidates.append(
                Candidate(
                    PRUNE,
                    estimate_after(snap.estimated_before - prune.tokens_saved),
                    prefix_before(first),
                    first,
                    prune.reason,
                )
            )
        elif strategy == "prune":
            reasons.append(f"nothing to prune: {prune.reason}")
    if strategy != "prune":
        cut = _cut(snap, force=force)
        summary = _summary_candidate(snap, cut, out) if not cut.nothing_to_compact else None
        # plan_cut cuts at a turn start at or before the keep budget, so the kept tail can
        # exceed it by most of a turn: when that lands the result over the target, cut again
        # with the budget reduced by the overshoot (a few times at most; never below the
        # floor; an explicit keep setting and overflow are honoured as they are).
        keep, _expected = _keep_budget(snap, force=force)
        target = int(config.target_ratio * trigger)
        for _ in range(4):
            if summary is None or summary.tokens_after <= target or force or snap.keep_explicit:
                break
            if config.preserve_messages or keep <= KEEP_FLOOR_TOKENS:
                break
            kept_served = sum(_served(snap, m.seq, m.tokens) for m in cut.kept)
            keep = max(KEEP_FLOOR_TOKENS, keep - max(1, kept_served - keep) - (summary.tokens_after - target))
            smaller = _cut(snap, force=force, keep=keep)
            if smaller.nothing_to_compact:
                break
            cut, summary = smaller, _summary_candidate(snap, smaller, out)
        if summary is None:
            reasons.append(cut.reason)
        else:
            out.cut = cut
            candidates.append(summary)
            kept = [m for m in snap.served_messages if m.seq >= cut.first_kept_seq]
            if config.prune_tool_outputs and not force:
                names = tool_names(snap.served_messages)
                kept_prune = plan_prune(
                    kept, names=names, protect_tokens=KEPT_PROTECT_TOKENS, min_savings=KEPT_MIN_SAVINGS
                )
                if kept_prune.prune_before_seq is not None:
                    out.kept_prune = kept_prune
                    candidates.append(
                        Candidate(
                            PRUNE_SUMMARIZE,
                            estimate_after(summary.tokens_estimated - kept_prune.tokens_saved),
                            summary.unchanged_prefix,
                            summary.first_changed_seq,
                            kept_prune.reason,
                        )
                    )
    if strategy == "prune":
        candidates = [c for c in candidates if c.kind == PRUNE]
    out.decision = choose(
        candidates,
        tokens_before=snap.tokens_before,
        trigger=trigger,
        target_ratio=config.target_ratio,
        prune_min_relief=0.0 if strategy == "prune" else config.prune_min_relief,
    )
    if out.decision is not None and strategy == "prune":
        out.decision = replace(out.decision, reason="prune: requested (strategy prune); " + out.decision.reason)
    if out.decision is None and candidates:
        out.nothing = "no compaction worth its cache cost: " + "; ".join(
            f"{c.kind} would land at {c.tokens_after:,}" for c in candidates
        )
    elif out.decision is None:
        out.nothing = "; ".join(reasons) or "nothing to compact"
    return out


def _stored_state(compaction: Compaction | None) -> dict[str, Any]:
    """The work state a compaction stored ({} when none)."""
    if compaction is None:
        return {}
    stored = WorkStateRecord.objects.filter(compaction_id=compaction.pk).values_list("data", flat=True).first()
    return stored if isinstance(stored, dict) else {}


def _previous_state(snap: _Snapshot, first_summarized: int) -> WorkState | None:
    """The work state before the range being summarized: the previous compaction's, with any
    messages between it and this range folded in; or, when there is none (the first compaction,
    an import, a state of another version), every stored message before the range folded from
    the start. Messages are never deleted, so the state is never lost."""
    state = from_json(_stored_state(snap.based_on)) or WorkState()
    if first_summarized <= state.through + 1:
        return state if state.through else None
    rows = (
        Message.objects.filter(session_id=snap.session.pk, seq__gt=state.through, seq__lt=first_summarized)
        .order_by("seq")
        .values_list("seq", "role", "content")
    )
    missing = [Msg(seq, role, content, 0) for seq, role, content in rows.iterator(chunk_size=500)]
    return fold(missing, state) if missing or state.through else None


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
# held) plus a fixed part (a handoff's sections, goal, rules and repository state are there
# whatever the range) and a share of the served tokens summarized now, at most the summary
# budget (the summarizer's output limit). Fitted on the offline summary of every shared
# transcript cut at a quarter, half, three quarters and the whole (58 cuts, 40 to 170k tokens):
# 3k tokens give ~750, 15k ~1,000, 100k ~1,800-2,600, 150k ~2,300-3,600. The earlier guess
# (2 %, at least 400) said 1,388 for a small manual compaction that came out at 2,900.
SUMMARY_BASE_TOKENS = 700
SUMMARY_SHARE = 0.018


def _estimate_summary_tokens(config: CompactionConfig, based_on: Compaction | None, tokens_summarized: int) -> int:
    previous = based_on.summary_tokens if based_on else 0
    return min(config.summary_budget, previous + SUMMARY_BASE_TOKENS + int(tokens_summarized * SUMMARY_SHARE))


def build_summarizer_chain(*, config: CompactionConfig, strategy: str, timeout: float, max_retries: int) -> list:
    """The summarizer chain for one job (a seam tests replace to make a summarizer slow)."""

    return build_chain(
        api_key=settings.ANTHROPIC_API_KEY or None,
        base_url=settings.ANTHROPIC_BASE_URL,
        model=config.summarizer_model,
        timeout=timeout,
        max_retries=max_retries,
        strategy=strategy,
    )


def _chain(**kwargs: Any) -> list:
    # Found on the package at call time: compaction.services.build_summarizer_chain is the
    # seam tests replace (a slow or failing summarizer), and that is where they replace it.
    return sys.modules[__package__].build_summarizer_chain(**kwargs)


def _summarize_within(inp, chain: list, *, config: CompactionConfig, budget: float):

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="overflow-summarizer")
    try:
        # Pure core code in the thread (no database), so abandoning it on timeout is safe; its
        # HTTP call ends by itself within the (short) LLM timeout.
        return pool.submit(summarize, inp, chain).result(timeout=budget)
    except FuturesTimeout:
        logger.warning("Overflow summarizer exceeded its %.0f s budget; using the extractive summarizer", budget)
        offline = _chain(config=config, strategy="extractive", timeout=budget, max_retries=0)
        result = summarize(inp, offline)
        reason = f"no summary within the overflow time budget of {budget:g} s"
        result.fallbacks = [{"strategy": chain[0].name, "reason": reason}, *result.fallbacks]
        return result
    finally:
        pool.shutdown(wait=False)


@dataclass(frozen=True)
class Overlay:
    """What a new overlay (prune or summary) writes on its job row."""

    strategy: str
    first_kept_seq: int | None
    summary: str = ""
    turn_prefix_summary: str = ""
    summary_tokens: int = 0
    split_turn: bool = False
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)
    prune_before_seq: int | None = None
    first_summarized_seq: int | None = None
    last_summarized_seq: int | None = None
    messages_summarized: int = 0
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    summarizer_model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    fidelity: dict[str, Any] = field(default_factory=dict)
    # compaction.core.policy: where the cached prompt stops matching, how much of it stays
    # (provider's scale: cache invalidated = tokens_after − this), why this candidate won.
    first_changed_seq: int | None = None
    unchanged_prefix_tokens: int | None = None
    policy_reason: str = ""
    policy_candidates: list[dict[str, Any]] = field(default_factory=list)
    policy_trigger: int | None = None  # the trigger the runway is measured against
    work_state: dict[str, Any] = field(default_factory=dict)  # compaction.core.work, as JSON


@dataclass(frozen=True)
class Skipped:
    """Nothing to compact (or nothing worth it): the job ends SKIPPED with `detail`."""

    based_on_id: Any
    tokens_before: int
    snapshot_seq: int
    detail: str


@dataclass(frozen=True)
class Activate:
    """A new overlay to activate, if the compaction it was based on is still the active one."""

    based_on_id: Any
    tokens_before: int
    snapshot_seq: int
    overlay: Overlay
    detail: str = ""
    trigger: int | None = None  # a summary's trigger: the job detail notes a result still over it


Outcome = Skipped | Activate


def _Outcome(  # noqa: N802 - the name importing.compaction_record_import calls (moved verbatim)
    kind: str,
    *,
    based_on_id: Any,
    tokens_before: int,
    snapshot_seq: int,
    detail: str = "",
    values: dict[str, Any] | None = None,
    trigger: int | None = None,
) -> Outcome:
    """Build a typed outcome from the older (kind, values) form; `values` must be Overlay fields."""
    if kind == "skip":
        return Skipped(based_on_id, tokens_before, snapshot_seq, detail)
    return Activate(based_on_id, tokens_before, snapshot_seq, Overlay(**(values or {})), detail, trigger)


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
) -> Outcome:
    """Decide and produce the new overlay from a snapshot. No writes.

    `time_budget` (overflow recovery, an agent is waiting): if the LLM chain has not produced a
    summary within it, the offline extractive summarizer does, and the fallback is recorded.
    """
    based_on = snap.based_on
    config = snap.config
    trigger = config.trigger_tokens
    base = {
        "based_on_id": based_on.pk if based_on else None,
        "tokens_before": snap.tokens_before,
        "snapshot_seq": snap.snapshot_seq,
    }
    skip = partial(Skipped, **base)
    if reason == Reason.THRESHOLD and not force and snap.tokens_before <= trigger:
        return skip(detail=f"usage {snap.tokens_before:,} is already under the trigger {trigger:,}")
    if not snap.messages:
        return skip(detail="nothing to compact: no messages in context")

    plan = _policy_plan(snap, strategy=strategy, instructions=instructions, force=force)
    if plan.decision is None:
        return skip(detail=plan.nothing)
    chosen = plan.decision.chosen
    policy = {
        "first_changed_seq": chosen.first_changed_seq,
        "unchanged_prefix_tokens": chosen.unchanged_prefix,
        "policy_reason": plan.decision.reason[:300],
        "policy_candidates": plan.decision.considered,
        "policy_trigger": trigger,
    }
    if chosen.kind == PRUNE:
        prune = plan.prune
        return Activate(
            **base,
            detail=prune.reason,
            trigger=None,
            overlay=Overlay(
                strategy="prune",
                summary=based_on.summary if based_on else "",
                turn_prefix_summary=based_on.turn_prefix_summary if based_on else "",
                summary_tokens=based_on.summary_tokens if based_on else 0,
                first_kept_seq=based_on.first_kept_seq if based_on else snap.messages[0].seq,
                split_turn=based_on.split_turn if based_on else False,
                read_files=list(based_on.read_files) if based_on else [],
                modified_files=list(based_on.modified_files) if based_on else [],
                work_state=_stored_state(based_on),
                prune_before_seq=prune.prune_before_seq,
                usage={"tokens_saved_estimate": prune.tokens_saved, "tool_results_pruned": prune.pruned},
                **policy,
            ),
        )

    cut = plan.cut
    detail = cut.reason
    if chosen.kind == PRUNE_SUMMARIZE:
        detail = f"{cut.reason}; {plan.kept_prune.reason} in the kept part"
    keep, expected = _keep_budget(snap, force=force)
    if expected is not None and expected > trigger:
        # Say so up front: an explicit keep setting (or the floor) leaves the result over the
        # trigger, so auto-compaction will wait for the loop guard rather than re-fire.
        source = "the explicit keep setting" if snap.keep_explicit or config.preserve_messages else "the minimum kept"
        detail = (
            f"expected ≈{expected:,} tokens after, above the trigger {trigger:,}: {source} "
            f"({keep:,} tokens) does not fit; {detail}"
        )

    chain = _chain(config=config, strategy=strategy, timeout=llm_timeout, max_retries=max_retries)

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
        kept=list(cut.kept),
        previous_state=_previous_state(snap, min(m.seq for m in [*cut.to_summarize, *cut.turn_prefix])),
    )
    if time_budget is not None and chain and chain[0].name not in ("extractive", "truncate"):
        result = _summarize_within(inp, chain, config=config, budget=time_budget)
    else:
        result = summarize(inp, chain)
    summarized = list(cut.to_summarize) + list(cut.turn_prefix)
    old_prune = based_on.prune_before_seq if based_on else None
    tokenizer = _tokenizer(snap.session)
    return Activate(
        **base,
        detail=detail,
        trigger=trigger,
        overlay=Overlay(
            strategy=result.strategy,
            fallbacks=result.fallbacks,
            summary=result.summary,
            turn_prefix_summary=result.turn_prefix_summary,
            summary_tokens=count_text(result.summary, tokenizer) + count_text(result.turn_prefix_summary, tokenizer),
            read_files=result.read_files,
            modified_files=result.modified_files,
            first_summarized_seq=min(m.seq for m in summarized),
            last_summarized_seq=max(m.seq for m in summarized),
            first_kept_seq=cut.first_kept_seq,
            split_turn=cut.split_turn,
            messages_summarized=len(summarized),
            prune_before_seq=plan.kept_prune.prune_before_seq
            if chosen.kind == PRUNE_SUMMARIZE
            # A prune boundary inside the kept part still saves tokens; below the cut it is moot.
            else (old_prune if old_prune and old_prune > cut.first_kept_seq else None),
            summarizer_model=result.model,
            usage=result.usage,
            fidelity=result.fidelity,
            work_state=result.work_state or {},
            **policy,
        ),
    )


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
    `tokens_after` (session_usage().tokens, see the note above _Snapshot): it is built
    from what will be served — system prompt + the summary message (its size estimated, see
    _estimate_summary_tokens) + the kept messages as served (prune overlay applied) — mapped by
    the session's calibration (fixed + ratio × estimate). `tokens_summarized` is what the summarizer reads (messages
    as stored); `tokens_kept` is what stays in context (as served).
    """

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
    plan = _policy_plan(snap, strategy=strategy, instructions=instructions, force=force)
    if plan.decision is None:
        return {**base, "would_compact": False, "reason": plan.nothing}
    chosen = plan.decision.chosen
    trigger = config.trigger_tokens
    policy = {
        "policy": chosen.kind,
        "policy_reason": plan.decision.reason,
        "policy_candidates": plan.decision.considered,
        "first_changed_seq": chosen.first_changed_seq,
        "estimated_cache_invalidated_tokens": chosen.cache_invalidated,
        "estimated_runway_tokens": chosen.runway(trigger),
    }
    if chosen.kind == PRUNE:
        prune = plan.prune
        return {
            **base,
            **policy,
            "would_compact": True,
            "strategy": "prune",
            "reason": prune.reason,
            "prune_before_seq": prune.prune_before_seq,
            "tool_results_pruned": prune.pruned,
            "estimated_tokens_after": chosen.tokens_after,
        }
    cut = plan.cut
    summarized = list(cut.to_summarize) + list(cut.turn_prefix)
    summarized_seqs = {m.seq for m in summarized}
    tokens_summarized = sum(m.tokens for m in summarized)
    kept_served = sum(tokens for seq, tokens in snap.served_tokens.items() if seq >= cut.first_kept_seq)
    extra: dict[str, Any] = {}
    if chosen.kind == PRUNE_SUMMARIZE:
        kept_served -= plan.kept_prune.tokens_saved
        extra = {"prune_before_seq": plan.kept_prune.prune_before_seq, "tool_results_pruned": plan.kept_prune.pruned}
    return {
        **base,
        **policy,
        **extra,
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
        "estimated_summary_tokens": plan.summary_tokens,
        "estimated_tokens_after": chosen.tokens_after,
    }
