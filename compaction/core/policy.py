"""Which compaction to make: chosen by the runway it buys and what it costs the prompt cache.

Every compaction rewrites part of the prompt the provider has cached: everything from the first
changed message on is billed again as a cache write on the next call, and the agent loses
verbatim context. So a compaction must buy a lot of runway — tokens of new work before the
trigger is crossed again — for what it invalidates. Measured on real Claude Code sessions
(bench/policy_eval.py replays them):
a prune of old tool output relieved 17–29 % of the trigger yet rewrote nearly the whole cached
prompt (its first pruned result was message 47/69), and the next prune followed ~40 messages
later; three compactions where Claude Code made one.

Candidates (each estimated on the provider's scale):
- `prune`: old tool output served as placeholders, the rest verbatim;
- `summarize`: the history before the cut summarized, the recent tail kept;
- `prune+summarize`: the summary, and the kept tail served lean (compaction.core.kept: repeated
  outputs as pointers, superseded file reads and long listings trimmed, old output trimmed).

Rules, like Anthropic's `clear_tool_uses` edit with its `clear_at_least`:
- a prune alone qualifies only if it relieves at least `prune_min_relief` × trigger;
- a candidate qualifies only if it lands at or below `target_ratio` × trigger (so the next
  compaction is far away);
- a qualifying prune alone wins (the runway it buys is worth its cache cost, every message stays
  verbatim, no summarizer call); else the qualifying candidate that re-bills the fewest cache
  tokens per token of runway (ties: the larger runway); if none qualifies, the one with the most
  runway (a prune alone that relieves too little only when nothing else is possible and it gets
  under the trigger).

`plan(PolicyInputs) -> PolicyPlan` builds the candidates from one snapshot of a session (plain
data gathered by compaction.services.planning) and chooses; `loop_guard` decides whether an
auto compaction must wait. Nothing here reads a database or a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any

from compaction.core.calibration import Calibration, as_calibration, calibrated_tokens
from compaction.core.config import CompactionConfig
from compaction.core.cutpoint import TURN_START_SLACK, CutPlan, plan_cut
from compaction.core.kept import KeptPlan, plan_kept
from compaction.core.prune import PrunePlan, plan_prune, tool_names
from compaction.core.tokens import Tokenizer, get_tokenizer
from compaction.core.types import Msg

PRUNE = "prune"
SUMMARIZE = "summarize"
PRUNE_SUMMARIZE = "prune+summarize"

# Defaults: land at or below half the trigger; a prune alone must relieve as much (from a
# context at the trigger it then lands there too) — rare on real sessions, as intended.
DEFAULT_TARGET_RATIO = 0.5
DEFAULT_PRUNE_MIN_RELIEF = 0.5

# Keep-budget cap (planned compactions without an explicit keep setting). The default keep
# budget (20,000 tokens, our estimate) is sized for Claude-Code-like triggers (~167k of 200k).
# Under a low trigger it does not fit: after a compaction the provider sees
#     fixed (tool definitions, the agent's own system prompt: only the provider counts them)
#     + ratio × (system prompt + summary + kept)
# and with fixed ≈ 26–31k, a 20k keep and the summary that is ≈ a 60k trigger already — every
# compaction landed just under (or over) it and the next few messages triggered the next one.
# So the kept tail is capped to land the result at the session's target_ratio of the trigger:
#     keep ≤ (target_ratio × trigger − fixed) / ratio − system − expected summary
# but never below KEEP_FLOOR_TOKENS (the recent work must survive verbatim; plan_cut also
# keeps at least one message and never splits a tool pair). Overflow (force) has its own
# budget; an explicit keep_recent_tokens / preserve_messages (request or session) is honoured.
KEEP_FLOOR_TOKENS = 4_000
# The kept tail is sized to land this share of the trigger below the target: the summary's size
# is only estimated (estimate_summary_tokens), and the cut lands at a turn start, not on the budget.
LANDING_MARGIN = 0.05
# plan_cut cuts at a turn start at or before the keep budget, so the kept tail can exceed it by
# most of a turn: a result over the target is cut again with a smaller budget, this many times.
KEEP_SHRINK_ROUNDS = 4

# With a default keep budget, what a compaction serves (summary + kept messages, as served) is
# held to (1 + TURN_START_SLACK) × the budget: as much as the cut alone may keep when it moves
# back to a turn's start (15,000 at the default 10,000). It is aimed this share lower because the
# summary is only estimated: on the shared transcripts the offline summary came out up to ~1,000
# tokens over its estimate (bench/kept_eval.py's cuts).
SERVED_MARGIN = 0.1

# Guess of a new summary's size: the previous summary (the update prompt keeps what it held)
# plus a fixed part (a handoff's sections, goal, rules and repository state are there whatever
# the range) and a share of the served tokens summarized now, at most the summary budget (the
# summarizer's output limit). Fitted on the offline summary of every shared transcript cut at a
# quarter, half, three quarters and the whole (58 cuts, 40 to 170k tokens): 3k tokens give ~750,
# 15k ~1,000, 100k ~1,800-2,600, 150k ~2,300-3,600.
SUMMARY_BASE_TOKENS = 700
SUMMARY_SHARE = 0.018

# Loop guard: after a compaction that could not bring usage under the trigger, auto-compaction
# waits until a real share of the trigger was appended since its snapshot — re-summarizing
# (nearly) the same context would only give the same result again (an agent was seen compacting
# 48 times in a row). A fixed 2,000 let a 60k trigger re-compact every couple of messages;
# proportional to the trigger it scales with how much room a compaction is expected to make.
LOOP_GUARD_TRIGGER_SHARE = 0.10
LOOP_GUARD_MIN_NEW_TOKENS = 2_000  # floor for tiny triggers


# --- candidates and the choice ----------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One way to compact, estimated. Token figures are on the provider's scale."""

    kind: str
    tokens_after: int
    # Tokens of the prompt that stay byte-identical (fixed part, system prompt, messages before
    # the first change): still cached after the compaction.
    unchanged_prefix: int
    first_changed_seq: int | None = None
    note: str = ""

    def runway(self, trigger: int) -> int:
        """Tokens of new work before the trigger is crossed again (negative: already over)."""
        return trigger - self.tokens_after

    @property
    def cache_invalidated(self) -> int:
        """Tokens written to the cache again on the next call: the prompt after the first change."""
        return cache_invalidated(tokens_after=self.tokens_after, unchanged_prefix=self.unchanged_prefix)


