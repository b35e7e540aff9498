"""A compaction of a long autonomous turn — one request, then the agent working alone for many
tool calls — summarizes everything before the kept messages in one Messages call and serves
one text. The turn's earlier part was a second summary (a second call, another format) that
disagreed with the first."""

from __future__ import annotations

import pytest

from compaction import services
from compaction.models import Status
from sessions.selectors import context_build
from tests.fake_anthropic import FakeAnthropic, Step

from .factories import append, conversation, make_session, turn

pytestmark = pytest.mark.django_db

REPLY = """## Where Things Stand
- Request 3 (#{request}) is in progress: modules 3.0 to 3.14 were read; the rest follow.

## Goal
Update the modules so every step passes.

## Constraints & Preferences
- (none)

## Progress
### Done
- [x] Steps 0-2 updated and reported done.

### In Progress
- [ ] Step 3: reading the module files one by one (#{request} onwards).

### Blocked
- (none)

## Key Decisions
- (none)

## Next Steps
1. Read the remaining module files of step 3.

## Critical Context
- Files under /repo/src/."""


def test_a_long_autonomous_turn_is_compacted_in_one_call_and_served_as_one_text(user, settings):
    with FakeAnthropic() as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-fake-one-call"
        settings.ANTHROPIC_BASE_URL = server.base_url
        session = make_session(user, window=200_000, keep_recent_tokens=3_000, reserve_tokens=16_384)
        append(session, conversation(3))  # three short turns
        request = session.last_seq + 1
        append(session, turn(3, tools=40, size=3))  # one request, then 40 tool calls alone
        server.default = Step.success(REPLY.format(request=request))
        job = services.compaction_run(compaction_id=services.compaction_request(session=session, reason="manual").pk)

    assert job.status == Status.SUCCEEDED, job.error
    assert job.strategy == "anthropic", job.fallbacks
    # The cut fell inside the long turn, far enough in for the old second layer (≥ 5 messages).
    assert job.split_turn and job.first_kept_seq - request >= 5
    assert len(server.requests) == 1 and job.usage["calls"] == 1
    (sent,) = server.requests
    transcript = sent.prompt.split("</conversation>")[0]
    assert f"#{request} [User]: Request 3:" in transcript and "#1 [User]: Request 0:" in transcript
    assert f"#{job.first_kept_seq - 1} " in transcript and f"#{job.first_kept_seq} " not in transcript
    assert f"the assistant's work on the request at #{request}" in sent.prompt
    # One text stored and served: no second layer.
    assert job.turn_prefix_summary == ""
    session.refresh_from_db()
    served = context_build(session=session).as_dict()["messages"][0]["content"]
    text = served if isinstance(served, str) else "".join(b.get("text", "") for b in served)
    assert "Request 3 (#" in text and "turn in progress began" not in text and "<turn-prefix-summary>" not in text
    # Cost, tokens and latency of the one call are on the job.
    (call,) = job.usage["per_call"]
    assert call["input_tokens"] > 0 and call["output_tokens"] > 0 and call["ms"] >= 0
    assert call["transcript_tokens"] > 0 and call["tool_output_cap"] is None  # shown whole
    assert job.usage["cost_usd"] > 0
