"""The database unavailable answers 503 with Retry-After in each API's own error shape, never a
500, and the first request once it is back succeeds.

The outage is made at the connection layer, on whichever database the suite runs: every new
cursor raises the driver's own OperationalError (a dropped or refused connection) or
InterfaceError (a connection closed under Django), which Django wraps as it would a real one.
A real PostgreSQL restart under load is tests/hardening/test_pg_restart.py.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from sessions.models import Message

pytestmark = pytest.mark.django_db

# A well-formed session key: Django reads it from the database (a malformed one it never looks up).
COOKIE = "sessionid=" + "a" * 32


@contextmanager
def database_down(kind: str = "OperationalError"):
    """Every cursor the connection makes raises the driver's `kind` until the block ends."""
    error = getattr(connection.Database, kind)
    original = connection.create_cursor

    def refuse(name=None):
        raise error("server closed the connection unexpectedly (the test's outage)")

    connection.create_cursor = refuse
    try:
        yield
    finally:
        connection.create_cursor = original


def _gateway_body(items: str = "messages") -> str:
    return json.dumps({"model": "m", "max_tokens": 9, items: [{"role": "user", "content": "hi"}]})


@pytest.fixture
def clients(api_key):
    """Clients that answer what the server would (an unhandled exception is a 500, not re-raised)."""
    rest = APIClient(raise_request_exception=False)
    rest.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    return rest, Client(raise_request_exception=False)


@pytest.mark.parametrize("kind", ["OperationalError", "InterfaceError"])
def test_each_api_answers_503_with_retry_after_in_its_own_shape(clients, api_key, settings, kind):
    settings.GATEWAY_UPSTREAM_API_KEY = settings.OPENAI_GATEWAY_UPSTREAM_API_KEY = "upstream-secret"
    settings.API_KEY_CACHE_SECONDS = 0  # the key is looked up in the database on each call
    rest, plain = clients
    with database_down(kind):
        listed = rest.get("/api/v1/sessions/")
        appended = rest.post("/api/v1/sessions/", {"title": "t"}, format="json")
        messages = plain.post(
            "/anthropic/v1/messages", _gateway_body(), content_type="application/json", HTTP_X_API_KEY=api_key
        )
        chat = plain.post(
            "/openai/v1/chat/completions",
            _gateway_body(),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {api_key}",
        )
        responses = plain.post(
            "/openai/v1/responses",
            _gateway_body("input"),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {api_key}",
        )
        page = plain.get("/", HTTP_COOKIE=COOKIE)  # the dashboard: the session is read first
        admin = plain.get("/admin/", HTTP_COOKIE=COOKIE)

    for response in (listed, appended, messages, chat, responses, page, admin):
        assert response.status_code == 503, (response.request["PATH_INFO"], response.content[:300])
        assert response["Retry-After"] == str(settings.DB_RETRY_AFTER_SECONDS)
    for response in (listed, appended):
        body = response.json()
        assert "database is unavailable" in body["error"] and body["detail"]["status"] == 503
    body = messages.json()
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert "database is unavailable" in body["error"]["message"]
    for response in (chat, responses):
        error = response.json()["error"]
        assert error["type"] == "server_error" and error["code"] == "database_unavailable"
        assert "database is unavailable" in error["message"] and "param" in error
    for response in (page, admin):
        assert response["Content-Type"].startswith("text/html")
        assert b"Service unavailable" in response.content and b"Traceback" not in response.content

    # Back: the very next requests succeed, and nothing was written during the outage.
    assert rest.get("/api/v1/sessions/").status_code == 200
    created = rest.post("/api/v1/sessions/", {"title": "after"}, format="json")
    assert created.status_code == 201
    assert rest.get("/api/v1/sessions/").json()["count"] == 1


def test_an_append_during_the_outage_is_refused_and_stores_nothing(clients, session, settings):
    settings.API_KEY_CACHE_SECONDS = 5
    rest, _ = clients
    path = f"/api/v1/sessions/{session.pk}/messages/"
    before = Message.objects.filter(session=session).count()
    assert rest.get(path).status_code == 200  # the key is cached: the outage hits the append itself
    # The session belongs to `user`, whose key the client sends.
    with database_down():
        refused = rest.post(path, {"role": "user", "content": "during"}, format="json")
    assert refused.status_code == 503 and refused["Retry-After"]
    assert Message.objects.filter(session=session).count() == before
    stored = rest.post(path, {"role": "user", "content": "after"}, format="json")
    assert stored.status_code == 201, stored.content
    assert Message.objects.filter(session=session).count() == before + 1


def test_other_server_errors_stay_500(clients, monkeypatch):
    """Only the database's unavailability is a 503: a bug is still a 500 (and logged)."""
    rest, _ = clients

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("sessions.api.views.SessionListView.get", broken)
    response = rest.get("/api/v1/sessions/")
    assert response.status_code == 500
    assert "Retry-After" not in response


@pytest.mark.parametrize(
    ("path", "items"),
    [("/openai/v1/chat/completions", "messages"), ("/openai/v1/responses", "input"), ("/openai/v1/models", None)],
)
def test_openai_without_an_upstream_key_says_what_the_operator_sets(clients, api_key, settings, path, items):
    settings.OPENAI_GATEWAY_UPSTREAM_API_KEY = ""
    _, plain = clients
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key}"}
    if items is None:
        response = plain.get(path, **auth)
    else:
        response = plain.post(path, _gateway_body(items), content_type="application/json", **auth)
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert error["code"] == "upstream_not_configured" and error["type"] == "server_error"
    assert "COMPACTOR_OPENAI_UPSTREAM_API_KEY" in error["message"]


def test_anthropic_without_an_upstream_key_says_what_the_operator_sets(clients, api_key, settings):
    settings.GATEWAY_UPSTREAM_API_KEY = ""
    _, plain = clients
    response = plain.post(
        "/anthropic/v1/messages", _gateway_body(), content_type="application/json", HTTP_X_API_KEY=api_key
    )
    assert response.status_code == 503
    body = response.json()
    assert body["type"] == "error" and "COMPACTOR_UPSTREAM_API_KEY" in body["error"]["message"]
