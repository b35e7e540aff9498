"""Also: a running job's lease. The worker renews it while the job runs; a dead worker's job is
re-queued by the next sweep after the lease lapses (<= lease + sweep interval = 35 s; a restarted
worker's at once: test_worker_restart.py)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from compaction import lease, services
from compaction.models import Compaction, Status
from tests.compaction.factories import append, conversation, make_session

pytestmark = pytest.mark.django_db(transaction=True)


def _claimed(user) -> Compaction:
    session = make_session(user)
    append(session, conversation(6))
    job = services.compaction_request(session=session, reason="manual")
    now = timezone.now()
    Compaction.objects.filter(pk=job.pk).update(
        status=Status.RUNNING, attempts=1, started_at=now, deadline_at=now + timedelta(seconds=lease.lease_seconds())
    )
    return job


def test_recovery_bound_with_default_settings_is_under_a_minute():
    # A claim's deadline is one lease ahead; the sweeper runs every COMPACTION_SWEEP_SECONDS.
    assert lease.lease_seconds() == settings.COMPACTION_LEASE_SECONDS == 30
    assert settings.CELERY_BEAT_SCHEDULE["sweep-stuck-compactions"]["schedule"] == 5
    assert settings.COMPACTION_LEASE_SECONDS + settings.COMPACTION_SWEEP_SECONDS <= 60


def test_a_renewed_lease_keeps_the_sweeper_away_and_a_lapsed_one_does_not(user):
    job = _claimed(user)
    since = timezone.now() - timedelta(seconds=1)
    later = timezone.now() + timedelta(seconds=lease.lease_seconds() + 5)
    # The worker renewed just before the sweep: still its job.
    assert lease.renew(compaction_id=job.pk, since=since, now=later - timedelta(seconds=2)) == 1
    assert services.compaction_sweep_stuck(now=later)["requeued"] == 0
    # No renewal for a lease: re-queued.
    much_later = later + timedelta(seconds=lease.lease_seconds() + 1)
    assert services.compaction_sweep_stuck(now=much_later)["requeued"] == 1
    job.refresh_from_db()
    assert job.status == Status.QUEUED


def test_renewal_stops_at_the_hard_time_limit(user):
    job = _claimed(user)
    since = timezone.now() - timedelta(seconds=1)
    past_limit = since + timedelta(seconds=settings.COMPACTION_HARD_TIME_LIMIT + lease.GRACE_SECONDS + 100)
    lease.renew(compaction_id=job.pk, since=since, now=past_limit)
    job.refresh_from_db()
    assert job.deadline_at <= since + timedelta(seconds=settings.COMPACTION_HARD_TIME_LIMIT + lease.GRACE_SECONDS)


def test_renewal_leaves_another_claim_alone(user):
    job = _claimed(user)
    # This task started after the claim was made (by another worker): not its claim.
    assert lease.renew(compaction_id=job.pk, since=timezone.now() + timedelta(seconds=1)) == 0


def test_the_task_renews_in_the_background_while_the_job_runs(user, settings):
    settings.COMPACTION_LEASE_SECONDS = 3  # renewal every second
    job = _claimed(user)
    Compaction.objects.filter(pk=job.pk).update(started_at=timezone.now() + timedelta(seconds=1))
    first = Compaction.objects.get(pk=job.pk).deadline_at
    with lease.renewing(compaction_id=job.pk):
        time.sleep(2.5)
        renewed = Compaction.objects.get(pk=job.pk).deadline_at
    assert renewed > first
    time.sleep(1.5)
    assert Compaction.objects.get(pk=job.pk).deadline_at == renewed  # stopped with the task
