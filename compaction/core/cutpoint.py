"""Where to cut a history for compaction.

`plan_cut` keeps the newest messages and summarizes the rest. It walks back from the newest
message adding token counts until the keep budget is met, then moves the cut back to the
nearest *valid* position:

- never at a tool_result message (a user message carrying tool_result blocks), nor at a
  message of another role than user or assistant;
- never between a tool_use and its tool_result, wherever the result lies (parallel tool
  calls, results spread over several user messages), so the kept part can never hold a
  tool_result whose tool_use was summarized, nor a tool_use whose existing result was;
- never after a tool_use that has no result anywhere (a slow tool while the conversation goes
  on): summarized, its result appended later would be served without it.

It then prefers the start of the turn the cut landed in (a real user message) when that keeps
a bounded amount more. A mid-turn cut whose compacted turn prefix has at least
`SPLIT_TURN_MIN_PREFIX` messages is a *split turn*: the history before the turn and the prefix
are summarized separately. Shorter prefixes are clean cuts and go into `to_summarize` with the
rest of the history.

Input the API never stores (it checks tool pairs on append) still gets a plan: a tool_result
pairs with the nearest tool_use with its id before it, else the first one after it; a result
whose id no tool_use carries pairs with nothing.

Everything here is pure and O(n): one forward pass reads each message's tool ids once (from
`Msg.stored_*_ids` when the caller has them, without touching a block), and a history that
fits the budget is decided on its token counts alone.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from compaction.core.types import Msg

# Turn prefixes shorter than this are not worth a separate summary.
SPLIT_TURN_MIN_PREFIX = 5
# Moving the cut back to the start of the turn it landed in keeps the turn whole, which
# summarizes better than a split; allow that when it costs at most this share of the keep
# budget in extra kept tokens (20k budget → up to 30k kept).
TURN_START_SLACK = 0.5
# Force (overflow) mode keeps about a fifth of the window ...
FORCE_KEEP_SHARE = 0.2
# ... but keeps the whole last user turn when it is no larger than this share of the window,
# so the model still sees the request it was working on. Larger turns are cut inside.
FORCE_MAX_KEEP_SHARE = 0.35
MIN_MESSAGES = 2


@dataclass(eq=False, slots=True)
class CutPlan:
    """A cut: what is summarized, what is kept. Treat it as a value (never changed once made).

    `reason` (one sentence for the job's record) is written when it is read: a job plans
    several cuts (policy candidates) and records the reason of one, and the text (thousands
    separators, seqs) cost as much as the planning itself on a short history.
    """

    to_summarize: list[Msg]  # history part to summarize (includes a short (<5) turn prefix)
    turn_prefix: list[Msg]  # split turn: compacted prefix (>= 5 msgs) of the turn being cut; else []
    kept: list[Msg]
    first_kept_seq: int | None  # None = nothing to compact
    split_turn: bool
    why: str | Callable[[], str] = field(repr=False)  # the reason, or what writes it

    @property
    def reason(self) -> str:
        why = self.why
        if not isinstance(why, str):
            why = self.why = why()
        return why

    def _key(self) -> tuple[object, ...]:
        return (self.to_summarize, self.turn_prefix, self.kept, self.first_kept_seq, self.split_turn, self.reason)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, CutPlan)
        return self._key() == other._key()

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


def valid_cut_mask(messages: list[Msg]) -> list[bool]:
    """valid[c]: the kept part may start at message c (c >= 1; index 0 is never a cut)."""
    pairs = _tool_pairs(messages)
    low, n = pairs.low, len(messages)
    mask = [False] * n
    floor = n
    for c in range(n - 1, 0, -1):
        if low[c] < floor:
            floor = low[c]
        mask[c] = floor >= c and c <= pairs.limit
    return mask


def valid_cut_indices(messages: list[Msg]) -> list[int]:
    """Indices where the kept part may start, ascending."""
    return [c for c, ok in enumerate(valid_cut_mask(messages)) if ok]


@dataclass(slots=True)
class _ToolPairs:
    """Where the tool pairs and the roles allow a cut, from one pass over the history.

    For every two messages that must stay on the same side of the cut (a tool_use and its
    result, p < q), low[q] <= p; a message that can never start the kept part (a tool_result
    message, another role) has low[q] <= q - 1. So a cut at c keeps every pair whole exactly
    when no low at or after c is below c: `min(low[c:]) >= c`.
    """

    low: list[int]  # n where nothing ties a message to an earlier one
    starts: list[int]  # user turn starts, ascending
    limit: int  # the last index a cut may take: the first tool_use with no result anywhere stays
    waiting: bool  # such a tool_use exists (at `limit`)

    def valid(self, c: int) -> bool:
        return 1 <= c <= self.limit and min(self.low[c:]) >= c

    def latest_valid(self, target: int) -> int | None:
        """The newest valid cut at or before `target`."""
        low = self.low
        c = min(target, self.limit)
        floor = min(low[c + 1 :]) if c + 1 < len(low) else len(low)
        while c >= 1:
            if low[c] < floor:
                floor = low[c]
            if floor >= c:
                return c
            c -= 1
        return None

    def first_valid_after(self, target: int) -> int | None:
        """The oldest valid cut after `target` (the smallest tail beyond it)."""
        low, found = self.low, None
        floor = min(low[self.limit + 1 :], default=len(low))
        for c in range(self.limit, max(target, 0), -1):
            if low[c] < floor:
                floor = low[c]
            if floor >= c:
                found = c
        return found


def _tool_pairs(messages: list[Msg]) -> _ToolPairs:
    """Read forward, results nearly always answer exactly the tool_uses of the assistant message
    before them (parallel calls sometimes in another order): one list comparison pairs them, and
    ids are looked up one by one (`_UsesBefore`) only otherwise, since on a long history a lookup
    per id costs more than the rest of the pass."""
    n = len(messages)
    low = [n] * n
    starts: list[int] = []
    uses: _UsesBefore | None = None  # made when a result is not paired by the comparison
    early: dict[str, int] = {}  # result id met before any tool_use with it -> its first result message
    unsure: list[tuple[Sequence[str], int]] = []  # tool_uses not answered just as listed, and where
    recent: Sequence[str] = ()  # the tool_uses of the last assistant message that made some
    recent_at = -1
    answered = True  # `recent` answered just as listed by one result message (or nothing to answer)
    for i, m in enumerate(messages):
        role = m.role
        if role == "user":
            ids = m.stored_result_ids
            if ids is None:
                ids = m.tool_result_ids
            if not ids:
                starts.append(i)
            elif ids == recent or (len(ids) == len(recent) and sorted(ids) == sorted(recent)):
                low[i] = recent_at
                answered = True
            else:
                uses = uses or _UsesBefore(messages)
                low[i] = _pair_results(ids, i, uses, early)
        elif role == "assistant":
            ids = m.stored_use_ids
            if ids is None:
                ids = m.tool_use_ids
            if ids:
                if early and not early.keys().isdisjoint(ids):
                    # Results recorded before their tool_use pair with its first use.
                    low[i] = min(early.pop(tool_id) for tool_id in set(ids) if tool_id in early)
                if not answered:
                    unsure.append((recent, recent_at))
                recent, recent_at, answered = ids, i, False
        else:
            low[i] = i - 1  # only user and assistant messages may start the kept part
    if not answered:
        unsure.append((recent, recent_at))
    limit, waiting = _first_waiting(messages, unsure) if unsure else (n - 1, False)
    return _ToolPairs(low, starts, limit, waiting)


class _UsesBefore:
    """tool_use id -> the newest assistant message carrying it before a given message, indexed
    only as far as asked (the results of the tool_uses just before them never ask)."""

    def __init__(self, messages: list[Msg]) -> None:
        self.messages = messages
        self.newest: dict[str, int] = {}
        self.read = 0

    def latest(self, tool_id: str, before: int) -> int | None:
        for i in range(self.read, before):
            m = self.messages[i]
            if m.role == "assistant":
                for use_id in m.tool_use_ids:
                    self.newest[use_id] = i
        self.read = max(self.read, before)
        return self.newest.get(tool_id)


def _pair_results(ids: Sequence[str], at: int, uses: _UsesBefore, early: dict[str, int]) -> int:
    """low[at] for a result message: its earliest paired tool_use, and at - 1 at most (a result
    message is never a cut). A result before any tool_use with its id waits in `early`."""
    low = at - 1
    for tool_id in ids:
        use = uses.latest(tool_id, at)
        if use is None:
            early.setdefault(tool_id, at)
        elif use < low:
            low = use
    return low


def _first_waiting(messages: list[Msg], unsure: list[tuple[Sequence[str], int]]) -> tuple[int, bool]:
    """(limit, waiting): the first assistant message with a tool_use no result names anywhere.
    Only tool_uses not answered just as listed (`unsure`) can be such."""
    answered = {tool_id for m in messages if m.role == "user" for tool_id in m.tool_result_ids}
    for ids, at in unsure:
        if not answered.issuperset(ids):
            return at, True
    return len(messages) - 1, False


def _tokens(messages: list[Msg], start: int, stop: int | None = None) -> int:
    """Tokens of messages[start:stop] (a negative count, from odd input, counts as none)."""
    total = 0
    for m in messages[start:stop]:
        t = m.tokens
        if t > 0:
            total += t
    return total


def _budget_target(messages: list[Msg], budget: int) -> tuple[int, int]:
    """(target, kept): the newest message from which the kept part meets the budget, walking back
    from the newest message, and the tokens kept from there; target 0 when only the whole
    history does (or not even it)."""
    if budget <= 0:
        return len(messages) - 1, max(0, messages[-1].tokens)
    kept = 0
    c = len(messages)
    for m in reversed(messages):
        c -= 1
        t = m.tokens
        if t > 0:
            kept += t
            if kept >= budget:
                return c, kept
    return 0, kept


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
    - `preserve_messages`: keep at least the last N messages instead (ignored when forced:
      overflow recovery must bound the kept tokens).
    - `force` (overflow): keep about `context_window` / 5 tokens (at least the last user turn
      when it fits in `FORCE_MAX_KEEP_SHARE` of the window, otherwise the smallest valid tail
      that meets the budget) and compact even when everything is within budget.
    - A tool_use with no result yet is never summarized, whatever the budget: its result,
      appended later, would be served without it.
    """
    n = len(messages)
    if n < MIN_MESSAGES:
        return _nothing(f"only {n} message{'s' if n != 1 else ''}", messages)
    budget = int(context_window * FORCE_KEEP_SHARE) if force and context_window else keep_recent_tokens
    # Force (overflow) always cuts by tokens: a preserved message count can be arbitrarily large.
    preserve = preserve_messages if preserve_messages is not None and preserve_messages > 0 and not force else None
    # The newest cut that keeps the budget or the preserved messages, before any tool id is read.
    target, kept = (n - preserve, None) if preserve is not None else _budget_target(messages, budget)
    if target < 1 and not force:
        return _nothing(lambda: _why_nothing(messages, None, _Goal(budget, preserve, force), target), messages)
    goal = _Goal(budget, preserve, force)
    pairs = _tool_pairs(messages)
    within = target < 1
    if within:  # forced with everything inside the budget: still compact, keeping the last turn
        target, kept = pairs.starts[-1] if pairs.starts and pairs.starts[-1] > 0 else n - 1, None
    cut, tail = pairs.latest_valid(target), False
    if cut is None and force:  # keep as little as possible beyond the target instead
        cut, tail = pairs.first_valid_after(target), True
    if cut is None:
        return _nothing(lambda: _why_nothing(messages, pairs, goal, target), messages)
    notes = "; minimum valid tail" if tail else ""
    if pairs.waiting and cut == pairs.limit < n - 1:
        notes += f"; the tool_use at seq {messages[cut].seq} is still waiting for its result, so it stays"
    # What the cut keeps: the budget walk's sum and the messages stepped back over, if it walked there.
    kept = kept + _tokens(messages, cut, target) if kept is not None and cut <= target else _tokens(messages, cut)
    s = bisect_right(pairs.starts, cut) - 1
    turn_start = pairs.starts[s] if s >= 0 else None
    if turn_start is not None and turn_start < cut:
        # Prefer the start of the turn the cut landed in, when that keeps little more.
        kept_from_start = goal.kept_from_turn_start(messages, turn_start, cut, kept, context_window)
        if kept_from_start is not None and pairs.valid(turn_start):
            cut, kept = turn_start, kept_from_start
    return _plan(messages, cut, turn_start, kept, lambda: goal.mode(_tokens(messages, 0) if within else None) + notes)


@dataclass(slots=True)
class _Goal:
    """What the kept part must hold, and its words for the reason."""

    budget: int
    preserve: int | None
    force: bool

    def mode(self, all_within: int | None = None) -> str:
        if self.preserve is not None:
            return f"preserve_messages={self.preserve}"
        if all_within is not None:  # the whole history's tokens, all within the forced budget
            return f"forced; all {_fmt(all_within)} tokens fit in the {_fmt(self.budget)}-token budget"
        return f"{'forced, ' if self.force else ''}keep budget {_fmt(self.budget)} tokens"

    def kept_from_turn_start(
        self, messages: list[Msg], turn_start: int, cut: int, kept: int, context_window: int | None
    ) -> int | None:
        """The tokens kept when the cut moves back to its turn's start, or None when that keeps too
        much: more than a bounded share beyond the budget, or twice the preserved messages."""
        if self.preserve is not None:
            return _tokens(messages, turn_start) if cut - turn_start <= self.preserve else None
        budget = self.budget
        if not self.force:
            most = budget + int(max(0, budget) * TURN_START_SLACK)
        else:
            share = (
                int(context_window * FORCE_MAX_KEEP_SHARE) if context_window else int(budget * (1 + TURN_START_SLACK))
            )
            most = max(share, budget)
        # Walked back from the cut, and only as far as it fits: a long turn is told in a few steps.
        for m in reversed(messages[turn_start:cut]):
            t = m.tokens
            if t > 0:
                kept += t
                if kept > most:
                    return None
        return kept if kept <= most else None


def _why_nothing(messages: list[Msg], pairs: _ToolPairs | None, goal: _Goal, target: int) -> str:
    """Why there is nothing to compact (unforced, or forced with no valid cut at all)."""
    n = len(messages)
    pairs = pairs or _tool_pairs(messages)
    if pairs.latest_valid(n - 1) is None:
        waiting = (
            f"; a tool_use at seq {messages[pairs.limit].seq} is still waiting for its result"
            if pairs.waiting and pairs.limit < n - 1
            else ""
        )
        return f"no valid cut point in {n} messages (every position would split a tool_use from its result{waiting})"
    if target >= 1:
        return f"meeting the {goal.mode()} requires every message once tool pairs are kept together"
    if goal.preserve is not None:
        return f"only {n} messages and preserve_messages={goal.preserve}"
    total, budget = _tokens(messages, 0), goal.budget
    if total <= budget:
        return f"all {n} messages ({_fmt(total)} tokens) fit within keep_recent_tokens={_fmt(budget)}"
    return f"keeping keep_recent_tokens={_fmt(budget)} needs all {n} messages ({_fmt(total)} tokens)"


def _nothing(reason: str | Callable[[], str], messages: list[Msg]) -> CutPlan:
    if isinstance(reason, str):
        return CutPlan([], [], list(messages), None, False, f"nothing to compact: {reason}")
    return CutPlan([], [], list(messages), None, False, lambda: f"nothing to compact: {reason()}")


def _fmt(n: int) -> str:
    return f"{n:,}"


def _plan(messages: list[Msg], cut: int, turn_start: int | None, kept_tokens: int, mode: Callable[[], str]) -> CutPlan:
    def why() -> str:
        return _cut_reason(messages, cut, turn_start, kept_tokens, mode)

    if turn_start is not None and cut - turn_start >= SPLIT_TURN_MIN_PREFIX:
        # A split turn: the history before the turn and the turn's prefix are summarized apart.
        return CutPlan(messages[:turn_start], messages[turn_start:cut], messages[cut:], messages[cut].seq, True, why)
    return CutPlan(messages[:cut], [], messages[cut:], messages[cut].seq, False, why)


def _cut_reason(
    messages: list[Msg], cut: int, turn_start: int | None, kept_tokens: int, mode: Callable[[], str]
) -> str:
    kept = f"keeping {len(messages) - cut} messages ({_fmt(kept_tokens)} tokens) from seq {messages[cut].seq}"
    if cut == turn_start:  # at a user turn start (the last one at or before the cut)
        return (
            f"cut at a user turn start ({mode()}): summarizing {cut} messages "
            f"({_fmt(_tokens(messages, 0, cut))} tokens), {kept}"
        )
    if turn_start is None:
        # The history already begins mid-turn (an earlier compaction split this turn); its
        # start lives in the previous summary, so the prefix is plain history here.
        return (
            f"cut mid-turn at an assistant message ({mode()}); the turn began before this history: "
            f"summarizing {cut} messages, {kept}"
        )
    prefix_len = cut - turn_start
    if prefix_len >= SPLIT_TURN_MIN_PREFIX:
        return (
            f"split turn ({mode()}): the turn starting at seq {messages[turn_start].seq} is cut after "
            f"{prefix_len} messages; summarizing {turn_start} history messages and a {prefix_len}-message "
            f"turn prefix separately, {kept}"
        )
    return (
        f"cut mid-turn at an assistant message ({mode()}); the {prefix_len}-message turn prefix is "
        f"summarized with the history (shorter than {SPLIT_TURN_MIN_PREFIX}): summarizing {cut} messages, {kept}"
    )
