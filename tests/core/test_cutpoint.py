"""Example tests for the cut point: small histories drawn out in comments, and every reason text."""

from __future__ import annotations

from compaction.core.cutpoint import (
    SPLIT_TURN_MIN_PREFIX,
    CutPlan,
    plan_cut,
    valid_cut_indices,
)
from compaction.core.types import Msg


def turn_starts(messages: list[Msg]) -> list[int]:
    """Indices of real user messages (user turns), oldest first."""
    return [i for i, m in enumerate(messages) if m.is_user_turn_start]


class History:
    """Builds Anthropic-shaped histories; seqs start at 101 so index/seq mix-ups show."""

    def __init__(self, first_seq: int = 101) -> None:
        self.messages: list[Msg] = []
        self.first_seq = first_seq
        self._tool = 0

    def _add(self, role: str, content, tokens: int) -> Msg:
        msg = Msg(seq=self.first_seq + len(self.messages), role=role, content=content, tokens=tokens)
        self.messages.append(msg)
        return msg

    def user(self, tokens: int = 10, text: str = "please do it") -> Msg:
        return self._add("user", text, tokens)

    def assistant(self, tokens: int = 10, tools: int = 0, text: str = "ok") -> list[str]:
        ids = []
        blocks: list[dict] = [{"type": "text", "text": text}]
        for _ in range(tools):
            self._tool += 1
            tool_id = f"toolu_{self._tool:04d}"
            ids.append(tool_id)
            blocks.append({"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": "ls"}})
        self._add("assistant", blocks, tokens)
        return ids

    def results(self, ids: list[str], tokens: int = 10) -> Msg:
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": "output"} for i in ids]
        return self._add("user", blocks, tokens)

    def tool_round(self, use_tokens: int = 10, result_tokens: int = 10, tools: int = 1) -> None:
        self.results(self.assistant(use_tokens, tools=tools), result_tokens)


def seqs(messages: list[Msg]) -> list[int]:
    return [m.seq for m in messages]


def assert_plan_invariants(plan: CutPlan, messages: list[Msg]) -> None:
    """What must hold for every plan (shared with the property tests)."""
    assert plan.to_summarize + plan.turn_prefix + plan.kept == messages
    if plan.nothing_to_compact:
        assert plan.kept == messages and not plan.to_summarize and not plan.turn_prefix
        assert plan.reason.startswith("nothing to compact")
        assert not plan.split_turn
        return
    assert plan.kept, "a compaction always keeps at least one message"
    assert plan.first_kept_seq == plan.kept[0].seq
    assert plan.summarized, "a compaction summarizes at least one message"
    assert not plan.kept[0].is_tool_result
    summarized_uses = {i for m in plan.summarized for i in m.tool_use_ids}
    summarized_results = {i for m in plan.summarized for i in m.tool_result_ids}
    kept_uses = {i for m in plan.kept for i in m.tool_use_ids}
    kept_results = {i for m in plan.kept for i in m.tool_result_ids}
    assert not (kept_results & summarized_uses), "kept tool_result whose tool_use is summarized"
    assert not (kept_uses & summarized_results), "kept tool_use whose result is summarized"
    assert plan.split_turn == bool(plan.turn_prefix)
    if plan.split_turn:
        assert len(plan.turn_prefix) >= SPLIT_TURN_MIN_PREFIX
        assert plan.turn_prefix[0].is_user_turn_start
        assert not any(m.is_user_turn_start for m in plan.turn_prefix[1:])
        assert not plan.kept[0].is_user_turn_start
    if not plan.kept[0].is_user_turn_start:
        # Mid-turn cut: the prefix of the turn is either split off (>= 5) or short.
        start = max(
            (i for i, m in enumerate(messages) if m.is_user_turn_start and m.seq < plan.kept[0].seq), default=None
        )
        if start is not None:
            prefix = messages.index(plan.kept[0]) - start
            assert plan.split_turn == (prefix >= SPLIT_TURN_MIN_PREFIX)


