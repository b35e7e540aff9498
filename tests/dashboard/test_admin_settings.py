"""The session admin saves only compaction settings the API accepts (else preview/compact break)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from sessions.models import Session
from tests.dashboard.factories import make_session

pytestmark = pytest.mark.django_db


def _post(client, session: Session, **changes):
    data = {
        "owner": session.owner_id,
        "title": session.title,
        "agent": session.agent,
        "model": session.model,
        "system_prompt": session.system_prompt,
        "context_window_override": session.context_window_override or "",
        "compaction_settings": json.dumps(session.compaction_settings),
        # The read-only compactions inline still posts its management form.
        "compactions-TOTAL_FORMS": "0",
        "compactions-INITIAL_FORMS": "0",
        "compactions-MIN_NUM_FORMS": "0",
        "compactions-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    data.update(changes)
    return client.post(reverse("admin:agent_sessions_session_change", args=[session.pk]), data)


@pytest.fixture
def admin_client_(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"keep_recent_tokens": "lots", "bogus": 1}, ["keep_recent_tokens: must be int", "bogus: unknown setting"]),
        ({"auto_compact_ratio": 5}, ["auto_compact_ratio: must be at most 1.0"]),
        (["not", "an", "object"], ["must be an object"]),
        ({"keep_recent_tokens": 500_000}, ["keep_recent_tokens: must be"]),
    ],
)
def test_admin_rejects_settings_the_api_rejects(admin_client_, user, settings, expected):
    session = make_session(user, model="claude-sonnet-4-5")
    response = _post(admin_client_, session, compaction_settings=json.dumps(settings))
    assert response.status_code == 200  # the form again, with errors
    text = response.content.decode()
    for fragment in expected:
        assert fragment in text
    session.refresh_from_db()
    assert session.compaction_settings == {}


@pytest.mark.parametrize("window", ["0", "-5", "1023", "10000001"])
def test_admin_rejects_window_overrides_the_api_rejects(admin_client_, user, window):
    session = make_session(user)
    response = _post(admin_client_, session, context_window_override=window)
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    session.refresh_from_db()
    assert session.context_window_override is None


def test_admin_rejects_reserve_beyond_a_small_override(admin_client_, user):
    session = make_session(user)
    response = _post(
        admin_client_, session, context_window_override="8000", compaction_settings=json.dumps({"reserve_tokens": 9000})
    )
    assert response.status_code == 200
    assert "reserve_tokens" in response.content.decode()
    session.refresh_from_db()
    assert session.context_window_override is None and session.compaction_settings == {}


def test_admin_saves_valid_settings_and_the_preview_works(admin_client_, user, api):
    session = make_session(user)
    response = _post(
        admin_client_,
        session,
        context_window_override="64000",
        compaction_settings=json.dumps({"keep_recent_tokens": 2500, "auto_compact_ratio": 0.7}),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    session.refresh_from_db()
    assert session.context_window_override == 64_000
    assert session.compaction_settings == {"keep_recent_tokens": 2500, "auto_compact_ratio": 0.7}
    preview = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"dry_run": True}, format="json")
    assert preview.status_code < 500
