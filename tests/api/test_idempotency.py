"""Idempotency-Key on the writing POSTs: a retry gets the first answer and writes nothing more."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.utils import timezone
from rest_framework.test import APIClient

from compaction.models import Compaction
from sessions import trash
from sessions.models import ApiKey, IdempotentRequest, Message, Session, UsageSample

from .helpers import url

pytestmark = pytest.mark.django_db

KEY = "3f1c7a52-retry-me"


def post(api, path, body, *, key=KEY, fmt="json"):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return api.post(path, body, format=fmt, **headers)


def test_the_same_append_twice_is_stored_once_and_answered_the_same(api, session):
    message = {"role": "user", "content": "Fix the parser"}
    first = post(api, url(session, "messages/"), message)
    again = post(api, url(session, "messages/"), message)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Message.objects.filter(session=session).count() == 1


def test_key_order_and_spacing_of_the_body_do_not_make_it_another_request(api, session):
    path = url(session, "messages/")
    post(api, path, {"role": "user", "content": "one"})
    raw = json.dumps({"content": "one", "role": "user"}, indent=2)
    again = api.post(path, raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert Message.objects.filter(session=session).count() == 1


def test_the_same_key_with_another_body_is_a_409_naming_the_key(api, session):
    assert post(api, url(session, "messages/"), {"role": "user", "content": "one"}).status_code == 201
    response = post(api, url(session, "messages/"), {"role": "user", "content": "two"})
    assert response.status_code == 409
    assert KEY in response.json()["error"]
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == ["one"]


def test_keys_are_scoped_to_the_key_owner(api, session, other_user):
    _, other_key = ApiKey.objects.create_key(owner=other_user, name="other")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {other_key}")
    other_session = Session.objects.create(owner=other_user, title="theirs")
    assert post(api, url(session, "messages/"), {"role": "user", "content": "mine"}).status_code == 201
    response = post(other, url(other_session, "messages/"), {"role": "user", "content": "theirs"})
    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert Message.objects.filter(session=other_session).count() == 1


def test_a_failed_request_leaves_the_key_free_for_the_corrected_retry(api, session):
    bad = post(api, url(session, "messages/"), {"role": "robot", "content": "x"})
    assert bad.status_code == 400
    assert not IdempotentRequest.objects.exists()
    good = post(api, url(session, "messages/"), {"role": "user", "content": "x"})
    assert good.status_code == 201


def test_after_24_hours_the_key_is_new_again_and_the_purge_forgets_it(api, session):
    post(api, url(session, "messages/"), {"role": "user", "content": "one"})
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(hours=25))
    again = post(api, url(session, "messages/"), {"role": "user", "content": "one"})
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert Message.objects.filter(session=session).count() == 2
    assert trash.idempotency_keys_purge(now=timezone.now() + timedelta(hours=25)) == 1


def test_a_bad_key_is_a_400_naming_the_header(api, session):
    response = post(api, url(session, "messages/"), {"role": "user", "content": "x"}, key="x" * 300)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["error"]
    assert not Message.objects.exists()


def test_usage_reports_compactions_and_sessions_are_idempotent(api, session):
    post(api, url(session, "messages/"), {"role": "user", "content": "hello " * 50}, key="m")
    usage = {"input_tokens": 900, "output_tokens": 12}
    assert (
        post(api, url(session, "usage/"), usage, key="u").json()
        == post(api, url(session, "usage/"), usage, key="u").json()
    )
    assert UsageSample.objects.filter(session=session).count() == 1
    first = post(api, url(session, "compactions/"), {}, key="c")
    again = post(api, url(session, "compactions/"), {}, key="c")
    assert again.status_code == first.status_code and again.json()["id"] == first.json()["id"]
    assert again.get("Location") == first.get("Location")
    assert Compaction.objects.filter(session=session).count() == 1
    created = [post(api, "/api/v1/sessions/", {"title": "once"}, key="s") for _ in range(2)]
    assert created[0].json()["id"] == created[1].json()["id"]
    assert Session.objects.filter(title="once").count() == 1


def test_an_import_retried_with_its_key_is_stored_once(api):
    messages = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": "Fixed."}]
    content = json.dumps({"messages": messages}).encode()
    answers = [
        post(api, "/api/v1/imports/", {"file": SimpleUploadedFile("t.json", content)}, key="i", fmt="multipart")
        for _ in range(2)
    ]
    assert answers[0].status_code == 201, answers[0].json()
    assert answers[1].json() == answers[0].json()
    assert Session.objects.count() == 1
    other = post(
        api, "/api/v1/imports/", {"file": SimpleUploadedFile("t.json", content + b" ")}, key="i", fmt="multipart"
    )
    assert other.status_code == 409


def test_a_failing_auto_compaction_check_never_turns_a_stored_append_into_an_error(api, session, monkeypatch):
    from compaction.services import jobs

    def broken(**kwargs):
        raise OperationalError("the database went away after the commit")

    monkeypatch.setattr(jobs, "compaction_maybe_auto", broken)
    for key in (None, "k1"):
        response = post(api, url(session, "messages/"), {"role": "user", "content": f"kept {key}"}, key=key)
        assert response.status_code == 201
        assert response.json()["compaction"] is None
    assert post(api, url(session, "usage/"), {"input_tokens": 10, "output_tokens": 1}, key=None).status_code == 200
    assert Message.objects.filter(session=session).count() == 2


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_retries_with_one_key_store_once(api_key, user):
    import threading

    from django.db import connection

    from tests.services import require_postgres

    require_postgres()
    session = Session.objects.create(owner=user, title="race")
    barrier = threading.Barrier(4)
    answers: list = []

    def send() -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
        barrier.wait()
        answers.append(post(client, url(session, "messages/"), {"role": "user", "content": "once"}))
        connection.close()

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [a.status_code for a in answers] == [201] * 4
    assert len({json.dumps(a.json(), sort_keys=True) for a in answers}) == 1
    assert Message.objects.filter(session=session).count() == 1


@pytest.fixture
def eager_worker():
    """Jobs run in-process when their transaction commits (the worker's stand-in)."""
    from project.celery import app as celery_app

    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.mark.django_db(transaction=True)
def test_a_compaction_request_that_waits_gets_its_finished_job_with_a_key(api, user, eager_worker):
    from tests.compaction.factories import append, conversation, make_session

    session = make_session(user)
    append(session, conversation(8))
    path = url(session, "compactions/")
    started = timezone.now()
    first = post(api, path, {"wait": 10}, key="wait-1")
    assert first.status_code == 200, first.json()  # finished, not a timed-out 202
    assert first.json()["status"] == "succeeded"
    assert (timezone.now() - started).total_seconds() < 8
    again = post(api, path, {"wait": 10}, key="wait-1")
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert Compaction.objects.filter(session=session).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_first_request_runs_is_a_409_saying_so(api, session, monkeypatch):
    from compaction.api import views

    seen: list = []
    original = views.services.compaction_request

    def slow_request(**kwargs):
        seen.append(post(api, url(session, "compactions/"), {}, key="busy"))  # the retry, meanwhile
        return original(**kwargs)

    monkeypatch.setattr(views.services, "compaction_request", slow_request)
    first = post(api, url(session, "compactions/"), {}, key="busy")
    assert first.status_code in (200, 202)
    assert seen[0].status_code == 409 and "still being processed" in seen[0].json()["error"]
    monkeypatch.setattr(views.services, "compaction_request", original)
    assert post(api, url(session, "compactions/"), {}, key="busy")["Idempotent-Replayed"] == "true"
