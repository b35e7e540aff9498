from __future__ import annotations

import io

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.core.management.base import CommandError
from django.middleware.csrf import _get_new_csrf_string
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.test import APIClient

from sessions import auth
from sessions.admin import ApiKeyAdmin
from sessions.dashboard.keys import apikey_revoke
from sessions.models import ApiKey, Message, Session

from .helpers import snapshot, url

pytestmark = pytest.mark.django_db


def endpoints(session_id) -> list[tuple[str, str, dict | None]]:
    base = f"/api/v1/sessions/{session_id}/"
    return [
        ("get", "/api/v1/sessions/", None),
        ("post", "/api/v1/sessions/", {"title": "x"}),
        ("get", base, None),
        ("patch", base, {"title": "stolen"}),
        ("delete", base, None),
        ("get", base + "messages/", None),
        ("post", base + "messages/", {"role": "user", "content": "hi"}),
        ("get", base + "context/", None),
        ("post", base + "usage/", {"input_tokens": 1}),
    ]


def call(client: APIClient, method: str, path: str, body: dict | None):
    return getattr(client, method)(path, body, format="json") if body is not None else getattr(client, method)(path)


@pytest.mark.parametrize("index", range(9))
def test_no_key_is_401(session, index):
    method, path, body = endpoints(session.pk)[index]
    response = call(APIClient(), method, path, body)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "error" in response.json()


@pytest.mark.parametrize("index", range(9))
def test_a_bad_key_is_401(session, index):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer not.a-real-key")
    method, path, body = endpoints(session.pk)[index]
    response = call(client, method, path, body)
    assert response.status_code == 401
    assert response.json()["error"] == "Invalid or revoked API key."


def test_a_revoked_key_is_401(user, session):
    record, key = ApiKey.objects.create_key(owner=user, name="old")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/sessions/").status_code == 200  # now cached
    apikey_revoke(user=user, prefix=record.prefix)
    response = client.get(url(session))
    assert response.status_code == 401
    assert response.json()["error"] == "Invalid or revoked API key."


def test_a_key_revoked_in_the_admin_is_401_at_once(user, rf):
    record, key = ApiKey.objects.create_key(owner=user, name="old")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/sessions/").status_code == 200
    record.revoked = True
    ApiKeyAdmin(ApiKey, admin.site).save_model(rf.post("/"), record, form=None, change=True)
    assert client.get("/api/v1/sessions/").status_code == 401


def test_a_key_revoked_elsewhere_is_401_within_the_cache_bound(user, settings, monkeypatch):
    # Revoked by another process (or straight in the database): this process's cache entry
    # still vouches for the key, but for API_KEY_CACHE_SECONDS at most.
    settings.API_KEY_CACHE_SECONDS = 5
    clock = [1_000_000.0]
    monkeypatch.setattr(auth, "_now", lambda: clock[0])
    record, key = ApiKey.objects.create_key(owner=user, name="old")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/sessions/").status_code == 200
    ApiKey.objects.filter(pk=record.pk).update(revoked=True)
    clock[0] += 4.9
    assert client.get("/api/v1/sessions/").status_code == 200
    clock[0] += 0.2
    assert client.get("/api/v1/sessions/").status_code == 401


def test_a_cached_key_costs_no_query_and_last_use_is_written_once(user, rf, django_assert_num_queries):
    record, key = ApiKey.objects.create_key(owner=user, name="busy")
    request = rf.get("/api/v1/sessions/", HTTP_AUTHORIZATION=f"Bearer {key}")
    backend = auth.BearerAPIKeyAuthentication()
    with django_assert_num_queries(2):  # the lookup, the last-use write
        assert backend.authenticate(request) == (user, record)
    for _ in range(3):
        with django_assert_num_queries(0):
            owner, cached = backend.authenticate(request)
        assert owner == user and cached.pk == record.pk
    record.refresh_from_db()
    assert record.last_used_at is not None
    # A wrong secret with a cached prefix is still refused.
    wrong = rf.get("/", HTTP_AUTHORIZATION=f"Bearer {record.prefix}.not-the-secret")
    with pytest.raises(AuthenticationFailed):
        backend.authenticate(wrong)


def test_no_cache_when_the_bound_is_zero(user, rf, settings, django_assert_num_queries):
    settings.API_KEY_CACHE_SECONDS = 0
    record, key = ApiKey.objects.create_key(owner=user, name="uncached")
    request = rf.get("/", HTTP_AUTHORIZATION=f"Bearer {key}")
    backend = auth.BearerAPIKeyAuthentication()
    backend.authenticate(request)
    with django_assert_num_queries(1):
        backend.authenticate(request)


def test_a_key_of_an_inactive_user_is_401(user, api):
    user.is_active = False
    user.save()
    assert api.get("/api/v1/sessions/").status_code == 401


def test_a_good_key_records_last_use(api, user):
    record = ApiKey.objects.get(owner=user)
    assert record.last_used_at is None
    assert api.get("/api/v1/sessions/").status_code == 200
    record.refresh_from_db()
    assert record.last_used_at is not None


@pytest.mark.parametrize("index", range(2, 9))
def test_another_owners_session_is_404_and_untouched(api, other_session, index):
    Message.objects.create(session=other_session, seq=1, role="user", content="secret", token_count=5)
    other_session.last_seq = other_session.message_count = 1
    other_session.save()
    before = snapshot(other_session)
    method, path, body = endpoints(other_session.pk)[index]
    response = call(api, method, path, body)
    assert response.status_code == 404
    assert "error" in response.json()
    assert Session.objects.filter(pk=other_session.pk).exists()
    assert snapshot(other_session) == before
    assert Session.objects.get(pk=other_session.pk).title == "Mallory's"


def test_the_list_does_not_show_other_owners_sessions(api, other_session):
    assert api.get("/api/v1/sessions/").json()["count"] == 0


def test_a_logged_in_dashboard_session_works_with_csrf(user, session):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password="alice-password")
    # Reads need no token.
    assert client.get(url(session, "context/")).status_code == 200
    # Writes without the CSRF token are refused...
    response = client.post(url(session, "messages/"), {"role": "user", "content": "hi"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    assert not Message.objects.filter(session=session).exists()
    # ...and accepted with it (cookie + X-CSRFToken header, as the dashboard sends them).
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    response = client.post(
        url(session, "messages/"), {"role": "user", "content": "hi"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 201, response.json()
    assert Message.objects.filter(session=session).count() == 1


def test_a_logged_in_user_cannot_reach_other_owners_sessions(user, other_session):
    client = APIClient()
    client.login(username="alice", password="alice-password")
    assert client.get(url(other_session)).status_code == 404


def test_create_api_key_prints_the_key_alone_on_its_last_line(user, session):
    out = io.StringIO()
    call_command("create_api_key", "alice", "--name", "laptop", stdout=out)
    lines = out.getvalue().strip().splitlines()
    key = lines[-1]
    assert key.strip() == key and " " not in key
    record = ApiKey.objects.get(owner=user, name="laptop")
    assert key.startswith(record.prefix)
    assert key not in "\n".join(lines[:-1])  # printed once
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = client.get(url(session))
    assert response.status_code == 200
    assert response.json()["id"] == str(session.pk)


def test_create_api_key_for_an_unknown_user_fails():
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("create_api_key", "nobody", stdout=io.StringIO())
