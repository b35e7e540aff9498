from __future__ import annotations

import pytest

from compaction.core import registry
from compaction.core.tokens import count_text
from sessions import services
from sessions.models import Session

from .helpers import url

pytestmark = pytest.mark.django_db


def test_it_creates_a_session(api, user):
    response = api.post(
        "/api/v1/sessions/",
        {
            "title": "Refactor",
            "agent": "pi",
            "model": "claude-opus-4-5",
            "system_prompt": "You are a careful coding agent.",
            "compaction_settings": {"keep_recent_tokens": 30000, "auto_compact_ratio": 0.7},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    session = Session.objects.get(pk=body["id"])
    assert session.owner == user
    assert body["context_window"] == registry.lookup("claude-opus-4-5").context_window == 200_000
    assert body["context_window_override"] is None
    assert body["compaction_settings"] == {"keep_recent_tokens": 30000, "auto_compact_ratio": 0.7}
    assert body["active_compaction"] is None
    assert body["message_count"] == 0
    system_tokens = count_text("You are a careful coding agent.")
    assert session.system_prompt_tokens == system_tokens
    assert body["usage"]["tokens"] == body["usage"]["estimated_tokens"] == system_tokens
    # Trigger = min(window - reserve, ratio × window)
    assert body["usage"]["trigger_tokens"] == min(200_000 - 16_384, 140_000)


def test_an_unknown_model_gets_the_default_window_and_can_be_overridden(api):
    body = api.post("/api/v1/sessions/", {"model": "my-local-llama"}, format="json").json()
    assert body["context_window"] == 128_000
    body = api.patch(f"/api/v1/sessions/{body['id']}/", {"context_window": 32_768}, format="json").json()
    assert body["context_window"] == 32_768
    assert body["context_window_override"] == 32_768
    # Small windows scale the reserve down (≤ 25 %): trigger = 32768 - 8192.
    assert body["usage"]["trigger_tokens"] == 32_768 - 8_192
    body = api.patch(f"/api/v1/sessions/{body['id']}/", {"context_window": None}, format="json").json()
    assert body["context_window"] == 128_000


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"keep_recent": 5}, "compaction_settings: keep_recent: unknown setting"),
        ({"reserve_tokens": "lots"}, "compaction_settings: reserve_tokens: must be int, got str"),
        ({"auto_compact_ratio": 2}, "compaction_settings: auto_compact_ratio: must be at most 1.0"),
        ({"auto_compact": "yes"}, "compaction_settings: auto_compact: must be bool"),
        ({"summary_max_tokens": 10}, "compaction_settings: summary_max_tokens: must be at least 256"),
        (
            {"compact_prompt": "Summarize briefly."},
            "compaction_settings: compact_prompt: custom prompt must contain the {conversation} placeholder",
        ),
        (
            {"compact_prompt": "Use {conversaton}"},
            "compaction_settings: compact_prompt: unknown placeholder(s): {conversaton}",
        ),
    ],
)
def test_it_rejects_bad_compaction_settings(api, settings, error):
    response = api.post("/api/v1/sessions/", {"title": "x", "compaction_settings": settings}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith(error), response.json()
    assert not Session.objects.exists()


def test_it_rejects_unknown_fields_and_bad_values(api):
    response = api.post("/api/v1/sessions/", {"titel": "typo"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("titel: unknown field; allowed: agent, compaction_settings,")
    response = api.post("/api/v1/sessions/", {"context_window": 100}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("context_window: ")
    assert not Session.objects.exists()


def test_patch_accepts_a_get_body_round_trip(api, session):
    body = api.get(url(session)).json()
    body["title"] = "Renamed"
    response = api.patch(url(session), body, format="json")
    assert response.status_code == 200, response.json()
    session.refresh_from_db()
    assert session.title == "Renamed"


def test_patch_merges_compaction_settings_and_null_removes(api, session):
    api.patch(url(session), {"compaction_settings": {"auto_compact": False, "reserve_tokens": 8000}}, format="json")
    body = api.patch(url(session), {"compaction_settings": {"reserve_tokens": None}}, format="json").json()
    assert body["compaction_settings"] == {"auto_compact": False}
    assert body["usage"]["auto_compact"] is False
    session.refresh_from_db()
    assert session.compaction_settings == {"auto_compact": False}


def test_patch_system_prompt_updates_usage(api, session):
    api.post(url(session, "messages/"), {"role": "user", "content": "hello there"}, format="json")
    session.refresh_from_db()
    before = session.context_tokens
    prompt = "You are Compactor's test agent. Be brief."
    body = api.patch(url(session), {"system_prompt": prompt}, format="json").json()
    assert body["usage"]["estimated_tokens"] == before + count_text(prompt)
    context = api.get(url(session, "context/")).json()
    assert context["system"] == prompt
    assert context["estimated_tokens"] == body["usage"]["estimated_tokens"]


def test_list_is_scoped_filtered_searched_and_paginated(api, user, other_user):
    for i in range(3):
        services.session_create(owner=user, title=f"Parser fix {i}", agent="claude-code", model="claude-sonnet-4-5")
    services.session_create(owner=user, title="Docs", agent="pi", model="gpt-5")
    services.session_create(owner=other_user, title="Parser fix (mallory)", agent="claude-code")
    body = api.get("/api/v1/sessions/").json()
    assert body["count"] == 4
    assert {s["title"] for s in body["results"]} == {"Parser fix 0", "Parser fix 1", "Parser fix 2", "Docs"}
    assert api.get("/api/v1/sessions/?agent=pi").json()["count"] == 1
    assert api.get("/api/v1/sessions/?model=claude-sonnet-4-5").json()["count"] == 3
    assert api.get("/api/v1/sessions/?search=parser").json()["count"] == 3
    page = api.get("/api/v1/sessions/?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]


def test_get_and_delete(api, session):
    body = api.get(url(session)).json()
    assert body["id"] == str(session.pk)
    assert body["title"] == "Fix the parser"
    api.post(url(session, "messages/"), {"role": "user", "content": "x"}, format="json")
    assert api.delete(url(session)).status_code == 204
    session.refresh_from_db()
    assert session.deleted_at is not None  # in the trash (sessions.trash), not gone
    assert api.get(url(session)).status_code == 404


def test_a_valid_compact_prompt_is_stored(api, session):
    prompt = "Summarize for a security reviewer.\n\n{conversation}"
    response = api.patch(url(session), {"compaction_settings": {"compact_prompt": prompt}}, format="json")
    assert response.status_code == 200, response.json()
    session.refresh_from_db()
    assert session.compaction_settings == {"compact_prompt": prompt}
    response = api.patch(url(session), {"compaction_settings": {"compact_prompt": "no placeholder"}}, format="json")
    assert response.status_code == 400
    session.refresh_from_db()
    assert session.compaction_settings == {"compact_prompt": prompt}


def test_delete_then_purge_removes_a_session_with_an_active_compaction(api, session):
    from compaction.models import Compaction
    from sessions import trash
    from sessions.models import Message

    api.post(
        url(session, "messages/"), {"messages": [{"role": "user", "content": f"m{i}"} for i in range(4)]}, format="json"
    )
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="s", first_kept_seq=3
    )
    session.active_compaction = compaction
    session.save()
    assert api.delete(url(session)).status_code == 204
    assert trash.sessions_purge(retention_days=0) == 1
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Message.objects.filter(session_id=session.pk).exists()
    assert not Compaction.objects.filter(pk=compaction.pk).exists()


def test_nul_characters_are_a_400_not_a_database_error(api, session):
    response = api.post("/api/v1/sessions/", {"title": "a\u0000b"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("title: ")
    response = api.patch(
        url(session), {"compaction_settings": {"compact_prompt": "x\u0000 {conversation}"}}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("compaction_settings: compact_prompt: must not contain the NUL")
    assert api.get("/api/v1/sessions/?search=a%00b").status_code == 400


def test_patch_rejects_a_read_only_field_and_names_what_to_set(api, session):
    response = api.patch(url(session), {"context_window_override": 1000}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"].startswith("context_window_override: read-only; set context_window"), body
    session.refresh_from_db()
    assert session.context_window_override is None
    response = api.patch(url(session), {"title": "x", "message_count": 7, "id": "nope"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["detail"]) == {"id", "message_count"}
    assert response.json()["detail"]["message_count"] == ["read-only; maintained by Compactor; leave it out"]
    session.refresh_from_db()
    assert session.title == "Fix the parser"  # nothing stored


def test_patch_accepts_read_only_fields_sent_back_unchanged(api, session):
    body = api.patch(url(session), {"context_window": 50_000}, format="json").json()
    assert body["context_window_override"] == 50_000
    body["context_window"] = 60_000
    response = api.patch(url(session), body, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["context_window_override"] == 60_000
    body["context_window_override"] = 70_000  # the wrong field: refused, not ignored
    response = api.patch(url(session), body, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("context_window_override: read-only; set context_window")


def test_create_rejects_read_only_fields(api):
    response = api.post("/api/v1/sessions/", {"title": "x", "context_window_override": 1000}, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("context_window_override: read-only; set context_window")
    assert not Session.objects.exists()


def test_the_list_filters_by_an_id_prefix_of_the_callers_sessions(api, user, other_user):
    import uuid as _uuid

    from sessions.models import Session as _Session

    mine = _Session.objects.create(pk=_uuid.UUID("f07b7eaa-1111-4111-8111-111111111111"), owner=user, title="a")
    _Session.objects.create(pk=_uuid.UUID("f07b7eab-1111-4111-8111-111111111111"), owner=user, title="b")
    _Session.objects.create(pk=_uuid.UUID("f07b7eaa-2222-4222-8222-222222222222"), owner=other_user, title="c")
    body = api.get("/api/v1/sessions/", {"id_prefix": "F07B7EAA"}).json()
    assert [s["id"] for s in body["results"]] == [str(mine.pk)] and body["count"] == 1
    response = api.get("/api/v1/sessions/", {"id_prefix": "f07b7e"})
    assert response.status_code == 400
    assert "at least 8 hex digits" in response.json()["detail"]["id_prefix"][0]
    assert api.get("/api/v1/sessions/", {"id_prefix": "zzzzzzzz"}).status_code == 400
