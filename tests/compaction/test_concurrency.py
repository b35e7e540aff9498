"""Races the engine must win: appends during a slow job, two compactions from one base, a zombie
worker, concurrent requests. Threads share the test database, so these are transactional tests
(PostgreSQL in CI; SQLite serializes the writers but exercises the same checks)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from compaction import services
from compaction.models import Compaction, Event, EventKind, Status
from compaction.services import planning
from sessions.models import Message
from sessions.selectors import context_build
from tests.services import require_postgres

from .factories import append, conversation, make_session, orphan_tool_results, served_seqs

pytestmark = pytest.mark.django_db(transaction=True)


class Gate:
    """Makes the summarizer of one thread block until the test releases it."""

    def __init__(self, monkeypatch, blocked_thread: str = "worker"):
        self.started = threading.Event()
        self.release = threading.Event()
        real = planning.build_summarizer_chain

        def chain(**kwargs):
            if threading.current_thread().name == blocked_thread:
                self.started.set()
                assert self.release.wait(30), "test never released the summarizer"
            return real(**kwargs)

        monkeypatch.setattr(planning, "build_summarizer_chain", chain)


def run_in_thread(target, name: str = "worker") -> tuple[threading.Thread, dict]:
    box: dict = {}

    def body():
        try:
            box["result"] = target()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread, box


def test_appends_during_a_slow_compaction_stay_verbatim_after_it_activates(user, monkeypatch):
    session = make_session(user)
    append(session, conversation(8))
    gate = Gate(monkeypatch)
    job = services.compaction_request(session=session, reason="manual")
    thread, box = run_in_thread(lambda: services.compaction_run(compaction_id=job.pk))
    assert gate.started.wait(30)
    late = conversation(3, start=100)
    append(session, late[:5])
    append(session, late[5:])
    gate.release.set()
    thread.join(30)
    assert "error" not in box, box.get("error")
    job = box["result"]
    assert job.status == Status.SUCCEEDED, job.error
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk
    seqs = served_seqs(session)
    assert seqs == list(range(job.first_kept_seq, session.last_seq + 1))
    late_rows = list(Message.objects.filter(session=session).order_by("-seq")[: len(late)])[::-1]
    assert [row.content for row in late_rows] == [m["content"] for m in late]
    assert all(row.seq in seqs for row in late_rows)
    # Usage counts the late messages too (recomputed at activation, after they were stored).

    context = context_build(session=session).as_dict()
    assert orphan_tool_results(context["messages"]) == []
    assert context["estimated_tokens"] == session.context_tokens


def test_two_compactions_from_one_base_only_one_activates(user, monkeypatch):
    """A background job and an overflow compaction both start from the same active compaction."""
    session = make_session(user)
    append(session, conversation(8))
    gate = Gate(monkeypatch)
    background = services.compaction_request(session=session, reason="manual")
    thread, box = run_in_thread(lambda: services.compaction_run(compaction_id=background.pk))
    assert gate.started.wait(30)
    result = services.compaction_overflow(
        session=session, error_text="prompt is too long: 250000 tokens > 200000 maximum"
    )
    assert result["compacted"] is True
    overflow = result["compaction"]
    gate.release.set()
    thread.join(30)
    background = box["result"]
    session.refresh_from_db()
    assert overflow.based_on_id is None and background.based_on_id is None
    assert session.active_compaction_id == overflow.pk
    assert background.status == Status.FAILED and background.error.startswith("superseded")
    assert Event.objects.filter(session=session, kind=EventKind.COMPACTION_FINISHED).count() == 1
    assert Compaction.objects.filter(session=session, status=Status.SUCCEEDED).count() == 1


def test_a_zombie_worker_cannot_activate_after_its_job_was_taken_over(user, monkeypatch):
    session = make_session(user)
    append(session, conversation(8))
    gate = Gate(monkeypatch, blocked_thread="zombie")
    job = services.compaction_request(session=session, reason="manual")
    thread, box = run_in_thread(lambda: services.compaction_run(compaction_id=job.pk), name="zombie")
    assert gate.started.wait(30)
    # The first worker looks dead: the sweeper re-queues the job and another worker runs it.
    assert services.compaction_sweep_stuck(now=timezone.now() + timedelta(hours=1))["requeued"] == 1
    done = services.compaction_run(compaction_id=job.pk)
    assert done.status == Status.SUCCEEDED and done.attempts == 2
    gate.release.set()
    thread.join(30)
    job.refresh_from_db()
    assert job.status == Status.SUCCEEDED and job.attempts == 2
    assert Event.objects.filter(compaction=job, kind=EventKind.COMPACTION_FINISHED).count() == 1
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk


def test_concurrent_requests_queue_exactly_one_job(user):
    # Truly concurrent writers: the in-memory SQLite test database answers "table is locked"
    # instead of waiting, so this one needs PostgreSQL (the unique in-flight index does the work).
    require_postgres()
    session = make_session(user)
    append(session, conversation(4))
    barrier = threading.Barrier(6)
    threads = []
    boxes = []
    for index in range(6):

        def request():
            barrier.wait(10)
            return services.compaction_request(session=session, reason="manual").pk

        thread, box = run_in_thread(request, name=f"client-{index}")
        threads.append(thread)
        boxes.append(box)
    for thread in threads:
        thread.join(30)
    assert all("error" not in box for box in boxes), [box.get("error") for box in boxes]
    assert len({box["result"] for box in boxes}) == 1
    assert Compaction.objects.filter(session=session).count() == 1
    assert Event.objects.filter(session=session, kind=EventKind.COMPACTION_QUEUED).count() == 1