def test_cut_falls_on_a_user_boundary() -> None:
    # [user] [assistant/tools] [user] [assistant/tools] [user] [assistant]
    h = History()
    h.user(100)
    h.tool_round(100, 100)
    h.assistant(100)
    h.user(100)
    h.tool_round(100, 100)
    h.assistant(100)
    third_user = h.user(100)
    h.assistant(100)
    plan = plan_cut(h.messages, keep_recent_tokens=150)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == third_user.seq
    assert not plan.split_turn
    assert len(plan.to_summarize) == 8 and len(plan.kept) == 2
    assert "user turn start" in plan.reason


def test_cut_keeps_the_last_turns_whole() -> None:
    # [0] user, [1] asst+tool_use, [2] result, [3] user, [4] asst+tool_use, [5] result,
    # [6] user, [7] asst+tool_use, [8] result | [9] user, [10] asst tool_use(Bash),
    # [11] result, [12] user, [13] assistant
    h = History(first_seq=0)
    for _ in range(3):
        h.user(50)
        h.tool_round(50, 50)
    h.user(50)
    h.tool_round(50, 50)
    h.user(50)
    h.assistant(50)
    plan = plan_cut(h.messages, keep_recent_tokens=250)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == 9
    assert seqs(plan.to_summarize) == list(range(9))
    assert seqs(plan.kept) == list(range(9, 14))


def test_never_cuts_at_a_tool_result() -> None:
    # The budget walk lands on [8] (a tool_result): the cut moves to include its tool_use.
    h = History(first_seq=0)
    h.user(10)
    h.tool_round(10, 10)
    h.user(10)
    h.assistant(10)
    h.user(10)
    h.tool_round(10, 10)  # [6] asst+tool_use, [7] result
    h.assistant(10)  # [8]
    h.user(10)  # [9]
    h.tool_round(10, 200)  # [10] asst, [11] big result
    plan = plan_cut(h.messages, keep_recent_tokens=205)
    assert_plan_invariants(plan, h.messages)
    # Walking back: [11] = 200 < 205, so [10] is needed; [10] is an assistant message,
    # the turn start [9] is within the slack, so the whole turn is kept.
    assert plan.first_kept_seq == 9
    assert 11 not in valid_cut_indices(h.messages)


def test_cut_moves_off_a_tool_result_to_its_tool_use() -> None:
    h = History(first_seq=0)
    h.user(10)
    h.assistant(10)
    h.user(1000)  # [2] big turn start: moving back to it would blow the slack
    ids = h.assistant(10, tools=1)  # [3]
    h.results(ids, 50)  # [4]
    h.assistant(10)  # [5]
    plan = plan_cut(h.messages, keep_recent_tokens=55)
    assert_plan_invariants(plan, h.messages)
    # Budget reached at [4] (the result): the cut moves back to [3], the tool_use.
    assert plan.first_kept_seq == 3
    assert not plan.split_turn  # prefix [2] is a single message: clean cut
    assert seqs(plan.to_summarize) == [0, 1, 2]


def test_long_turn_is_a_split_turn() -> None:
    # One user request followed by 30 assistant + tool messages.
    h = History()
    h.user(100, "first request")
    h.assistant(100)
    turn = h.user(100, "refactor everything")
    for _ in range(15):
        h.tool_round(100, 100)
    plan = plan_cut(h.messages, keep_recent_tokens=1000)
    assert_plan_invariants(plan, h.messages)
    assert plan.split_turn
    assert seqs(plan.to_summarize) == [101, 102]
    assert plan.turn_prefix[0] == turn
    assert plan.kept[0].role == "assistant"
    assert plan.kept_tokens >= 1000
    assert "split turn" in plan.reason


def test_short_turn_prefix_is_a_clean_cut_into_history() -> None:
    h = History()
    h.user(10)
    h.assistant(10)
    turn = h.user(5000)  # too big to move the cut back to it
    h.tool_round(10, 10)  # prefix: user, asst, result = 3 messages
    h.tool_round(10, 10)
    h.tool_round(10, 100)
    plan = plan_cut(h.messages, keep_recent_tokens=130)
    assert_plan_invariants(plan, h.messages)
    assert not plan.split_turn and plan.turn_prefix == []
    assert turn in plan.to_summarize
    assert plan.kept[0].role == "assistant"
    # 5 prefix messages (user + 2 rounds) → split
    plan = plan_cut(h.messages, keep_recent_tokens=110)
    assert_plan_invariants(plan, h.messages)
    assert plan.split_turn and len(plan.turn_prefix) == 5