@dataclass(frozen=True)
class PolicyCandidate:
    """A candidate as the policy weighed it: stored on the job and shown by the API and dry run."""

    kind: str
    tokens_after: int
    runway: int
    cache_invalidated: int
    first_changed_seq: int | None
    qualifies: bool
    why_not: str = ""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Decision:
    chosen: Candidate
    reason: str
    considered: list[PolicyCandidate] = field(default_factory=list)


def cache_invalidated(*, tokens_after: int, unchanged_prefix: int) -> int:
    """The cache tokens a compaction invalidates, from its measured tokens_after."""
    return max(0, tokens_after - unchanged_prefix)


def _weigh(
    candidate: Candidate, *, tokens_before: int, trigger: int, target_ratio: float, prune_min_relief: float
) -> PolicyCandidate:
    target, min_relief = int(target_ratio * trigger), int(prune_min_relief * trigger)
    relief = tokens_before - candidate.tokens_after
    problems = []
    if candidate.kind == PRUNE and relief < min_relief:
        problems.append(f"relieves {relief:,} < {min_relief:,} ({prune_min_relief:.0%} of the trigger)")
    if candidate.tokens_after > target:
        problems.append(f"lands at {candidate.tokens_after:,} > {target:,} ({target_ratio:.0%} of the trigger)")
    return PolicyCandidate(
        kind=candidate.kind,
        tokens_after=candidate.tokens_after,
        runway=candidate.runway(trigger),
        cache_invalidated=candidate.cache_invalidated,
        first_changed_seq=candidate.first_changed_seq,
        qualifies=not problems,
        why_not="; ".join(problems),
    )


