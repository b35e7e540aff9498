from __future__ import annotations

import json

import pytest
from django.test import override_settings

from sessions.models import Message

from .helpers import snapshot, url

pytestmark = pytest.mark.django_db


@override_settings(MAX_REQUEST_BYTES=2048)
def test_a_body_over_the_limit_is_413_json_and_stores_nothing(api, session):
    before = snapshot(session)
    body = json.dumps({"role": "user", "content": "x" * 4000})
    response = api.post(url(session, "messages/"), body, content_type="application/json")
    assert response.status_code == 413
    error = response.json()
    assert error["error"].startswith(f"request body is {len(body):,} bytes; the limit is 2,048 bytes")
    assert error["detail"] == {"content_length": len(body), "max_request_bytes": 2048}
    assert snapshot(session) == before
    assert not Message.objects.exists()


@override_settings(MAX_REQUEST_BYTES=2048)
def test_a_body_under_the_limit_is_accepted(api, session):
    response = api.post(url(session, "messages/"), {"role": "user", "content": "x" * 1000}, format="json")
    assert response.status_code == 201


@override_settings(MAX_REQUEST_BYTES=2048)
def test_the_limit_is_checked_before_authentication(client, session):
    response = client.post(url(session, "messages/"), "y" * 5000, content_type="application/json")
    assert response.status_code == 413
