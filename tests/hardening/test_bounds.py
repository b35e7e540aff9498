"""Integers beyond the database's columns are a 400 naming the field, and a request that
fails writes nothing (one transaction per writing request)."""

from __future__ import annotations

import pytest

from compaction.models import Compaction, Event, Status

pytestmark = pytest.mark.django_db(transaction=True)


def url(session, tail: str) -> str:
    return f"/api/v1/sessions/{session.pk}/{tail}"


def _queued_manual(api, session) -> str:
    response = api.post(url(session, "compactions/"), {}, format="json")
    assert response.status_code == 202, response.json()
    return response.json()["id"]


@pytest.mark.parametrize("value", [2**31, 2**63, 10**30])
def test_overflow_input_tokens_out_of_range_is_a_400_and_writes_nothing(api, session, value):
    job_id = _queued_manual(api, session)
    events_before = Event.objects.count()
    response = api.post(
        url(session, "overflow/"),
        {"error_text": "prompt is too long", "status_code": 400, "input_tokens": value},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "input_tokens" in response.json()["error"]
    assert Event.objects.count() == events_before
    assert Compaction.objects.get(pk=job_id).status == Status.QUEUED


@pytest.mark.parametrize(
    ("tail", "body", "field"),
    [
        ("compactions/", {"keep_recent_tokens": 2**31}, "keep_recent_tokens"),
        ("compactions/", {"preserve_messages": 2**40}, "preserve_messages"),
        ("usage/", {"input_tokens": 2**31}, "input_tokens"),
        ("usage/", {"input_tokens": 10, "message_seq": 2**31}, "message_seq"),
    ],
)
def test_integer_inputs_are_bounded(api, session, tail, body, field):
    response = api.post(url(session, tail), body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]


def test_session_integer_settings_are_bounded(api):
    response = api.post("/api/v1/sessions/", {"compaction_settings": {"keep_recent_tokens": 2**31}}, format="json")
    assert response.status_code == 400, response.content
    assert "keep_recent_tokens" in response.json()["error"]


def test_a_request_that_fails_half_way_writes_nothing(api, session, monkeypatch):
    """The overflow's event, the retired queued job and the overflow compaction itself are all
    rolled back when the request fails after them."""
    from sessions import selectors

    job_id = _queued_manual(api, session)
    events_before = Event.objects.count()

    def boom(*args, **kwargs):
        raise RuntimeError("failed after the writes")

    monkeypatch.setattr(selectors, "context_build", boom)
    api.raise_request_exception = False
    response = api.post(
        url(session, "overflow/"), {"error_text": "prompt is too long", "status_code": 400}, format="json"
    )
    assert response.status_code == 500
    assert Event.objects.count() == events_before
    assert Compaction.objects.get(pk=job_id).status == Status.QUEUED
    assert Compaction.objects.filter(session=session).count() == 1
    session.refresh_from_db()
    assert session.active_compaction_id is None
