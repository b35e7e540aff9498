"""The cache-aware policy (compaction.core.policy) and what it buys on real sessions."""

from __future__ import annotations

import pytest

from compaction import services
from compaction.core.policy import PRUNE, PRUNE_SUMMARIZE, SUMMARIZE, Candidate, choose
from compaction.core.transcripts.base import context_tokens
from compaction.models import Event, EventKind, Status
from tests.corpus import TRANSCRIPTS as SHARED_TRANSCRIPTS
from tests.corpus import corpus

from .factories import append, conversation, make_session

pytestmark = pytest.mark.django_db


def request_and_run(session, **kwargs):
    kwargs.setdefault("reason", "manual")
    job = services.compaction_request(session=session, **kwargs)
    return services.compaction_run(compaction_id=job.pk)


TRIGGER = 100_000


def test_a_prune_that_relieves_too_little_loses_to_a_summary():
    # The measured case: a prune of old tool output relieving ~25 % of the trigger, rewriting
    # nearly the whole cached prompt from message 47 on.
    prune = Candidate(PRUNE, 75_000, unchanged_prefix=20_000, first_changed_seq=47)
    summary = Candidate(SUMMARIZE, 40_000, unchanged_prefix=15_000, first_changed_seq=1)
    decision = choose([prune, summary], tokens_before=100_000, trigger=TRIGGER)
    assert decision.chosen is summary
    assert "not prune relieves 25,000 < 50,000" in decision.reason
    assert [row.qualifies for row in decision.considered] == [False, True]
    assert decision.considered[1].runway == 60_000 and decision.considered[1].cache_invalidated == 25_000


def test_a_prune_that_relieves_enough_wins_and_keeps_the_conversation():
    prune = Candidate(PRUNE, 45_000, unchanged_prefix=30_000, first_changed_seq=80)
    summary = Candidate(SUMMARIZE, 30_000, unchanged_prefix=15_000, first_changed_seq=1)
    decision = choose([prune, summary], tokens_before=100_000, trigger=TRIGGER)
    assert decision.chosen is prune
    # A lower bar for the relief, the same rule: 20 % relief is enough with prune_min_relief 0.2.
    small = Candidate(PRUNE, 78_000, unchanged_prefix=30_000, first_changed_seq=80)
    assert choose([small, summary], tokens_before=100_000, trigger=TRIGGER).chosen is summary
    assert (
        choose([small, summary], tokens_before=100_000, trigger=TRIGGER, prune_min_relief=0.2, target_ratio=0.8).chosen
        is small
    )


def test_among_summaries_the_fewest_cache_tokens_per_token_of_runway_win():
    summary = Candidate(SUMMARIZE, 45_000, unchanged_prefix=15_000, first_changed_seq=1)
    both = Candidate(PRUNE_SUMMARIZE, 35_000, unchanged_prefix=15_000, first_changed_seq=1)
    decision = choose([summary, both], tokens_before=100_000, trigger=TRIGGER)
    assert decision.chosen is both  # 20,000 / 65,000 < 30,000 / 55,000
    assert "fewest cache tokens per token of runway" in decision.reason


def test_when_nothing_lands_at_the_target_the_most_runway_wins_but_never_a_weak_prune():
    prune = Candidate(PRUNE, 60_000, unchanged_prefix=20_000, first_changed_seq=9)
    summary = Candidate(SUMMARIZE, 70_000, unchanged_prefix=15_000, first_changed_seq=1)
    decision = choose([prune, summary], tokens_before=100_000, trigger=TRIGGER)
    assert decision.chosen is summary and "no candidate lands at or below 50,000" in decision.reason
    # Only a weak prune possible: made if it gets under the trigger, else nothing.
    assert choose([prune], tokens_before=100_000, trigger=TRIGGER).chosen is prune
    over = Candidate(PRUNE, 101_000, unchanged_prefix=20_000, first_changed_seq=9)
    assert choose([over], tokens_before=110_000, trigger=TRIGGER) is None
    assert choose([], tokens_before=110_000, trigger=TRIGGER) is None


