"""Planning: take one snapshot of a session, let the policy (compaction.core.policy) choose what
to make, and produce it — run the summarizer chain for a summary. Shared by the dry run, the
background run and overflow recovery. No writes.

One measure everywhere: every token figure the engine compares with the trigger, stores as
tokens_before/after or predicts in a dry run is session_usage().tokens — what the provider will
see. It is the provider's last report plus estimates since, or, after a (de)activation dropped
the report, the session's affine calibration of our estimate of the served context, fixed +
ratio × estimate (fixed: what only the provider counts — tool definitions, the agent's own
system prompt; ratio: the provider's tokenizer against ours; compaction.core.calibration). A
figure we compute ourselves (served-context estimates, prune savings) is brought onto that scale
the same way, never compared raw; stored (unpruned) message counts are never mixed with served
ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from compaction.core import policy
from compaction.core.calibration import Calibration
from compaction.core.config import CompactionConfig
from compaction.core.ledger import Fidelity
from compaction.core.policy import PRUNE, PRUNE_SUMMARIZE, PolicyCandidate, PolicyInputs, PolicyPlan
from compaction.core.summarizers import SummaryInput, SummaryResult, build_chain, summarize
from compaction.core.summarizers.agree import agree
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content, count_text
from compaction.core.types import Fallback, FileOps, Msg
from compaction.core.work import WorkState, fold, from_json, work_start
from compaction.models import Compaction, Reason, WorkStateRecord
from sessions import services as ss
from sessions.models import Message, Session

logger = logging.getLogger("compaction.services")

KEEP_SETTINGS = ("keep_recent_tokens", "preserve_messages")


# --- snapshot ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """What a compaction is computed from: the session's context and meter at one moment."""

    session: Session
    based_on: Compaction | None  # the active compaction the new one replaces
    config: CompactionConfig
    tokens_before: int  # session_usage().tokens: the provider's scale
    messages: list[Msg]  # in context, as stored (what is cut and summarized)
    snapshot_seq: int
    estimated_before: int  # our estimate of the served context, uncalibrated
    # session_usage().calibration: maps an estimate of the served context to the provider's
    # scale after (de)activation (fixed + ratio × estimate); None before any report.
    calibration: Calibration | None
    calibration_offset: int  # the last report's additive offset (informational, dry run)
    served_messages: list[Msg]  # in context, as served (pruning plans)
    keep_explicit: bool  # a keep setting given by the request or the session: honoured, never capped
    summary_framing_tokens: int
    work_start_seq: int | None = None  # where the task in progress began (core.work.work_start)

    @property
    def served_tokens(self) -> dict[int, int]:
        """seq → tokens as served now (pruned tool results and truncated replies are smaller)."""
        return {m.seq: m.tokens for m in self.served_messages}

    def policy_inputs(self, *, strategy: str, instructions: str, force: bool) -> PolicyInputs:
        based_on = self.based_on
        return PolicyInputs(
            config=self.config,
            tokens_before=self.tokens_before,
            messages=self.messages,
            served_messages=self.served_messages,
            estimated_before=self.estimated_before,
            calibration=self.calibration,
            system_prompt_tokens=self.session.system_prompt_tokens,
            summary_framing_tokens=self.summary_framing_tokens,
            previous_summary_tokens=based_on.summary_tokens if based_on else 0,
            previous_prune_before_seq=based_on.prune_before_seq if based_on else None,
            keep_explicit=self.keep_explicit,
            strategy=strategy,
            instructions=instructions,
            force=force,
            work_start_seq=self.work_start_seq,
            tokenizer=ss.session_tokenizer(self.session),
        )


def snapshot_take(session_id, overrides: dict[str, Any] | None) -> Snapshot:
    """The session's context, meter and settings now (`overrides`: the request's settings)."""
    session = Session.objects.select_related("active_compaction").get(pk=session_id)
    usage = ss.session_usage(session)
    # One read of the messages in context, as stored (what is cut and summarized) and as served.
    messages, served_messages = ss.context_messages_both(session)
    tokenizer = ss.session_tokenizer(session)
    layers = (overrides, session.compaction_settings)
    return Snapshot(
        session=session,
        based_on=session.active_compaction,
        config=ss.session_config(session, overrides or None),
        tokens_before=usage.tokens,
        messages=messages,
        snapshot_seq=max([m.seq for m in messages], default=session.last_seq),
        estimated_before=usage.estimated_tokens,
        calibration=usage.calibration,
        calibration_offset=usage.calibration_offset or 0,
        served_messages=served_messages,
        keep_explicit=any((layer or {}).get(key) is not None for layer in layers for key in KEEP_SETTINGS),
        # The summary is served as one user message with a fixed preamble: that framing is
        # counted exactly, with the session's tokenizer.
        summary_framing_tokens=count_content(render_summary_message(""), tokenizer),
        work_start_seq=work_start(fold(messages, from_json(_stored_state(session.active_compaction)))),
    )