def test_prefers_turn_start_within_slack() -> None:
    h = History()
    h.user(10)
    h.assistant(10)
    start = h.user(10)
    for _ in range(6):
        h.tool_round(10, 10)
    # kept needs 60 tokens; whole turn is 130 <= 1.5 × 100
    plan = plan_cut(h.messages, keep_recent_tokens=100)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == start.seq and not plan.split_turn


def test_parallel_tool_calls_with_results_spread_over_messages() -> None:
    h = History(first_seq=0)
    h.user(10)
    h.assistant(10)
    h.user(10)  # [2]
    a, b, c = h.assistant(10, tools=3)  # [3]
    h.results([a], 10)  # [4]
    h.assistant(10)  # [5] an assistant message between results (bad ordering, still handled)
    h.results([b], 10)  # [6]
    h.results([c], 10)  # [7]
    h.assistant(10)  # [8]
    valid = valid_cut_indices(h.messages)
    assert 4 not in valid and 5 not in valid and 6 not in valid and 7 not in valid
    assert 3 in valid and 8 in valid
    for keep in range(0, 100, 5):
        plan = plan_cut(h.messages, keep_recent_tokens=keep)
        assert_plan_invariants(plan, h.messages)


def test_result_before_use_is_still_never_split() -> None:
    h = History(first_seq=0)
    h.user(10)
    h.results(["toolu_x"], 10)  # [1] result recorded before its use (malformed input)
    h.assistant(10)
    h.messages[2] = Msg(2, "assistant", [{"type": "tool_use", "id": "toolu_x", "name": "Read", "input": {}}], 10)
    h.user(10)
    h.assistant(10)
    assert 2 not in valid_cut_indices(h.messages)
    for keep in range(0, 60, 5):
        assert_plan_invariants(plan_cut(h.messages, keep_recent_tokens=keep), h.messages)


def test_nothing_to_compact_when_too_few_messages() -> None:
    h = History()
    h.user(10)
    plan = plan_cut(h.messages, keep_recent_tokens=0)
    assert plan.nothing_to_compact and plan.first_kept_seq is None
    assert plan.reason == "nothing to compact: only 1 message"
    assert plan_cut([], keep_recent_tokens=10).reason == "nothing to compact: only 0 messages"


def test_nothing_to_compact_when_within_budget() -> None:
    h = History()
    h.user(10)
    h.tool_round(10, 10)
    h.assistant(10)
    plan = plan_cut(h.messages, keep_recent_tokens=40)
    assert plan.nothing_to_compact
    assert "fit within keep_recent_tokens=40" in plan.reason
    assert plan.kept == h.messages
    # One token less and the first message can go.
    plan = plan_cut(h.messages, keep_recent_tokens=30)
    assert not plan.nothing_to_compact


def test_nothing_to_compact_when_pairs_cover_everything() -> None:
    # A turn that is one long chain of tool rounds: the only valid cuts are assistant messages.
    h = History(first_seq=0)
    h.user(10)
    h.tool_round(10, 1000)
    plan = plan_cut(h.messages, keep_recent_tokens=500)
    # the budget needs [1:], cut at [1] (assistant) keeps 1010 tokens
    assert plan.first_kept_seq == 1
    assert_plan_invariants(plan, h.messages)
    only_results = [
        Msg(1, "user", "hi", 5),
        Msg(2, "assistant", [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}], 5),
        Msg(3, "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}], 5),
    ]
    plan = plan_cut(only_results, keep_recent_tokens=6)
    assert plan.first_kept_seq == 2
    plan = plan_cut(only_results[1:], keep_recent_tokens=1)
    assert plan.nothing_to_compact and "no valid cut point" in plan.reason


