"""Where to cut a history for compaction (seeds 000, 002, 003, 004).

`plan_cut` walks back from the newest message, accumulating token counts until the keep
budget is met, then moves the cut to a *valid* position:

- never at a tool_result message (a user message carrying tool_result blocks);
- never between a tool_use and its tool_result, wherever the result lies (parallel tool
  calls, results spread over several user messages) — so the kept part can never hold a
  tool_result whose tool_use was summarized, nor a tool_use whose existing result was;
- never after a tool_use that has no result yet (a slow tool while the conversation goes
  on): summarized, its result appended later would be served as an orphan (issue 9 D1);
- preferably at a real user message (a turn start), when that costs at most a bounded
  amount of extra kept tokens; otherwise mid-turn at an assistant message.

A mid-turn cut whose compacted turn prefix has at least `SPLIT_TURN_MIN_PREFIX` messages is a
*split turn*: the history before the turn and the prefix are summarized separately. Shorter
prefixes are clean cuts and go into `to_summarize` with the rest of the history.

Everything here is pure and O(n). Like pi's `prepareCompaction` it reads each message's tool
ids once (from `Msg.stored_*_ids` when the caller has them, without touching a block) and
walks back from the end only as far as the budget; input the API never stores (orphan or
reversed results, duplicate ids) and forced minimum tails take the exhaustive path, which
decides identically (a property test holds the two together).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import attrgetter
from typing import NamedTuple

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

    def _key(self) -> tuple:
        return (self.to_summarize, self.turn_prefix, self.kept, self.first_kept_seq, self.split_turn, self.reason)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

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


@dataclass(frozen=True)
class _Scan:
    """Everything about a history that planning a cut can ask; lists newest first (index k is
    message n-1-k)."""

    kept_tokens: list[int]  # kept_tokens[k]: tokens kept when the cut is at message n-1-k
    cuttable: list[bool]  # the kept part may start there (pairs, roles); `limit` aside
    starts: list[int]  # indices of user turn starts, newest first
    limit: int  # no cut after this index: a tool_use waiting for its result is never summarized
    pending: int  # tool_uses without any result
    total: int  # tokens of the whole history


def _scan_exact(messages: list[Msg]) -> _Scan:
    """Every message, any input (duplicate ids, results before their use, orphans).

    A pair (use at a, result at b) forbids every cut c with min(a, b) < c <= max(a, b):
    results pair with the nearest use before them, else (malformed) the first one after.
    Marked with a difference array so the whole check is linear.
    """
    n = len(messages)
    uses: dict[str, list[int]] = {}
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for tool_id in m.tool_use_ids:
                uses.setdefault(tool_id, []).append(i)
        elif m.role == "user":
            answered.update(m.tool_result_ids)
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
            diff[min(a, j) + 1] += 1
            diff[max(a, j) + 1] -= 1
    waiting = [positions[0] for tool_id, positions in uses.items() if tool_id not in answered]
    cuttable = [False] * n
    running = 0
    for c in range(n):
        running += diff[c]
        m = messages[c]
        cuttable[c] = not running and m.role in ("user", "assistant") and not m.is_tool_result
    kept_tokens = [0] * n
    acc = 0
    for c in range(n - 1, -1, -1):
        acc += max(0, messages[c].tokens)
        kept_tokens[n - 1 - c] = acc
    cuttable.reverse()
    return _Scan(
        kept_tokens=kept_tokens,
        cuttable=cuttable,
        starts=[i for i in range(n - 1, -1, -1) if messages[i].is_user_turn_start],
        limit=min(waiting, default=n - 1),
        pending=len(waiting),
        total=acc,
    )


class _Located(NamedTuple):
    """Where the budget puts the cut, before the turn-start preference (a tuple: cheap to make)."""

    cut: int
    mode: Callable[[], str]  # writes how the budget was set, for the reason
    turn_start: int | None  # last user turn start at or before the cut
    turn_start_valid: bool  # the kept part may start there
    kept_at_cut: int
    kept_at_turn_start: int
    total: Callable[[], int]  # tokens of the whole history (read for the reason only)


_USES = attrgetter("stored_use_ids")
_RESULTS = attrgetter("stored_result_ids")
_ROLE = attrgetter("role")
_USER_ONLY = frozenset(("user",))


def _locate_back(
    messages: list[Msg],
    *,
    budget: int | None,
    target: int | None,
    mode: Callable[[], str],
    exact: Callable[[], _Located | CutPlan],
) -> _Located | CutPlan | None:
    """pi's findCutPoint and findTurnStartIndex, and nothing before them: walk back from the
    newest message adding token counts until the budget (or `target` messages) is kept, on
    to the first valid cut, on to the start of its turn, reading only the stored tool ids of
    the messages walked over.

    Walking back, a tool_result is *open* until its tool_use is met: a cut is valid where
    none is open. Results nearly always answer exactly the tool_uses of the assistant
    message before them: one comparison closes them (`recent`), and sets are touched only
    otherwise. A tool_use met with no result after it is waiting: no cut comes after it.
    What lies before the turn start (the prefix) is checked, not walked back, on the stored
    ids (`_prefix_apart`): its results answer its own tool_uses, and each of those is
    answered there or by a result still open after the walk (so none waits). Why there is
    nothing to compact is written by `exact` (the exhaustive scan) when the reason is read;
    a history within the budget is told by its token counts alone, before any tool id.

    Returns None (the forward pass, then the exhaustive scan decide) without stored ids, for
    other roles, a result without its tool_use, a tool_use met with no result after it whose
    id is answered somewhere (a result before its tool_use, or the id used twice), a waiting
    tool_use before the cut, or a prefix that is not a history of its own.
    """
    n = len(messages)
    last = n - 1
    if target is None:
        if budget <= 0:
            target = last
        else:
            # Token counts only, first: a history within the budget has nothing to compact
            # whatever its tool ids say (so says the exhaustive scan too), and most short ones
            # are; a longer one pays a second read of the newest messages up to the budget.
            kept = 0
            for m in reversed(messages):
                t = m.tokens
                if t > 0:
                    kept += t
                    if kept >= budget:
                        break
            else:
                return CutPlan([], [], list(messages), None, False, lambda: _reason_of(exact()))
    recent = None  # the last result message's ids walked over, until its tool_uses are met
    opened: set = set()  # other result ids walked over whose tool_use is not met yet
    unanswered: list[str] = []  # tool_uses with no result after them
    waiting_at = n  # the oldest of them
    kept = 0
    cut = -1
    kept_at_cut = 0
    turn_start = -1
    c = n
    for m in reversed(messages):
        c -= 1
        t = m.tokens
        if t > 0:
            kept += t
        role = m.role
        if role == "user":
            ids = m.stored_result_ids
            if ids:
                if recent is not None:
                    opened.update(recent)
                recent = ids
                continue  # never a cut, nor the target (the cut is before it either way)
            if ids is None:
                return None
            start = True
        elif role == "assistant":
            ids = m.stored_use_ids
            if ids:
                # Parallel calls are often answered in another order: compared sorted then.
                # Only with nothing else open: an open result may share an id with them.
                if (
                    recent is not None
                    and not opened
                    and (ids == recent or (len(ids) == len(recent) and sorted(ids) == sorted(recent)))
                ):
                    recent = None
                else:
                    if recent is not None:
                        opened.update(recent)
                        recent = None
                    missing = [tool_id for tool_id in ids if tool_id not in opened]
                    opened.difference_update(ids)
                    if missing:
                        unanswered += missing
                        waiting_at = c
            elif ids is None:
                return None
            start = False
        else:
            return None
        if cut >= 0:  # on to the start of the cut's turn
            if start:
                turn_start = c
                break
            if waiting_at < cut:
                return None  # a tool_use before the cut waits for its result: no cut may come after it
            continue
        if target is None:
            if kept < budget:
                continue
            target = c
        if c > target or c < 1 or opened or recent is not None:
            continue
        cut, kept_at_cut = c, kept
        if start:
            turn_start = c
            break
    if recent is not None:
        opened.update(recent)
    if unanswered and not _waiting(unanswered, messages):
        return None
    prefix = messages[:turn_start] if turn_start > 0 else []
    if prefix:
        if not _prefix_apart(prefix, opened):
            return None
    elif opened:
        return None  # results without their tool_use
    if cut < 0:
        return CutPlan([], [], list(messages), None, False, lambda: _reason_of(exact()))
    if waiting_at < n and cut == waiting_at < last:
        mode = _waiting_mode(mode, messages[cut].seq)
    walked_tokens = kept

    def total() -> int:
        return walked_tokens + sum(t for m in prefix if (t := m.tokens) > 0)

    # Positional: keywords would double the cost of making it (0.25 µs more per short history).
    return _Located(
        cut,
        mode,
        turn_start if turn_start >= 0 else None,
        turn_start >= 1 and not opened,  # turn_start_valid
        kept_at_cut,
        kept if turn_start >= 0 else 0,  # kept_at_turn_start
        total,
    )


def _waiting(unanswered: list[str], messages: list[Msg]) -> bool:
    """The tool_uses met with no result after them have no result anywhere (a result before
    its tool_use, or a second tool_use with the id, is input the exhaustive scan handles).
    Read only when a tool_use waits; result ids stored on another role only make it stricter."""
    try:
        return set(unanswered).isdisjoint(chain.from_iterable(map(_RESULTS, messages)))
    except TypeError:  # ids not stored
        return False


def _prefix_apart(prefix: list[Msg], opened: set) -> bool:
    """What comes before the turn start is a history of its own: its results answer its
    tool_uses, which are all answered there or by the results still open after the walk
    (answered later, so none waits).

    Read forward, a result message nearly always answers exactly the last tool_uses read
    (`pending`, in any order): then one comparison per pair, and the sets of
    `_prefix_apart_sets` hold as well (the results' ids are the tool_uses' ids but for the
    last tool_uses, whose ids are `opened`). Anything else is left to those sets, which hash
    every id: three times the cost (10 µs on a 63-message prefix)."""
    pending: list[str] | tuple[str, ...] = ()
    for m in prefix:
        results = m.stored_result_ids
        uses = m.stored_use_ids
        if results:
            if uses or uses is None or m.role != "user" or (results != pending and sorted(results) != sorted(pending)):
                break
            pending = ()
        elif uses:
            if pending or results is None:
                break
            pending = uses
        elif results is None or uses is None:
            return False  # ids not stored
    else:
        if opened == set(pending):
            return True
    return _prefix_apart_sets(prefix, opened)


def _prefix_apart_sets(prefix: list[Msg], opened: set) -> bool:
    """`_prefix_apart` for any stored ids, with set operations (no message walked)."""
    try:
        result_lists = list(map(_RESULTS, prefix))
        answered = set(chain.from_iterable(result_lists))
        uses = set(chain.from_iterable(map(_USES, prefix)))
    except TypeError:  # ids not stored
        return False
    if not _USER_ONLY.issuperset(map(_ROLE, compress(prefix, result_lists))):
        return False  # results on another role: the exhaustive scan ignores them
    if opened:
        return opened <= uses and answered <= uses and uses <= answered | opened
    return answered == uses


def _reason_of(located: _Located | CutPlan) -> str:
    """The reason the exhaustive scan gives for a history with nothing to compact."""
    if not isinstance(located, CutPlan):
        raise AssertionError("the walk back found nothing to compact where the exhaustive scan found a cut")
    return located.reason


def _locate_fast(
    messages: list[Msg], *, budget: int | None, target: int | None, force: bool, mode: Callable[[], str]
) -> _Located | CutPlan | None:
    """pi's way (findValidCutPoints, then findCutPoint walking back from the newest message):
    one pass reads each message's tool ids once, then a walk back from the end adds up token
    counts until the budget (or `target` messages) is kept, and steps back to the first
    valid cut; the turn start and what is kept from it come from what the pass noted.

    The pass notes, for every message holding tool results, the earliest tool_use it answers:
    cutting at c separates a pair exactly when a result at or after c answers a tool_use
    before c. A tool_use that nothing answers is still waiting for its result: no cut comes
    after it.

    Returns None, and `_locate_exact` decides, for input the API never stores (a result
    without its tool_use before it, duplicate ids, other roles) and for a forced cut that
    needs more than the budget.
    """
    n = len(messages)
    waiting: dict[str, int] = {}  # tool_use id -> its message, until a result answers it
    recent: list[str] | tuple[str, ...] = ()  # the last assistant message's tool_uses, not in `waiting` yet
    recent_at = -1
    results_at: list[int] = []  # messages holding tool results, oldest first
    lows: list[int] = []  # lows[k]: the earliest tool_use answered by message results_at[k]
    starts: list[int] = []  # user turn starts, oldest first
    before_start: list[int] = []  # tokens before each of them
    total = 0
    i = -1
    # Results nearly always answer exactly the tool_uses of the assistant message before them:
    # one list comparison then, and a dict operation per id only otherwise (on long
    # histories the id lookups were most of the time).
    for m in messages:
        i += 1
        role = m.role
        if role == "user":
            ids = m.stored_result_ids
            if ids is None:
                content = m.content
                if content.__class__ is not str:
                    # Plain loops (a comprehension is a call); membership test first: most
                    # blocks are text or thinking and have no such key.
                    for b in content:
                        if "tool_use_id" in b and b.get("type") == "tool_result":
                            if ids is None:
                                ids = []
                            ids.append(b["tool_use_id"])
            if not ids:
                starts.append(i)
                before_start.append(total)
            elif ids == recent or (
                # Parallel calls are often answered in another order: the same ids, each once.
                len(ids) == len(recent) and len(answered := set(ids)) == len(ids) and answered == set(recent)
            ):
                if waiting and not waiting.keys().isdisjoint(recent):
                    return None  # an id used again: the result pairs with the nearer use
                results_at.append(i)
                lows.append(recent_at)
                recent = ()
            else:
                for tool_id in recent:
                    if waiting.setdefault(tool_id, recent_at) != recent_at:
                        return None  # duplicate tool_use id
                recent = ()
                low = n
                for tool_id in ids:
                    a = waiting.pop(tool_id, n)
                    if a == n:
                        return None  # orphan, reversed or duplicate result
                    if a < low:
                        low = a
                results_at.append(i)
                lows.append(low)
        elif role == "assistant":
            ids = m.stored_use_ids
            if ids is None:
                content = m.content
                if content.__class__ is not str:
                    for b in content:
                        if "id" in b and b.get("type") == "tool_use":
                            if ids is None:
                                ids = []
                            ids.append(b["id"])
            if ids:
                for tool_id in recent:
                    if waiting.setdefault(tool_id, recent_at) != recent_at:
                        return None
                recent, recent_at = ids, i
        else:
            return None
        t = m.tokens
        if t > 0:
            total += t
    for tool_id in recent:
        if waiting.setdefault(tool_id, recent_at) != recent_at:
            return None
    last = n - 1
    limit = last
    pending = len(waiting)
    if pending:
        # Tool_uses nothing answered: waiting for their result, unless the id was used again
        # after an answered use (a duplicate: `_locate_exact` sorts that out).
        if any(not waiting.keys().isdisjoint(m.tool_result_ids) for m in messages if m.role == "user"):
            return None
        if any(len(set(m.tool_use_ids)) != len(m.tool_use_ids) for m in messages if m.role == "assistant"):
            return None
        limit = min(waiting.values())

    # Walk back adding token counts until the budget is kept (pi's findCutPoint).
    kept = 0
    if target is None:
        if budget <= 0:
            target = last
            kept = max(0, messages[last].tokens)
        elif total >= budget:  # else no walk meets the budget: the whole history fits
            c = n
            for m in reversed(messages):
                c -= 1
                t = m.tokens
                if t > 0:
                    kept += t
                    if kept >= budget:
                        target = c
                        break
    else:
        kept = sum(t for m in messages[max(target, 0) :] if (t := m.tokens) > 0)
    cut = -1
    if target is not None and target >= 1:
        # Step back from the target to the first valid cut, usually a message or two.
        k = bisect_left(results_at, target + 1)
        min_low = min(lows[k:], default=n)
        c = target
        while c >= 1:
            if k and results_at[k - 1] == c:
                k -= 1
                if lows[k] < min_low:
                    min_low = lows[k]
            elif min_low >= c and c <= limit:
                cut = c
                break
            c -= 1
            t = messages[c].tokens
            if t > 0:
                kept += t
    if cut < 0:
        if force:
            return None  # the minimum valid tail beyond the budget: `_locate_exact`
        return _nothing_reason(
            messages,
            budget=budget,
            target=target,
            mode=mode,
            total=total,
            waiting_at=limit if pending else n,
            any_valid=_any_valid(limit, last, results_at, lows),
        )
    if pending and cut == limit < last:
        mode = _waiting_mode(mode, messages[cut].seq)
    s = bisect_left(starts, cut + 1) - 1
    turn_start = starts[s] if s >= 0 else None
    return _Located(
        cut=cut,
        mode=mode,
        turn_start=turn_start,
        turn_start_valid=turn_start is not None and _valid_at(turn_start, limit, results_at, lows),
        kept_at_cut=kept,
        kept_at_turn_start=total - before_start[s] if s >= 0 else 0,
        total=lambda: total,
    )


def _waiting_mode(mode: Callable[[], str], seq: int) -> Callable[[], str]:
    return lambda: f"{mode()}; the tool_use at seq {seq} is still waiting for its result, so it stays"


def _any_valid(limit: int, last: int, results_at: list[int], lows: list[int]) -> bool:
    """Is there any valid cut (1 <= c <= limit)? Walks back from the newest candidate like the
    budget walk; the newest message is nearly always one."""
    k = len(results_at)
    min_low = last + 1
    for c in range(last, 0, -1):
        if k and results_at[k - 1] == c:
            k -= 1
            if lows[k] < min_low:
                min_low = lows[k]
        elif min_low >= c and c <= limit:
            return True
    return False


def _turn_start_at_or_before(starts: list[int], index: int) -> int | None:
    k = bisect_left(starts, index + 1)
    return starts[k - 1] if k else None


def _valid_at(c: int, limit: int, results_at: list[int], lows: list[int]) -> bool:
    """The kept part may start at message c: not a result, and no result from c on answers a
    tool_use before c (lows: the earliest tool_use each result message answers)."""
    k = bisect_left(results_at, c)
    if k < len(results_at) and results_at[k] == c:
        return False
    return 1 <= c <= limit and min(lows[k:], default=c) >= c


def _nothing_reason(
    messages: list[Msg],
    *,
    budget: int | None,
    target: int | None,
    mode: Callable[[], str],
    total: int,
    waiting_at: int,
    any_valid: bool,
) -> CutPlan:
    """Why there is nothing to compact (unforced), in the order the checks are made."""
    n = len(messages)
    if not any_valid:

        def why() -> str:
            waiting = (
                f"; a tool_use at seq {messages[waiting_at].seq} is still waiting for its result"
                if waiting_at < n - 1
                else ""
            )
            return (
                f"no valid cut point in {n} messages (every position would split a tool_use from its result{waiting})"
            )

        return _nothing(why, messages)
    if budget is None:  # by message count
        if target is None or target <= 0:
            return _nothing(lambda: f"only {n} messages and {mode()}", messages)
    elif not target:
        if total <= budget:
            return _nothing(
                lambda: f"all {n} messages ({_fmt(total)} tokens) fit within keep_recent_tokens={_fmt(budget)}",
                messages,
            )
        return _nothing(
            lambda: f"keeping keep_recent_tokens={_fmt(budget)} needs all {n} messages ({_fmt(total)} tokens)",
            messages,
        )
    return _nothing(lambda: f"meeting the {mode()} requires every message once tool pairs are kept together", messages)


def valid_cut_mask(messages: list[Msg]) -> list[bool]:
    """valid[c]: the kept part may start at message c (c >= 1; index 0 is never a cut)."""
    n = len(messages)
    scan = _scan_exact(messages)
    return [1 <= c <= scan.limit and scan.cuttable[n - 1 - c] for c in range(n)]


def valid_cut_indices(messages: list[Msg]) -> list[int]:
    """Indices where the kept part may start, ascending."""
    return [c for c, ok in enumerate(valid_cut_mask(messages)) if ok]


def _nothing(reason: str | Callable[[], str], messages: list[Msg]) -> CutPlan:
    if isinstance(reason, str):
        return CutPlan([], [], list(messages), None, False, f"nothing to compact: {reason}")
    return CutPlan([], [], list(messages), None, False, lambda: f"nothing to compact: {reason()}")


def _fmt(n: int) -> str:
    return f"{n:,}"


def _locate_exact(
    messages: list[Msg],
    *,
    budget: int,
    max_extra_messages: int | None,
    force: bool,
) -> _Located | CutPlan:
    """Where the cut goes for any input, reading every message (`_locate_fast` falls back here)."""
    n = len(messages)
    scan = _scan_exact(messages)
    last = n - 1
    kept_tokens = scan.kept_tokens  # kept_tokens[last - c] = tokens kept when the cut is at c
    cuttable = scan.cuttable
    limit = scan.limit

    def valid(c: int) -> bool:
        return 1 <= c <= limit and cuttable[last - c]

    if limit < 1 or not any(cuttable[last - limit : last]):
        waiting_at = limit if scan.pending else n
        return _nothing_reason(
            messages, budget=None, target=None, mode=str, total=0, waiting_at=waiting_at, any_valid=False
        )
    total = scan.total
    starts = scan.starts  # newest first

    if max_extra_messages is not None:
        preserve_messages = max_extra_messages
        target = n - preserve_messages
        if target <= 0:
            return _nothing(f"only {n} messages and preserve_messages={preserve_messages}", messages)
        mode = f"preserve_messages={preserve_messages}"
    else:
        # Largest c whose kept tokens meet the budget (c = n - 1 at least: keep one message);
        # kept_tokens only grows walking back, so a bisection finds it.
        k = bisect_left(kept_tokens, budget)
        target = last - k if k < n else 0
        if target == 0 or kept_tokens[last - target] < budget:
            if not force:
                if total <= budget:
                    why = f"all {n} messages ({_fmt(total)} tokens) fit within keep_recent_tokens={_fmt(budget)}"
                else:
                    why = f"keeping keep_recent_tokens={_fmt(budget)} needs all {n} messages ({_fmt(total)} tokens)"
                return _nothing(why, messages)
            # Forced with everything inside the budget: still compact, keeping the last turn.
            target = starts[0] if starts and starts[0] > 0 else last
            mode = f"forced; all {_fmt(total)} tokens fit in the {_fmt(budget)}-token budget"
        else:
            mode = f"{'forced, ' if force else ''}keep budget {_fmt(budget)} tokens"

    # The latest valid cut at or before the target keeps at least the budget.
    cut = next((c for c in range(min(target, limit), 0, -1) if cuttable[last - c]), None)
    if cut is None:
        if not force:
            return _nothing(
                f"meeting the {mode} requires every message once tool pairs are kept together",
                messages,
            )
        # Forced: keep as little as possible beyond the target instead.
        cut = next(c for c in range(target + 1, limit + 1) if cuttable[last - c])
        mode += "; minimum valid tail"
    if scan.pending and cut == limit < last:
        mode += f"; the tool_use at seq {messages[cut].seq} is still waiting for its result, so it stays"
    turn_start = next((s for s in starts if s <= cut), None)
    text = mode
    return _Located(
        cut=cut,
        mode=lambda: text,
        turn_start=turn_start,
        turn_start_valid=turn_start is not None and valid(turn_start),
        kept_at_cut=kept_tokens[last - cut],
        kept_at_turn_start=kept_tokens[last - turn_start] if turn_start is not None else 0,
        total=lambda: total,
    )


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
    - A tool_use with no result yet is never summarized, whatever the budget: its result,
      appended later, would be served without it.
    """
    n = len(messages)
    if n < MIN_MESSAGES:
        return _nothing(f"only {n} message{'s' if n != 1 else ''}", messages)
    if force:
        budget = int(context_window * FORCE_KEEP_SHARE) if context_window else keep_recent_tokens
    else:
        budget = keep_recent_tokens
    # Force (overflow) always cuts by tokens: a preserved message count can be arbitrarily large.
    if preserve_messages is not None and preserve_messages > 0 and not force:
        # Moving back to the turn start may keep up to twice the requested messages.
        max_extra_messages = preserve_messages
        by_budget, target = None, n - preserve_messages

        def mode() -> str:
            return f"preserve_messages={preserve_messages}"

    else:
        max_extra_messages = None
        by_budget, target = budget, None

        def mode() -> str:
            return f"{'forced, ' if force else ''}keep budget {_fmt(budget)} tokens"

    def exact() -> _Located | CutPlan:
        return _locate_exact(messages, budget=budget, max_extra_messages=max_extra_messages, force=force)

    # The walk back only, as pi; then one forward pass; then every message read, for the
    # input (and forced cuts) the quicker ones leave to the next.
    located = None if force else _locate_back(messages, budget=by_budget, target=target, mode=mode, exact=exact)
    if located is None:
        located = _locate_fast(messages, budget=by_budget, target=target, force=force, mode=mode)
    if located is None:
        located = exact()
    if isinstance(located, CutPlan):
        return located
    return _plan(messages, located, budget, force, context_window, max_extra_messages)


