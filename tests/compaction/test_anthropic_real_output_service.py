"""Two compactions of a real Claude Code session through the service (jobs, stored rows), the
LLM answered by the local Messages-API server with the reply the real model gave Claude Code
for that session. The session's compact prompt is Claude Code's own
instructions, so the real reply answers what was asked."""

from __future__ import annotations

import pytest

from compaction import services
from compaction.core.cutpoint import valid_cut_indices
from compaction.core.prompts import strip_file_tags
from compaction.core.work import from_json
from compaction.models import Status, WorkStateRecord
from tests.corpus import TRANSCRIPTS, as_msgs, corpus, history_before_compaction
from tests.fake_anthropic import FakeAnthropic, Recorded, Step, recorded_compaction

from .factories import append, make_session

pytestmark = [corpus, pytest.mark.django_db]

SESSION = "8463c716-a2ea-4c14-9efa-87158ebd9f20"


def test_two_compactions_on_a_real_reply_are_parsed_repaired_and_merged(user, settings):
    history, _ = history_before_compaction(TRANSCRIPTS / "claude-code" / f"{SESSION}.jsonl")
    (path,) = (TRANSCRIPTS / "claude-code" / SESSION / "subagents").glob("agent-acompact-*.jsonl")
    call = recorded_compaction(path)
    # Cut the history in two where a cut is valid (never inside a tool pair).
    half = next(i for i in valid_cut_indices(as_msgs(history)) if i >= len(history) // 2)
    calls: list[Recorded] = []

    def reply(record: Recorded) -> Step:
        calls.append(record)
        return Step.success(call.response)

    with FakeAnthropic(default=reply) as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-fake-real-reply"
        settings.ANTHROPIC_BASE_URL = server.base_url
        session = make_session(
            user,
            window=200_000,
            keep_recent_tokens=4_000,
            reserve_tokens=16_384,  # the default summary budget (the engine tests' factory uses a small one)
            compact_prompt="{conversation}\n\n" + call.prompt.replace("{", "{{").replace("}", "}}"),
        )
        append(session, history[:half])
        first = services.compaction_run(compaction_id=services.compaction_request(session=session, reason="manual").pk)
        append(session, history[half:])
        second = services.compaction_run(compaction_id=services.compaction_request(session=session, reason="manual").pk)

    for job in (first, second):
        assert job.status == Status.SUCCEEDED, job.error
        assert job.strategy == "anthropic", job.fallbacks
        assert "<analysis>" not in job.summary and "<summary>" not in job.summary
        assert job.fidelity["score"] >= job.fidelity["score_before_repair"]
        assert job.usage["cache_creation_input_tokens"] > 0
    # Every error line of the work the ledger asks for is in the first summary (the model's own
    # or added by the repair), and the check says how many it asked for.
    errors = first.fidelity["errors"]
    assert errors["kept"] == errors["total"], first.fidelity
    assert not any(job.fidelity["repaired"]["skipped_for_budget"] for job in (first, second))
    # The second job's prompt is the update prompt over the first summary (its file lists aside).
    update = calls[-1].prompt
    assert "<previous-summary>" in update and "never silently drop" in update
    assert strip_file_tags(first.summary)[:500] in update
    assert second.based_on_id == first.pk
    # What the first compaction handed over survives the merge: its commits (from the work state
    # it stored) are named by the merged summary, the agreement check adds any the model lost.
    stored = from_json(WorkStateRecord.objects.get(compaction=first).data)
    shas = [c.sha[:7] for c in stored.git.commits if c.subject]
    assert shas
    assert all(sha in second.summary for sha in shas), (shas, second.fidelity["agreement"])
    assert set(first.modified_files) <= set(second.modified_files)