def _choose_qualifying(
    qualifying: list[Candidate], rows: list[PolicyCandidate], *, trigger: int, target: int
) -> tuple[Candidate, str]:
    # A prune alone that qualifies has bought the runway asked for at a relief worth its cache
    # cost, keeps every message verbatim and needs no summarizer call: it wins. Otherwise the
    # summary that re-bills the fewest cache tokens per token of runway.
    def cost_per_runway(c: Candidate) -> float:
        return c.cache_invalidated / max(1, c.runway(trigger))

    prunes = [c for c in qualifying if c.kind == PRUNE]
    chosen = prunes[0] if prunes else min(qualifying, key=lambda c: (cost_per_runway(c), -c.runway(trigger)))
    reason = (
        f"{chosen.kind}: lands at {chosen.tokens_after:,} (≤ {target:,}), buys {chosen.runway(trigger):,} tokens "
        f"of runway for {chosen.cache_invalidated:,} cache tokens"
    )
    if len(qualifying) > 1:
        reason += " — a prune alone keeps every message" if prunes else " — the fewest cache tokens per token of runway"
    rejected = [f"{r.kind} {r.why_not}" for r in rows if r.kind != chosen.kind and not r.qualifies]
    if rejected:
        reason += "; not " + "; not ".join(rejected)
    return chosen, reason


def _choose_most_runway(
    candidates: list[Candidate], *, tokens_before: int, trigger: int, target: int, min_relief: int
) -> tuple[Candidate, str] | None:
    # None lands at the target (an explicit keep setting, a huge kept tail): the most runway,
    # but a prune alone that relieves too little only if nothing else is possible and it at
    # least gets under the trigger.
    pool = [c for c in candidates if c.kind != PRUNE or tokens_before - c.tokens_after >= min_relief]
    pool = pool or [c for c in candidates if c.runway(trigger) > 0]
    if not pool:
        return None
    chosen = max(pool, key=lambda c: (c.runway(trigger), -c.cache_invalidated))
    reason = (
        f"{chosen.kind}: no candidate lands at or below {target:,}; the most runway "
        f"({chosen.runway(trigger):,} tokens, lands at {chosen.tokens_after:,})"
    )
    return chosen, reason


def choose(
    candidates: list[Candidate],
    *,
    tokens_before: int,
    trigger: int,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    prune_min_relief: float = DEFAULT_PRUNE_MIN_RELIEF,
) -> Decision | None:
    """The candidate to make, and why; None when there is none."""
    if not candidates:
        return None
    target = int(target_ratio * trigger)
    min_relief = int(prune_min_relief * trigger)
    weigh = partial(
        _weigh,
        tokens_before=tokens_before,
        trigger=trigger,
        target_ratio=target_ratio,
        prune_min_relief=prune_min_relief,
    )
    rows = [weigh(c) for c in candidates]
    qualifying = [c for c, row in zip(candidates, rows, strict=True) if row.qualifies]
    if qualifying:
        chosen, reason = _choose_qualifying(qualifying, rows, trigger=trigger, target=target)
    else:
        found = _choose_most_runway(
            candidates, tokens_before=tokens_before, trigger=trigger, target=target, min_relief=min_relief
        )
        if found is None:
            return None
        chosen, reason = found
    return Decision(chosen, reason, rows)


# --- plan: every candidate a request allows, from one snapshot ----------------------------


@dataclass(frozen=True)
class PolicyInputs:
    """One snapshot of a session, as plain data, and what the request asks for.

    Token figures are our estimates unless said otherwise; `calibration` maps an estimate of the
    served context onto the provider's scale (fixed + ratio × estimate; None before any report).
    """

    config: CompactionConfig
    tokens_before: int  # the meter's figure (provider's scale): what the trigger is compared with
    messages: Sequence[Msg]  # in context, as stored: what is cut and summarized
    served_messages: Sequence[Msg]  # in context, as served (prune overlay applied)
    estimated_before: int  # our estimate of the whole served context
    calibration: Calibration | None
    system_prompt_tokens: int
    summary_framing_tokens: int  # the summary message's fixed preamble, counted exactly
    previous_summary_tokens: int = 0  # the active compaction's summary (merged into the new one)
    previous_prune_before_seq: int | None = None  # the active prune boundary, if any
    # keep_recent_tokens / preserve_messages set by the request or the session (not a default):
    # honoured as given, never capped.
    keep_explicit: bool = False
    strategy: str = "auto"  # "auto", "prune" (a prune only) or a summarizer strategy
    instructions: str = ""
    force: bool = False  # overflow: compact whatever the trigger, with the overflow's keep budget
    # Where the task in progress began (compaction.core.work.work_start): a default keep budget
    # keeps no more than the messages from there (the summary hands over what came before).
    work_start_seq: int | None = None
    # The session's tokenizer: the kept part's plan counts what it serves with it.
    tokenizer: Tokenizer | None = None

    def on_provider_scale(self, estimated: int) -> int:
        """A served-context estimate as the meter will show it once the new overlay is active."""
        return calibrated_tokens(self.calibration, estimated)


