"""Also: `wait` long-polls are bounded (COMPACTOR_MAX_WAIT_SECONDS: a longer one waits that long and
says so), a number, and capped per web process."""

from __future__ import annotations

import pytest

from compaction.api import views
from compaction.models import Compaction, Status

pytestmark = pytest.mark.django_db


def url(session) -> str:
    return f"/api/v1/sessions/{session.pk}/compactions/"


@pytest.mark.parametrize("value", [False, True])
def test_a_boolean_wait_is_a_400(api, session, value):
    response = api.post(url(session), {"wait": value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "wait: A valid number is required."
    assert not Compaction.objects.filter(session=session).exists()


def test_a_wait_above_the_cap_waits_the_cap_and_says_so(api, session, settings, monkeypatch):
    settings.COMPACTION_MAX_WAIT_SECONDS = 1  # COMPACTOR_MAX_WAIT_SECONDS (30 by default)
    waited: list[float] = []
    real = views._wait_for
    monkeypatch.setattr(views, "_wait_for", lambda job, seconds: waited.append(seconds) or real(job, seconds))
    response = api.post(url(session), {"wait": 31}, format="json")
    assert response.status_code == 202  # no worker in this test: the job is still queued after the cap
    body = response.json()
    assert waited == [1]
    assert body["wait_capped"] is True and body["wait_skipped"] is False and body["status"] == "queued"
    assert "waited 1 s, the most a request may (COMPACTOR_MAX_WAIT_SECONDS)" in body["detail"]
    assert f"/compactions/{body['id']}/" in body["detail"]


def test_a_wait_within_the_cap_is_not_capped(api, session):
    body = api.post(url(session), {"wait": 0.2}, format="json").json()
    assert body["wait_capped"] is False


def test_the_wait_help_states_the_real_default(client):
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    wait = schema["components"]["schemas"]["CompactionRequestRequest"]["properties"]["wait"]
    assert wait["default"] == 0 and "default 0" in wait["description"]
    assert "maximum" not in wait


def test_beyond_the_waiter_cap_the_answer_comes_at_once(api, session, settings, monkeypatch):
    settings.COMPACTION_MAX_WAITERS = 2
    monkeypatch.setattr(views.WAITERS, "count", 2)  # two requests of this process already wait
    response = api.post(url(session), {"wait": 20}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert body["wait_skipped"] is True and "COMPACTOR_MAX_WAITERS" in body["detail"]
    assert Compaction.objects.get(pk=body["id"]).status == Status.QUEUED
    assert views.WAITERS.count == 2


def test_a_waiter_frees_its_slot(api, session):
    response = api.post(url(session), {"wait": 0.3}, format="json")
    assert response.status_code == 202
    assert response.json()["wait_skipped"] is False
    assert views.WAITERS.count == 0
