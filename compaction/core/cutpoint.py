"""Where to cut a history for compaction (seeds 000, 002, 003, 004).

`plan_cut` walks back from the newest message, accumulating token counts until the keep
budget is met, then moves the cut to a *valid* position:

- never at a tool_result message (a user message carrying tool_result blocks);
- never between a tool_use and its tool_result, wherever the result lies (parallel tool
  calls, results spread over several user messages) — so the kept part can never hold a
  tool_result whose tool_use was summarized, nor a tool_use whose existing result was;
- preferably at a real user message (a turn start), when that costs at most a bounded
  amount of extra kept tokens; otherwise mid-turn at an assistant message.

A mid-turn cut whose compacted turn prefix has at least `SPLIT_TURN_MIN_PREFIX` messages is a
*split turn*: the history before the turn and the prefix are summarized separately. Shorter
prefixes are clean cuts and go into `to_summarize` with the rest of the history.

Everything here is pure and O(n) so it can run on histories of thousands of messages.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from compaction.core.types import Msg

# Seed 002: prefixes shorter than this are "not worth a separate summary".
SPLIT_TURN_MIN_PREFIX = 5
# Moving the cut back to the start of the turn it landed in keeps the turn whole, which
# summarizes better than a split; allow that when it costs at most this share of the keep
# budget in extra kept tokens (20k budget → up to 30k kept).
TURN_START_SLACK = 0.5
# Force (overflow) mode keeps about a fifth of the window (seed 002: keep = window / 5) ...
FORCE_KEEP_SHARE = 0.2
# ... but keeps the whole last user turn when it is no larger than this share of the window,
# so the model still sees the request it was working on. Larger turns are cut inside.
FORCE_MAX_KEEP_SHARE = 0.35
MIN_MESSAGES = 2


@dataclass(frozen=True)
class CutPlan:
    to_summarize: list[Msg]  # history part to summarize (includes a short (<5) turn prefix)
    turn_prefix: list[Msg]  # split turn: compacted prefix (>= 5 msgs) of the turn being cut; else []
    kept: list[Msg]
    first_kept_seq: int | None  # None = nothing to compact
    split_turn: bool
    reason: str

    @property
    def nothing_to_compact(self) -> bool:
        return self.first_kept_seq is None

    @property
    def summarized(self) -> list[Msg]:
        """Every message the compaction replaces (history, then the turn prefix)."""
        return [*self.to_summarize, *self.turn_prefix]

    @property
    def messages_summarized(self) -> int:
        return len(self.to_summarize) + len(self.turn_prefix)

    @property
    def first_summarized_seq(self) -> int | None:
        summarized = self.to_summarize or self.turn_prefix
        return summarized[0].seq if summarized and not self.nothing_to_compact else None

    @property
    def last_summarized_seq(self) -> int | None:
        summarized = self.turn_prefix or self.to_summarize
        return summarized[-1].seq if summarized and not self.nothing_to_compact else None

    @property
    def summarized_tokens(self) -> int:
        return sum(m.tokens for m in self.to_summarize) + sum(m.tokens for m in self.turn_prefix)

    @property
    def kept_tokens(self) -> int:
        return sum(m.tokens for m in self.kept)


def turn_starts(messages: list[Msg]) -> list[int]:
    """Indices of real user messages (user turns), oldest first."""
    return [i for i, m in enumerate(messages) if m.is_user_turn_start]


def _pair_blocked(messages: list[Msg]) -> list[bool]:
    """blocked[c] is True when cutting before message c would separate a tool pair.

    A pair (use at a, result at b) forbids every cut c with min(a, b) < c <= max(a, b).
    Results normally follow their use; the reverse order is handled too so that a
    malformed history still never yields a split pair. Marked with a difference array
    so the whole check is linear.
    """
    n = len(messages)
    uses: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for tool_id in m.tool_use_ids:
                uses.setdefault(tool_id, []).append(i)
    diff = [0] * (n + 2)
    for j, m in enumerate(messages):
        if m.role != "user":
            continue
        for tool_id in m.tool_result_ids:
            positions = uses.get(tool_id)
            if not positions:
                continue  # orphan result: no pair to keep together (and never a cut point anyway)
            k = bisect_left(positions, j)
            a = positions[k - 1] if k > 0 else positions[0]  # nearest use before, else after
            low, high = min(a, j), max(a, j)
            diff[low + 1] += 1
            diff[high + 1] -= 1
    blocked = [False] * n
    running = 0
    for c in range(n):
        running += diff[c]
        blocked[c] = running > 0
    return blocked


def valid_cut_mask(messages: list[Msg]) -> list[bool]:
    """valid[c]: the kept part may start at message c (c >= 1; index 0 is never a cut)."""
    blocked = _pair_blocked(messages)
    valid = [False] * len(messages)
    for c in range(1, len(messages)):
        valid[c] = not blocked[c] and not messages[c].is_tool_result and messages[c].role in ("user", "assistant")
    return valid


def valid_cut_indices(messages: list[Msg]) -> list[int]:
    """Indices where the kept part may start, ascending."""
    return [c for c, ok in enumerate(valid_cut_mask(messages)) if ok]


def _nothing(reason: str, messages: list[Msg]) -> CutPlan:
    return CutPlan(
        to_summarize=[],
        turn_prefix=[],
        kept=list(messages),
        first_kept_seq=None,
        split_turn=False,
        reason=f"nothing to compact: {reason}",
    )


def _fmt(n: int) -> str:
    return f"{n:,}"


def plan_cut(
    messages: list[Msg],
    *,
    keep_recent_tokens: int,
    preserve_messages: int | None = None,
    force: bool = False,
    context_window: int | None = None,
) -> CutPlan:
    """Choose what to summarize and what to keep verbatim. Never raises for any history.

    - Token mode: keep at least `keep_recent_tokens` (unless the whole history is kept).
    - `preserve_messages` (seed 003): keep at least the last N messages instead (ignored when
      forced: overflow recovery must bound the kept tokens).
    - `force` (overflow, seed 002): keep about `context_window` / 5 tokens (at least the last
      user turn when it fits in `FORCE_MAX_KEEP_SHARE` of the window, otherwise the smallest
      valid tail that meets the budget) and compact even when everything is within budget.
    """
    n = len(messages)
    if n < MIN_MESSAGES:
        return _nothing(f"only {n} message{'s' if n != 1 else ''}", messages)

    valid = valid_cut_mask(messages)
    if not any(valid):
        return _nothing(
            f"no valid cut point in {n} messages (every position would split a tool_use from its result)",
            messages,
        )
    # suffix[c] = tokens kept when the cut is at c.
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + max(0, messages[i].tokens)
    total = suffix[0]
    starts = turn_starts(messages)

    if force:
        budget = int(context_window * FORCE_KEEP_SHARE) if context_window else keep_recent_tokens
        max_keep = (
            int(context_window * FORCE_MAX_KEEP_SHARE) if context_window else int(budget * (1 + TURN_START_SLACK))
        )
        max_keep = max(max_keep, budget)
    else:
        budget = keep_recent_tokens
        max_keep = budget + int(max(0, budget) * TURN_START_SLACK)

    mode = ""
    # Force (overflow) always cuts by tokens: a preserved message count can be arbitrarily large.
    if preserve_messages is not None and preserve_messages > 0 and not force:
        target = n - preserve_messages
        if target <= 0:
            return _nothing(f"only {n} messages and preserve_messages={preserve_messages}", messages)
        mode = f"preserve_messages={preserve_messages}"
        # Moving back to the turn start may keep up to twice the requested messages.
        max_extra_messages = preserve_messages
    else:
        max_extra_messages = None
        # Largest c whose suffix meets the budget (c = n - 1 at least: keep one message).
        target = n - 1
        while target > 0 and suffix[target] < budget:
            target -= 1
        if suffix[target] < budget or target == 0:
            if not force:
                if total <= budget:
                    why = f"all {n} messages ({_fmt(total)} tokens) fit within keep_recent_tokens={_fmt(budget)}"
                else:
                    why = f"keeping keep_recent_tokens={_fmt(budget)} needs all {n} messages ({_fmt(total)} tokens)"
                return _nothing(why, messages)
            # Forced with everything inside the budget: still compact, keeping the last turn.
            target = starts[-1] if starts and starts[-1] > 0 else n - 1
            mode = f"forced; all {_fmt(total)} tokens fit in the {_fmt(budget)}-token budget"
        else:
            mode = f"{'forced, ' if force else ''}keep budget {_fmt(budget)} tokens"

    # The latest valid cut at or before the target keeps at least the budget.
    cut = next((c for c in range(target, 0, -1) if valid[c]), None)
    if cut is None:
        if not force:
            return _nothing(
                f"meeting the {mode} requires every message once tool pairs are kept together",
                messages,
            )
        # Forced: keep as little as possible beyond the target instead.
        cut = next(c for c in range(target + 1, n) if valid[c])
        mode += "; minimum valid tail"

    # Prefer the start of the turn the cut landed in.
    turn_index = bisect_left(starts, cut + 1) - 1  # last turn start <= cut
    turn_start = starts[turn_index] if turn_index >= 0 else None
    if turn_start is not None and turn_start < cut and turn_start > 0 and valid[turn_start]:
        if max_extra_messages is not None:
            acceptable = cut - turn_start <= max_extra_messages
        else:
            acceptable = suffix[turn_start] <= max_keep
        if acceptable:
            cut = turn_start

    first_kept = messages[cut].seq
    kept = list(messages[cut:])
    kept_desc = f"keeping {len(kept)} messages ({_fmt(suffix[cut])} tokens) from seq {first_kept}"

    if messages[cut].is_user_turn_start:
        return CutPlan(
            to_summarize=list(messages[:cut]),
            turn_prefix=[],
            kept=kept,
            first_kept_seq=first_kept,
            split_turn=False,
            reason=f"cut at a user turn start ({mode}): summarizing {cut} messages "
            f"({_fmt(total - suffix[cut])} tokens), {kept_desc}",
        )
    if turn_start is None:
        # The history already begins mid-turn (an earlier compaction split this turn); its
        # start lives in the previous summary, so the prefix is plain history here.
        return CutPlan(
            to_summarize=list(messages[:cut]),
            turn_prefix=[],
            kept=kept,
            first_kept_seq=first_kept,
            split_turn=False,
            reason=f"cut mid-turn at an assistant message ({mode}); the turn began before this history: "
            f"summarizing {cut} messages, {kept_desc}",
        )
    prefix_len = cut - turn_start
    if prefix_len >= SPLIT_TURN_MIN_PREFIX:
        return CutPlan(
            to_summarize=list(messages[:turn_start]),
            turn_prefix=list(messages[turn_start:cut]),
            kept=kept,
            first_kept_seq=first_kept,
            split_turn=True,
            reason=f"split turn ({mode}): the turn starting at seq {messages[turn_start].seq} is cut after "
            f"{prefix_len} messages; summarizing {turn_start} history messages and a {prefix_len}-message "
            f"turn prefix separately, {kept_desc}",
        )
    return CutPlan(
        to_summarize=list(messages[:cut]),
        turn_prefix=[],
        kept=kept,
        first_kept_seq=first_kept,
        split_turn=False,
        reason=f"cut mid-turn at an assistant message ({mode}); the {prefix_len}-message turn prefix is "
        f"summarized with the history (shorter than {SPLIT_TURN_MIN_PREFIX}): summarizing {cut} messages, {kept_desc}",
    )
