"""Property tests: for random histories with tool pairs the cut never breaks a pair, and
`plan_cut` decides as a plain reference written from the rules in its module docstring."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.cutpoint import SPLIT_TURN_MIN_PREFIX, plan_cut, valid_cut_indices
from compaction.core.types import Msg
from tests.core.test_cutpoint import assert_plan_invariants

tokens = st.integers(min_value=1, max_value=3000)


@st.composite
def histories(draw) -> list[Msg]:
    """User turns; assistant messages with 0..3 parallel tool_uses; results in the
    following user message(s), sometimes spread over several; sometimes a pending call at
    the end, or one still waiting while the conversation goes on; sometimes a
    history that begins mid-turn (after an earlier split)."""
    messages: list[Msg] = []
    counter = 0

    def add(role: str, content, size: int) -> None:
        messages.append(Msg(seq=1000 + len(messages), role=role, content=content, tokens=size))

    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        add("user", [{"type": "text", "text": "do something"}], draw(tokens))
        for _ in range(draw(st.integers(min_value=0, max_value=6))):
            ids = []
            for _ in range(draw(st.integers(min_value=0, max_value=3))):
                counter += 1
                ids.append(f"toolu_{counter}")
            blocks = [{"type": "text", "text": "thinking aloud"}] + [
                {"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": f"/src/{i}.py"}} for i in ids
            ]
            add("assistant", blocks, draw(tokens))
            if not ids:
                continue
            if draw(st.integers(min_value=0, max_value=15)) == 0:
                continue  # a slow tool: its result has not arrived, the conversation goes on
            if draw(st.booleans()):
                groups = [ids]
            else:
                groups = [[i] for i in ids]
            for n, group in enumerate(groups):
                if n and draw(st.integers(min_value=0, max_value=3)) == 0:
                    # Something lands between a tool_use and a later result: an assistant
                    # line of the same streamed response, or a user interjection.
                    if draw(st.booleans()):
                        add("assistant", [{"type": "text", "text": "while waiting"}], draw(tokens))
                    else:
                        add("user", "stop, use the other file", draw(tokens))
                add("user", [{"type": "tool_result", "tool_use_id": i, "content": "..."} for i in group], draw(tokens))
        if draw(st.booleans()):
            add("assistant", [{"type": "text", "text": "done"}], draw(tokens))
    if draw(st.booleans()):
        counter += 1
        add("assistant", [{"type": "tool_use", "id": f"toolu_{counter}", "name": "Bash", "input": {}}], draw(tokens))
    if len(messages) > 1 and draw(st.booleans()):
        # Begin mid-turn, as after an earlier split-turn compaction; drop any results
        # whose tool_use fell away so the input itself has no orphans.
        start = draw(st.integers(min_value=1, max_value=len(messages) - 1))
        while start < len(messages) and messages[start].is_tool_result:
            start += 1
        messages = messages[start:] or messages[-1:]
        used = {i for m in messages for i in m.tool_use_ids}
        messages = [m for m in messages if set(m.tool_result_ids) <= used] or messages[-1:]
    return messages


def _kept_and_summarized_ids(plan):
    return (
        {i for m in plan.kept for i in m.tool_result_ids},
        {i for m in plan.kept for i in m.tool_use_ids},
        {i for m in plan.to_summarize + plan.turn_prefix for i in m.tool_use_ids},
        {i for m in plan.to_summarize + plan.turn_prefix for i in m.tool_result_ids},
    )


def check_waiting_tool_uses_kept(plan, messages) -> None:
    """A tool_use with no result yet is never summarized: its result, appended later, would be
    served without it."""
    answered = {i for m in messages for i in m.tool_result_ids}
    assert not {i for m in plan.summarized for i in m.tool_use_ids} - answered


def check_pairs(plan, messages) -> None:
    kept_results, kept_uses, summarized_uses, summarized_results = _kept_and_summarized_ids(plan)
    all_results = {i for m in messages for i in m.tool_result_ids}
    # The kept part never starts with, nor contains, an orphan tool_result.
    assert not plan.kept[0].is_tool_result
    assert kept_results <= kept_uses
    # No tool_use in kept lacks its result when that result exists.
    assert {i for i in kept_uses if i in all_results} <= kept_results
    assert not (summarized_uses & kept_results)
    assert not (summarized_results & kept_uses)
    check_waiting_tool_uses_kept(plan, messages)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), keep=st.integers(min_value=0, max_value=40_000))
def test_token_budget_cut(messages: list[Msg], keep: int) -> None:
    plan = plan_cut(messages, keep_recent_tokens=keep)
    assert_plan_invariants(plan, messages)
    if plan.nothing_to_compact:
        return
    check_pairs(plan, messages)
    # Kept tokens meet the budget (otherwise the whole history would have been kept).
    assert plan.kept_tokens >= keep
    assert plan.split_turn == (len(plan.turn_prefix) >= SPLIT_TURN_MIN_PREFIX)
    assert plan.first_kept_seq in {messages[c].seq for c in valid_cut_indices(messages)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), preserve=st.integers(min_value=1, max_value=30))
def test_preserve_messages_cut(messages: list[Msg], preserve: int) -> None:
    plan = plan_cut(messages, keep_recent_tokens=0, preserve_messages=preserve)
    assert_plan_invariants(plan, messages)
    if plan.nothing_to_compact:
        return
    check_pairs(plan, messages)
    assert len(plan.kept) >= preserve


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=histories(),
    keep=st.integers(min_value=0, max_value=40_000),
    window=st.integers(min_value=1_000, max_value=200_000),
)
def test_forced_cut(messages: list[Msg], keep: int, window: int) -> None:
    plan = plan_cut(messages, keep_recent_tokens=keep, force=True, context_window=window)
    assert_plan_invariants(plan, messages)
    if plan.nothing_to_compact:
        # Forced compaction only gives up when no valid cut exists at all.
        assert not valid_cut_indices(messages)
        return
    check_pairs(plan, messages)
    valid = valid_cut_indices(messages)
    first_kept_index = messages.index(plan.kept[0])
    budget = window // 5
    if plan.kept_tokens > int(window * 0.35):
        # Keeping more than the force cap is only allowed when no later valid cut meets the
        # budget, i.e. this is the minimum valid tail that does.
        later = [c for c in valid if c > first_kept_index]
        assert all(sum(m.tokens for m in messages[c:]) < budget for c in later)


def _with_stored_ids(messages: list[Msg]) -> list[Msg]:
    """As the service hands messages over: every message with both id lists, as stored."""
    return [
        Msg(m.seq, m.role, m.content, m.tokens, m.tool_use_ids if m.role == "assistant" else [], m.tool_result_ids)
        for m in messages
    ]


@st.composite
def damaged(draw, messages: list[Msg]) -> list[Msg]:
    """Input the API never stores, which must still be planned by the rules: swapped messages
    (results before their tool_use), duplicated or forgotten ids, orphan results, other roles,
    result ids stored on an assistant message."""
    messages = list(messages)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(messages) - 1))
        j = draw(st.integers(min_value=0, max_value=len(messages) - 1))
        m, other = messages[i], messages[j]
        uses, results = list(m.stored_use_ids or []), list(m.stored_result_ids or [])
        foreign = [*(other.stored_use_ids or []), *(other.stored_result_ids or []), "toolu_x"]
        kind = draw(st.sampled_from(["swap", "copy_id", "drop_id", "role", "drop", "ids_on_assistant"]))
        if kind == "swap":
            messages[i], messages[j] = other, m
            continue
        if kind == "drop":
            if len(messages) > 2:
                del messages[i]
            continue
        role = m.role
        if kind == "copy_id":
            (uses if m.role == "assistant" else results).append(draw(st.sampled_from(foreign)))
        elif kind == "drop_id":
            if uses:
                uses.pop(draw(st.integers(min_value=0, max_value=len(uses) - 1)))
            elif results:
                results.pop(draw(st.integers(min_value=0, max_value=len(results) - 1)))
        elif kind == "role":
            role = draw(st.sampled_from(["system", "user", "assistant"]))
        elif kind == "ids_on_assistant":
            results.append(draw(st.sampled_from(foreign)))
        messages[i] = Msg(m.seq, role, m.content, m.tokens, uses, results)
    return messages


# --- A reference planner, written from the rules in cutpoint's docstring as plainly as possible
# (quadratic: every rule checked at every position). plan_cut must decide as it does.


def reference_pairs(messages: list[Msg]) -> list[tuple[int, int]]:
    """(tool_use message, tool_result message) for every result: the nearest assistant message
    before it that carries its id, else the first one after it; a result no tool_use carries
    pairs with nothing."""
    pairs = []
    for j, m in enumerate(messages):
        if m.role != "user":
            continue
        for tool_id in m.tool_result_ids:
            uses = [a for a, u in enumerate(messages) if u.role == "assistant" and tool_id in u.tool_use_ids]
            before = [a for a in uses if a < j]
            if uses:
                pairs.append((before[-1] if before else uses[0], j))
    return pairs


def reference_waiting(messages: list[Msg]) -> list[int]:
    """Assistant messages carrying a tool_use that no result answers anywhere."""
    answered = {i for m in messages if m.role == "user" for i in m.tool_result_ids}
    return [a for a, m in enumerate(messages) if m.role == "assistant" and set(m.tool_use_ids) - answered]


def reference_valid(messages: list[Msg]) -> list[int]:
    """Where the kept part may start: a user or assistant message that is not a tool_result
    message, splits no pair, and comes after no waiting tool_use (the first one may itself
    start the kept part)."""
    pairs = reference_pairs(messages)
    waiting = reference_waiting(messages)
    return [
        c
        for c, m in enumerate(messages)
        if c >= 1
        and m.role in ("user", "assistant")
        and not m.is_tool_result
        and not any(min(a, j) < c <= max(a, j) for a, j in pairs)
        and (not waiting or c <= waiting[0])
    ]


def reference_plan(messages: list[Msg], keep: int, preserve: int | None, force: bool, window: int | None) -> tuple:
    """(first kept seq or None, turn prefix length, phrases the reason must hold)."""
    n = len(messages)
    if n < 2:
        return None, 0, ["nothing to compact: only"]
    budget = int(window * 0.2) if force and window else keep
    preserve = preserve if preserve and preserve > 0 and not force else None
    valid = reference_valid(messages)
    if not valid:
        return None, 0, ["nothing to compact: no valid cut point"]

    def kept(c: int) -> int:
        return sum(max(0, m.tokens) for m in messages[c:])

    starts = [i for i, m in enumerate(messages) if m.is_user_turn_start]
    notes = []
    if preserve:
        target = n - preserve
        if target < 1:
            return None, 0, [f"only {n} messages and preserve_messages={preserve}"]
    else:
        target = max((c for c in range(1, n) if kept(c) >= budget), default=0)
        if target < 1 and not force:
            return None, 0, ["fit within" if kept(0) <= budget else "needs all"]
        if target < 1:  # forced, and everything fits: keep the last user turn
            target = starts[-1] if starts and starts[-1] > 0 else n - 1
            notes.append("tokens fit in the")
    cut = max((c for c in valid if c <= target), default=None)
    if cut is None and not force:
        return None, 0, ["requires every message once tool pairs are kept together"]
    if cut is None:
        cut = min(c for c in valid if c > target)
        notes.append("minimum valid tail")
    waiting = reference_waiting(messages)
    if waiting and cut == waiting[0] < n - 1:
        notes.append("still waiting for its result, so it stays")
    turn_start = max((s for s in starts if s <= cut), default=None)
    if turn_start is not None and turn_start < cut and turn_start in valid:
        if preserve:
            fits = cut - turn_start <= preserve
        elif not force:
            fits = kept(turn_start) <= budget + int(max(0, budget) * 0.5)
        else:
            fits = kept(turn_start) <= max(int(window * 0.35) if window else int(budget * 1.5), budget)
        if fits:
            cut = turn_start
    prefix = cut - turn_start if turn_start is not None and cut - turn_start >= SPLIT_TURN_MIN_PREFIX else 0
    if cut == turn_start:
        notes.append("cut at a user turn start")
    elif turn_start is None:
        notes.append("the turn began before this history")
    else:
        notes.append("split turn" if prefix else "summarized with the history")
    return messages[cut].seq, prefix, notes


def check_against_reference(messages: list[Msg], **kwargs) -> None:
    plan = plan_cut(messages, **kwargs)
    seq, prefix, phrases = reference_plan(
        messages,
        kwargs["keep_recent_tokens"],
        kwargs.get("preserve_messages"),
        kwargs.get("force", False),
        kwargs.get("context_window"),
    )
    assert (plan.first_kept_seq, len(plan.turn_prefix)) == (seq, prefix), plan.reason
    for phrase in phrases:
        assert phrase in plan.reason
    assert valid_cut_indices(messages) == reference_valid(messages)


cut_arguments = dict(
    keep=st.integers(min_value=0, max_value=40_000),
    force=st.booleans(),
    window=st.one_of(st.none(), st.integers(min_value=1_000, max_value=200_000)),
    preserve=st.one_of(st.none(), st.integers(min_value=0, max_value=30)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), stored_ids=st.booleans(), **cut_arguments)
def test_plans_as_the_reference(
    messages: list[Msg], keep: int, force: bool, window: int | None, preserve: int | None, stored_ids: bool
) -> None:
    """Tool ids read from the blocks or as stored beside them, plan_cut decides as the rules say."""
    if stored_ids:
        messages = _with_stored_ids(messages)
    kwargs = dict(keep_recent_tokens=keep, force=force, context_window=window, preserve_messages=preserve)
    check_against_reference(messages, **kwargs)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), messages=histories(), **cut_arguments)
def test_plans_damaged_input_as_the_reference(
    data, messages: list[Msg], keep: int, force: bool, window: int | None, preserve: int | None
) -> None:
    """Input the API never stores (results before their tool_use, repeated or missing ids, other
    roles, result ids on an assistant message) is planned by the same rules."""
    messages = data.draw(damaged(_with_stored_ids(messages)))
    kwargs = dict(keep_recent_tokens=keep, force=force, context_window=window, preserve_messages=preserve)
    check_against_reference(messages, **kwargs)


def _msg(seq: int, role: str, uses: list[str] = (), results: list[str] = (), tokens: int = 100) -> Msg:
    blocks = [{"type": "text", "text": "x"}]
    blocks += [{"type": "tool_use", "id": i, "name": "Read", "input": {}} for i in uses]
    blocks += [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in results]
    return Msg(seq, role, blocks, tokens, list(uses), list(results))


# Histories whose stored ids repeat an id, where pairing results with the tool_uses just before
# them would go wrong: each must be planned by the rules, at every budget.
REPEATED_IDS = {
    "a tool_use id answered earlier, used again later": [
        _msg(1, "user"),
        _msg(2, "assistant", uses=["a"]),
        _msg(3, "user", results=["a"]),
        _msg(4, "assistant"),
        _msg(5, "user"),
        _msg(6, "assistant", uses=["a"]),
        _msg(7, "assistant"),
        _msg(8, "user"),
        _msg(9, "assistant"),
    ],
    "one result id twice, spread over two messages": [
        _msg(1, "user"),
        _msg(2, "assistant", uses=["a", "b"]),
        _msg(3, "user", results=["a"]),
        _msg(4, "assistant"),
        _msg(5, "user", results=["b", "a"]),
        _msg(6, "assistant"),
        _msg(7, "user"),
        _msg(8, "assistant"),
    ],
    "a result naming an id used twice, the first use unanswered (found by the damaged-input test)": [
        _msg(1, "assistant", uses=["a"]),
        _msg(2, "assistant", uses=["b", "c"]),
        _msg(3, "user", results=["b"]),
        _msg(4, "user", results=["c"]),
        _msg(5, "assistant", uses=["a"]),
        _msg(6, "user", results=["a"]),
        _msg(7, "user"),
        _msg(8, "assistant", uses=["d"]),
        _msg(9, "user", results=["d", "a"]),
    ],
    "one tool_use id in two unanswered calls": [
        _msg(1, "user"),
        _msg(2, "assistant", uses=["a"]),
        _msg(3, "user", results=["a"]),
        _msg(4, "assistant", uses=["w"]),
        _msg(5, "user"),
        _msg(6, "assistant", uses=["w", "c"]),
        _msg(7, "user", results=["c"]),
        _msg(8, "assistant"),
    ],
}


@pytest.mark.parametrize("name", sorted(REPEATED_IDS))
def test_repeated_ids_plan_as_the_reference(name: str) -> None:
    messages = REPEATED_IDS[name]
    for keep in range(0, 100 * len(messages) + 100, 50):
        for preserve in (None, 1, 3):
            for force in (False, True):
                kwargs = dict(keep_recent_tokens=keep, preserve_messages=preserve, force=force, context_window=keep * 5)
                check_against_reference(messages, **kwargs)