def test_never_raises_on_odd_messages() -> None:
    weird = [
        Msg(1, "user", [], 0),
        Msg(2, "assistant", "", 0),
        Msg(3, "user", [{"type": "tool_result", "tool_use_id": "nope", "content": ""}], 3),
        Msg(4, "system", "note", 3),
        Msg(5, "assistant", [{"type": "tool_use", "name": "no-id"}], -4),
    ]
    for keep in (0, 1, 3, 100):
        for force in (False, True):
            plan = plan_cut(weird, keep_recent_tokens=keep, force=force, context_window=10)
            assert_plan_invariants(plan, weird)


def test_preserve_messages() -> None:
    h = History()
    for _ in range(6):
        h.user(10)
        h.assistant(10)
    plan = plan_cut(h.messages, keep_recent_tokens=10**9, preserve_messages=4)
    assert_plan_invariants(plan, h.messages)
    assert len(plan.kept) == 4 and plan.kept[0].is_user_turn_start
    # Odd count lands on an assistant: moving back one message to the user keeps the turn.
    plan = plan_cut(h.messages, keep_recent_tokens=0, preserve_messages=3)
    assert len(plan.kept) == 4 and plan.kept[0].is_user_turn_start
    # Too short to compact.
    short = h.messages[:5]
    plan = plan_cut(short, keep_recent_tokens=0, preserve_messages=5)
    assert plan.nothing_to_compact and "preserve_messages=5" in plan.reason


def test_preserve_messages_never_splits_a_pair() -> None:
    h = History()
    h.user(10)
    h.assistant(10)
    h.user(10)
    ids = h.assistant(10, tools=2)
    h.results(ids[:1])
    h.results(ids[1:])
    h.assistant(10)
    plan = plan_cut(h.messages, keep_recent_tokens=0, preserve_messages=2)
    assert_plan_invariants(plan, h.messages)
    assert len(plan.kept) >= 2


def test_force_keeps_a_fifth_of_the_window() -> None:
    h = History()
    for _ in range(40):
        h.user(1000)
        h.tool_round(2000, 2000)  # 5k per turn → 200k in all
    plan = plan_cut(h.messages, keep_recent_tokens=20_000, force=True, context_window=100_000)
    assert_plan_invariants(plan, h.messages)
    assert 20_000 <= plan.kept_tokens <= 35_000
    assert plan.kept[0].is_user_turn_start


def test_force_keeps_the_last_user_turn_when_it_fits() -> None:
    h = History()
    h.user(100)
    h.assistant(100)
    last = h.user(100)
    for _ in range(10):
        h.tool_round(1000, 1000)  # 20k turn: larger than window/5 = 20k? (20,100 tokens)
    plan = plan_cut(h.messages, keep_recent_tokens=50_000, force=True, context_window=100_000)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == last.seq


def test_force_cuts_inside_a_huge_last_turn() -> None:
    h = History()
    h.user(100)
    h.assistant(100)
    h.user(100)
    for _ in range(50):
        h.tool_round(1000, 1000)  # 100k turn: more than 35 % of the window
    plan = plan_cut(h.messages, keep_recent_tokens=50_000, force=True, context_window=100_000)
    assert_plan_invariants(plan, h.messages)
    assert plan.split_turn
    assert 20_000 <= plan.kept_tokens <= 22_000


def test_force_with_a_last_message_larger_than_the_budget_keeps_the_minimum_tail() -> None:
    h = History(first_seq=0)
    h.user(100)
    h.assistant(100)
    h.user(100)
    h.tool_round(100, 100)
    h.tool_round(100, 500_000)  # [5] asst, [6] a giant tool result
    plan = plan_cut(h.messages, keep_recent_tokens=20_000, force=True, context_window=200_000)
    assert_plan_invariants(plan, h.messages)
    assert seqs(plan.kept) == [5, 6]