def policy_plan(snap: Snapshot, *, strategy: str, instructions: str, force: bool) -> PolicyPlan:
    return policy.plan(snap.policy_inputs(strategy=strategy, instructions=instructions, force=force))


# --- what a job produces -----------------------------------------------------------------


@dataclass(frozen=True)
class NewOverlay:
    """What a new overlay (prune or summary) writes on its job row."""

    strategy: str
    first_kept_seq: int | None
    summary: str = ""
    # A compaction made before summaries were one text (a split turn's second layer): a prune
    # keeps it as it is. New summaries never write one.
    turn_prefix_summary: str = ""
    summary_tokens: int = 0
    split_turn: bool = False
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)
    prune_before_seq: int | None = None
    kept_plan: dict[str, Any] = field(default_factory=dict)  # compaction.core.kept.KeptPlan, as JSON
    first_summarized_seq: int | None = None
    last_summarized_seq: int | None = None
    messages_summarized: int = 0
    fallbacks: list[Fallback] = field(default_factory=list)
    summarizer_model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    fidelity: Fidelity | None = None  # a summary's check against its ledger; none for a prune
    # compaction.core.policy: where the cached prompt stops matching, how much of it stays
    # (provider's scale: cache invalidated = tokens_after − this), why this candidate won.
    first_changed_seq: int | None = None
    unchanged_prefix_tokens: int | None = None
    policy_reason: str = ""
    policy_candidates: list[PolicyCandidate] = field(default_factory=list)
    policy_trigger: int | None = None  # the trigger the runway is measured against
    work_state: dict[str, Any] = field(default_factory=dict)  # compaction.core.work, as JSON
    # A summary's status as of messages stored after the snapshot (activation calls it with them).
    restate: Callable[[list[Msg]], NewOverlay] | None = field(default=None, repr=False, compare=False)


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
    overlay: NewOverlay
    detail: str = ""
    trigger: int | None = None  # a summary's trigger: the job detail notes a result still over it
    status_seq: int | None = None  # the newest message the summary's status covers (None: snapshot_seq)


Outcome = Skipped | Activate


# --- the summarizer chain ------------------------------------------------------------------


def build_summarizer_chain(*, config: CompactionConfig, strategy: str, timeout: float, max_retries: int) -> list:
    """The summarizer chain for one job. Tests replace it here (planning.build_summarizer_chain)
    to make a summarizer slow or fail."""
    return build_chain(
        api_key=settings.ANTHROPIC_API_KEY or None,
        base_url=settings.ANTHROPIC_BASE_URL,
        model=config.summarizer_model,
        timeout=timeout,
        max_retries=max_retries,
        strategy=strategy,
    )


def _summarize_within(
    inp: SummaryInput, chain: list, *, config: CompactionConfig, budget: float
) -> tuple[SummaryResult, list[Fallback]]:
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="overflow-summarizer")
    try:
        # Pure core code in the thread (no database), so abandoning it on timeout is safe; its
        # HTTP call ends by itself within the (short) LLM timeout.
        result = pool.submit(summarize, inp, chain).result(timeout=budget)
        return result, list(result.fallbacks)
    except FuturesTimeout:
        logger.warning("Overflow summarizer exceeded its %.0f s budget; using the extractive summarizer", budget)
        offline = build_summarizer_chain(config=config, strategy="extractive", timeout=budget, max_retries=0)
        result = summarize(inp, offline)
        late = Fallback(chain[0].name, f"no summary within the overflow time budget of {budget:g} s")
        return result, [late, *result.fallbacks]
    finally:
        pool.shutdown(wait=False)


def _previous_summary(based_on: Compaction | None) -> str | None:
    if based_on is None or not based_on.summary.strip():
        return None
    text = based_on.summary
    if based_on.turn_prefix_summary.strip():
        # A compaction from before summaries were one text kept a split turn's earlier part as a
        # second layer; it describes messages now summarized too: merged, not dropped.
        text += "\n\n## Earlier part of the turn that was in progress\n\n" + based_on.turn_prefix_summary.strip()
    return text


