"""GET /healthz and /readyz: liveness without dependencies, readiness naming what is down."""

from __future__ import annotations

import socket
from datetime import timedelta
from unittest import mock

import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from ops.models import WorkerHeartbeat
from project.celery import app as celery_app

pytestmark = pytest.mark.django_db


def beat(seconds_ago: float, worker: str = "celery@test") -> WorkerHeartbeat:
    now = timezone.now()
    return WorkerHeartbeat.objects.update_or_create(
        worker=worker,
        defaults={"pid": 4242, "started_at": now - timedelta(hours=1), "seen_at": now - timedelta(seconds=seconds_ago)},
    )[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture
def broker_conf():
    """Change the Celery app's broker settings for one test; restored after it."""
    saved = {key: celery_app.conf[key] for key in ("broker_url", "broker_transport_options")}

    def change(**values):
        for key, item in values.items():
            celery_app.conf[key] = item

    yield change
    for key, item in saved.items():
        celery_app.conf[key] = item


def broken_cursor(*args, **kwargs):
    raise OperationalError('connection to server at "db.internal" failed: password=hunter2 rejected')


# --- /healthz ---------------------------------------------------------------------------------


def test_healthz_answers_with_no_credentials_even_when_the_database_is_down():
    with mock.patch("django.db.backends.base.base.BaseDatabaseWrapper.cursor", broken_cursor):
        response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_probes_answer_any_host_over_plain_http_even_with_https_enforced(settings, not_eager):
    settings.ALLOWED_HOSTS = ["compactor.example.com"]
    settings.SECURE_SSL_REDIRECT = True
    beat(1)
    client = Client(HTTP_HOST="10.0.3.7:8000")  # a kubelet's probe: the pod's IP, plain HTTP
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    # Anything else still goes through the host check.
    assert client.get("/api/v1/sessions/").status_code == 400


def test_healthz_refuses_writes():
    response = Client().post("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


# --- /readyz ----------------------------------------------------------------------------------


def test_readyz_is_ok_with_the_database_the_broker_and_a_fresh_heartbeat(not_eager):
    beat(2)
    response = Client().get("/readyz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok" and "down" not in body
    assert body["checks"]["database"] == {"ok": True}
    assert body["checks"]["broker"]["ok"] is True
    worker = body["checks"]["worker"]
    assert worker["ok"] is True and worker["alive"] == 1
    assert 1.5 <= worker["heartbeat_age_seconds"] <= 10


def test_readyz_names_the_worker_when_none_ever_recorded_a_heartbeat(not_eager):
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["down"] == ["worker"]
    assert "no worker heartbeat recorded yet" in body["checks"]["worker"]["error"]


def test_readyz_turns_503_once_the_freshest_heartbeat_is_older_than_the_max_age(settings, not_eager):
    settings.WORKER_HEARTBEAT_MAX_AGE = 5
    beat(4, "celery@a")
    beat(300, "celery@b")  # a worker that died long ago does not make the live one count less
    ok = Client().get("/readyz")
    assert ok.status_code == 200 and ok.json()["checks"]["worker"]["alive"] == 1
    WorkerHeartbeat.objects.filter(worker="celery@a").update(seen_at=timezone.now() - timedelta(seconds=6))
    stale = Client().get("/readyz")
    assert stale.status_code == 503
    assert stale.json()["down"] == ["worker"]
    error = stale.json()["checks"]["worker"]["error"]
    assert "no worker heartbeat in the last 5 s" in error and "6 s old" in error


def test_readyz_names_the_database_and_leaks_nothing_of_its_error(not_eager):
    beat(1)
    with mock.patch("django.db.backends.base.base.BaseDatabaseWrapper.cursor", broken_cursor):
        response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["database", "worker"]  # heartbeats live in the database
    assert body["checks"]["database"]["error"] == "database unreachable (OperationalError)"
    assert body["checks"]["broker"]["ok"] is True
    assert "hunter2" not in response.content.decode() and "db.internal" not in response.content.decode()


def test_readyz_names_the_broker_when_redis_does_not_answer(broker_conf, not_eager):
    beat(1)
    broker_conf(broker_url=f"redis://:secret-pass@127.0.0.1:{closed_port()}/0")
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["broker"]
    assert body["checks"]["broker"]["error"].startswith("broker unreachable (")
    assert "secret-pass" not in response.content.decode()
    assert body["checks"]["database"]["ok"] and body["checks"]["worker"]["ok"]


def test_readyz_names_the_embedded_broker_when_its_folder_is_gone(broker_conf, tmp_path, not_eager):
    beat(1)
    gone = str(tmp_path / "gone")
    broker_conf(broker_url="filesystem://", broker_transport_options={"data_folder_in": gone, "data_folder_out": gone})
    response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json()["down"] == ["broker"]
    (tmp_path / "gone").mkdir()
    assert Client().get("/readyz").status_code == 200


def test_readyz_needs_no_worker_when_tasks_run_eagerly():
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        response = Client().get("/readyz")
    finally:
        celery_app.conf.task_always_eager = previous
    assert response.status_code == 200
    assert response.json()["checks"]["worker"] == {"ok": True, "eager": True}
