"""Errors said once, and a stale page brought up to date after the API answers 409."""

from __future__ import annotations

import pytest

from compaction import services as compaction_services
from tests.browser.conftest import log_in, screenshot
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_undo_on_a_stale_page_says_why_once_and_refreshes(live_server, page_factory, user):
    session = make_session(user, title="Stale page")
    add_messages(session, conversation(20), tokens=300)
    job = make_compaction(session, first_kept_seq=11, last_summarized_seq=10, messages_summarized=10)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.evaluate("window.__noReload = true")
    assert page.locator("#overview tr.active-row").count() == 1

    compaction_services.compaction_revert(compaction=job, user=user)  # "another tab" undid it

    page.locator("#overview tr.active-row").get_by_role("button", name="Undo").click()
    error = page.locator("#compact-status .progress-failed")
    error.wait_for()
    text = error.inner_text()
    assert "only the active compaction can be undone" in text
    assert text.count("none is active") == 1, text  # not "… none is active — … none is active"
    # The page was stale: gauge, history and timeline refresh in place (no active row any more).
    page.wait_for_function("() => document.querySelectorAll('#overview tr.active-row').length === 0")
    assert page.locator("#overview .badge", has_text="undone").count() == 1
    # The timeline is refreshed by its own request: nothing is "in summary" any more.
    page.wait_for_function("() => document.querySelectorAll('.region-note, li.msg-compacted').length === 0")
    assert page.evaluate("window.__noReload") is True
    screenshot(page, "stale-undo-409", full_page=False)
    assert page.errors == []


def test_keep_budget_accepts_any_whole_number_up_to_the_window(live_server, page_factory, user):
    session = make_session(user, title="Budget", model="claude-sonnet-4-5")
    add_messages(session, conversation(8), tokens=100)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    keep = page.get_by_label("Keep recent tokens verbatim (optional)")
    for value, valid in (("2500", True), ("1", True), ("200000", True), ("200001", False), ("-1", False)):
        keep.fill(value)
        assert keep.evaluate("el => el.checkValidity()") is valid, value