def _stored_state(compaction: Compaction | None) -> dict[str, Any]:
    """The work state a compaction stored ({} when none)."""
    if compaction is None:
        return {}
    stored = WorkStateRecord.objects.filter(compaction_id=compaction.pk).values_list("data", flat=True).first()
    return stored if isinstance(stored, dict) else {}


def _previous_state(snap: Snapshot, first_summarized: int) -> WorkState | None:
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


@dataclass(frozen=True)
class SummaryRun:
    """How one job runs its summarizers: the LLM's limits and, for overflow recovery (an agent
    is waiting), the time after which the offline extractive summarizer answers instead."""

    llm_timeout: float
    max_retries: int
    time_budget: float | None = None


def _summarize(
    snap: Snapshot, plan: PolicyPlan, *, strategy: str, instructions: str, run: SummaryRun
) -> tuple[SummaryResult, list[Fallback], SummaryInput]:
    config, based_on, cut = snap.config, snap.based_on, plan.cut
    assert cut is not None  # a summary is planned with its cut
    chain = build_summarizer_chain(
        config=config, strategy=strategy, timeout=run.llm_timeout, max_retries=run.max_retries
    )
    previous_files = FileOps(list(based_on.read_files), list(based_on.modified_files)) if based_on else FileOps()
    # Everything before the kept messages is one history, a long turn cut inside included: one
    # summary, never a second layer for the turn's earlier part that could disagree with it.
    inp = SummaryInput(
        messages=list(cut.summarized),
        previous_summary=_previous_summary(based_on),
        previous_files=previous_files,
        instructions=instructions or None,
        custom_prompt=config.compact_prompt,
        output_budget=config.summary_budget,
        model=config.summarizer_model,
        kept=list(cut.kept),
        previous_state=_previous_state(snap, min(m.seq for m in cut.summarized)),
    )
    if run.time_budget is not None and chain and chain[0].name not in ("extractive", "truncate"):
        return (*_summarize_within(inp, chain, config=config, budget=run.time_budget), inp)
    result = summarize(inp, chain)
    return result, list(result.fallbacks), inp


def _restate(snap: Snapshot, plan: PolicyPlan, inp: SummaryInput, overlay: NewOverlay, late: list[Msg]) -> NewOverlay:
    """The overlay with its summary's status as of `late` too: messages stored while the job ran
    (after its snapshot) are served verbatim after the summary, so what it states as current
    (a request not yet reported done, the next steps) is computed again with them. An extractive
    summary is rendered again from the work state (offline, no model call); a model's summary is
    made to agree with the state, as the chain made it agree with the snapshot's; a summary that
    states no status (truncate, a custom prompt's) is left as it is."""
    if overlay.strategy == "truncate" or snap.config.compact_prompt:
        return overlay
    through = from_json(overlay.work_state)  # folded once through the summarized range
    if overlay.strategy == "extractive":
        # With the state through the summarized range, only the kept messages are folded again.
        later = replace(inp, kept=[*inp.kept, *late], state=through, state_now=None)
        chain = build_summarizer_chain(config=snap.config, strategy="extractive", timeout=0, max_retries=0)
        result = summarize(later, chain)
        return _summary_overlay(snap, plan, result, overlay.fallbacks)
    if through is None:
        return overlay
    agreement = agree(overlay.summary, fold([*inp.kept, *late], through), add_where=False)
    tokens = count_text(agreement.summary, ss.session_tokenizer(snap.session))
    tokens += count_text(overlay.turn_prefix_summary, ss.session_tokenizer(snap.session))
    return replace(overlay, summary=agreement.summary, summary_tokens=tokens)


# --- compute: the outcome of one job -------------------------------------------------------


def _policy_fields(plan: PolicyPlan, trigger: int) -> dict[str, Any]:
    assert plan.decision is not None  # only a plan that chose a compaction is applied
    chosen = plan.decision.chosen
    return {
        "first_changed_seq": chosen.first_changed_seq,
        "unchanged_prefix_tokens": chosen.unchanged_prefix,
        "policy_reason": plan.decision.reason[:300],
        "policy_candidates": list(plan.decision.considered),
        "policy_trigger": trigger,
    }


