"""Random interleavings of appends, compactions (manual, threshold, prune, forced), undo and
overflow: after every step the served context is valid and no message is ever lost."""

from __future__ import annotations

import random

import pytest

from compaction import services
from compaction.models import Status
from sessions import services as session_services
from sessions.models import Message
from sessions.selectors import context_build

from .factories import compaction_active_chain, conversation, make_session, orphan_tool_results

pytestmark = pytest.mark.django_db


def check_invariants(session) -> None:
    session.refresh_from_db()
    context = context_build(session=session).as_dict()
    assert orphan_tool_results(context["messages"]) == []
    served = [seq for seq in context["seqs"] if seq is not None]
    active = session.active_compaction
    first = (active.first_kept_seq if active else None) or 1
    # Everything from the cut on is served, in order, none skipped (appends during jobs included).
    assert served == list(range(first, session.last_seq + 1))
    # Everything before the cut is covered by the summaries of the active chain.
    covered: set[int] = set()
    for job in compaction_active_chain(session=session):
        if job.first_summarized_seq is not None:
            covered |= set(range(job.first_summarized_seq, job.last_summarized_seq + 1))
    assert set(range(1, first)) <= covered, "a message before the cut is in no summary"
    assert Message.objects.filter(session=session).count() == session.last_seq
    # Cached usage agrees with the context actually served.
    assert session.context_tokens == context["estimated_tokens"]


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_keep_the_invariants(user, seed):
    rng = random.Random(seed)
    session = make_session(user, window=12_000, keep_recent_tokens=rng.choice([1_000, 2_000, 3_000]))
    next_turn = 0
    for _ in range(14):
        op = rng.choice(["append", "append", "append", "compact", "compact", "revert", "overflow", "prune"])
        if op == "append":
            turns = rng.randint(1, 3)
            session_services.messages_append(
                session=session,
                messages=conversation(turns, start=next_turn, tools=rng.randint(0, 4), size=rng.choice([2, 6, 20])),
            )
            next_turn += turns
        elif op in ("compact", "prune"):
            job = services.compaction_request(
                session=session,
                reason=rng.choice(["manual", "threshold"]),
                strategy="prune" if op == "prune" else rng.choice(["auto", "extractive", "truncate"]),
                overrides={"preserve_messages": rng.randint(2, 8)} if rng.random() < 0.3 else {},
                force=rng.random() < 0.2,
            )
            job = services.compaction_run(compaction_id=job.pk)
            assert job.status in {Status.SUCCEEDED, Status.SKIPPED}, (job.status, job.error)
        elif op == "revert":
            session.refresh_from_db()
            if session.active_compaction is not None:
                services.compaction_revert(compaction=session.active_compaction)
        elif op == "overflow":
            result = services.compaction_overflow(
                session=session, error_text="prompt is too long: 300000 tokens > 200000 maximum"
            )
            assert result["overflow"] is True
        check_invariants(session)
