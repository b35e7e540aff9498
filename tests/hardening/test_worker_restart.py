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


class Sent(list):
    """The job ids sent to the broker, and which of them went ahead of the queue (`resumed`)."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed: list = []

    def __call__(self, job_id, mark=True, resumed=False) -> None:
        self.append(job_id)
        if resumed:
            self.resumed.append(job_id)


@pytest.fixture
def sent(monkeypatch) -> Sent:
    messages = Sent()
    monkeypatch.setattr(jobs, "enqueue", messages)
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
    assert sent.resumed == [orphan.pk]  # ahead of the queued jobs (PRIORITY_RESUMED)
    # Its own claims (after it started) are left alone, and nothing queued since is sent twice.
    sent.clear()
    mine = _job(user, worker=NAME, started_at=now + timedelta(seconds=1), deadline_at=lease)
    assert services.compaction_recover_orphans(worker=NAME, since=now)["requeued"] == 0
    assert Compaction.objects.get(pk=mine.pk).status == Status.RUNNING


@pytest.mark.django_db
def test_the_sweeper_requeues_a_job_whose_worker_restarted_before_its_lease_lapses(
    user, sent, django_capture_on_commit_callbacks
):
    now = timezone.now()
    job = _job(user, worker=NAME, started_at=now - timedelta(seconds=4), deadline_at=now + timedelta(seconds=30))
    WorkerHeartbeat.objects.create(worker=NAME, pid=1, started_at=now - timedelta(seconds=10), seen_at=now)
    assert services.compaction_sweep_stuck(now=now)["requeued"] == 0  # the claiming process is alive

    WorkerHeartbeat.objects.filter(worker=NAME).update(started_at=now - timedelta(seconds=1), pid=2)
    with django_capture_on_commit_callbacks(execute=True):
        assert services.compaction_sweep_stuck(now=now)["requeued"] == 1
    assert sent.resumed == [job.pk]  # sent ahead of the queued jobs (PRIORITY_RESUMED)
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


LEAN_START = """
import sys
from project.celery import app

app.Worker(hostname="lean@test", pool_cls="solo", quiet=True)  # Django's setup, the tasks, worker_init
print(",".join(sorted(sys.modules)))
"""


def test_a_worker_starts_without_the_admin_the_urls_or_the_system_checks():
    """Issue 35: a restarted worker was ready 15.5 s (17.6 s at load 19) after a SIGKILL, its start
    CPU-bound: the admin's autodiscover (dashboard, API authentication, drf_spectacular) and the
    system checks (the whole URLconf) ran in it. The worker program (project.worker) skips both;
    what the tasks need is still imported before the pool forks."""
    import os
    import subprocess
    import sys

    from tests.hardening.servers import ROOT

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_SETTINGS_MODULE", "CELERY_SKIP_CHECKS"))}
    env.update(DEBUG="1", PYTHONPATH=str(ROOT), ANTHROPIC_API_KEY="sk-ant-lean-start")
    done = subprocess.run(
        [sys.executable, "-c", LEAN_START], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(done.stdout.strip().splitlines()[-1].split(","))
    # What the jobs run is imported before the pool forks, the summarizer's SDK with it (with an API
    # key): the pool's processes share it instead of each importing it on its first job.
    assert {"compaction.tasks", "sessions.tasks", "compaction.services", "anthropic"} <= loaded
    skipped = {
        "sessions.admin", "compaction.admin", "sessions.dashboard.present", "sessions.auth", "project.urls",
        "gateway.views", "drf_spectacular.openapi",
    }  # fmt: skip
    assert skipped & loaded == set()