def _prune_overlay(snap: Snapshot, plan: PolicyPlan) -> NewOverlay:
    """A prune keeps the active summary as it is and moves the prune boundary."""
    based_on, prune = snap.based_on, plan.prune
    assert prune is not None  # the plan chose its prune
    return NewOverlay(
        strategy="prune",
        summary=based_on.summary if based_on else "",
        turn_prefix_summary=based_on.turn_prefix_summary if based_on else "",
        summary_tokens=based_on.summary_tokens if based_on else 0,
        first_kept_seq=based_on.first_kept_seq if based_on else snap.messages[0].seq,
        split_turn=based_on.split_turn if based_on else False,
        read_files=list(based_on.read_files) if based_on else [],
        modified_files=list(based_on.modified_files) if based_on else [],
        work_state=_stored_state(based_on),
        # The kept messages stay as the summary's compaction serves them; the boundary trims
        # what that plan left whole.
        kept_plan=dict(based_on.kept_plan) if based_on else {},
        prune_before_seq=prune.prune_before_seq,
        usage={"tokens_saved_estimate": prune.tokens_saved, "tool_results_pruned": prune.pruned},
        **_policy_fields(plan, snap.config.trigger_tokens),
    )


def _summary_detail(snap: Snapshot, plan: PolicyPlan) -> str:
    cut, config = plan.cut, snap.config
    assert cut is not None and plan.decision is not None  # the plan chose a summary
    detail = cut.reason
    if plan.decision.chosen.kind == PRUNE_SUMMARIZE:
        assert plan.kept_plan is not None  # a prune + summary plans its kept part
        detail = f"{cut.reason}; {plan.kept_plan.reason}"
    keep, expected = plan.keep_budget.keep, plan.keep_budget.expected_after
    if expected is not None and expected > config.trigger_tokens:
        # Say so up front: an explicit keep setting (or the floor) leaves the result over the
        # trigger, so auto-compaction will wait for the loop guard rather than re-fire.
        source = "the explicit keep setting" if snap.keep_explicit or config.preserve_messages else "the minimum kept"
        detail = (
            f"expected ≈{expected:,} tokens after, above the trigger {config.trigger_tokens:,}: {source} "
            f"({keep:,} tokens) does not fit; {detail}"
        )
    return detail


def _summary_overlay(snap: Snapshot, plan: PolicyPlan, result: SummaryResult, fallbacks: list[Fallback]) -> NewOverlay:
    cut, based_on = plan.cut, snap.based_on
    assert cut is not None and plan.decision is not None  # the plan chose a summary
    summarized = cut.summarized
    tokenizer = ss.session_tokenizer(snap.session)
    kept_plan: dict[str, Any] = {}
    if plan.decision.chosen.kind == PRUNE_SUMMARIZE:
        # The kept part's plan trims every old output a prune boundary would: it replaces one.
        assert plan.kept_plan is not None  # a prune + summary plans its kept part
        prune_before_seq, kept_plan = None, plan.kept_plan.as_json()
    else:
        # A prune boundary inside the kept part still saves tokens; below the cut it is moot.
        old = based_on.prune_before_seq if based_on else None
        prune_before_seq = old if old and old > cut.first_kept_seq else None
    return NewOverlay(
        strategy=result.strategy,
        fallbacks=fallbacks,
        summary=result.summary,
        summary_tokens=count_text(result.summary, tokenizer),
        read_files=result.read_files,
        modified_files=result.modified_files,
        first_summarized_seq=min(m.seq for m in summarized),
        last_summarized_seq=max(m.seq for m in summarized),
        first_kept_seq=cut.first_kept_seq,
        split_turn=cut.split_turn,  # information: the kept part starts inside a turn
        messages_summarized=len(summarized),
        prune_before_seq=prune_before_seq,
        kept_plan=kept_plan,
        summarizer_model=result.model,
        usage=result.usage,
        fidelity=result.fidelity,
        work_state=result.work_state or {},
        **_policy_fields(plan, snap.config.trigger_tokens),
    )


def outcome_compute(
    snap: Snapshot, *, reason: str, strategy: str, instructions: str, force: bool, run: SummaryRun
) -> Outcome:
    """Decide and produce the new overlay from a snapshot. No writes."""
    trigger = snap.config.trigger_tokens
    base: dict[str, Any] = {
        "based_on_id": snap.based_on.pk if snap.based_on else None,
        "tokens_before": snap.tokens_before,
        "snapshot_seq": snap.snapshot_seq,
    }
    if reason == Reason.THRESHOLD and not force and snap.tokens_before <= trigger:
        return Skipped(**base, detail=f"usage {snap.tokens_before:,} is already under the trigger {trigger:,}")
    if not snap.messages:
        return Skipped(**base, detail="nothing to compact: no messages in context")
    plan = policy_plan(snap, strategy=strategy, instructions=instructions, force=force)
    if plan.decision is None:
        return Skipped(**base, detail=plan.nothing)
    if plan.decision.chosen.kind == PRUNE:
        assert plan.prune is not None  # the plan chose its prune
        return Activate(**base, detail=plan.prune.reason, trigger=None, overlay=_prune_overlay(snap, plan))
    detail = _summary_detail(snap, plan)
    result, fallbacks, inp = _summarize(snap, plan, strategy=strategy, instructions=instructions, run=run)
    made = _summary_overlay(snap, plan, result, fallbacks)

    def restate(late: list[Msg]) -> NewOverlay:
        return replace(_restate(snap, plan, inp, made, late), restate=restate)

    return Activate(**base, detail=detail, trigger=trigger, overlay=replace(made, restate=restate))


