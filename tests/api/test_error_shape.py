"""One `error` line per error, field details only where fields are at fault, choices listed, unknown
ids named, and the same API key accepted as `x-api-key` as well as `Authorization: Bearer`."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from .helpers import url

pytestmark = pytest.mark.django_db


def test_an_unknown_session_is_named_in_one_line(api):
    sid = uuid.uuid4()
    response = api.get(f"/api/v1/sessions/{sid}/context/")
    assert response.status_code == 404
    assert response.json() == {"error": f"session {sid} not found"}


def test_another_owners_session_reads_the_same_as_a_missing_one(api, other_session):
    for path in ("", "context/", "messages/"):
        response = api.get(url(other_session, path))
        assert response.json() == {"error": f"session {other_session.pk} not found"}
    appended = api.post(url(other_session, "messages/"), {"role": "user", "content": "hi"}, format="json")
    assert appended.status_code == 404 and appended.json() == {"error": f"session {other_session.pk} not found"}


def test_an_unknown_compaction_is_named(api, session):
    cid = uuid.uuid4()
    response = api.get(url(session, f"compactions/{cid}/"))
    assert response.status_code == 404
    assert response.json() == {"error": f"compaction {cid} not found in session {session.pk}"}


def test_an_invalid_choice_lists_the_choices(api, session):
    response = api.post(url(session, "compactions/"), {"strategy": "magic"}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"].startswith('strategy: "magic" is not a valid choice; choose one of: auto, ')
    assert "extractive" in body["error"] and "prune" in body["error"]
    assert body["detail"] == {"strategy": [body["error"].removeprefix("strategy: ")]}


def test_a_field_error_keeps_its_field_details(api, session):
    response = api.post(url(session, "messages/"), {"role": "robot", "content": "hi"}, format="json")
    body = response.json()
    assert response.status_code == 400 and body["error"].startswith("role: unknown role 'robot'")
    assert list(body["detail"]) == ["role"]


def test_without_a_key_the_401_is_one_line(client):
    response = client.get("/api/v1/sessions/")
    assert response.status_code == 401
    assert list(response.json()) == ["error"]


def test_the_rest_api_takes_the_key_as_x_api_key_too(api_key, session):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key)
    response = client.get(url(session))
    assert response.status_code == 200 and response.json()["id"] == str(session.pk)
    client.credentials(HTTP_X_API_KEY=api_key + "x")
    assert client.get(url(session)).status_code == 401