def test_force_compacts_even_within_budget() -> None:
    h = History()
    h.user(10)
    h.assistant(10)
    h.user(10)
    h.assistant(10)
    last = h.user(10)
    h.assistant(10)
    assert plan_cut(h.messages, keep_recent_tokens=1000).nothing_to_compact
    plan = plan_cut(h.messages, keep_recent_tokens=1000, force=True, context_window=200_000)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == last.seq
    assert "forced" in plan.reason
    # A single turn: everything but the minimum tail.
    h = History()
    h.user(10)
    for _ in range(6):
        h.tool_round(10, 10)
    plan = plan_cut(h.messages, keep_recent_tokens=1000, force=True, context_window=200_000)
    assert_plan_invariants(plan, h.messages)
    assert len(plan.kept) == 2 and plan.split_turn and plan.to_summarize == []


def test_history_starting_mid_turn_is_never_a_split() -> None:
    # After an earlier split-turn compaction the context starts at an assistant message.
    h = History()
    for _ in range(10):
        h.tool_round(10, 10)
    plan = plan_cut(h.messages, keep_recent_tokens=50)
    assert_plan_invariants(plan, h.messages)
    assert not plan.split_turn and plan.kept[0].role == "assistant"
    assert "began before this history" in plan.reason


def test_turn_starts_and_properties() -> None:
    h = History(first_seq=0)
    h.user(10)
    h.tool_round(10, 10)
    h.user(10)
    h.assistant(10)
    assert turn_starts(h.messages) == [0, 3]
    plan = plan_cut(h.messages, keep_recent_tokens=20)
    assert plan.first_summarized_seq == 0 and plan.last_summarized_seq == 2
    assert plan.messages_summarized == 3 and plan.summarized_tokens == 30 and plan.kept_tokens == 20
    nothing = plan_cut(h.messages, keep_recent_tokens=10_000)
    assert nothing.first_summarized_seq is None and nothing.last_summarized_seq is None
    assert nothing.messages_summarized == 0


def test_user_message_with_text_and_results_is_not_a_turn_start() -> None:
    mixed = Msg(
        3,
        "user",
        [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}, {"type": "text", "text": "also do Y"}],
        10,
    )
    msgs = [
        Msg(1, "user", "go", 10),
        Msg(2, "assistant", [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}], 10),
        mixed,
        Msg(4, "assistant", "done", 10),
    ]
    assert turn_starts(msgs) == [0]
    assert 2 not in valid_cut_indices(msgs)
    plan = plan_cut(msgs, keep_recent_tokens=10)
    assert_plan_invariants(plan, msgs)
    assert plan.first_kept_seq == 4


def test_large_history_is_fast() -> None:
    import time

    h = History()
    for _ in range(3000):
        h.user(50)
        h.tool_round(200, 300, tools=2)
        h.assistant(40)
    start = time.perf_counter()
    plan = plan_cut(h.messages, keep_recent_tokens=20_000)
    elapsed = time.perf_counter() - start
    assert_plan_invariants(plan, h.messages)
    assert elapsed < 1.0


def test_force_ignores_preserve_messages() -> None:
    h = History()
    for _ in range(10):
        h.user(10_000)
        h.assistant(10_000)
    plan = plan_cut(h.messages, keep_recent_tokens=0, preserve_messages=15, force=True, context_window=100_000)
    assert_plan_invariants(plan, h.messages)
    assert plan.kept_tokens <= 35_000
    assert len(plan.kept) < 15


def test_reason_when_the_budget_needs_every_message() -> None:
    h = History()
    h.user(100)
    h.assistant(10)
    plan = plan_cut(h.messages, keep_recent_tokens=50)
    assert plan.nothing_to_compact
    assert plan.reason == "nothing to compact: keeping keep_recent_tokens=50 needs all 2 messages (110 tokens)"


def test_a_tool_use_waiting_for_its_result_is_never_summarized() -> None:
    # A slow tool call, then the conversation goes on; its result comes later.
    h = History(first_seq=1)
    h.user(10, "build it")
    h._add("assistant", [{"type": "tool_use", "id": "toolu_slow_build", "name": "Bash", "input": {}}], 10)
    for _ in range(20):
        h.user(30)
        h.assistant(30)
    for force in (False, True):
        plan = plan_cut(h.messages, keep_recent_tokens=300, force=force, context_window=1_000)
        assert_plan_invariants(plan, h.messages)
        assert plan.first_kept_seq == 2, plan.reason  # the tool_use stays, only the request goes
        assert "still waiting for its result" in plan.reason
    assert valid_cut_indices(h.messages) == [1]
    # Once answered, the pair is kept together, then summarized like any other.
    answer = h.results(["toolu_slow_build"], 10)
    h.assistant(10)
    plan = plan_cut(h.messages, keep_recent_tokens=300)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq == 2
    for _ in range(20):
        h.user(30)
        h.assistant(30)
    plan = plan_cut(h.messages, keep_recent_tokens=300)
    assert_plan_invariants(plan, h.messages)
    assert plan.first_kept_seq > answer.seq and plan.kept[0].is_user_turn_start


