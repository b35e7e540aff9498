"""compaction.core.policy.plan and loop_guard with plain data: no database, no Django.

The behaviour tests against the database (tests/compaction/test_policy.py, test_services.py) run
the same plan through the services; these pin each rule of the plan on histories built here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from compaction.core import policy
from compaction.core.config import CompactionConfig
from compaction.core.policy import (
    KEEP_FLOOR_TOKENS,
    PRUNE,
    PRUNE_SUMMARIZE,
    SUMMARIZE,
    LastCompaction,
    PolicyInputs,
    estimate_summary_tokens,
    keep_budget,
    loop_guard,
    loop_guard_new_tokens,
)
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content
from compaction.core.types import Msg

FRAMING = count_content(render_summary_message("", ""))


def _text(tokens: int) -> str:
    return "lorem ipsum " * max(1, tokens // 2)  # two tokens a repetition


def history(turns: int, *, text: int = 400, tool_output: int = 0) -> list[Msg]:
    """`turns` turns of a user request and the assistant's answer; with `tool_output`, each
    answer first calls a tool whose result has about that many tokens."""
    contents: list[tuple[str, Any]] = []
    for n in range(turns):
        contents.append(("user", f"request {n}: " + _text(text)))
        if tool_output:
            use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": f"run {n}"}}
            result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": _text(tool_output)}
            contents.append(("assistant", [{"type": "text", "text": "running it"}, use]))
            contents.append(("user", [result]))
        contents.append(("assistant", f"answer {n}: " + _text(text)))
    return [Msg(seq, role, content, count_content(content)) for seq, (role, content) in enumerate(contents, start=1)]


def sized(*spec: tuple[str, int]) -> list[Msg]:
    """Text messages of about the given sizes: (role, tokens), ..."""
    contents = [(role, f"{role} {n}: " + _text(tokens)) for n, (role, tokens) in enumerate(spec)]
    return [Msg(seq, role, content, count_content(content)) for seq, (role, content) in enumerate(contents, start=1)]


def inputs(messages: list[Msg], **changes: Any) -> PolicyInputs:
    """A snapshot of `messages`: served as stored, no calibration, the meter at their sum.
    `settings`: CompactionConfig fields over a 200k window keeping 20k (or a whole `config`)."""
    settings = {"context_window": 200_000, "keep_recent_tokens": 20_000, **changes.pop("settings", {})}
    config = changes.pop("config", None) or CompactionConfig(**settings)
    total = sum(m.tokens for m in messages)
    base = PolicyInputs(
        config=config,
        tokens_before=total,
        messages=messages,
        served_messages=messages,
        estimated_before=total,
        calibration=None,
        system_prompt_tokens=0,
        summary_framing_tokens=FRAMING,
    )
    return replace(base, **changes)


TOOL_HEAVY = history(12, text=200, tool_output=8_000)  # ~100k tokens, mostly tool output
LONG_TOOL_HEAVY = history(24, text=200, tool_output=8_000)  # ~200k tokens
CHATTY = history(40, text=1_200)  # ~100k tokens of conversation, no tool output
LARGE_KEEP = {"context_window": 400_000, "keep_recent_tokens": 90_000, "auto_compact_token_limit": 220_000}

# (case, history, PolicyInputs changes, the kind chosen or None, the kinds weighed, words in the answer)
CASES = [
    (
        "a prune alone that relieves enough wins",
        TOOL_HEAVY,
        {"settings": {"auto_compact_token_limit": 100_000, "prune_min_relief": 0.2, "target_ratio": 0.9}},
        PRUNE,
        [PRUNE, SUMMARIZE, PRUNE_SUMMARIZE],
        "prune: lands at",
    ),
    (
        "a prune that relieves too little loses to a summary",
        TOOL_HEAVY,
        {"settings": {"auto_compact_token_limit": 100_000, "prune_min_relief": 0.9}},
        PRUNE_SUMMARIZE,  # the kept tail served lean: older tool output trimmed (beyond its newest 2,000 tokens)
        [PRUNE, SUMMARIZE, PRUNE_SUMMARIZE],
        "not prune relieves",
    ),
    (
        "a summarizer strategy rules a prune alone out",
        TOOL_HEAVY,
        {"strategy": "extractive", "settings": {"auto_compact_token_limit": 100_000}},
        PRUNE_SUMMARIZE,
        [SUMMARIZE, PRUNE_SUMMARIZE],
        "summarize",
    ),
    (
        "instructions rule a prune alone out",
        TOOL_HEAVY,
        {"instructions": "keep the test names", "settings": {"auto_compact_token_limit": 100_000}},
        PRUNE_SUMMARIZE,
        [SUMMARIZE, PRUNE_SUMMARIZE],
        "summarize",
    ),
    (
        "old tool output in a large kept part is pruned too",
        LONG_TOOL_HEAVY,
        {"strategy": "extractive", "keep_explicit": True, "settings": LARGE_KEEP},
        PRUNE_SUMMARIZE,
        [SUMMARIZE, PRUNE_SUMMARIZE],
        "the fewest cache tokens per token of runway",
    ),
    (
        "overflow (force) serves the kept part lean too: what it keeps must fit the window",
        LONG_TOOL_HEAVY,
        {"force": True, "settings": LARGE_KEEP},
        PRUNE_SUMMARIZE,
        [SUMMARIZE, PRUNE_SUMMARIZE],
        "the fewest cache tokens per token of runway",
    ),
    (
        "strategy prune makes a prune however little it relieves",
        TOOL_HEAVY,
        {"strategy": "prune", "settings": {"auto_compact_token_limit": 100_000, "prune_min_relief": 0.9}},
        PRUNE,
        [PRUNE],
        "prune: requested (strategy prune); ",
    ),
    (
        "strategy prune with nothing to prune says why",
        CHATTY,
        {"strategy": "prune", "settings": {"auto_compact_token_limit": 100_000}},
        None,
        [],
        "nothing to prune: all tool output (0 tokens) is within the protected 40,000",
    ),
    (
        "an active prune boundary past the new one leaves nothing new to prune",
        TOOL_HEAVY,
        {
            "previous_prune_before_seq": 10_000,
            "strategy": "prune",
            "settings": {"auto_compact_token_limit": 100_000},
        },
        None,
        [],
        "nothing to prune",
    ),
    (
        "a conversation without tool output is summarized",
        CHATTY,
        {"settings": {"auto_compact_token_limit": 100_000}},
        SUMMARIZE,
        [SUMMARIZE],
        "summarize",
    ),
    (
        "a history shorter than the keep budget has nothing to compact",
        history(2, text=400),
        {"settings": {"auto_compact_token_limit": 100_000}},
        None,
        [],
        "nothing to compact",
    ),
    (
        "an empty context has nothing to compact",
        [],
        {"settings": {"auto_compact_token_limit": 100_000}},
        None,
        [],
        "nothing to compact",
    ),
]


@pytest.mark.parametrize(
    ("case", "messages", "changes", "chosen", "weighed", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_plan_chooses(case, messages, changes, chosen, weighed, words):
    plan = policy.plan(inputs(messages, **changes))
    if chosen is None:
        assert plan.decision is None
        assert words in plan.nothing
        return
    assert plan.decision is not None and plan.decision.chosen.kind == chosen, plan.decision
    assert words in plan.decision.reason
    assert [row.kind for row in plan.decision.considered] == weighed
    assert plan.nothing == ""
    # What the chosen kind needs to be made is in the plan.
    if chosen == PRUNE:
        assert plan.prune is not None and plan.prune.prune_before_seq is not None
    else:
        assert plan.cut is not None and not plan.cut.nothing_to_compact and plan.summary_tokens > 0
        assert (plan.kept_plan is not None) == (PRUNE_SUMMARIZE in weighed)


def test_the_weighed_candidates_are_what_the_job_stores_and_the_api_answers():
    plan = policy.plan(inputs(TOOL_HEAVY, settings={"auto_compact_token_limit": 100_000}))
    rows = [row.as_json() for row in plan.decision.considered]
    assert [list(row) for row in rows] == [
        ["kind", "tokens_after", "runway", "cache_invalidated", "first_changed_seq", "qualifies", "why_not"]
    ] * 3
    prune = rows[0]
    assert prune["runway"] == 100_000 - prune["tokens_after"]
    # A prune keeps everything before the first pruned result cached; a summary only the system prompt.
    assert prune["first_changed_seq"] == plan.prune.first_pruned_seq
    assert rows[1]["cache_invalidated"] == rows[1]["tokens_after"]


def test_the_cut_hands_back_stored_messages_but_weighs_them_as_served():
    # Every tool result is served pruned (an eighth of its size): as served, more of the history
    # fits the keep budget, so the cut keeps more messages than the stored sizes allow.
    served = [
        replace(m, tokens=1_000) if m.role == "user" and not isinstance(m.content, str) else m for m in TOOL_HEAVY
    ]
    keep_8k = {"strategy": "extractive", "keep_explicit": True, "settings": {"keep_recent_tokens": 8_000}}
    stored_plan = policy.plan(inputs(TOOL_HEAVY, **keep_8k))
    served_plan = policy.plan(inputs(TOOL_HEAVY, served_messages=served, **keep_8k))
    assert len(served_plan.cut.kept) > len(stored_plan.cut.kept)
    assert all(m in TOOL_HEAVY for m in served_plan.cut.kept + served_plan.cut.to_summarize)


# --- the keep budget -----------------------------------------------------------------------


def test_the_default_keep_is_capped_to_land_under_the_target_of_a_low_trigger():
    config = CompactionConfig(context_window=200_000, keep_recent_tokens=20_000, auto_compact_token_limit=60_000)
    # The provider counts 26,000 tokens we never see (tool definitions, the agent's prompt).
    snapshot = inputs(CHATTY, config=config, calibration={"fixed": 26_000, "ratio": 1.0})
    budget = keep_budget(snapshot)
    in_context = sum(m.tokens for m in CHATTY)
    summary = estimate_summary_tokens(config, previous_summary_tokens=0, tokens_summarized=in_context - 20_000)
    aim = (0.5 - policy.LANDING_MARGIN) * 60_000
    assert budget.keep == max(KEEP_FLOOR_TOKENS, int(aim - 26_000) - summary - FRAMING)
    assert budget.keep < 20_000
    assert budget.expected_after == 26_000 + summary + FRAMING + budget.keep


@pytest.mark.parametrize(
    ("changes", "keep"),
    [
        ({"keep_explicit": True}, 20_000),  # set by the request or the session: honoured
        ({"force": True}, 20_000),  # overflow sizes its own budget
        ({"settings": {"preserve_messages": 6}}, 20_000),  # a message count, not a token budget
        ({"calibration": {"fixed": 200_000, "ratio": 1.0}}, KEEP_FLOOR_TOKENS),  # never below the floor
    ],
)
def test_the_keep_budget_cap_and_its_exceptions(changes, keep):
    settings = {"auto_compact_token_limit": 60_000, **changes.get("settings", {})}
    assert keep_budget(inputs(CHATTY, **{**changes, "settings": settings})).keep == keep


def _since(messages: list[Msg], seq: int) -> int:
    return sum(m.tokens for m in messages if m.seq >= seq)


@pytest.mark.parametrize(
    ("changes", "keep"),
    [
        # The task began in the last turn (~2.4k tokens, under the floor): the floor is kept.
        ({"work_start_seq": 79}, KEEP_FLOOR_TOKENS),
        # 6 turns back (~14k): exactly its messages, less than the 20k default.
        ({"work_start_seq": 69}, _since(CHATTY, 69)),
        # 30 turns back (~72k): the default budget stands.
        ({"work_start_seq": 21}, 20_000),
        # An explicit keep setting and overflow are honoured as they are.
        ({"work_start_seq": 69, "keep_explicit": True}, 20_000),
        ({"work_start_seq": 69, "force": True}, 20_000),
    ],
)
def test_the_default_keep_keeps_no_more_than_the_task_in_progress(changes, keep):
    snapshot = inputs(CHATTY, **changes)
    assert keep_budget(snapshot).keep == keep
    plan = policy.plan(snapshot)
    if not snapshot.force and not snapshot.keep_explicit and keep < 20_000 and keep > KEEP_FLOOR_TOKENS:
        # The cut lands at a turn start at or before the task's start: all of its messages stay.
        assert plan.cut.first_kept_seq <= changes["work_start_seq"]
        assert plan.cut.first_kept_seq > changes["work_start_seq"] - 4


def test_forced_keep_budget_predicts_nothing():
    assert keep_budget(inputs(CHATTY, force=True)).expected_after is None


def test_a_summary_over_the_target_is_cut_again_with_a_smaller_keep():
    # A 24k-token reply straddles the 20k keep budget: the cut keeps it whole (a cut lands on a
    # message boundary at or before the budget), so the result lands over the target (30k).
    straddling = sized(
        *[("user", 4_000), ("assistant", 4_000)] * 6,
        ("user", 1_000),
        ("assistant", 24_000),
        ("user", 3_000),
        ("assistant", 3_000),
    )
    config = CompactionConfig(context_window=200_000, keep_recent_tokens=20_000, auto_compact_token_limit=60_000)
    snapshot = inputs(straddling, config=config)
    unshrunk = policy.plan(replace(snapshot, keep_explicit=True))  # the same budget, honoured as is
    plan = policy.plan(snapshot)
    target = int(config.target_ratio * 60_000)
    assert unshrunk.keep_budget.keep == plan.keep_budget.keep == 20_000
    assert unshrunk.decision.chosen.tokens_after > target
    assert plan.decision.chosen.tokens_after <= target
    assert len(plan.cut.kept) < len(unshrunk.cut.kept)
    assert plan.keep_budget == keep_budget(snapshot)  # the detail reports the budget before shrinking


def edit_heavy_turn(steps: int) -> list[tuple[str, Any]]:
    """One request, then `steps` edits whose inputs hold the new code (~500 tokens each) and
    whose results say "ok": nothing in it the kept plan can trim."""
    contents: list[tuple[str, Any]] = [("user", "Port the theme module.")]
    for n in range(steps):
        use = {"type": "tool_use", "id": f"e{n}", "name": "edit", "input": {"path": f"src/t{n}.ts", "new": _text(480)}}
        contents.append(("assistant", [use]))
        contents.append(("user", [{"type": "tool_result", "tool_use_id": f"e{n}", "content": "ok"}]))
    return contents


def test_a_default_budget_serves_at_most_one_and_a_half_times_itself_after_a_compaction():
    """At the default keep budget the cut may move back to the start of the turn for up to half
    as much again; with the summary added, what a compaction serves would pass 1.5 × the budget
    (15,000 at the default 10,000), so the part is cut again, later, inside the turn."""
    early = [(m.role, m.content) for m in CHATTY]
    contents = early + edit_heavy_turn(26)  # a ~13k-token turn: the cut moves back to its start
    messages = [Msg(seq, role, c, count_content(c)) for seq, (role, c) in enumerate(contents, start=1)]
    config = CompactionConfig(context_window=200_000)
    snapshot = inputs(messages, config=config, previous_summary_tokens=3_000)
    assert config.keep_recent_tokens == 10_000
    plan = policy.plan(snapshot)
    served = plan.summary_tokens + FRAMING + sum(m.tokens for m in plan.cut.kept)
    assert served <= 15_000
    as_budget = policy.plan(replace(snapshot, keep_explicit=True))  # the same budget, honoured as given
    assert as_budget.cut.first_kept_seq == len(early) + 1  # the turn's start
    assert as_budget.summary_tokens + FRAMING + sum(m.tokens for m in as_budget.cut.kept) > 15_000
    assert plan.cut.first_kept_seq > len(early) + 1  # cut inside the turn


def test_the_summary_estimate_grows_with_the_previous_summary_up_to_the_budget():
    config = CompactionConfig(context_window=200_000)
    fresh = estimate_summary_tokens(config, previous_summary_tokens=0, tokens_summarized=100_000)
    assert fresh == policy.SUMMARY_BASE_TOKENS + int(100_000 * policy.SUMMARY_SHARE)
    merged = estimate_summary_tokens(config, previous_summary_tokens=3_000, tokens_summarized=100_000)
    assert merged == fresh + 3_000
    assert estimate_summary_tokens(config, previous_summary_tokens=10**6, tokens_summarized=0) == config.summary_budget


# --- the loop guard ------------------------------------------------------------------------

TRIGGER = 60_000
SUCCEEDED_OVER = LastCompaction("succeeded", tokens_before=70_000, tokens_after=65_000, snapshot_seq=40)
SUCCEEDED_UNDER = LastCompaction("succeeded", tokens_before=70_000, tokens_after=30_000, snapshot_seq=40)
SKIPPED = LastCompaction("skipped", tokens_before=70_000, tokens_after=None, snapshot_seq=40)
FAILED = LastCompaction("failed", tokens_before=70_000, tokens_after=None, snapshot_seq=40)
NEVER_SNAPSHOTTED = LastCompaction("failed", tokens_before=None, tokens_after=None, snapshot_seq=None)


@pytest.mark.parametrize(
    ("last", "new_tokens", "held"),
    [
        (None, 0, None),
        (SUCCEEDED_UNDER, 0, None),  # it helped: the next crossing is real work
        (NEVER_SNAPSHOTTED, 0, None),  # failed before its snapshot: nothing to compare with
        (SUCCEEDED_OVER, 5_999, "the last compaction left 65,000 tokens"),
        (SUCCEEDED_OVER, 6_000, None),  # 10 % of the trigger appended since
        (SKIPPED, 100, "could not reduce 70,000 tokens"),
        (FAILED, 100, "failed at 70,000 tokens"),
        (FAILED, 6_000, None),
    ],
)
def test_the_loop_guard_holds_until_a_share_of_the_trigger_was_appended(last, new_tokens, held):
    message = loop_guard(last, tokens=71_000, trigger=TRIGGER, new_tokens=new_tokens)
    if held is None:
        assert message is None
    else:
        assert held in message and f"only {new_tokens:,} tokens were appended since (needs 6,000)" in message
    # The database is asked how much was appended only when the answer matters.
    assert policy.loop_guard_watches(last, trigger=TRIGGER) == (last in (SUCCEEDED_OVER, SKIPPED, FAILED))


def test_the_loop_guard_scales_with_the_trigger_above_a_floor():
    assert loop_guard_new_tokens(167_000) == 16_700
    assert loop_guard_new_tokens(5_000) == policy.LOOP_GUARD_MIN_NEW_TOKENS