@dataclass(frozen=True)
class KeepBudget:
    keep: int  # the keep budget handed to plan_cut
    expected_after: int | None  # tokens after at that budget (provider's scale); None when forced


@dataclass(frozen=True)
class PolicyPlan:
    """The candidates a compaction could be and the one chosen (decision None: nothing to do)."""

    decision: Decision | None
    keep_budget: KeepBudget
    nothing: str = ""  # why there is nothing to compact (decision is None)
    prune: PrunePlan | None = None  # a prune alone
    cut: CutPlan | None = None  # a summary's cut (stored messages)
    kept_plan: KeptPlan | None = None  # how the kept part is served (prune + summarize)
    summary_tokens: int = 0  # the summary's estimated size


def estimate_summary_tokens(config: CompactionConfig, *, previous_summary_tokens: int, tokens_summarized: int) -> int:
    """A new summary's size, before the summarizer has written it (see SUMMARY_BASE_TOKENS)."""
    estimate = previous_summary_tokens + SUMMARY_BASE_TOKENS + int(tokens_summarized * SUMMARY_SHARE)
    return min(config.summary_budget, estimate)


def loop_guard_new_tokens(trigger: int) -> int:
    """Tokens that must be appended after a compaction left usage over the trigger."""
    return max(LOOP_GUARD_MIN_NEW_TOKENS, int(trigger * LOOP_GUARD_TRIGGER_SHARE))


class _Snapshot:
    """The inputs with what every step reads precomputed: each message's served size, the
    messages weighed as served (the keep budget is about what stays in the context) and the
    stored messages by seq (the summarizer reads them in full)."""

    def __init__(self, inputs: PolicyInputs) -> None:
        self.inputs = inputs
        self.config = inputs.config
        self.trigger = inputs.config.trigger_tokens
        self.served = {m.seq: m.tokens for m in inputs.served_messages}
        self.measured = [
            m if self.served.get(m.seq, m.tokens) == m.tokens else replace(m, tokens=self.served[m.seq])
            for m in inputs.messages
        ]
        self.stored = {m.seq: m for m in inputs.messages}

    def served_tokens(self, message: Msg) -> int:
        return self.served.get(message.seq, message.tokens)

    def prefix_before(self, seq: int) -> int:
        """Everything served before `seq` stays byte-identical: still cached after the change."""
        after = sum(self.served_tokens(m) for m in self.inputs.messages if m.seq >= seq)
        return self.inputs.on_provider_scale(max(0, self.inputs.estimated_before - after))


def keep_budget(inputs: PolicyInputs) -> KeepBudget:
    """The configured keep budget, capped as KEEP_FLOOR_TOKENS explains unless forced (overflow)
    or set explicitly, and the tokens expected after a compaction at that budget."""
    config = inputs.config
    keep = config.keep_recent_tokens
    if inputs.force:
        return KeepBudget(keep, None)
    cal = as_calibration(inputs.calibration)
    fixed = cal.fixed if cal else 0
    ratio = (cal.ratio if cal else 1.0) or 1.0
    served = {m.seq: m.tokens for m in inputs.served_messages}
    in_context = sum(served.get(m.seq, m.tokens) for m in inputs.messages)
    summary = estimate_summary_tokens(
        config, previous_summary_tokens=inputs.previous_summary_tokens, tokens_summarized=max(0, in_context - keep)
    )
    overhead = inputs.system_prompt_tokens + summary + inputs.summary_framing_tokens
    if not (inputs.keep_explicit or config.preserve_messages):
        aim = (config.target_ratio - LANDING_MARGIN) * config.trigger_tokens
        room = int((aim - fixed) / ratio) - overhead
        keep = max(min(keep, KEEP_FLOOR_TOKENS), min(keep, room, _work_tokens(inputs, served)))
    return KeepBudget(keep, inputs.on_provider_scale(overhead + keep))