# --- dry run -----------------------------------------------------------------------------


def _dry_run_summary(snap: Snapshot, plan: PolicyPlan, *, strategy: str) -> dict[str, Any]:
    cut = plan.cut
    assert cut is not None and cut.first_kept_seq is not None and plan.decision is not None  # a summary's cut
    summarized = cut.summarized
    seqs = [m.seq for m in summarized]
    kept_served = sum(tokens for seq, tokens in snap.served_tokens.items() if seq >= cut.first_kept_seq)
    extra: dict[str, Any] = {}
    if plan.decision.chosen.kind == PRUNE_SUMMARIZE:
        assert plan.kept_plan is not None  # a prune + summary plans its kept part
        kept_served = policy.lean_kept_tokens(
            snap.policy_inputs(strategy=strategy, instructions="", force=False), cut.kept, plan.kept_plan
        )
        extra = {"tool_results_pruned": sum(plan.kept_plan.counts().values())}
    return {
        **extra,
        "would_compact": True,
        "strategy": strategy,
        "reason": cut.reason,
        "first_summarized_seq": min(seqs),
        "last_summarized_seq": max(seqs),
        "first_kept_seq": cut.first_kept_seq,
        "split_turn": cut.split_turn,
        "messages_summarized": len(summarized),
        "tokens_summarized": sum(m.tokens for m in summarized),
        "messages_kept": len(cut.kept),
        "tokens_kept": kept_served,
        "estimated_summary_tokens": plan.summary_tokens,
        "estimated_tokens_after": plan.decision.chosen.tokens_after,
    }


def _dry_run_prune(plan: PolicyPlan) -> dict[str, Any]:
    prune = plan.prune
    assert prune is not None and plan.decision is not None  # the plan chose its prune
    return {
        "would_compact": True,
        "strategy": "prune",
        "reason": prune.reason,
        "prune_before_seq": prune.prune_before_seq,
        "tool_results_pruned": prune.pruned,
        "estimated_tokens_after": plan.decision.chosen.tokens_after,
    }


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
    `tokens_after` (session_usage().tokens, see the module doc): it is built from what will be
    served — system prompt + the summary message (its size estimated,
    compaction.core.policy.estimate_summary_tokens) + the kept messages as served (prune overlay
    applied) — mapped by the session's calibration (fixed + ratio × estimate).
    `tokens_summarized` is what the summarizer reads (messages as stored); `tokens_kept` is what
    stays in context (as served).
    """
    snap = snapshot_take(session.pk, overrides)
    config = snap.config
    base = {
        "dry_run": True,
        "tokens_before": snap.tokens_before,
        "trigger_tokens": config.trigger_tokens,
        "context_window": config.context_window,
        "messages_in_context": len(snap.messages),
        "based_on": str(snap.based_on.pk) if snap.based_on else None,
        "calibration_offset": snap.calibration_offset,
        "calibration": snap.calibration.as_dict() if snap.calibration else None,
    }
    plan = policy_plan(snap, strategy=strategy, instructions=instructions, force=force)
    if plan.decision is None:
        return {**base, "would_compact": False, "reason": plan.nothing}
    chosen = plan.decision.chosen
    policy_answer = {
        "policy": chosen.kind,
        "policy_reason": plan.decision.reason,
        "policy_candidates": [row.as_json() for row in plan.decision.considered],
        "first_changed_seq": chosen.first_changed_seq,
        "estimated_cache_invalidated_tokens": chosen.cache_invalidated,
        "estimated_runway_tokens": chosen.runway(config.trigger_tokens),
    }
    if chosen.kind == PRUNE:
        return {**base, **policy_answer, **_dry_run_prune(plan)}
    return {**base, **policy_answer, **_dry_run_summary(snap, plan, strategy=strategy)}
