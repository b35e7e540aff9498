"""A replay (import_transcript --replay) runs its session's compactions itself; a Celery worker
that receives one of them meanwhile leaves it alone, so the two never race for the session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction import importing, services, tasks
from compaction.models import Compaction, Status
from sessions import services as session_services
from sessions.models import Session


def long_chat(path: Path, pairs: int = 24) -> Path:
    words = " ".join(f"word{n}" for n in range(300))
    messages = []
    for n in range(pairs):
        messages.append({"role": "user", "content": f"Step {n}: please summarise this text. {words}"})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Summary {n}: {words}"}]})
    path.write_text(json.dumps(messages))
    return path


@pytest.fixture
def eager_worker():
    """Each enqueued task runs at once in this process, at the commit that enqueued it: a worker
    as fast as a worker can be, in the middle of the replay."""
    from project.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.mark.django_db(transaction=True)
def test_a_worker_leaves_a_replayed_sessions_jobs_to_the_replay(user, tmp_path, eager_worker, monkeypatch):
    outcomes: list[tuple[bool, object]] = []
    real = services.compaction_run_unless_replaying

    def worker(*, compaction_id, **kwargs):
        replaying = Compaction.objects.get(pk=compaction_id).session.replaying
        outcomes.append((replaying, real(compaction_id=compaction_id, **kwargs)))

    monkeypatch.setattr(services, "compaction_run_unless_replaying", worker)  # the task looks it up at run time
    seen_replaying: list[bool] = []

    def on_step(step) -> None:
        seen_replaying.append(Session.objects.get(owner=user).replaying)

    report = importing.transcript_import(
        owner=user,
        path=long_chat(tmp_path / "chat.json"),
        replay=True,
        window=32_000,
        trigger=6_000,
        on_step=on_step,
    )
    session = report.session
    jobs = Compaction.objects.filter(session=session, status=Status.SUCCEEDED)
    assert jobs.count() >= 2, "the replay should have compacted"
    # The worker got every job, while the session was being replayed, and ran none of them.
    assert outcomes and all(replaying for replaying, _ in outcomes)
    assert all(result is None for _, result in outcomes)
    assert all(seen_replaying) and len(seen_replaying) == report.messages == 48
    session.refresh_from_db()
    assert session.replaying is False  # other workers may take the session again
    assert not Compaction.objects.filter(session=session, status=Status.QUEUED).exists()


@pytest.mark.django_db
def test_once_the_replay_is_over_the_worker_runs_the_sessions_jobs(user):
    session = session_services.session_create(owner=user, title="t", context_window=32_000)
    session_services.messages_append(
        session=session,
        messages=[{"role": r, "content": f"{r} message {n} " * 200} for n in range(6) for r in ("user", "assistant")],
    )
    job = services.compaction_request(session=session, reason="manual")
    Session.objects.filter(pk=session.pk).update(replaying=True)
    assert tasks.run_compaction(compaction_id=str(job.pk)) is None
    job.refresh_from_db()
    assert job.status == Status.QUEUED and job.attempts == 0  # left for the replay
    Session.objects.filter(pk=session.pk).update(replaying=False)
    tasks.run_compaction(compaction_id=str(job.pk))
    job.refresh_from_db()
    assert job.attempts == 1 and job.status in (Status.SUCCEEDED, Status.SKIPPED)


@pytest.mark.django_db
def test_a_replay_that_fails_stores_nothing(user, tmp_path, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("summarizer exploded")

    monkeypatch.setattr(importing.services, "transcript_replay", broken)
    with pytest.raises(RuntimeError):
        importing.transcript_import(owner=user, path=long_chat(tmp_path / "chat.json", pairs=2), replay=True)
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_replay_that_died_does_not_hold_its_sessions_jobs_forever(user):
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    session = session_services.session_create(owner=user, title="t", context_window=32_000)
    session_services.messages_append(
        session=session,
        messages=[{"role": r, "content": f"{r} message {n} " * 200} for n in range(6) for r in ("user", "assistant")],
    )
    job = services.compaction_request(session=session, reason="manual")
    Session.objects.filter(pk=session.pk).update(replaying=True)
    silent = timedelta(seconds=settings.COMPACTION_HARD_TIME_LIMIT + services.jobs.REPLAY_STALE_GRACE_SECONDS)
    now = timezone.now()
    # Still within what one compaction may take: the replay is alive, the job is its own.
    assert services.compaction_run_unless_replaying(compaction_id=job.pk, now=now + silent / 2) is None
    job.refresh_from_db()
    assert job.status == Status.QUEUED
    # Silent for longer (its process was killed): the worker drops the flag and runs the job.
    services.compaction_run_unless_replaying(compaction_id=job.pk, now=now + silent * 2)
    job.refresh_from_db()
    session.refresh_from_db()
    assert job.attempts == 1 and job.status in (Status.SUCCEEDED, Status.SKIPPED)
    assert session.replaying is False