def _plan(
    messages: list[Msg],
    located: _Located,
    budget: int,
    force: bool,
    context_window: int | None,
    max_extra_messages: int | None,
) -> CutPlan:
    cut, mode, turn_start, turn_start_valid, kept_at_cut, kept_at_turn_start, total = located
    # Prefer the start of the turn the cut landed in.
    if turn_start is not None and turn_start < cut and turn_start_valid:
        if max_extra_messages is not None:
            acceptable = cut - turn_start <= max_extra_messages
        else:
            acceptable = kept_at_turn_start <= _max_keep(budget, force, context_window)
        if acceptable:
            cut = turn_start
            kept_at_cut = kept_at_turn_start

    def why() -> str:
        return _cut_reason(messages, cut, turn_start, kept_at_cut, mode, total)

    if turn_start is not None and cut - turn_start >= SPLIT_TURN_MIN_PREFIX:
        # A split turn: the history before the turn and the turn's prefix are summarized apart.
        return CutPlan(messages[:turn_start], messages[turn_start:cut], messages[cut:], messages[cut].seq, True, why)
    return CutPlan(messages[:cut], [], messages[cut:], messages[cut].seq, False, why)


def _max_keep(budget: int, force: bool, context_window: int | None) -> int:
    """The most tokens a move back to the turn start may keep (asked only when there is one)."""
    if not force:
        return budget + int(max(0, budget) * TURN_START_SLACK)
    max_keep = int(context_window * FORCE_MAX_KEEP_SHARE) if context_window else int(budget * (1 + TURN_START_SLACK))
    return max(max_keep, budget)


def _cut_reason(
    messages: list[Msg],
    cut: int,
    turn_start: int | None,
    kept_tokens: int,
    mode: Callable[[], str],
    total: Callable[[], int],
) -> str:
    kept = f"keeping {len(messages) - cut} messages ({_fmt(kept_tokens)} tokens) from seq {messages[cut].seq}"
    if cut == turn_start:  # at a user turn start (the last one at or before the cut)
        return (
            f"cut at a user turn start ({mode()}): summarizing {cut} messages "
            f"({_fmt(total() - kept_tokens)} tokens), {kept}"
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
