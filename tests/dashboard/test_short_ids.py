"""Session ids as the pages show them (the first 8 hex digits): /sessions/<short id>/ opens the
session when one matches, lists the matches when several do, and the list's search takes them;
the session page copies the full id."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from tests.dashboard.factories import make_session

pytestmark = pytest.mark.django_db

FIRST = uuid.UUID("f07b7eaa-1111-4111-8111-111111111111")
SECOND = uuid.UUID("f07b7eaa-2222-4222-8222-222222222222")


def test_a_unique_short_id_opens_the_session(logged_in, user):
    make_session(user, id=FIRST, title="Parser")
    response = logged_in.get("/sessions/f07b7eaa/")
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard:session-detail", args=[FIRST])


def test_an_ambiguous_short_id_lists_the_matches(logged_in, user, other_user):
    make_session(user, id=FIRST, title="Parser")
    make_session(user, id=SECOND, title="Lexer")
    make_session(user, title="Unrelated")
    make_session(other_user, id=uuid.UUID("f07b7eaa-3333-4333-8333-333333333333"), title="Theirs")
    response = logged_in.get("/sessions/f07b7eaa/", follow=True)
    body = response.content.decode()
    assert response.redirect_chain[-1][0] == reverse("dashboard:session-list") + "?q=f07b7eaa"
    assert "Several sessions have an id starting with f07b7eaa" in body
    assert "Parser" in body and "Lexer" in body
    assert "Unrelated" not in body and "Theirs" not in body
    # A longer piece of the id (dashes allowed) tells them apart.
    assert logged_in.get("/sessions/f07b7eaa-2222/")["Location"].endswith(f"/sessions/{SECOND}/")


def test_a_short_id_too_short_unknown_or_another_owners_is_a_404(logged_in, user, other_user):
    make_session(other_user, id=FIRST, title="Theirs")
    assert logged_in.get("/sessions/f07b7e/").status_code == 404
    assert logged_in.get("/sessions/f07b7eaa/").status_code == 404
    assert logged_in.get("/sessions/not-an-id/").status_code == 404


def test_the_session_page_offers_the_full_id_to_copy(logged_in, user):
    make_session(user, id=FIRST)
    body = logged_in.get(reverse("dashboard:session-detail", args=[FIRST])).content.decode()
    assert "id f07b7eaa" in body
    assert (
        f'id="session-full-id" class="visually-hidden" type="text" readonly tabindex="-1" aria-label="Full session id" value="{FIRST}"'
        in body
    )
    assert 'data-copy="#session-full-id"' in body and "copy full id" in body
