"""A job whose database went away while it ran is handed back to the queue as soon as the
database answers again: by the worker while it waits a little, else by the task's retry, never
left RUNNING until its lease lapses (the probe: two jobs `running` for 36 s after a PostgreSQL
restart, "could not hand the job back to the queue").

The outage is made at the connection layer (every new cursor raises the driver's
OperationalError), so it runs on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

import threading

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections

from compaction import services
from compaction.models import Compaction, Status
from compaction.services import jobs, planning
from compaction.tasks import run_compaction
from tests.compaction.factories import append, conversation, make_session

pytestmark = pytest.mark.django_db(transaction=True)  # no test transaction for an error to poison


class Outage:
    """The database down from `start()` until `end()` for this connection."""

    def __init__(self) -> None:
        self.conn = connections[DEFAULT_DB_ALIAS]  # this thread's: a timer thread may end the outage
        self.original = self.conn.create_cursor

    def start(self) -> None:
        error = self.conn.Database.OperationalError

        def refuse(name=None):
            raise error("terminating connection due to administrator command (the test's outage)")

        self.conn.create_cursor = refuse

    def end(self) -> None:
        self.conn.create_cursor = self.original


@pytest.fixture
def outage():
    down = Outage()
    yield down
    down.end()


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(jobs, "HAND_BACK_PAUSE_SECONDS", 0.05)
    monkeypatch.setattr(jobs, "HAND_BACK_PATIENCE_SECONDS", 0.3)


def _job(user) -> Compaction:
    session = make_session(user)
    append(session, conversation(6))
    return services.compaction_request(session=session, reason="manual")


def _fail_with_the_database_down(outage, monkeypatch, *, back_after: float | None = None):
    """The summarizer step finds the database gone (and, with back_after, it returns then)."""

    def compute(*args, **kwargs):
        outage.start()
        if back_after is not None:
            threading.Timer(back_after, outage.end).start()
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(planning, "outcome_compute", compute)


def test_the_worker_hands_the_job_back_as_soon_as_the_database_answers(user, outage, monkeypatch, quick):
    monkeypatch.setattr(jobs, "HAND_BACK_PATIENCE_SECONDS", 5.0)
    job = _job(user)
    _fail_with_the_database_down(outage, monkeypatch, back_after=0.4)
    with pytest.raises(OperationalError):  # the task retries it
        services.compaction_run(compaction_id=job.pk)
    job.refresh_from_db()
    assert job.status == Status.QUEUED and job.attempts == 1 and job.started_at is None


def test_a_hand_back_that_failed_is_done_by_the_retry_then_the_job_runs(user, outage, monkeypatch, quick):
    job = _job(user)
    _fail_with_the_database_down(outage, monkeypatch)
    with pytest.raises(services.HandBackPending) as raised:
        services.compaction_run(compaction_id=job.pk)
    assert raised.value.attempt == 1
    outage.end()
    job.refresh_from_db()
    assert job.status == Status.RUNNING  # the database never answered the worker

    monkeypatch.undo()
    # The retry's delivery hands attempt 1 back, then claims and runs it (no lease to wait for).
    done = services.compaction_run_unless_replaying(compaction_id=job.pk, hand_back=1)
    assert done is not None and done.status in (Status.SUCCEEDED, Status.SKIPPED)
    assert done.attempts == 2


def test_the_retry_never_hands_back_another_attempt(user):
    job = _job(user)
    Compaction.objects.filter(pk=job.pk).update(status=Status.RUNNING, attempts=2)  # re-claimed since
    assert services.compaction_run_unless_replaying(compaction_id=job.pk, hand_back=1) is None
    job.refresh_from_db()
    assert job.status == Status.RUNNING and job.attempts == 2


def test_the_task_retries_soon_and_carries_the_hand_back(user, outage, monkeypatch, quick):
    job = _job(user)
    _fail_with_the_database_down(outage, monkeypatch)
    sent: list[dict] = []

    class Retried(Exception):
        pass

    def retry(*, exc, countdown, kwargs):
        sent.append({"countdown": countdown, "kwargs": kwargs, "exc": exc})
        return Retried()

    monkeypatch.setattr(run_compaction, "retry", retry)
    with pytest.raises(Retried):
        run_compaction(compaction_id=str(job.pk))
    outage.end()
    assert sent[0]["kwargs"] == {"compaction_id": str(job.pk), "hand_back": 1}
    assert sent[0]["countdown"] <= 1  # the first retry within a second, not after the lease


def test_a_summary_made_before_the_outage_is_written_once_the_database_answers(user, monkeypatch, quick):
    """The restart came between the summary (an LLM call, paid for) and its write: the write is
    tried again on a fresh connection instead of handing the job back to compute it all again."""
    from compaction.services import activation

    monkeypatch.setattr(jobs, "HAND_BACK_PATIENCE_SECONDS", 5.0)
    job = _job(user)
    computed: list[int] = []
    compute, apply = planning.outcome_compute, activation.outcome_apply

    def counting(*args, **kwargs):
        computed.append(1)
        return compute(*args, **kwargs)

    failures = [OperationalError("terminating connection due to administrator command")] * 2

    def flaky_apply(*args, **kwargs):
        if failures:
            raise failures.pop()
        return apply(*args, **kwargs)

    monkeypatch.setattr(planning, "outcome_compute", counting)
    monkeypatch.setattr(activation, "outcome_apply", flaky_apply)
    done = services.compaction_run(compaction_id=job.pk)
    assert done.status in (Status.SUCCEEDED, Status.SKIPPED)
    assert done.attempts == 1 and len(computed) == 1
