"""Laptop and phone widths: no horizontal scrolling, controls reachable by keyboard."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sessions(user):
    busy = make_session(user, title="Port the parser to Rust", agent="claude-code", model="claude-sonnet-4-5")
    add_messages(busy, conversation(40), tokens=4_000)
    make_compaction(
        busy,
        first_kept_seq=21,
        last_summarized_seq=20,
        messages_summarized=20,
        usage={"input_tokens": 48_210, "output_tokens": 1_730, "duration_ms": {"anthropic": 0, "extractive": 4}},
        fallbacks=[{"strategy": "anthropic", "reason": "no API key configured"}],
        read_files=[f"src/parser/module_{i:02d}.rs" for i in range(30)],
        modified_files=["src/parser/lib.rs", "Cargo.toml"],
    )
    add_messages(busy, conversation(30), tokens=5_500)
    for i, (model, tokens) in enumerate([("gpt-5", 120_000), ("claude-haiku-4-5", 9_000), ("gemini-2.5-pro", 600_000)]):
        s = make_session(user, title=f"Session {i}: refactor module {i}", agent="codex", model=model)
        add_messages(s, conversation(10), tokens=tokens // 10)
    return busy


@pytest.mark.parametrize("width,height,label", [(1366, 900, "laptop"), (390, 844, "phone")])
def test_pages_fit_the_screen(live_server, page_factory, sessions, width, height, label):
    page = page_factory(width, height)
    log_in(page, live_server.url, "alice", "alice-password")
    for url, name in [
        ("/", "list"),
        (f"/sessions/{sessions.pk}/", "detail"),
        (f"/sessions/{sessions.pk}/compactions/{sessions.active_compaction_id}/", "compaction"),
        ("/keys/", "keys"),
    ]:
        page.goto(live_server.url + url)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} scrolls sideways by {overflow}px at {width}px"
        screenshot(page, f"{label}-{name}")
        screenshot(page, f"{label}-{name}-top", full_page=False)
    assert page.errors == []


def test_compact_controls_are_keyboard_reachable(live_server, page_factory, sessions):
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{sessions.pk}/")
    reached = set()
    for _ in range(80):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement.textContent.trim() || document.activeElement.id"))
        if {"Preview", "Compact now", "Undo"} <= reached:
            break
    assert {"Preview", "Compact now", "Undo"} <= reached
    assert page.get_by_label("Focus instructions (optional)").count() == 1
    assert page.get_by_label("Keep recent tokens verbatim (optional)").count() == 1


def test_list_filters_and_timeline_load_more_without_reloading(live_server, page_factory, sessions, user):
    long_session = make_session(user, title="Very long session", agent="pi")
    add_messages(long_session, conversation(250), tokens=50)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.evaluate("window.__noReload = true")
    page.get_by_label("Search title or agent").fill("very long")
    page.wait_for_function("() => document.querySelectorAll('#session-table tbody tr').length === 1")
    assert "q=very%20long" in page.url  # pushed, so the filtered list can be bookmarked
    page.get_by_label("Status").select_option("over")
    page.wait_for_function("() => document.querySelector('#session-table').innerText.includes('No sessions match')")
    assert page.evaluate("window.__noReload") is True

    # Opened without ?from= a long session shows its latest messages; earlier ones load in place.
    page.goto(f"{live_server.url}/sessions/{long_session.pk}/")
    page.evaluate("window.__noReload = true")
    assert page.locator("li.msg").first.get_attribute("id") == "m-151"
    assert page.locator("li.msg").last.get_attribute("id") == "m-250"
    page.get_by_role("link", name="Load earlier messages (#51–#150)").click()
    page.locator("#m-51").wait_for()
    assert page.locator("li.msg").first.get_attribute("id") == "m-51"
    assert page.locator("li.msg").count() == 200
    assert page.evaluate("window.__noReload") is True

    page.goto(f"{live_server.url}/sessions/{long_session.pk}/?from=1")
    page.evaluate("window.__noReload = true")
    assert page.locator("li.msg").count() == 100
    page.locator("#load-more-101").scroll_into_view_if_needed()  # "revealed" loads the next page
    page.locator("#m-101").wait_for()
    page.locator("#load-more-201").scroll_into_view_if_needed()
    page.locator("#m-250").wait_for()
    assert page.locator("li.msg").count() == 250
    assert page.locator(".load-more").count() == 0
    assert page.evaluate("window.__noReload") is True
