"""Messages stored while a compaction job runs (after its snapshot) are served after its summary:
what the summary states as the current status is computed with them at activation. The summary
said "The latest request (#N), not yet reported done" while the kept message after it, stored
150 ms after the job took its snapshot, said the work was done."""

from __future__ import annotations

import pytest

from compaction.models import Compaction, Reason, Status
from compaction.services import compaction_request, compaction_run, planning
from sessions.selectors import context_build

from .factories import append, conversation, make_session

pytestmark = pytest.mark.django_db

NOT_DONE = "not yet reported done"
DONE = "All done: the module is updated and its tests pass."


def _job_that_sees_a_message_arrive(session, monkeypatch, late: list[dict]) -> Compaction:
    real = planning.outcome_compute

    def compute_then_the_agent_answers(*args, **kwargs):
        outcome = real(*args, **kwargs)  # the snapshot and the summary: the job's work
        append(session, late)  # meanwhile the agent's next message is stored
        return outcome

    monkeypatch.setattr(planning, "outcome_compute", compute_then_the_agent_answers)
    job = compaction_request(session=session, reason=Reason.MANUAL, strategy="extractive")
    compaction_run(compaction_id=job.pk)
    job.refresh_from_db()
    return job


def test_a_reply_stored_while_the_job_ran_is_in_the_status_the_summary_states(user, monkeypatch):
    session = make_session(user, keep_recent_tokens=600)
    append(session, conversation(6))
    append(session, [{"role": "user", "content": "Request 99: update src/module_99.py so the last step passes."}])
    job = _job_that_sees_a_message_arrive(session, monkeypatch, [{"role": "assistant", "content": DONE}])
    assert job.status == Status.SUCCEEDED
    assert NOT_DONE not in job.summary
    context = context_build(session=session)
    assert context.messages[-1]["content"] == DONE  # served after the summary, verbatim


def test_without_a_late_message_the_open_request_is_still_reported(user, monkeypatch):
    """The same job with the agent still working: the status line stays (the check above can fail)."""
    session = make_session(user, keep_recent_tokens=600)
    append(session, conversation(6))
    append(session, [{"role": "user", "content": "Request 99: update src/module_99.py so the last step passes."}])
    job = _job_that_sees_a_message_arrive(session, monkeypatch, [{"role": "user", "content": "and hurry"}])
    assert job.status == Status.SUCCEEDED
    assert NOT_DONE in job.summary