def _work_tokens(inputs: PolicyInputs, served: Mapping[int, int]) -> int:
    """The served tokens of the messages since the task in progress began (no limit when none
    is): what is kept verbatim when the task began inside the keep budget. Before it, finished
    work the summary hands over (its commits, checks, the person's words) in a fraction of the
    tokens; the task's own messages stay as they were."""
    start = inputs.work_start_seq
    if start is None:
        return 1 << 62
    return sum(served.get(m.seq, m.tokens) for m in inputs.messages if m.seq >= start)


def _cut(snap: _Snapshot, keep: int) -> CutPlan:
    """Plan the cut with each message weighed as served, then hand back the stored messages."""
    cut = plan_cut(
        snap.measured,
        keep_recent_tokens=keep,
        preserve_messages=snap.config.preserve_messages,
        force=snap.inputs.force,
        context_window=snap.config.context_window,
    )
    stored = snap.stored
    return replace(
        cut,
        to_summarize=[stored[m.seq] for m in cut.to_summarize],
        turn_prefix=[stored[m.seq] for m in cut.turn_prefix],
        kept=[stored[m.seq] for m in cut.kept],
    )


@dataclass(frozen=True)
class _Summary:
    """A summarize candidate with what the prune + summarize variant and the dry run need."""

    candidate: Candidate
    estimated: int  # tokens after, our estimate (uncalibrated)
    summary_tokens: int


def _summary(snap: _Snapshot, cut: CutPlan) -> _Summary:
    inputs = snap.inputs
    summarized = [*cut.to_summarize, *cut.turn_prefix]
    assert cut.first_kept_seq is not None  # a summary is planned only for a cut that compacts
    kept_served = sum(m.tokens for m in inputs.served_messages if m.seq >= cut.first_kept_seq)
    summary_tokens = estimate_summary_tokens(
        snap.config,
        previous_summary_tokens=inputs.previous_summary_tokens,
        tokens_summarized=sum(snap.served_tokens(m) for m in summarized),
    )
    # The summary is served as one user message with a fixed preamble: that framing is counted
    # exactly by the caller.
    estimated = inputs.system_prompt_tokens + inputs.summary_framing_tokens + summary_tokens + kept_served
    # The summary message replaces the start of the conversation: only the system prompt (and
    # what only the provider counts) stays cached.
    candidate = Candidate(
        SUMMARIZE,
        inputs.on_provider_scale(estimated),
        inputs.on_provider_scale(inputs.system_prompt_tokens),
        min(m.seq for m in summarized),
        cut.reason,
    )
    return _Summary(candidate, estimated, summary_tokens)


def _prune_alone(snap: _Snapshot) -> tuple[PrunePlan | None, Candidate | None, str]:
    """(the prune, its candidate, why there is none) for a prune of the context as served."""
    inputs = snap.inputs
    # Planned over the context as served (current prune overlay applied), so results that are
    # already placeholders are not counted as savings again.
    prune = plan_prune(list(inputs.served_messages))
    if prune.prune_before_seq is None or prune.prune_before_seq <= (inputs.previous_prune_before_seq or 0):
        return None, None, f"nothing to prune: {prune.reason}"
    first = prune.first_pruned_seq or prune.prune_before_seq
    after = inputs.on_provider_scale(inputs.estimated_before - prune.tokens_saved)
    return prune, Candidate(PRUNE, after, snap.prefix_before(first), first, prune.reason), ""


