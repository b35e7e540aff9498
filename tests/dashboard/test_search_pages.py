"""The dashboard's history search: the session page's box, the list's (every session), hits
linking to their message highlighted in the timeline, owners only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from compaction.models import Compaction
from sessions import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(user):
    session = services.session_create(owner=user, title="Parser work")
    services.messages_append(
        session=session,
        messages=[
            {"role": "user", "content": "The <b>capybara</b> test fails in src/parse.py."},
            {"role": "assistant", "content": "Looking at the capybara case."},
            {"role": "user", "content": "Then ship it."},
        ],
    )
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="Fixed a test.", first_kept_seq=2
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    return session


def test_the_session_search_marks_matches_and_links_to_the_message(logged_in, session):
    url = reverse("dashboard:session-search", args=[session.pk])
    fragment = logged_in.get(url, {"q": "capybara"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="search-results"')
    assert "2 hits for “capybara” in this session" in fragment
    # Content is escaped; only the match is marked.
    assert "&lt;b&gt;<mark>capybara</mark>&lt;/b&gt;" in fragment
    detail = reverse("dashboard:session-detail", args=[session.pk])
    assert f'href="{detail}?from=1&amp;hl=1&amp;b=0#m-1"' in fragment
    assert "in summary" in fragment and "in context" in fragment
    # Opened without htmx it is a page of its own, with the form filled in.
    page = logged_in.get(url, {"q": "src/parse.py"}).content.decode()
    assert "<title>Search" in page and 'value="src/parse.py"' in page and "<mark>src/parse.py</mark>" in page
    # The hit's link opens the timeline with that message highlighted.
    timeline = logged_in.get(detail, {"from": 1, "hl": 2}).content.decode()
    assert 'msg-highlight" id="m-2" aria-current="true"' in timeline
    assert "Search this session" in timeline and str(session.pk) in timeline  # the full id, for agents


def test_the_list_searches_every_session_of_the_user(logged_in, session, other_user):
    theirs = services.session_create(owner=other_user, title="Not yours")
    services.messages_append(session=theirs, messages=[{"role": "user", "content": "capybara too"}])
    assert "Search messages in all sessions" in logged_in.get(reverse("dashboard:session-list")).content.decode()
    page = logged_in.get(reverse("dashboard:search"), {"q": "capybara"}).content.decode()
    assert "2 hits" in page and "Parser work" in page and "Not yours" not in page


def test_a_bad_query_is_a_400_saying_why_and_others_sessions_are_404(logged_in, session, other_user):
    response = logged_in.get(reverse("dashboard:search"), {"q": "x" * 501})
    assert response.status_code == 400 and "is longer than 500 characters" in response.content.decode()
    theirs = services.session_create(owner=other_user, title="Not yours")
    assert logged_in.get(reverse("dashboard:session-search", args=[theirs.pk]), {"q": "x"}).status_code == 404


def test_a_tool_output_hit_opens_its_folded_result(logged_in, session):
    services.messages_append(
        session=session,
        messages=[
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading the log."},
                    {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "cat build.log"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "E: narwhal overflow"}],
            },
        ],
    )
    fragment = logged_in.get(
        reverse("dashboard:session-search", args=[session.pk]), {"q": "narwhal"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    detail = reverse("dashboard:session-detail", args=[session.pk])
    assert f'href="{detail}?from=3&amp;hl=5&amp;b=0#m-5"' in fragment and "tool result" in fragment
    page = logged_in.get(detail, {"from": 3, "hl": 5, "b": 0}).content.decode()
    highlighted = page[page.index('id="m-5"') :]
    assert highlighted.index('<details class="result" open>') < highlighted.index("narwhal overflow")
    assert '<details class="tool" open>' not in page  # only the hit's block is unfolded
