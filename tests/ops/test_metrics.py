"""GET /metrics: off without COMPACTOR_METRICS_TOKEN, bearer-only with it, and figures that move
with real requests, compactions and gateway calls."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import resolve
from django.utils import timezone

from compaction import services
from compaction.models import Compaction, Status
from ops.models import WorkerHeartbeat
from tests.compaction.factories import append, conversation, make_session
from tests.fake_anthropic import FakeAnthropic, Step

from .helpers import TOKEN, scrape, total, value

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


# --- access -----------------------------------------------------------------------------------


def test_metrics_are_off_without_a_token_even_for_a_bearer(settings):
    settings.METRICS_TOKEN = ""
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 404
    assert "COMPACTOR_METRICS_TOKEN" in response.json()["error"]


def test_metrics_need_the_bearer_token(metrics_on):
    missing = Client().get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert b"# TYPE compactor_compactions_total counter" in response.content


def test_metrics_speak_openmetrics_when_asked(metrics_on):
    response = Client().get(
        "/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0"
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


# --- requests ---------------------------------------------------------------------------------


def test_requests_are_counted_and_timed_by_view_and_status_never_by_session(metrics_on, api, user):
    session = make_session(user)
    before = scrape()
    assert api.get(f"/api/v1/sessions/{session.pk}/").status_code == 200
    assert api.get("/api/v1/sessions/00000000-0000-0000-0000-000000000000/").status_code == 404
    after = scrape()
    # The API's own view name: other tests in the same process count the dashboard's session page too.
    detail = resolve(f"/api/v1/sessions/{session.pk}/").view_name
    ok = {"view": detail, "method": "GET", "status": "200"}
    assert (
        value(after, "compactor_http_requests_total", **ok) == value(before, "compactor_http_requests_total", **ok) + 1
    )
    missing = {"view": detail, "method": "GET", "status": "404"}
    assert (
        value(after, "compactor_http_requests_total", **missing)
        - value(before, "compactor_http_requests_total", **missing)
        == 1
    )
    timed = {"view": detail, "method": "GET", "status_class": "2xx"}
    count = "compactor_http_request_duration_seconds_count"
    assert value(after, count, **timed) == value(before, count, **timed) + 1
    text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert str(session.pk) not in text
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", text), "a label carries an id"


def test_probes_and_scrapes_are_not_counted_as_requests(metrics_on):
    before = scrape()
    Client().get("/healthz")
    Client().get("/readyz")
    after = scrape()
    assert total(after, "compactor_http_requests_total") == total(before, "compactor_http_requests_total")


# --- compactions ------------------------------------------------------------------------------


def run(job: Compaction, capture) -> Compaction:
    """The worker's call; metrics are recorded when its transaction commits."""
    with capture(execute=True):
        return services.compaction_run(compaction_id=job.pk)


def test_a_real_compaction_moves_the_counters_by_what_its_row_records(
    metrics_on, user, django_capture_on_commit_callbacks
):
    session = make_session(user)
    append(session, conversation(8))
    before = scrape()
    job = services.compaction_request(session=session, reason="manual")
    job = run(job, django_capture_on_commit_callbacks)
    assert job.status == Status.SUCCEEDED, job.error
    after = scrape()
    strategy = job.strategy
    labels = {"strategy": strategy, "outcome": "succeeded", "reason": "manual"}
    assert (
        value(after, "compactor_compactions_total", **labels) - value(before, "compactor_compactions_total", **labels)
        == 1
    )
    duration = {"strategy": strategy, "outcome": "succeeded"}
    count, total_seconds = "compactor_compaction_duration_seconds_count", "compactor_compaction_duration_seconds_sum"
    assert value(after, count, **duration) - value(before, count, **duration) == 1
    assert value(after, total_seconds, **duration) - value(before, total_seconds, **duration) == pytest.approx(
        job.duration_ms / 1000, abs=0.002
    )
    for name, expected in (
        ("compactor_compaction_tokens_before_total", job.tokens_before),
        ("compactor_compaction_tokens_after_total", job.tokens_after),
        ("compactor_compaction_tokens_saved_total", job.tokens_before - job.tokens_after),
    ):
        assert value(after, name, strategy=strategy) - value(before, name, strategy=strategy) == expected, name
    assert expected > 0


def test_a_summarizer_that_fails_counts_a_fallback(metrics_on, user, settings, django_capture_on_commit_callbacks):
    with FakeAnthropic(default=Step(status=400, error_type="invalid_request_error", error_message="no")) as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-fake-metrics"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        session = make_session(user)
        append(session, conversation(8))
        before = scrape()
        job = services.compaction_request(session=session, reason="manual")
        job = run(job, django_capture_on_commit_callbacks)
    assert job.status == Status.SUCCEEDED and job.fallbacks[0]["strategy"] == "anthropic", job.fallbacks
    after = scrape()
    name = "compactor_compaction_fallbacks_total"
    assert value(after, name, strategy="anthropic") - value(before, name, strategy="anthropic") == 1