def _shrink_keep(snap: _Snapshot, cut: CutPlan, summary: _Summary, keep: int) -> tuple[CutPlan, _Summary]:
    """Cut again with the keep budget reduced by the overshoot while the summary lands over the
    target (a few times at most; never below the floor; an explicit keep setting and overflow
    are honoured as they are)."""
    config, inputs = snap.config, snap.inputs
    if inputs.force or inputs.keep_explicit or config.preserve_messages:
        return cut, summary
    target = int(config.target_ratio * snap.trigger)
    for _ in range(KEEP_SHRINK_ROUNDS):
        if summary.candidate.tokens_after <= target or keep <= KEEP_FLOOR_TOKENS:
            break
        kept_served = sum(snap.served_tokens(m) for m in cut.kept)
        overshoot = summary.candidate.tokens_after - target
        keep = max(KEEP_FLOOR_TOKENS, keep - max(1, kept_served - keep) - overshoot)
        smaller = _cut(snap, keep)
        if smaller.nothing_to_compact:
            break
        cut, summary = smaller, _summary(snap, smaller)
    return cut, summary


def lean_kept_tokens(inputs: PolicyInputs, kept: Sequence[Msg], plan: KeptPlan) -> int:
    """The kept messages as served under `plan` (which replaces any prune boundary): its count
    for an edited message; for the others, as served now unless the active prune boundary
    trimmed them (then as stored)."""
    served = {m.seq: m.tokens for m in inputs.served_messages}
    boundary = inputs.previous_prune_before_seq or 0
    return sum(
        plan.tokens[m.seq] if m.seq in plan.tokens else m.tokens if m.seq < boundary else served.get(m.seq, m.tokens)
        for m in kept
    )


def _kept_plan(snap: _Snapshot, cut: CutPlan, summary: _Summary) -> tuple[KeptPlan | None, Candidate | None]:
    """The summary with the kept tail served lean (compaction.core.kept). The summary already
    changes the cached prompt from its start, so any saving in the kept part is free (an
    overflow's too: what it keeps must fit the window)."""
    inputs = snap.inputs
    if not snap.config.prune_tool_outputs:
        return None, None
    tokenizer = inputs.tokenizer or get_tokenizer()
    kept = list(cut.kept)
    plan = plan_kept(kept, names=tool_names(inputs.messages), tokenizer=tokenizer)
    if plan.empty:
        return None, None
    kept_served = sum(snap.served_tokens(m) for m in kept)
    candidate = Candidate(
        PRUNE_SUMMARIZE,
        inputs.on_provider_scale(summary.estimated - kept_served + lean_kept_tokens(inputs, kept, plan)),
        summary.candidate.unchanged_prefix,
        summary.candidate.first_changed_seq,
        plan.reason,
    )
    return plan, candidate


def _served_messages(snap: _Snapshot, cut: CutPlan, summary: _Summary, plan: KeptPlan | None) -> int:
    """Tokens of messages served after the compaction (our estimate): the summary message and
    the kept messages, lean under `plan`."""
    inputs = snap.inputs
    kept = list(cut.kept)
    kept_served = sum(snap.served_tokens(m) for m in kept)
    lean = lean_kept_tokens(inputs, kept, plan) if plan is not None else kept_served
    return summary.estimated - inputs.system_prompt_tokens - kept_served + lean


def _lean_fit(
    snap: _Snapshot, cut: CutPlan, summary: _Summary, keep: int
) -> tuple[CutPlan, _Summary, KeptPlan | None, Candidate | None]:
    """The kept part served lean, cut again (later) while what the compaction serves — summary
    and kept messages — comes to more than (1 + TURN_START_SLACK) × the keep budget, less
    SERVED_MARGIN. Default budgets only (an explicit keep setting and overflow are honoured as
    they are); never below the floor."""
    config, inputs = snap.config, snap.inputs
    plan, candidate = _kept_plan(snap, cut, summary)
    if inputs.force or inputs.keep_explicit or config.preserve_messages:
        return cut, summary, plan, candidate
    limit = int((1 - SERVED_MARGIN) * (1 + TURN_START_SLACK) * config.keep_recent_tokens)
    for _ in range(KEEP_SHRINK_ROUNDS):
        served = _served_messages(snap, cut, summary, plan)
        if served <= limit or keep <= KEEP_FLOOR_TOKENS:
            break
        # The cut keeps at least the budget, to a message boundary: take off what it kept beyond
        # the budget too, or the same cut comes back.
        kept = sum(snap.served_tokens(m) for m in cut.kept)
        keep = max(KEEP_FLOOR_TOKENS, keep - max(1, kept - keep) - (served - limit))
        smaller = _cut(snap, keep)
        if smaller.nothing_to_compact:
            break
        cut, summary = smaller, _summary(snap, smaller)
        plan, candidate = _kept_plan(snap, cut, summary)
    return cut, summary, plan, candidate