def test_dry_run_manual_run_and_forced_prune_share_the_policy(user):
    # keep_recent_tokens not set: the default keep budget, capped to land at the target.
    session = make_session(user, window=200_000, auto_compact_token_limit=60_000, keep_recent_tokens=None)
    append(session, conversation(12, tools=2, size=150))
    preview = services.compaction_dry_run(session=session)
    assert preview["would_compact"] and preview["policy"] == PRUNE_SUMMARIZE, preview["policy_reason"]
    assert {row["kind"] for row in preview["policy_candidates"]} >= {PRUNE, SUMMARIZE}
    job = request_and_run(session)  # manual, strategy auto: the same choice
    assert job.status == Status.SUCCEEDED, job.error or job.detail
    assert job.strategy == "extractive" and job.policy_reason == preview["policy_reason"][:300]
    assert job.first_changed_seq == preview["first_changed_seq"] == preview["first_summarized_seq"]
    assert job.runway_tokens == 60_000 - job.tokens_after
    assert job.tokens_after <= 30_000  # at or below half the trigger
    assert job.cache_invalidated_tokens == job.tokens_after - session.system_prompt_tokens
    finished = Event.objects.get(compaction=job, kind=EventKind.COMPACTION_FINISHED)
    assert finished.data["runway_tokens"] == job.runway_tokens
    assert finished.data["cache_invalidated_tokens"] == job.cache_invalidated_tokens

    # strategy=prune still forces a prune, however little it relieves.
    other = make_session(user, window=200_000, auto_compact_token_limit=60_000, keep_recent_tokens=20_000)
    append(other, conversation(12, tools=2, size=150))
    preview = services.compaction_dry_run(session=other, strategy="prune")
    assert preview["would_compact"] and preview["strategy"] == "prune"
    forced = request_and_run(other, strategy="prune")
    assert forced.status == Status.SUCCEEDED and forced.strategy == "prune", forced.detail
    assert forced.policy_reason.startswith("prune: requested")
    assert forced.first_changed_seq == preview["first_changed_seq"]


def test_the_api_shows_what_a_compaction_cost_and_bought(api, user):
    session = make_session(user, window=200_000, auto_compact_token_limit=60_000, keep_recent_tokens=20_000)
    append(session, conversation(12, tools=2, size=150))
    job = request_and_run(session)
    body = api.get(f"/api/v1/sessions/{session.pk}/compactions/{job.pk}/").json()
    for key in ("first_changed_seq", "cache_invalidated_tokens", "runway_tokens", "policy_reason"):
        assert body[key] == getattr(job, key), key
    assert body["policy_candidates"] and body["runway_tokens"] > 0


# --- whole replays of the shared long Claude Code sessions ----------------------------------

TRANSCRIPTS = SHARED_TRANSCRIPTS / "claude-code"
WINDOW = 200_000
REPLAY_TRIGGER = 167_000  # where Claude Code compacted (its preTokens ≈ 167k on a 200k window)


