"""Where the lean kept part shows to people: the session page's context breakdown and timeline,
and the compaction's admin page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from compaction import services as compaction_services
from compaction.models import Status
from sessions import services as session_services
from sessions.models import Message
from tests.api.test_context_kept import work

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(user):
    session = session_services.session_create(owner=user, title="kept", model="claude-sonnet-4-5")
    session_services.messages_append(session=session, messages=work())
    first = Message.objects.get(session=session, content="Fix render/1 and commit it.").seq
    keep = sum(Message.objects.filter(session=session, seq__gte=first).values_list("token_count", flat=True))
    job = compaction_services.compaction_request(
        session=session, reason="manual", strategy="extractive", overrides={"keep_recent_tokens": keep}
    )
    job = compaction_services.compaction_run(compaction_id=job.pk)
    assert job.status == Status.SUCCEEDED
    return session, job


def test_the_session_page_says_what_the_kept_part_trims(client, user, compacted):
    session, job = compacted
    client.force_login(user)
    body = client.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    assert "Kept messages served lean: 3 repeated outputs served as a pointer to the copy kept" in body
    assert "1 out-of-date file read trimmed, 1 long search or listing trimmed" in body
    assert body.count("tool output pruned") == 5  # the five messages the plan trims


def test_the_admin_lists_each_trimmed_message(client, staff_user, compacted):
    _, job = compacted
    client.force_login(staff_user)
    body = client.get(reverse("admin:compaction_compaction_change", args=[job.pk])).content.decode()
    first = job.first_kept_seq
    assert "Kept messages served" in body
    assert f"#{first + 2}: superseded → #{first + 5}" in body
    assert f"#{first + 10}: same → #{first + 8}" in body


def test_the_compaction_page_lists_what_its_kept_plan_serves(client, user, compacted):
    session, job = compacted
    client.force_login(user)
    page = reverse("dashboard:compaction-detail", args=[session.pk, job.pk])
    body = client.get(page).content.decode()
    first = job.first_kept_seq
    assert "5 tool outputs served as a pointer or trimmed" in body
    assert f"repeats message #{first + 8}: a pointer to it" in body
    assert f"out-of-date read of lib/render.ex (changed or read again at #{first + 5})" in body
