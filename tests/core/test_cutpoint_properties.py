"""Property tests: for random histories with tool pairs the cut never breaks a pair."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core import cutpoint
from compaction.core.cutpoint import SPLIT_TURN_MIN_PREFIX, plan_cut, valid_cut_indices
from compaction.core.types import Msg
from tests.core.test_cutpoint import assert_plan_invariants

tokens = st.integers(min_value=1, max_value=3000)


@st.composite
def histories(draw) -> list[Msg]:
    """User turns; assistant messages with 0..3 parallel tool_uses; results in the
    following user message(s), sometimes spread over several; sometimes a pending call at
    the end, or one still waiting while the conversation goes on (issue 9 D1); sometimes a
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
    served without it (issue 9 D1)."""
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
    """Input the API never stores, which the walk back must hand over rather than misplan:
    swapped messages (results before their tool_use), duplicated or forgotten ids, orphan
    results, other roles, result ids stored on an assistant message."""
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


def _plans_alike(monkeypatch, messages: list[Msg], kwargs: dict, *, tiers: tuple[str, ...]) -> None:
    """plan_cut as it runs equals plan_cut with the quicker `tiers` switched off (reasons included)."""
    walked = plan_cut(messages, **kwargs)
    for name in tiers:
        monkeypatch.setattr(cutpoint, name, lambda *args, **kw: None)
    try:
        slower = plan_cut(messages, **kwargs)
    finally:
        monkeypatch.undo()
    assert walked == slower


cut_arguments = dict(
    keep=st.integers(min_value=0, max_value=40_000),
    force=st.booleans(),
    window=st.integers(min_value=1_000, max_value=200_000),
    preserve=st.one_of(st.none(), st.integers(min_value=1, max_value=30)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), stored_ids=st.booleans(), **cut_arguments)
def test_walk_back_plans_as_the_exhaustive_scan(
    monkeypatch_module, messages: list[Msg], keep: int, force: bool, window: int, preserve: int | None, stored_ids: bool
) -> None:
    """The walk back (`_locate_back`, then the forward pass `_locate_fast`) decides exactly
    as reading every message does."""
    if stored_ids:
        messages = _with_stored_ids(messages)
    kwargs = dict(keep_recent_tokens=keep, force=force, context_window=window, preserve_messages=preserve)
    _plans_alike(monkeypatch_module, messages, kwargs, tiers=("_locate_back", "_locate_fast"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=histories(), **cut_arguments)
def test_forward_pass_plans_as_the_exhaustive_scan(
    monkeypatch_module, messages: list[Msg], keep: int, force: bool, window: int, preserve: int | None
) -> None:
    """The forward pass alone (what runs when the walk back hands over) decides as the scan."""
    kwargs = dict(keep_recent_tokens=keep, force=force, context_window=window, preserve_messages=preserve)
    monkeypatch_module.setattr(cutpoint, "_locate_back", lambda *args, **kw: None)
    try:
        walked = plan_cut(_with_stored_ids(messages), **kwargs)
    finally:
        monkeypatch_module.undo()
    monkeypatch_module.setattr(cutpoint, "_locate_back", lambda *args, **kw: None)
    monkeypatch_module.setattr(cutpoint, "_locate_fast", lambda *args, **kw: None)
    try:
        exhaustive = plan_cut(_with_stored_ids(messages), **kwargs)
    finally:
        monkeypatch_module.undo()
    assert walked == exhaustive


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), messages=histories(), **cut_arguments)
def test_walk_back_on_damaged_input_plans_as_the_exhaustive_scan(
    monkeypatch_module, data, messages: list[Msg], keep: int, force: bool, window: int, preserve: int | None
) -> None:
    """Whatever the stored ids say, the walk back plans as the exhaustive scan (it hands over
    what it cannot vouch for)."""
    messages = data.draw(damaged(_with_stored_ids(messages)))
    kwargs = dict(keep_recent_tokens=keep, force=force, context_window=window, preserve_messages=preserve)
    _plans_alike(monkeypatch_module, messages, kwargs, tiers=("_locate_back", "_locate_fast"))


@pytest.fixture(scope="module")
def monkeypatch_module():
    # Hypothesis runs many examples per test call: a function-scoped monkeypatch would be shared.
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _msg(seq: int, role: str, uses: list[str] = (), results: list[str] = (), tokens: int = 100) -> Msg:
    blocks = [{"type": "text", "text": "x"}]
    blocks += [{"type": "tool_use", "id": i, "name": "Read", "input": {}} for i in uses]
    blocks += [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in results]
    return Msg(seq, role, blocks, tokens, list(uses), list(results))


# Histories whose stored ids repeat an id where the walk back's one-comparison shortcut would
# not see it: each must be planned as the exhaustive scan plans it, at every budget.
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
def test_walk_back_with_repeated_ids_plans_as_the_exhaustive_scan(monkeypatch, name: str) -> None:
    messages = REPEATED_IDS[name]
    for keep in range(0, 100 * len(messages) + 100, 50):
        for preserve in (None, 1, 3):
            kwargs = dict(keep_recent_tokens=keep, preserve_messages=preserve)
            _plans_alike(monkeypatch, messages, kwargs, tiers=("_locate_back", "_locate_fast"))
