"""Redis down (cache and broker): reads, appends and gateway calls still answer, nothing is lost,
and a job whose message never reached the broker (or was flushed from it) is sent by the sweeper
once the broker is back. The outage is a private redis-server the test stops."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone

from compaction import services
from compaction.models import Compaction, Status
from project.celery import app as celery_app
from sessions.models import Message
from tests.gateway.upstream import FakeUpstream

from .servers import PrivateRedis

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def redis_cache(settings, private_redis):
    """Django's cache on the private Redis, through the production backend."""
    settings.CACHES = {
        "default": {"BACKEND": "project.cache.ForgivingRedisCache", "LOCATION": private_redis.url, "KEY_PREFIX": "t"}
    }
    settings.API_KEY_CACHE_SECONDS = 5
    yield private_redis


@pytest.fixture
def redis_broker(private_redis):
    """Celery's broker on the private Redis (the app's pooled connections dropped both ways)."""
    previous = celery_app.conf.broker_url
    _drop_connections()
    celery_app.conf.broker_url = private_redis.url
    yield private_redis
    _drop_connections()
    celery_app.conf.broker_url = previous


def _drop_connections() -> None:
    # Only the app's cached pools: kombu keeps the pools themselves per broker URL, so closing
    # them would break the next test's publishing on the original broker.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def queued_messages(queue: redis.Redis, name: str = "celery") -> list[dict]:
    """The messages waiting in a Celery queue on Redis, taken first to last: kombu keeps one list
    per priority step (`name`, then `name` + its separator + 3, 6, 9; compaction.services.common's
    PRIORITY_*), each taken from its right end."""
    keys = [name] + [f"{name}\x06\x16{step}" for step in (3, 6, 9)]
    return [json.loads(raw) for key in keys for raw in reversed(queue.lrange(key, 0, -1))]


def _append(api, session_id, text: str):
    return api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": text}, format="json")


def test_with_the_cache_down_reads_appends_and_gateway_calls_answer(api, api_key, redis_cache, settings, caplog):
    fake = FakeUpstream().start()
    settings.GATEWAY_UPSTREAM_URL, settings.GATEWAY_UPSTREAM_API_KEY = fake.url, "upstream-secret"
    try:
        created = api.post("/api/v1/sessions/", {"title": "outage"}, format="json")
        assert created.status_code == 201
        session_id = created.json()["id"]
        assert redis.Redis.from_url(redis_cache.url).dbsize() > 0  # the key was cached while it could be

        redis_cache.stop()
        caplog.set_level(logging.WARNING, logger="project.cache")
        statuses = []
        for i in range(20):
            statuses.append(api.get(f"/api/v1/sessions/{session_id}/messages/").status_code)
            statuses.append(_append(api, session_id, f"step {i}").status_code)
            time.sleep(0.1)  # across the cache's down window, so it is retried (and fails) again
        gateway = Client().post(
            "/anthropic/v1/messages",
            data=json.dumps({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}),
            content_type="application/json",
            HTTP_X_API_KEY=api_key,
        )
    finally:
        fake.stop()
    assert set(statuses) == {200, 201}
    assert gateway.status_code == 200
    assert Message.objects.filter(session_id=session_id).count() == 20
    warnings = [r for r in caplog.records if r.name == "project.cache"]
    assert len(warnings) == 1  # at most once a minute, however many calls failed
    assert "Cache unavailable" in warnings[0].getMessage()


def _sweep(capture, **kwargs) -> int:
    with capture(execute=True):  # the re-send goes out when the sweep's transaction commits
        return services.compaction_sweep_stuck(**kwargs)["reenqueued"]