def test_a_failed_compaction_is_counted_as_failed(metrics_on, user, monkeypatch, django_capture_on_commit_callbacks):
    session = make_session(user)
    append(session, conversation(8))
    before = scrape()
    job = services.compaction_request(session=session, reason="manual", strategy="extractive")

    def explode(*args, **kwargs):
        raise RuntimeError("summarizer crashed")

    monkeypatch.setattr(services.planning, "outcome_compute", explode)
    job = run(job, django_capture_on_commit_callbacks)
    assert job.status == Status.FAILED
    after = scrape()
    labels = {"strategy": "extractive", "outcome": "failed", "reason": "manual"}
    assert (
        value(after, "compactor_compactions_total", **labels) - value(before, "compactor_compactions_total", **labels)
        == 1
    )


def test_queue_depth_and_the_oldest_queued_age_are_read_from_the_job_table(metrics_on, user):
    now = timezone.now()
    for minutes in (3, 1):
        session = make_session(user)
        job = Compaction.objects.create(session=session, reason="manual", status=Status.QUEUED)
        Compaction.objects.filter(pk=job.pk).update(created_at=now - timedelta(minutes=minutes))
    running = Compaction.objects.create(session=make_session(user), reason="manual", status=Status.RUNNING)
    assert running.pk
    samples = scrape()
    assert value(samples, "compactor_compaction_queue_depth") == 2
    assert value(samples, "compactor_compactions_running") == 1
    assert 180 <= value(samples, "compactor_compaction_queue_oldest_age_seconds") < 200


def test_heartbeat_age_and_live_workers_are_read_at_scrape_time(metrics_on, settings):
    settings.WORKER_HEARTBEAT_MAX_AGE = 30
    assert value(scrape(), "compactor_worker_heartbeat_age_seconds") == float("inf")
    now = timezone.now()
    WorkerHeartbeat.objects.create(worker="celery@a", pid=1, started_at=now, seen_at=now - timedelta(seconds=12))
    WorkerHeartbeat.objects.create(worker="celery@b", pid=2, started_at=now, seen_at=now - timedelta(seconds=45))
    samples = scrape()
    assert 12 <= value(samples, "compactor_worker_heartbeat_age_seconds") < 20
    assert value(samples, "compactor_workers_alive") == 1
    assert value(samples, "compactor_worker_heartbeat_max_age_seconds") == 30


def test_a_scrape_still_answers_when_the_database_is_down(metrics_on):
    def broken(*args, **kwargs):
        raise OperationalError("database is gone")

    with mock.patch("ops.scrape.queue_read", broken):
        samples = scrape()
    assert value(samples, "compactor_metrics_database_up") == 0
    assert ("compactor_compaction_queue_depth", frozenset()) not in samples
    assert value(scrape(), "compactor_metrics_database_up") == 1


# --- the gateway's upstream -------------------------------------------------------------------


def _gateway_call(key: str):
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    return Client().post(
        "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=key
    )


def test_a_gateway_call_is_timed_and_counted_by_upstream_status(metrics_on, upstream, api_key):
    before = scrape()
    assert _gateway_call(api_key).status_code == 200
    after = scrape()
    endpoint = {"endpoint": "/v1/messages"}
    count = "compactor_gateway_upstream_duration_seconds_count"
    assert value(after, count, **endpoint) - value(before, count, **endpoint) == 1
    name = "compactor_gateway_upstream_responses_total"
    assert value(after, name, status="200", **endpoint) - value(before, name, status="200", **endpoint) == 1


def test_an_unreachable_upstream_counts_an_error_by_its_class(metrics_on, upstream, api_key, settings):
    settings.GATEWAY_UPSTREAM_URL = "http://127.0.0.1:9"
    before = scrape()
    assert _gateway_call(api_key).status_code == 502
    after = scrape()
    labels = {"endpoint": "/v1/messages", "error": "ConnectError"}
    name = "compactor_gateway_upstream_errors_total"
    assert value(after, name, **labels) - value(before, name, **labels) == 1


# --- the alert rules shipped in deploy/ --------------------------------------------------------


def test_the_shipped_alert_rules_use_only_metrics_this_server_exposes(metrics_on):
    yaml = pytest.importorskip("yaml")
    rules = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) >= 3
    text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE))  # every metric, incremented yet or not
    used = {name for expr in exprs for name in re.findall(r"\bcompactor_[a-z_]+", expr)}
    # A counter's TYPE line names it with _total; a histogram's without _bucket/_count/_sum.
    missing = {
        name for name in used if name not in families and re.sub(r"_(bucket|count|sum)$", "", name) not in families
    }
    assert used and not missing, missing
