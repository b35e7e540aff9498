"""Which compaction to make: chosen by the runway it buys and what it costs the prompt cache.

Every compaction rewrites part of the prompt the provider has cached: everything from the first
changed message on is billed again as a cache write on the next call, and the agent loses
verbatim context. So a compaction must buy a lot of runway — tokens of new work before the
trigger is crossed again — for what it invalidates. Measured on the shared Claude Code sessions
(issue 13): a prune of old tool output relieved 17–29 % of the trigger yet rewrote nearly the
whole cached prompt (its first pruned result was message 47/69), and the next prune followed
~40 messages later; three compactions where Claude Code made one.

Candidates (each estimated on the provider's scale by the caller):
- `prune`: old tool output served as placeholders, the rest verbatim;
- `summarize`: the history before the cut summarized, the recent tail kept;
- `prune+summarize`: the summary, and old tool output in the kept tail pruned too.

Rules, like Anthropic's `clear_tool_uses` edit with its `clear_at_least`:
- a prune alone qualifies only if it relieves at least `prune_min_relief` × trigger;
- a candidate qualifies only if it lands at or below `target_ratio` × trigger (so the next
  compaction is far away);
- a qualifying prune alone wins (the runway it buys is worth its cache cost, every message stays
  verbatim, no summarizer call); else the qualifying candidate that re-bills the fewest cache
  tokens per token of runway (ties: the larger runway); if none qualifies, the one with the most runway (a prune
  alone that relieves too little only when nothing else is possible and it gets under the
  trigger).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PRUNE = "prune"
SUMMARIZE = "summarize"
PRUNE_SUMMARIZE = "prune+summarize"

# Defaults: land at or below half the trigger; a prune alone must relieve as much (from a
# context at the trigger it then lands there too) — rare on real sessions, as intended.
DEFAULT_TARGET_RATIO = 0.5
DEFAULT_PRUNE_MIN_RELIEF = 0.5


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
        return max(0, self.tokens_after - self.unchanged_prefix)


@dataclass(frozen=True)
class Decision:
    chosen: Candidate
    reason: str
    considered: list[dict[str, Any]] = field(default_factory=list)


def cache_invalidated(*, tokens_after: int, unchanged_prefix: int) -> int:
    """The cache tokens a compaction invalidates, from its measured tokens_after."""
    return max(0, tokens_after - unchanged_prefix)


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
    rows: list[dict[str, Any]] = []
    qualifying: list[Candidate] = []
    for candidate in candidates:
        relief = tokens_before - candidate.tokens_after
        problems = []
        if candidate.kind == PRUNE and relief < min_relief:
            problems.append(f"relieves {relief:,} < {min_relief:,} ({prune_min_relief:.0%} of the trigger)")
        if candidate.tokens_after > target:
            problems.append(f"lands at {candidate.tokens_after:,} > {target:,} ({target_ratio:.0%} of the trigger)")
        if not problems:
            qualifying.append(candidate)
        rows.append(
            {
                "kind": candidate.kind,
                "tokens_after": candidate.tokens_after,
                "runway": candidate.runway(trigger),
                "cache_invalidated": candidate.cache_invalidated,
                "first_changed_seq": candidate.first_changed_seq,
                "qualifies": not problems,
                "why_not": "; ".join(problems),
            }
        )

    def cost_per_runway(c: Candidate) -> float:
        return c.cache_invalidated / max(1, c.runway(trigger))

    if qualifying:
        # A prune alone that qualifies has bought the runway asked for at a relief worth its
        # cache cost, keeps every message verbatim and needs no summarizer call: it wins.
        # Otherwise the summary that re-bills the fewest cache tokens per token of runway.
        prunes = [c for c in qualifying if c.kind == PRUNE]
        chosen = prunes[0] if prunes else min(qualifying, key=lambda c: (cost_per_runway(c), -c.runway(trigger)))
        others = [r for r in rows if r["kind"] != chosen.kind]
        reason = (
            f"{chosen.kind}: lands at {chosen.tokens_after:,} (≤ {target:,}), buys {chosen.runway(trigger):,} tokens "
            f"of runway for {chosen.cache_invalidated:,} cache tokens"
        )
        if len(qualifying) > 1:
            reason += (
                " — a prune alone keeps every message" if prunes else " — the fewest cache tokens per token of runway"
            )
        rejected = [f"{r['kind']} {r['why_not']}" for r in others if not r["qualifies"]]
        if rejected:
            reason += "; not " + "; not ".join(rejected)
    else:
        # None lands at the target (an explicit keep setting, a huge kept tail): the most runway,
        # but a prune alone that relieves too little only if nothing else is possible and it
        # at least gets under the trigger.
        pool = [c for c in candidates if c.kind != PRUNE or tokens_before - c.tokens_after >= min_relief]
        pool = pool or [c for c in candidates if c.runway(trigger) > 0]
        if not pool:
            return None
        chosen = max(pool, key=lambda c: (c.runway(trigger), -c.cache_invalidated))
        reason = (
            f"{chosen.kind}: no candidate lands at or below {target:,}; the most runway "
            f"({chosen.runway(trigger):,} tokens, lands at {chosen.tokens_after:,})"
        )
    return Decision(chosen, reason, rows)


def candidate_dict(candidate: Candidate) -> dict[str, Any]:
    return asdict(candidate)
