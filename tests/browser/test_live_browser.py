"""The session page and the list follow an agent as it writes: ~3k tokens appended through the
REST API show on the gauge (and the new message in the timeline) within 2 s, with no reload."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.dashboard.factories import add_messages, conversation, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# ~3,000 tokens of plain prose (tiktoken counts " word" as one token).
THREE_K_TOKENS = "The agent keeps working on the parser and reports progress. " * 300


def api_append(base_url: str, key: str, session_id, text: str) -> None:
    request = urllib.request.Request(
        f"{base_url}/api/v1/sessions/{session_id}/messages/",
        data=json.dumps({"role": "user", "content": text}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def wait_for_change(page, selector: str, before: str, *, within: float) -> float:
    """Seconds until the element's text differs from `before` (fails after `within`)."""
    started = time.monotonic()
    page.wait_for_function(
        "([sel, old]) => { const e = document.querySelector(sel); return e && e.innerText.trim() !== old; }",
        arg=[selector, before],
        timeout=within * 1000,
    )
    return time.monotonic() - started


def test_session_page_follows_an_api_append(live_server, page_factory, user, api_key):
    session = make_session(user, title="Live session")
    add_messages(session, conversation(8), tokens=1500)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.evaluate("window.__notReloaded = true")
    before = page.locator(".gauge-words").inner_text().strip()
    # Let the page settle into its polling rhythm, so the append lands at a random point of it.
    page.wait_for_timeout(700)
    api_append(live_server.url, api_key, session.pk, THREE_K_TOKENS)
    waited = wait_for_change(page, ".gauge-words", before, within=2.0)
    after = page.locator(".gauge-words").inner_text().strip()
    print(f"gauge changed {waited:.2f} s after the append: {before!r} -> {after!r}")
    assert after != before and waited < 2.0
    # The new message appears at the end of the timeline, and the page was not reloaded.
    page.locator("#m-9").wait_for(timeout=2000)
    assert "9 messages" in page.locator("#session-meta").inner_text()
    assert page.locator("#session-meta").count() == 1 and page.locator("#overview").count() == 1
    assert "keeps working on the parser" in page.locator("#m-9").inner_text()
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, "live-session-after-append", full_page=False)
    assert page.errors == [] and page.csp_violations == []


def test_session_list_follows_an_api_append_keeping_the_filter(live_server, page_factory, user, api_key):
    session = make_session(user, title="Live parser")
    add_messages(session, conversation(8), tokens=1500)
    make_session(user, title="Something else")
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/?q=parser&sort=usage")
    page.evaluate("window.__notReloaded = true")
    cell = "#session-table td.usage-cell .small"
    before = page.locator(cell).inner_text().strip()
    page.wait_for_timeout(700)
    api_append(live_server.url, api_key, session.pk, THREE_K_TOKENS)
    waited = wait_for_change(page, cell, before, within=2.0)
    print(f"list row changed {waited:.2f} s after the append")
    assert waited < 2.0
    # Still the filtered view: one row, the other session not shown; URL unchanged.
    assert page.locator("#session-table tbody tr").count() == 1
    assert "Something else" not in page.locator("#session-table").inner_text()
    assert page.url.endswith("/?q=parser&sort=usage")
    assert page.evaluate("window.__notReloaded") is True
    assert page.errors == [] and page.csp_violations == []


def test_a_hidden_tab_does_not_poll(live_server, page_factory, user):
    session = make_session(user, title="Hidden tab")
    add_messages(session, conversation(4), tokens=500)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    polls = []
    page.on("request", lambda r: polls.append(r.url) if "/overview/" in r.url else None)
    page.wait_for_timeout(1700)
    assert polls, "a visible tab polls"
    page.evaluate(
        """() => { Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
                   Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'}); }"""
    )
    polls.clear()
    page.wait_for_timeout(3200)
    assert polls == []