def test_stored_tool_ids_plan_as_the_blocks_do() -> None:
    h = History(first_seq=0)
    for _ in range(30):
        h.user(40)
        h.tool_round(20, 60, tools=2)
        h.assistant(10)
    stored = [Msg(m.seq, m.role, m.content, m.tokens, m.tool_use_ids, m.tool_result_ids) for m in h.messages]
    for keep in (0, 100, 1_000, 3_000, 10_000):
        a, b = plan_cut(stored, keep_recent_tokens=keep), plan_cut(h.messages, keep_recent_tokens=keep)
        assert (a.first_kept_seq, seqs(a.turn_prefix), a.reason) == (b.first_kept_seq, seqs(b.turn_prefix), b.reason)


def test_turn_start_slack_is_inclusive() -> None:
    # The budget is met at the last assistant message; moving back to the turn start keeps
    # exactly 1.5 × the budget (allowed), then one token more (not allowed).
    for extra, moves_back in ((0, True), (1, False)):
        h = History(first_seq=0)
        h.user(10)
        h.assistant(10)
        start = h.user(50 + extra)
        h.assistant(50)
        h.assistant(50)
        plan = plan_cut(h.messages, keep_recent_tokens=100)
        assert_plan_invariants(plan, h.messages)
        assert (plan.first_kept_seq == start.seq) == moves_back, plan.reason


def _use(seq: int, *ids: str, tokens: int = 10) -> Msg:
    return Msg(seq, "assistant", [{"type": "tool_use", "id": i, "name": "x", "input": {}} for i in ids], tokens)


def _result(seq: int, *ids: str, tokens: int = 10) -> Msg:
    return Msg(seq, "user", [{"type": "tool_result", "tool_use_id": i, "content": "r"} for i in ids], tokens)


def _turns(count: int, tokens: int = 1000) -> list[Msg]:
    h = History()
    for _ in range(count):
        h.user(tokens)
        h.assistant(tokens)
    return h.messages


def _long_turn(rounds: int) -> list[Msg]:
    h = History()
    h.user(100)
    h.assistant(100)
    h.user(100)
    for _ in range(rounds):
        h.tool_round(1000, 1000)
    return h.messages


def _waiting(turns: int) -> list[Msg]:
    h = History(first_seq=1)
    h.user(10, "build it")
    h._add("assistant", [{"type": "tool_use", "id": "toolu_slow", "name": "Bash", "input": {}}], 10)
    for _ in range(turns):
        h.user(30)
        h.assistant(30)
    return h.messages


def _reversed_pair(use_tokens: int) -> list[Msg]:
    # A result recorded before its tool_use: the pair still keeps both on one side.
    return [Msg(1, "user", "hi", 10), _result(2, "x"), _use(3, "x", tokens=use_tokens), Msg(4, "assistant", "ok", 10)]