def plan(inputs: PolicyInputs) -> PolicyPlan:
    """Estimate every candidate the request allows and choose one, the same way for an auto
    compaction, a manual one and a dry run. `strategy="prune"` forces a prune; a summarizer
    strategy, instructions or force (overflow) rule a prune alone out."""
    snap = _Snapshot(inputs)
    config, strategy = inputs.config, inputs.strategy
    budget = keep_budget(inputs)
    candidates: list[Candidate] = []
    reasons: list[str] = []
    found: dict[str, Any] = {}
    allow_prune = strategy == PRUNE or (
        strategy == "auto" and not inputs.instructions and not inputs.force and config.prune_tool_outputs
    )
    if allow_prune:
        found["prune"], candidate, why_not = _prune_alone(snap)
        if candidate is not None:
            candidates.append(candidate)
        elif strategy == PRUNE:
            reasons.append(why_not)
    if strategy != PRUNE:
        cut = _cut(snap, budget.keep)
        if cut.nothing_to_compact:
            reasons.append(cut.reason)
        else:
            cut, summary = _shrink_keep(snap, cut, _summary(snap, cut), budget.keep)
            cut, summary, found["kept_plan"], both = _lean_fit(snap, cut, summary, budget.keep)
            found["cut"], found["summary_tokens"] = cut, summary.summary_tokens
            candidates.append(summary.candidate)
            if both is not None:
                candidates.append(both)
    decision = _decide(inputs, candidates)
    return PolicyPlan(decision, budget, nothing=_nothing(decision, candidates, reasons), **found)


def _decide(inputs: PolicyInputs, candidates: list[Candidate]) -> Decision | None:
    forced_prune = inputs.strategy == PRUNE  # then the only candidate is a prune
    decision = choose(
        candidates,
        tokens_before=inputs.tokens_before,
        trigger=inputs.config.trigger_tokens,
        target_ratio=inputs.config.target_ratio,
        prune_min_relief=0.0 if forced_prune else inputs.config.prune_min_relief,
    )
    if decision is not None and forced_prune:
        decision = replace(decision, reason="prune: requested (strategy prune); " + decision.reason)
    return decision


def _nothing(decision: Decision | None, candidates: list[Candidate], reasons: list[str]) -> str:
    if decision is not None:
        return ""
    if candidates:
        landings = "; ".join(f"{c.kind} would land at {c.tokens_after:,}" for c in candidates)
        return "no compaction worth its cache cost: " + landings
    return "; ".join(reasons) or "nothing to compact"


# --- loop guard -------------------------------------------------------------------------


@dataclass(frozen=True)
class LastCompaction:
    """The session's latest finished compaction, as the loop guard weighs it."""

    status: str  # "succeeded", "skipped" or "failed"
    tokens_before: int | None
    tokens_after: int | None
    snapshot_seq: int | None


def loop_guard_watches(last: LastCompaction | None, *, trigger: int) -> bool:
    """Whether `last` left usage over the trigger, so auto-compaction waits for new work."""
    if last is None or last.snapshot_seq is None:
        return False
    return not (last.status == "succeeded" and last.tokens_after is not None and last.tokens_after <= trigger)


def loop_guard(last: LastCompaction | None, *, tokens: int, trigger: int, new_tokens: int) -> str | None:
    """Why auto-compaction must not fire now (`new_tokens` appended since `last`'s snapshot,
    usage at `tokens`), or None."""
    if last is None or not loop_guard_watches(last, trigger=trigger):
        return None
    needed = loop_guard_new_tokens(trigger)
    if new_tokens >= needed:
        return None
    left = last.tokens_after if last.status == "succeeded" else last.tokens_before
    outcome = {"succeeded": "left", "skipped": "could not reduce", "failed": "failed at"}[last.status]
    return (
        f"Auto-compaction held back: the last compaction {outcome} {left or tokens:,} tokens, above the trigger "
        f"{trigger:,}, and only {new_tokens:,} tokens were appended since (needs {needed:,})"
    )
