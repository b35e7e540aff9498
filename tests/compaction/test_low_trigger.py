"""Low trigger on a 200k window (acceptance finding): replaying a real session with a 60k
auto-compaction limit must compact a few times, each time well under the trigger — not
every few messages with the result landing just under (or over) it.

Before the keep budget was capped relative to the trigger this replay compacted 17 times
(2–48 messages each, 60–69k → 50–60k) plus 5 "nothing to compact" jobs: the default 20k kept
tail + the ~28k only the provider counts + the summary already filled the 60k trigger."""

from __future__ import annotations

import pytest

from compaction import services
from compaction.models import Compaction, Status
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = [corpus, pytest.mark.django_db, pytest.mark.slow]

NAME = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
WINDOW = 200_000
TRIGGER = 60_000


def test_low_trigger_compacts_rarely_and_well_under_the_trigger(user):
    from compaction.core.transcripts.claude_code import read_claude_code
    from sessions import services as session_services

    transcript = read_claude_code(TRANSCRIPTS / "claude-code" / f"{NAME}.jsonl")
    messages = services.transcript_messages_for_api(transcript.messages)
    session = session_services.session_create(
        owner=user,
        title="low trigger",
        agent="claude-code",
        model=transcript.model or "",
        context_window=WINDOW,
        compaction_settings={"auto_compact_token_limit": TRIGGER},
    )
    over: list[int] = []

    def on_step(step) -> None:
        if step.usage_tokens > TRIGGER:
            over.append(step.index)

    result = services.transcript_replay(session=session, messages=messages, run_inline=True, on_step=on_step)
    jobs = list(Compaction.objects.filter(session=session).order_by("created_at"))
    done = [j for j in jobs if j.status == Status.SUCCEEDED]
    for j in jobs:
        print(j.status, j.strategy, j.messages_summarized, j.tokens_before, "→", j.tokens_after, j.detail[:120])
    print(f"steps {result.steps}, over the trigger after {len(over)} steps, {len(done)} compactions")
    assert len(done) >= 3, "the low trigger should compact this 286-message session several times"
    # Few compactions, none of them a "nothing to compact" or a failure.
    assert len(done) <= 9, [(j.messages_summarized, j.tokens_before, j.tokens_after) for j in done]
    assert all(j.status == Status.SUCCEEDED for j in jobs), [(j.status, j.detail) for j in jobs]
    for j in done:
        # Each one summarizes a real stretch and leaves a third of the trigger or more for new work.
        assert j.messages_summarized >= 10, (j.messages_summarized, j.detail)
        assert j.tokens_after <= 0.70 * TRIGGER, (j.tokens_before, j.tokens_after, j.detail)
    assert not over, over  # the inline worker brings every crossing back under the trigger