# The reasons the API shows for a compaction, word for word.
REASONS = [
    (
        _turns(4),
        dict(keep_recent_tokens=2500),
        "cut mid-turn at an assistant message (keep budget 2,500 tokens); the 1-message turn prefix is summarized "
        "with the history (shorter than 5): summarizing 5 messages, keeping 3 messages (3,000 tokens) from seq 106",
    ),
    (
        _turns(4),
        dict(keep_recent_tokens=100_000),
        "nothing to compact: all 8 messages (8,000 tokens) fit within keep_recent_tokens=100,000",
    ),
    (
        _turns(2, 100),
        dict(keep_recent_tokens=150),
        "cut at a user turn start (keep budget 150 tokens): summarizing 2 messages (200 tokens), "
        "keeping 2 messages (200 tokens) from seq 103",
    ),
    (
        _turns(4),
        dict(keep_recent_tokens=0, preserve_messages=3),
        "cut at a user turn start (preserve_messages=3): summarizing 4 messages (4,000 tokens), "
        "keeping 4 messages (4,000 tokens) from seq 105",
    ),
    (
        _turns(2),
        dict(keep_recent_tokens=0, preserve_messages=4),
        "nothing to compact: only 4 messages and preserve_messages=4",
    ),
    (
        _turns(4),
        dict(keep_recent_tokens=100_000, force=True, context_window=200_000),
        "cut at a user turn start (forced; all 8,000 tokens fit in the 40,000-token budget): summarizing 6 messages "
        "(6,000 tokens), keeping 2 messages (2,000 tokens) from seq 107",
    ),
    (
        _long_turn(10),
        dict(keep_recent_tokens=3000),
        "split turn (keep budget 3,000 tokens): the turn starting at seq 103 is cut after 17 messages; summarizing "
        "2 history messages and a 17-message turn prefix separately, keeping 4 messages (4,000 tokens) from seq 120",
    ),
    (
        _long_turn(50),
        dict(keep_recent_tokens=50_000, force=True, context_window=100_000),
        "split turn (forced, keep budget 20,000 tokens): the turn starting at seq 103 is cut after 81 messages; "
        "summarizing 2 history messages and a 81-message turn prefix separately, keeping 20 messages "
        "(20,000 tokens) from seq 184",
    ),
    (
        [Msg(101 + i, "assistant" if i % 2 == 0 else "user", "ok", 10) for i in range(20)],
        dict(keep_recent_tokens=50),
        "cut at a user turn start (keep budget 50 tokens): summarizing 15 messages (150 tokens), "
        "keeping 5 messages (50 tokens) from seq 116",
    ),
    (
        [_use(1, "a"), _result(2, "a"), _use(3, "b"), _result(4, "b"), _use(5, "c"), _result(6, "c")],
        dict(keep_recent_tokens=15),
        "cut mid-turn at an assistant message (keep budget 15 tokens); the turn began before this history: "
        "summarizing 4 messages, keeping 2 messages (20 tokens) from seq 5",
    ),
    (
        [_use(2, "t1"), _result(3, "t1")],
        dict(keep_recent_tokens=1),
        "nothing to compact: no valid cut point in 2 messages (every position would split a tool_use from its result)",
    ),
    (
        [_result(1, "r"), _use(2, "r", "w"), Msg(3, "user", "x", 10)],
        dict(keep_recent_tokens=0),
        "nothing to compact: no valid cut point in 3 messages (every position would split a tool_use from its "
        "result; a tool_use at seq 2 is still waiting for its result)",
    ),
    (
        _reversed_pair(10),
        dict(keep_recent_tokens=15),
        "nothing to compact: meeting the keep budget 15 tokens requires every message once tool pairs are kept "
        "together",
    ),
    (
        _reversed_pair(500),
        dict(keep_recent_tokens=0, force=True, context_window=1000),
        "cut mid-turn at an assistant message (forced, keep budget 200 tokens; minimum valid tail); the 3-message "
        "turn prefix is summarized with the history (shorter than 5): summarizing 3 messages, keeping 1 messages "
        "(10 tokens) from seq 4",
    ),
    (
        _waiting(6),
        dict(keep_recent_tokens=100, force=True, context_window=1000),
        "cut mid-turn at an assistant message (forced, keep budget 200 tokens; the tool_use at seq 2 is still "
        "waiting for its result, so it stays); the 1-message turn prefix is summarized with the history (shorter "
        "than 5): summarizing 1 messages, keeping 13 messages (370 tokens) from seq 2",
    ),
]


def test_every_reason_reads_as_before() -> None:
    for messages, kwargs, reason in REASONS:
        plan = plan_cut(messages, **kwargs)
        assert_plan_invariants(plan, messages)
        assert plan.reason == reason
