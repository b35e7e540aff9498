"""DELETE moves a session to the trash (restorable), a purge deletes it for good after the
retention period, and the admin refuses to delete the active compaction."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from compaction.models import Compaction, Status
from sessions import trash
from sessions.models import Message, Session
from tests.compaction.factories import append, conversation, make_session

pytestmark = pytest.mark.django_db


def url(session, tail: str = "") -> str:
    return f"/api/v1/sessions/{session.pk}/{tail}"


def test_delete_moves_the_session_to_the_trash_and_restore_brings_it_back(api, session):
    messages = list(Message.objects.filter(session=session).values_list("seq", "content"))
    assert messages
    assert api.delete(url(session)).status_code == 204

    assert api.get(url(session)).status_code == 404
    assert api.get(url(session, "context/")).status_code == 404
    assert api.post(url(session, "messages/"), {"role": "user", "content": "x"}, format="json").status_code == 404
    assert str(session.pk) not in {row["id"] for row in api.get("/api/v1/sessions/").json()["results"]}
    assert api.delete(url(session)).status_code == 404  # already in the trash
    # Nothing was destroyed.
    assert list(Message.objects.filter(session=session).values_list("seq", "content")) == messages

    restored = api.post(url(session, "restore/"))
    assert restored.status_code == 200, restored.json()
    assert restored.json()["message_count"] == len(messages)
    assert api.get(url(session)).status_code == 200
    assert len(api.get(url(session, "messages/")).json()["results"]) == len(messages)


def test_restore_is_a_404_unless_the_session_is_in_the_callers_trash(api, other_api, session):
    assert api.post(url(session, "restore/")).status_code == 404  # not deleted
    api.delete(url(session))
    assert other_api.post(url(session, "restore/")).status_code == 404  # another owner's
    session.refresh_from_db()
    assert session.deleted_at is not None


def test_purge_deletes_only_what_is_older_than_the_retention(user):
    now = timezone.now()
    old = make_session(user)
    append(old, conversation(2))
    recent = make_session(user)
    kept = make_session(user)
    trash.session_trash(session=old, now=now - timedelta(days=settings.TRASH_RETENTION_DAYS + 1))
    trash.session_trash(session=recent, now=now - timedelta(days=settings.TRASH_RETENTION_DAYS - 1))
    call_command("purge_trash", stdout=open("/dev/null", "w"))  # noqa: SIM115
    assert not Session.objects.filter(pk=old.pk).exists()
    assert not Message.objects.filter(session_id=old.pk).exists()
    assert Session.objects.filter(pk=recent.pk).exists() and Session.objects.filter(pk=kept.pk).exists()


def test_purge_runs_from_beat(user):
    from sessions.tasks import purge_trash

    assert settings.CELERY_BEAT_SCHEDULE["purge-trash"]["task"] == purge_trash.name
    gone = make_session(user)
    trash.session_trash(session=gone, now=timezone.now() - timedelta(days=settings.TRASH_RETENTION_DAYS + 1))
    purge_trash.apply()
    assert not Session.objects.filter(pk=gone.pk).exists()


# --- admin ----------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="root-password"))
    return client


def _compacted(user):
    from compaction import services

    session = make_session(user)
    append(session, conversation(8))
    job = services.compaction_request(session=session, reason="manual", strategy="extractive")
    job = services.compaction_run(compaction_id=job.pk)
    assert job.status == Status.SUCCEEDED
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk
    return session, job


def test_admin_refuses_to_delete_the_active_compaction(admin_client, user):
    session, job = _compacted(user)
    page = admin_client.get(f"/admin/compaction/compaction/{job.pk}/delete/", follow=True)
    assert b"undo it first" in page.content
    admin_client.post(f"/admin/compaction/compaction/{job.pk}/delete/", {"post": "yes"})
    # The bulk action's confirmation page refuses it; forcing the POST is a 403.
    confirm = admin_client.post(
        "/admin/compaction/compaction/", {"action": "delete_selected", "_selected_action": [str(job.pk)]}
    )
    assert b"would require deleting the following protected" in confirm.content or b"permission" in confirm.content
    admin_client.raise_request_exception = False
    bulk = admin_client.post(
        "/admin/compaction/compaction/",
        {"action": "delete_selected", "_selected_action": [str(job.pk)], "post": "yes"},
    )
    assert bulk.status_code == 403
    assert Compaction.objects.filter(pk=job.pk).exists()
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk


def test_admin_deletes_a_compaction_that_is_not_active(admin_client, user):
    from compaction import services

    session, job = _compacted(user)
    services.compaction_revert(compaction=job, user=user)
    response = admin_client.post(f"/admin/compaction/compaction/{job.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Compaction.objects.filter(pk=job.pk).exists()


def test_admin_delete_of_a_session_moves_it_to_the_trash(admin_client, user, session):
    admin_client.post(f"/admin/agent_sessions/session/{session.pk}/delete/", {"post": "yes"})
    session.refresh_from_db()
    assert session.deleted_at is not None
    assert Message.objects.filter(session=session).exists()
    admin_client.post("/admin/agent_sessions/session/", {"action": "restore", "_selected_action": [str(session.pk)]})
    session.refresh_from_db()
    assert session.deleted_at is None


# --- dashboard ------------------------------------------------------------------------------------


def test_dashboard_trash_and_restore(client, user, other_user, session):
    client.force_login(user)
    assert client.post(f"/sessions/{session.pk}/trash/").status_code == 302
    assert client.get(f"/sessions/{session.pk}/").status_code == 404
    assert f"/sessions/{session.pk}/".encode() not in client.get("/").content
    page = client.get("/trash/")
    assert session.title.encode() in page.content and b"Restore" in page.content
    # Someone else can neither trash nor restore it.
    client.force_login(other_user)
    assert client.post(f"/sessions/{session.pk}/restore/").status_code == 404
    client.force_login(user)
    response = client.post(f"/sessions/{session.pk}/restore/")
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert client.get(f"/sessions/{session.pk}/").status_code == 200
    session.refresh_from_db()
    assert session.deleted_at is None


def test_only_the_owner_moves_a_session_to_the_trash(client, other_user, session):
    client.force_login(other_user)
    assert client.post(f"/sessions/{session.pk}/trash/").status_code == 404
    session.refresh_from_db()
    assert session.deleted_at is None