@corpus
@pytest.mark.slow
@pytest.mark.parametrize("name", ["8463c716-a2ea-4c14-9efa-87158ebd9f20", "258c7280-ae70-4798-800f-63464d01a85d"])
def test_whole_replay_compacts_no_more_often_than_claude_code_and_lands_at_half_the_trigger(user, name):
    from compaction.core.transcripts.claude_code import read_claude_code
    from sessions import services as session_services

    transcript = read_claude_code(TRANSCRIPTS / f"{name}.jsonl")
    messages = services.transcript_messages_for_api(transcript.messages)
    session = session_services.session_create(
        owner=user,
        title=name,
        agent="claude-code",
        model=transcript.model or "",
        context_window=WINDOW,
        compaction_settings={"auto_compact_token_limit": REPLAY_TRIGGER},
    )
    result = services.transcript_replay(session=session, messages=messages, run_inline=True)
    assert result.steps == len(messages)
    assert len(transcript.compactions) == 1  # Claude Code compacted once in each
    jobs = result.compactions
    summary = [(j.strategy, j.tokens_before, j.tokens_after, j.runway_tokens, j.cache_invalidated_tokens) for j in jobs]
    print(f"{name}: {summary}")
    assert 1 <= len(jobs) <= len(transcript.compactions), summary
    for job in jobs:
        assert job.reason == "threshold"
        assert job.tokens_before > REPLAY_TRIGGER
        assert job.tokens_after <= REPLAY_TRIGGER // 2, summary
        assert job.runway_tokens == REPLAY_TRIGGER - job.tokens_after
        # A summary rewrites the prompt from the first message on: all but the system prompt
        # (and the fixed part only the provider counts) is billed again.
        assert job.first_changed_seq == job.first_summarized_seq
        assert 0 < job.cache_invalidated_tokens < job.tokens_after
        assert "not prune relieves" in job.policy_reason, job.policy_reason
    # The prune alone was weighed and rejected for its relief, as measured on the shared sessions (17–29 %).
    prune = next(row for row in jobs[0].policy_candidates if row["kind"] == PRUNE)
    assert not prune["qualifies"] and prune["tokens_after"] > REPLAY_TRIGGER // 2
    # Claude Code's own figure for the same compaction, from its first reply after it.
    cc_index = transcript.compactions[0]["before_message_index"]
    cc_after = next(
        context_tokens(m.get("usage"))
        for m in transcript.messages[cc_index:]
        if m["role"] == "assistant" and context_tokens(m.get("usage"))
    )
    # Claude Code keeps nothing verbatim; we keep the task in progress verbatim beside a summary
    # and land near its figure (within a quarter) all the same.
    assert abs(jobs[0].tokens_after - cc_after) < cc_after // 4, (jobs[0].tokens_after, cc_after)
    session.refresh_from_db()
    assert session_services.session_usage(session).tokens < REPLAY_TRIGGER


def test_the_dashboard_shows_the_runway_left_and_what_a_compaction_cost(client, user):
    from django.urls import reverse

    client.force_login(user)
    session = make_session(user, window=200_000, auto_compact_token_limit=60_000, keep_recent_tokens=None)
    append(session, conversation(12, tools=2, size=150))
    page = client.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    assert "Runway: none —" in page and "tokens past the trigger" in page  # over the trigger, not compacted
    job = request_and_run(session)
    page = client.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    assert f"Runway left: {job.runway_tokens:,} tokens" in page
    detail = client.get(reverse("dashboard:compaction-detail", args=[session.pk, job.pk])).content.decode()
    assert f"{job.cache_invalidated_tokens:,} tokens" in detail.replace("\u202f", ",")
    assert "Runway bought" in detail and f"#{job.first_changed_seq}</a>" in detail
    assert "Why this compaction" in detail and "summarize: lands at" in detail


def test_the_kept_tail_is_the_task_in_progress(user, settings):
    """The snapshot reads where the task in progress began from the stored messages: the
    default keep budget keeps its messages and no more (the summary hands over the rest)."""
    settings.COMPACTOR = {**settings.COMPACTOR, "KEEP_RECENT_TOKENS": 20_000}  # a default far above the task
    session = make_session(user, window=200_000, auto_compact_token_limit=100_000, keep_recent_tokens=None)
    append(session, conversation(30, tools=2, size=150))
    start = [
        {"role": "user", "content": "Take proj-a.2 next."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "bd1",
                    "name": "Bash",
                    "input": {"command": "bd update proj-a.2 --status in_progress"},
                }
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "bd1", "content": "✓ Updated proj-a.2"}]},
    ]
    append(session, start)
    task_seq = session.last_seq - 2  # the person's message that began it
    append(session, conversation(3, start=30, tools=2, size=30))  # ~7k tokens of work on it
    preview = services.compaction_dry_run(session=session)
    assert preview["would_compact"], preview
    assert task_seq - 4 < preview["first_kept_seq"] <= task_seq + 1
    # Without the task, the same history keeps the default 20k-token tail: more messages.
    other = make_session(user, window=200_000, auto_compact_token_limit=100_000, keep_recent_tokens=None)
    append(other, conversation(30, tools=2, size=150) + conversation(4, start=30, tools=2, size=30))
    assert services.compaction_dry_run(session=other)["first_kept_seq"] < task_seq - 10
