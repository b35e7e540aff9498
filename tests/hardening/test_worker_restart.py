"""A worker restart resumes queued and interrupted jobs at once (the probe: after a SIGKILL the
interrupted jobs re-ran after 43 s: lease 30 s + sweep 15 s).

A claim records the worker's name; a worker that starts re-queues what a previous process of its
name was running and sends the queued jobs again (compaction_recover_orphans, on worker_ready),
and the sweeper re-queues a job whose worker's heartbeat restarted after the claim. The last test
runs real workers: SIGKILL during a compaction, a new worker of the same name, both jobs started
again within 10 s of the kill.
"""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from compaction import services
from compaction.models import Compaction, Status
from compaction.services import jobs
from ops.models import WorkerHeartbeat
from project.celery import app as celery_app
from tests.compaction.factories import append, conversation, make_session
from tests.e2e.conftest import VALID_SUMMARY
from tests.fake_anthropic import FakeAnthropic, Step

NAME = "w1@host"


def _job(user, **claim) -> Compaction:
    session = make_session(user)
    append(session, conversation(6))
    job = services.compaction_request(session=session, reason="manual")
    if claim:
        Compaction.objects.filter(pk=job.pk).update(status=Status.RUNNING, attempts=1, **claim)
    return job


@pytest.fixture
def not_eager():
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def sent(monkeypatch) -> list:
    messages: list = []
    monkeypatch.setattr(jobs, "enqueue", lambda job_id, mark=True: messages.append(job_id))
    return messages


@pytest.mark.django_db
def test_a_starting_worker_requeues_its_previous_process_jobs_and_resends_the_queued(user, sent):
    now = timezone.now()
    lease = now + timedelta(seconds=30)
    orphan = _job(user, worker=NAME, started_at=now - timedelta(seconds=5), deadline_at=lease)
    elsewhere = _job(user, worker="w2@other", started_at=now - timedelta(seconds=5), deadline_at=lease)
    queued = _job(user)
    Compaction.objects.filter(pk=queued.pk).update(enqueued_at=now - timedelta(seconds=3))

    result = services.compaction_recover_orphans(worker=NAME, since=now - timedelta(seconds=1))

    assert result == {"requeued": 1, "failed": 0, "resent": 1}
    orphan.refresh_from_db()
    assert orphan.status == Status.QUEUED and orphan.attempts == 1 and orphan.deadline_at is None
    assert Compaction.objects.get(pk=elsewhere.pk).status == Status.RUNNING  # another worker's: its lease decides
    assert sorted(map(str, sent)) == sorted([str(orphan.pk), str(queued.pk)])
    # Its own claims (after it started) are left alone, and nothing queued since is sent twice.
    sent.clear()
    mine = _job(user, worker=NAME, started_at=now + timedelta(seconds=1), deadline_at=lease)
    assert services.compaction_recover_orphans(worker=NAME, since=now)["requeued"] == 0
    assert Compaction.objects.get(pk=mine.pk).status == Status.RUNNING


@pytest.mark.django_db
def test_the_sweeper_requeues_a_job_whose_worker_restarted_before_its_lease_lapses(user, sent):
    now = timezone.now()
    job = _job(user, worker=NAME, started_at=now - timedelta(seconds=4), deadline_at=now + timedelta(seconds=30))
    WorkerHeartbeat.objects.create(worker=NAME, pid=1, started_at=now - timedelta(seconds=10), seen_at=now)
    assert services.compaction_sweep_stuck(now=now)["requeued"] == 0  # the claiming process is alive

    WorkerHeartbeat.objects.filter(worker=NAME).update(started_at=now - timedelta(seconds=1), pid=2)
    assert services.compaction_sweep_stuck(now=now)["requeued"] == 1
    job.refresh_from_db()
    assert job.status == Status.QUEUED
    assert "restarted" in job.events.order_by("-created_at").first().message


@pytest.mark.django_db
def test_a_claim_records_the_worker(user, eager_celery):
    from compaction.tasks import run_compaction

    job = _job(user)
    run_compaction.apply(kwargs={"compaction_id": str(job.pk)})
    job.refresh_from_db()
    assert job.status in (Status.SUCCEEDED, Status.SKIPPED)
    assert job.worker == socket.gethostname()  # eager: Celery names the host


@pytest.mark.django_db(transaction=True)
@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_a_sigkilled_worker_s_job_starts_again_within_10_s_of_the_kill(worker_factory, not_eager, api, user):
    # The first summary call hangs (the attempt the SIGKILL interrupts); later ones answer at once.
    with FakeAnthropic(default=Step.success(VALID_SUMMARY)) as llm:
        llm.push(Step.success(VALID_SUMMARY, delay=60))
        env = {"ANTHROPIC_API_KEY": "sk-ant-fake-restart", "ANTHROPIC_BASE_URL": llm.base_url}
        worker = worker_factory("restart", **env)  # --pool=solo: the job runs in the main process
        session = make_session(user)
        append(session, conversation(8))
        response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {}, format="json")
        assert response.status_code == 202, response.content
        job = Compaction.objects.get(pk=response.json()["id"])
        deadline = time.monotonic() + 30
        while not llm.requests:  # running, inside its summary call
            assert time.monotonic() < deadline, "the job never called the summarizer"
            time.sleep(0.1)
        worker.kill()
        killed = timezone.now()
        job.refresh_from_db()
        assert job.status == Status.RUNNING and job.worker.startswith("restart@")

        worker_factory("restart", **env)  # as make serve's supervisor restarts it: the same name
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.attempts == 2 and job.started_at is not None:
                break
            time.sleep(0.1)
    assert job.attempts == 2, f"not started again within 30 s of the kill ({job.status})"
    resumed = (job.started_at - killed).total_seconds()
    assert resumed < 10, f"started again {resumed:.1f} s after the kill (lease {settings.COMPACTION_LEASE_SECONDS} s)"
