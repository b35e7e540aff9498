"""Also: `wait` long-polls are bounded (30 s, a number) and capped per web process."""

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


def test_wait_is_at_most_30_seconds(api, session):
    response = api.post(url(session), {"wait": 31}, format="json")
    assert response.status_code == 400 and response.json()["error"].startswith("wait:")


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
