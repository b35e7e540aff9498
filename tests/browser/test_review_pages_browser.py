"""Review and key pages in a real browser: the admin review page's Review / Re-run / Edit are on
the first screen however long the source and the summary are; on a phone the API keys table
shows each key's State and its Revoke button without sideways scrolling."""

from __future__ import annotations

import pytest

from sessions.models import ApiKey
from tests.browser.conftest import log_in, screenshot
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_SUMMARY = "## Progress\n" + "\n".join(
    f"- Step {n}: edited `src/module_{n}.py` and ran the tests; all green." for n in range(1, 260)
)


def on_first_screen(page, locator, *, width: int, height: int) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height and box["x"] + box["width"] <= width


def test_review_forms_are_on_the_first_screen_of_a_long_review(live_server, page_factory, user, staff_user):
    session = make_session(user, title="Long review")
    add_messages(session, conversation(200), tokens=300)
    c = make_compaction(
        session, first_summarized_seq=1, last_summarized_seq=180, first_kept_seq=181, summary=LONG_SUMMARY
    )
    page = page_factory(1280, 800)
    log_in(page, live_server.url, "root", "root-password")
    page.goto(f"{live_server.url}/admin/compaction/compaction/{c.pk}/review/")
    assert page.locator(".review-summary li").count() > 200  # the whole summary is on the page
    for locator in (
        page.get_by_role("button", name="Save review"),
        page.get_by_role("button", name="Re-run compaction"),
        page.get_by_text("Open the editor"),
    ):
        assert on_first_screen(page, locator, width=1280, height=800), locator
    page.get_by_text("Open the editor").click()
    assert page.get_by_role("button", name="Save edit").is_visible()
    screenshot(page, "review-first-screen", full_page=False)
    assert page.errors == []


def test_api_keys_table_shows_state_and_revoke_on_a_phone(live_server, page_factory, user):
    ApiKey.objects.create_key(owner=user, name="laptop agent")
    ApiKey.objects.create_key(owner=user, name="old ci runner", revoked=True)
    page = page_factory(375, 800)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/keys/")
    rows = page.locator("table.keys tbody tr")
    assert rows.count() == 2
    # Each key's State and the active key's Revoke lie inside the 375 px screen as laid out:
    # no sideways scrolling of the page or of the table's wrapper is needed to reach them.
    states = page.locator('table.keys td[data-label="State"] .status')
    assert sorted(states.all_inner_texts()) == ["active", "revoked"]
    revoke = page.get_by_role("button", name="Revoke key laptop agent")
    for element in [states.nth(0), states.nth(1), revoke]:
        left, right = element.evaluate("e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; }")
        assert 0 <= left and right <= 375, (element, left, right)
    assert revoke.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    wrap = page.locator(".table-wrap").evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert wrap[0] <= wrap[1], wrap
    screenshot(page, "api-keys-phone")
    assert page.errors == []


@pytest.mark.parametrize("width,label", [(1280, "laptop"), (375, "phone")])
def test_rejected_summary_page_undo_in_the_browser(live_server, page_factory, user, staff_user, width, label):
    from compaction.core.ledger import Ledger, fidelity_report
    from compaction.models import ReviewStatus

    ledger = Ledger()
    ledger.items["files"].append("src/parser.py")
    ledger.items["commands"].append("pytest -k nested --maxfail=1")
    _, fidelity = fidelity_report("## Goal\nFix `src/parser.py`.", ledger)
    session = make_session(user, title="Rejected in the browser")
    add_messages(session, conversation(16), tokens=500)
    c = make_compaction(
        session, review_status=ReviewStatus.REJECTED, reviewed_by=staff_user, fidelity=fidelity.as_json()
    )
    page = page_factory(width, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/compactions/{c.pk}/")
    assert page.get_by_role("heading", name="Rejected, but still served").is_visible()
    assert page.locator(".fidelity-score").inner_text() == "50 %"
    # "Missed" starts collapsed (the outcome and the summary come first); one click shows the items.
    assert not page.get_by_text("pytest -k nested --maxfail=1").is_visible()
    page.get_by_text("Missed: 1 item").click()
    assert page.get_by_text("pytest -k nested --maxfail=1").is_visible()
    screenshot(page, f"compaction-rejected-{label}")
    page.get_by_role("button", name="Undo").click()
    page.locator("#rejected-status").get_by_text("Compaction undone").wait_for()
    session.refresh_from_db()
    assert session.active_compaction_id is None
    assert page.errors == [] and page.csp_violations == []
