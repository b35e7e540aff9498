"""History search in a real browser at 1366 px: the session page's box finds a summarized message,
its hit opens the timeline there with the message highlighted; the list's box searches every session."""

from __future__ import annotations

import pytest

from compaction.models import Compaction
from sessions import services
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_PATH = "src/" + "/".join(f"very_long_directory_name_{i}" for i in range(12)) + "/app.py"


@pytest.fixture
def session(user):
    session = services.session_create(owner=user, title="Migration work", model="claude-sonnet-4-5")
    messages = []
    for i in range(1, 121):
        text = f"Step {i}: routine work on the importer."
        if i == 7:
            text = f"Step 7: the okapi migration broke {LONG_PATH} with ALTER TABLE annotations."
        messages.append({"role": "user" if i % 2 else "assistant", "content": text})
    services.messages_append(session=session, messages=messages)
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="Worked on the importer.", first_kept_seq=100
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)
    other = services.session_create(owner=user, title="Another session")
    services.messages_append(session=other, messages=[{"role": "user", "content": "an okapi here too"}])
    return session


def _no_sideways_scroll(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px"


def test_search_finds_a_summarized_message_and_opens_it_highlighted(live_server, page_factory, session):
    page = page_factory(1366, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    # The timeline opens at the latest messages: #7 is far above, summarized away.
    assert page.locator("#m-7").count() == 0
    page.get_by_role("searchbox", name="Search this session's messages").fill('okapi "alter table"')
    page.get_by_role("button", name="Search").click()
    hit = page.locator(".search-hit").first
    hit.wait_for()
    assert page.locator(".search-hit").count() == 1
    assert hit.locator("mark").all_inner_texts()[0] == "okapi"
    assert "in summary" in hit.inner_text()
    _no_sideways_scroll(page)  # a long path in a snippet wraps
    screenshot(page, "search-session-results", full_page=False)

    hit.get_by_role("link", name="#7").click()
    page.wait_for_url(f"**/sessions/{session.pk}/?from=5&hl=7&b=0#m-7")
    target = page.locator("#m-7")
    assert "msg-highlight" in target.get_attribute("class")
    assert target.is_visible() and target.evaluate(
        "el => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    _no_sideways_scroll(page)
    screenshot(page, "search-session-highlighted", full_page=False)

    page.goto(f"{live_server.url}/")
    page.get_by_role("searchbox", name="Search messages in all sessions").fill("okapi")
    page.get_by_role("searchbox", name="Search messages in all sessions").press("Enter")
    page.locator(".search-hit").nth(1).wait_for()
    titles = set(page.locator(".search-session").all_inner_texts())
    assert titles == {"Migration work", "Another session"}
    _no_sideways_scroll(page)
    screenshot(page, "search-all-results", full_page=False)
    assert page.errors == [] and page.csp_violations == []