def test_a_job_queued_while_the_broker_is_down_is_sent_when_it_is_back(
    api, redis_broker, django_capture_on_commit_callbacks
):
    capture = django_capture_on_commit_callbacks
    session_id = api.post("/api/v1/sessions/", {"title": "broker"}, format="json").json()["id"]
    for i in range(4):
        assert _append(api, session_id, f"step {i} " + "words " * 50).status_code == 201
    redis_broker.stop()

    assert api.get(f"/api/v1/sessions/{session_id}/messages/").status_code == 200
    limit = {"compaction_settings": {"auto_compact_token_limit": 600}}
    assert api.patch(f"/api/v1/sessions/{session_id}/", limit, format="json").status_code == 200
    started = time.monotonic()
    with capture(execute=True):
        # Crosses the trigger: the auto compaction's job is queued, its message cannot be sent.
        appended = _append(api, session_id, "written while the broker is down " + "words " * 800)
    assert appended.status_code == 201, appended.content
    assert appended.json()["compaction"] is not None
    assert time.monotonic() - started < 10  # the broker's refusal does not hold the request long
    with capture(execute=True):
        response = api.post(f"/api/v1/sessions/{session_id}/compactions/", {}, format="json")
    assert response.status_code in (200, 202) and response.json()["already_in_flight"], response.content
    job = Compaction.objects.get(session_id=session_id)
    assert job.status == Status.QUEUED  # committed, waiting for its message to go out

    redis_broker.start_again()
    queue = redis.Redis.from_url(redis_broker.url)
    assert queued_messages(queue) == []
    # Not yet stale: the sweeper leaves it; past the short stale period it sends it, once.
    assert _sweep(capture) == 0
    later = timezone.now() + services.requeue_queued_after() + timedelta(seconds=1)
    assert _sweep(capture, now=later) == 1
    assert _sweep(capture, now=later + timedelta(seconds=1)) == 0
    [message] = queued_messages(queue)
    assert message["headers"]["task"] == "compaction.tasks.run_compaction"

    # Delivered twice (the lost one turning up after all): it runs once.
    assert services.compaction_run(compaction_id=job.pk) is not None
    assert services.compaction_run(compaction_id=job.pk) is None
    job.refresh_from_db()
    assert job.status in (Status.SUCCEEDED, Status.SKIPPED)


def test_a_flushed_message_is_sent_again_by_the_sweeper(api, redis_broker, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    session_id = api.post("/api/v1/sessions/", {"title": "flushed"}, format="json").json()["id"]
    for i in range(4):
        _append(api, session_id, f"step {i} " + "words " * 50)
    queue = redis.Redis.from_url(redis_broker.url)
    with capture(execute=True):
        api.post(f"/api/v1/sessions/{session_id}/compactions/", {}, format="json")
    assert len(queued_messages(queue)) == 1
    queue.flushdb()  # the message is lost
    later = timezone.now() + services.requeue_queued_after() + timedelta(seconds=1)
    assert _sweep(capture, now=later) == 1
    assert len(queued_messages(queue)) == 1


def test_an_interrupted_attempt_is_taken_before_the_jobs_queued_ahead_of_it(user, redis_broker):
    """Issue 35: after a worker restart the interrupted jobs, re-queued, waited behind every job
    queued meanwhile. Re-sent at PRIORITY_RESUMED, a worker (kombu's BRPOP over the priority
    lists, as the worker consumes) takes them first."""
    from compaction.services.common import enqueue
    from tests.compaction.factories import append, conversation, make_session

    def job() -> Compaction:
        session = make_session(user)
        append(session, conversation(6))
        return services.compaction_request(session=session, reason="manual")

    queued, interrupted = job(), job()  # their messages go out on commit, which a test never reaches
    since = timezone.now()
    Compaction.objects.filter(pk=interrupted.pk).update(
        status=Status.RUNNING, attempts=1, worker="w1@host", started_at=since - timedelta(seconds=5)
    )
    Compaction.objects.filter(pk=queued.pk).update(enqueued_at=since - timedelta(seconds=5))
    enqueue(queued.pk, mark=False)  # the queued job's message, sent before the worker died

    assert services.compaction_recover_orphans(worker="w1@host", since=since) == {
        "requeued": 1, "failed": 0, "resent": 1
    }  # fmt: skip
    with celery_app.connection_for_read() as connection:
        inbox = connection.SimpleQueue("celery", no_ack=True)
        taken = [inbox.get(timeout=5).payload[1]["compaction_id"] for _ in range(3)]
        inbox.close()
    assert taken == [str(interrupted.pk), str(queued.pk), str(queued.pk)]  # the re-sent duplicate is a no-op
