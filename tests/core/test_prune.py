"""Tool-output pruning (pure): where the boundary goes, what is served, and that both agree."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.prune import (
    MIN_ERROR_PRUNE_TOKENS,
    MIN_PRUNE_TOKENS,
    PrunePlan,
    placeholder,
    plan_prune,
    prune_content,
    prune_served,
    tool_names,
    trimmed,
)
from compaction.core.tokens import MESSAGE_OVERHEAD, Tokenizer, count_content
from compaction.core.types import Msg

# One token per word: sizes in these tests are exact and easy to reason about.
WORDS = Tokenizer("words", True, lambda text: len(text.split()))


def output(tokens: int) -> str:
    return " ".join(["w"] * tokens)


def exchange(seq: int, tool_id: str, name: str, tokens: int, **extra) -> list[Msg]:
    use = [{"type": "tool_use", "id": tool_id, "name": name, "input": {}}]
    result = [{"type": "tool_result", "tool_use_id": tool_id, "content": output(tokens), **extra}]
    return [
        Msg(seq, "assistant", use, count_content(use, WORDS)),
        Msg(seq + 1, "user", result, count_content(result, WORDS)),
    ]


def conversation(*outputs: tuple[str, int]) -> list[Msg]:
    msgs = [Msg(1, "user", "Do the work", 3)]
    for index, (name, tokens) in enumerate(outputs):
        msgs += exchange(2 + 2 * index, f"t{index}", name, tokens)
    return msgs


def served_savings(msgs: list[Msg], plan: PrunePlan) -> int:
    names = tool_names(msgs)
    total = 0
    for m in msgs:
        if plan.prune_before_seq and m.seq < plan.prune_before_seq and m.role == "user":
            total += count_content(m.content, WORDS) - count_content(
                prune_content(m.content, tool_names=names, tokenizer=WORDS, seq=m.seq), WORDS
            )
    return total


def test_nothing_to_prune_when_all_output_is_protected():
    plan = plan_prune(conversation(("Bash", 10_000), ("Read", 10_000)), tokenizer=WORDS)
    assert plan.nothing_to_prune
    assert (plan.prune_before_seq, plan.tokens_saved, plan.pruned) == (None, 0, 0)
    assert "within the protected 40,000" in plan.reason


def test_the_newest_40k_are_protected_and_older_output_is_pruned():
    # seqs: results at 3, 5, 7, 9 (30k, 30k, 25k, 20k). From the newest: 20k, 45k → crosses at
    # seq 7, which is kept with everything after it; 3 and 5 are pruned.
    msgs = conversation(("Read", 30_000), ("Bash", 30_000), ("Grep", 25_000), ("Read", 20_000))
    plan = plan_prune(msgs, tokenizer=WORDS)
    assert plan.prune_before_seq == 7
    assert plan.pruned == 2
    assert plan.tokens_saved == served_savings(msgs, plan)
    assert 59_000 < plan.tokens_saved < 60_000  # each keeps its head and the note


def test_the_newest_result_is_never_pruned_however_large():
    plan = plan_prune(conversation(("Read", 90_000)), tokenizer=WORDS)
    assert plan.nothing_to_prune


def test_it_is_not_worth_it_below_min_savings():
    msgs = conversation(("Bash", 15_000), ("Read", 30_000), ("Read", 20_000))
    plan = plan_prune(msgs, tokenizer=WORDS)
    assert plan.nothing_to_prune
    assert "less than 20,000" in plan.reason
    assert plan_prune(msgs, tokenizer=WORDS, min_savings=10_000).prune_before_seq == 5


def test_protected_tools_short_errors_and_small_results_are_kept():
    msgs = [Msg(1, "user", "go", 2)]
    msgs += exchange(2, "t_skill", "skill", 30_000)
    msgs += exchange(4, "t_err", "Bash", MIN_ERROR_PRUNE_TOKENS - 1, is_error=True)
    msgs += exchange(6, "t_small", "Bash", MIN_PRUNE_TOKENS - 1)
    msgs += exchange(8, "t_big", "Read", 30_000)
    msgs += exchange(10, "t_new", "Read", 45_000)
    plan = plan_prune(msgs, tokenizer=WORDS)
    assert plan.prune_before_seq == 11
    assert plan.pruned == 1  # only t_big
    names = tool_names(msgs)
    for m in msgs[:-2]:
        served = prune_content(m.content, tool_names=names, tokenizer=WORDS, seq=m.seq)
        if m.seq == 9:
            assert served[0]["content"] == trimmed(output(30_000), "Read", 30_000, 9)
        else:
            assert served == m.content


def test_a_long_error_output_is_trimmed_around_its_error_lines():
    log = "\n".join(
        [
            *(f"ok line {i}" for i in range(400)),
            "FAILED tests/test_a.py::test_x - AssertionError",
            *(f"more {i}" for i in range(400)),
        ]
    )
    text = trimmed(log, "Bash", 5_000, 42)
    assert text.startswith("ok line 0\n") and text.endswith("more 399")
    assert "FAILED tests/test_a.py::test_x - AssertionError" in text and "message #42 holds it all" in text
    assert len(text) < 1_500


def test_prune_content_serves_a_placeholder_and_leaves_the_input_alone():
    content = [
        {"type": "text", "text": "Here are the results"},
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": output(500)}],
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "tool_result", "tool_use_id": "t2", "content": output(300)},
    ]
    original = copy.deepcopy(content)
    served = prune_content(content, tool_names={"t1": "Bash"}, tokenizer=WORDS)
    assert content == original
    assert served[0] == content[0]
    assert served[1] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": trimmed([{"type": "text", "text": output(500)}], "Bash", 503),  # 500 + block framing
        "cache_control": {"type": "ephemeral"},
    }
    assert served[2] == content[2]  # 300 words on one line: its trimmed form would be no shorter
    assert prune_content("plain text", tool_names={}, tokenizer=WORDS) == "plain text"


def test_placeholder_formats_thousands():
    assert (
        placeholder("Bash", 12_345)
        == "[… Bash output trimmed: 12,345 tokens in all; re-run the tool to see the rest …]"
    )
    assert "(message #7 holds it all)" in placeholder("Bash", 12_345, 7)


def test_names_from_before_the_cut_can_be_supplied():
    result = [{"type": "tool_result", "tool_use_id": "old", "content": output(60_000)}]
    msgs = [Msg(5, "user", result, count_content(result, WORDS)), *exchange(6, "t_new", "Bash", 2_000)]
    plan = plan_prune(msgs, tokenizer=WORDS, protect_tokens=1_000, names={"old": "WebFetch"})
    assert plan.prune_before_seq == 7
    assert plan.tokens_saved == 60_000 - len(trimmed(output(60_000), "WebFetch", 60_000, 5).split())


def test_the_real_tokenizer_works_too():
    big = "line of a file that is quite long\n" * 6_000
    result = [{"type": "tool_result", "tool_use_id": "t0", "content": big}]
    later = [{"type": "tool_result", "tool_use_id": "t1", "content": big}]
    use = [{"type": "tool_use", "id": "t0", "name": "Read", "input": {}}]
    use1 = [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]
    msgs = [Msg(1, "assistant", use, 20), Msg(2, "user", result, count_content(result))]
    msgs += [Msg(3, "assistant", use1, 20), Msg(4, "user", later, count_content(later))]
    plan = plan_prune(msgs, protect_tokens=1_000, min_savings=1_000)
    assert plan.prune_before_seq == 4
    served = prune_content(result, tool_names=tool_names(msgs), seq=2)
    assert count_content(result) - count_content(served) == plan.tokens_saved


SIZES = st.lists(
    st.tuples(st.sampled_from(["Bash", "Read", "skill"]), st.integers(0, 30_000), st.booleans()),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(sizes=SIZES, protect=st.integers(0, 60_000), min_savings=st.integers(0, 40_000))
def test_plan_and_served_overlay_always_agree(sizes, protect, min_savings):
    msgs = [Msg(1, "user", "go", 2)]
    for index, (name, tokens, is_error) in enumerate(sizes):
        msgs += exchange(2 + 2 * index, f"t{index}", name, tokens, **({"is_error": True} if is_error else {}))
    plan = plan_prune(msgs, tokenizer=WORDS, protect_tokens=protect, min_savings=min_savings)
    if plan.prune_before_seq is None:
        assert plan.tokens_saved == 0
        return
    assert plan.tokens_saved >= min_savings
    assert plan.tokens_saved == served_savings(msgs, plan)

    # Output after the crossing message (kept at the boundary) fits the protected budget,
    # and adding the crossing message exceeds it.
    def output_from(seq: int) -> int:
        return sum(
            count_content(m.content, WORDS) - MESSAGE_OVERHEAD
            for m in msgs
            if m.seq >= seq and m.role == "user" and not isinstance(m.content, str)
        )

    assert output_from(plan.prune_before_seq + 1) <= protect < output_from(plan.prune_before_seq)


# --- prune_served: the served context's fast path must equal prune_content + count_content ---

_block = st.one_of(
    st.builds(
        lambda tid, n, err, listy: {
            "type": "tool_result",
            "tool_use_id": tid,
            "content": [{"type": "text", "text": output(n)}] if listy else output(n),
            **({"is_error": True} if err else {}),
        },
        st.sampled_from(["t1", "t2", "t3", "t4"]),
        st.integers(0, 400),
        st.booleans(),
        st.booleans(),
    ),
    st.builds(lambda n: {"type": "text", "text": output(n)}, st.integers(1, 300)),
    st.just({"type": "tool_result", "tool_use_id": "t1"}),  # no content at all
)
_NAMES = {"t1": "Read", "t2": "skill", "t3": "Bash"}  # t4: a use outside the names → "unknown tool"


@settings(max_examples=300, deadline=None)
@given(st.lists(_block, min_size=1, max_size=5))
def test_prune_served_equals_prune_content_and_a_full_recount(content):
    original = copy.deepcopy(content)
    expected = prune_content(content, tool_names=_NAMES, tokenizer=WORDS)
    stored = count_content(content, WORDS)
    for stored_tokens in (stored, None):
        served = prune_served(content, stored_tokens=stored_tokens, tool_names=_NAMES, tokenizer=WORDS)
        assert served.content == expected
        assert served.changed == (expected != content)
        assert served.tokens == (count_content(expected, WORDS) if served.changed else stored)
        again = prune_served(
            content, stored_tokens=stored, tool_names=_NAMES, tokenizer=WORDS, known_outputs=served.outputs
        )
        assert (again.content, again.tokens, again.changed) == (served.content, served.tokens, served.changed)
    assert content == original


def test_prune_served_tokenizes_only_the_trimmed_form_of_a_single_result():
    calls: list[str] = []
    counting = Tokenizer("counting", True, lambda text: calls.append(text) or len(text.split()))
    content = [{"type": "tool_result", "tool_use_id": "t1", "content": output(500)}]
    served = prune_served(
        content, stored_tokens=count_content(content, WORDS), tool_names={"t1": "Read"}, tokenizer=counting
    )
    assert served.content[0]["content"] == trimmed(output(500), "Read", 500)
    assert calls == [trimmed(output(500), "Read", 500)]  # the 500-word output itself was not tokenized
    assert served.tokens == count_content(served.content, WORDS)


def test_prune_served_recounts_when_the_stored_count_is_another_tokenizers():
    content = [{"type": "tool_result", "tool_use_id": "t1", "content": output(500)}]
    served = prune_served(content, stored_tokens=10, tool_names={"t1": "Read"}, tokenizer=WORDS)
    assert served.content == prune_content(content, tool_names={"t1": "Read"}, tokenizer=WORDS)
    assert served.tokens == count_content(served.content, WORDS)
