"""Live pages: the session page and the list poll with the fingerprint of what they show; an
unchanged page answers 204 without rendering, a change (an append through the API, a job's
progress, a review) answers the new fragment. The timeline's tail fetches new messages."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from compaction.models import Status
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def poll_url(body: str, path: str) -> str:
    """The hx-get a live element polls (the first one under `path`)."""
    match = re.search(rf'hx-get="({re.escape(path)}\?[^"]*v=[0-9a-f]+)"', body)
    assert match, f"no live poll of {path} in the page"
    return html.unescape(match.group(1))


def append(api, session, text: str = "More work. " * 50) -> None:
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": text}, format="json")
    assert response.status_code == 201, response.content


def test_unchanged_overview_answers_204_without_rendering(logged_in, user, django_assert_max_num_queries):
    session = make_session(user)
    add_messages(session, conversation(6), tokens=500)
    page = logged_in.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    url = poll_url(page, reverse("dashboard:session-overview", args=[session.pk]))
    # Login session, user, the session row, one aggregate over its compactions.
    with django_assert_max_num_queries(4):
        response = logged_in.get(url, **HX)
    assert response.status_code == 204 and response.content == b""
    assert [t.name for t in response.templates] == []


def test_overview_after_an_api_append_shows_the_new_gauge(logged_in, user, api):
    session = make_session(user)
    add_messages(session, conversation(5), tokens=500)  # ends with the user's turn: no call waiting
    page = logged_in.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    url = poll_url(page, reverse("dashboard:session-overview", args=[session.pk]))
    before = re.search(r'class="gauge-words[^"]*">([^<]+)<', page).group(1)
    append(api, session)
    response = logged_in.get(url, **HX)
    assert response.status_code == 200
    body = response.content.decode()
    after = re.search(r'class="gauge-words[^"]*">([^<]+)<', body).group(1)
    assert after != before
    assert response["HX-Trigger"] == "compactor:refreshed"
    # The line under the title (message count, last activity) is swapped along, out of band.
    assert re.search(r'id="session-meta" hx-swap-oob="true">\s+claude-code · claude-sonnet-4-5 ·\s+6 messages', body)
    # The new fragment polls with the new fingerprint: asked again, nothing changed.
    assert (
        logged_in.get(poll_url(body, reverse("dashboard:session-overview", args=[session.pk])), **HX).status_code == 204
    )


def test_overview_changes_when_a_job_starts_and_when_it_is_reviewed(logged_in, user, staff_user):
    session = make_session(user)
    add_messages(session, conversation(12), tokens=500)
    job = make_compaction(session, status=Status.QUEUED, activate=False, tokens_before=None, tokens_after=None)
    overview = reverse("dashboard:session-overview", args=[session.pk])
    url = poll_url(logged_in.get(overview, **HX).content.decode(), overview)
    job.status, job.started_at = Status.RUNNING, timezone.now()
    job.save(update_fields=["status", "started_at"])
    response = logged_in.get(url, **HX)
    assert response.status_code == 200 and "Running compaction" in response.content.decode()
    url = poll_url(response.content.decode(), overview)
    job.status, job.reviewed_at, job.reviewed_by = Status.SUCCEEDED, timezone.now(), staff_user
    job.save(update_fields=["status", "reviewed_at", "reviewed_by"])
    assert logged_in.get(url, **HX).status_code == 200


def test_another_owner_cannot_poll(client, other_user, user):
    session = make_session(user)
    client.force_login(other_user)
    assert client.get(reverse("dashboard:session-overview", args=[session.pk]) + "?v=0", **HX).status_code == 404


def test_list_poll_keeps_filter_sort_and_page_and_answers_204_until_a_change(logged_in, user, api):
    for i in range(30):
        make_session(user, title=f"Parser {i:02d}")
    make_session(user, title="Unrelated")
    url = reverse("dashboard:session-list")
    page = logged_in.get(url, {"q": "parser", "sort": "usage", "page": 2}).content.decode()
    poll = poll_url(page, url)
    assert "q=parser" in poll and "sort=usage" in poll and "page=2" in poll
    assert logged_in.get(poll, **HX).status_code == 204
    target = make_session(user, title="Parser 99")
    response = logged_in.get(poll, **HX)
    assert response.status_code == 200
    fragment = response.content.decode()
    assert "<html" not in fragment and "Page 2 of 2" in fragment and "Unrelated" not in fragment
    poll = poll_url(fragment, url)
    assert logged_in.get(poll, **HX).status_code == 204
    append(api, target)
    assert logged_in.get(poll, **HX).status_code == 200


def test_timeline_tail_brings_new_messages_and_nothing_when_there_are_none(logged_in, user, api):
    session = make_session(user)
    add_messages(session, conversation(5), tokens=100)  # ends with the user's turn: no call waiting
    page = logged_in.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    messages_url = reverse("dashboard:session-messages", args=[session.pk])
    tail = re.search(rf'hx-get="({re.escape(messages_url)}\?from=6&amp;tail=1)"', page)
    assert tail, "the latest page has a live tail after #5"
    tail_url = html.unescape(tail.group(1))
    assert logged_in.get(tail_url, **HX).status_code == 204
    append(api, session, "A new question from the agent's user.")
    body = logged_in.get(tail_url, **HX).content.decode()
    assert 'id="m-6"' in body and "A new question" in body and 'id="m-5"' not in body
    assert "from=7&amp;tail=1" in body and "Load earlier" not in body


def test_an_older_page_has_no_tail(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(250), tokens=10)
    page = logged_in.get(reverse("dashboard:session-detail", args=[session.pk]), {"from": 1}).content.decode()
    assert "tail=1" not in page and "Load more messages (from #101)" in page


def test_load_earlier_updates_showing_from(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(250), tokens=10)
    page = logged_in.get(reverse("dashboard:session-detail", args=[session.pk])).content.decode()
    assert "Showing from #151 of 250" in page
    body = logged_in.get(
        reverse("dashboard:session-messages", args=[session.pk]), {"from": 51, "to": 151}, **HX
    ).content.decode()
    assert 'id="timeline-range" hx-swap-oob="true"' in body and "Showing from #51 of 250" in body
    assert "tail=1" not in body
