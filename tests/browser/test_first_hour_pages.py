"""The pages a new user opens first, at a laptop's and a phone's width: the compaction page opens
with its outcome, the session page puts Compact and Preview beside the gauge (trash far from the
title), the chart's labels sit clear of the other line, the trash is cards on a phone, and the
full session id can be copied."""

from __future__ import annotations

import pytest
from django.utils import timezone

from compaction.core.ledger import Ledger, fidelity_report
from tests.browser.conftest import log_in, screenshot
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [(1366, 900, "laptop"), (390, 844, "phone")]


def _fidelity_with_misses() -> dict:
    ledger = Ledger()
    ledger.items["files"].append("src/parser.py")
    ledger.items["commands"].extend(f"pytest tests/test_{i}.py -x" for i in range(4))
    return fidelity_report("## Goal\nFix `src/parser.py`.", ledger)[1].as_json()


@pytest.fixture
def compacted(user):
    session = make_session(user, title="Port the parser to Rust", model="claude-sonnet-4-5")
    add_messages(session, conversation(60), tokens=2_900)  # near the 200k window: both chart lines drawn
    job = make_compaction(
        session,
        fidelity=_fidelity_with_misses(),
        runway_tokens=120_000,
        policy_reason="summarize: lands at 21,380, 120,000 tokens of runway",
        summary="## Goal\nPort the parser.\n\n" + "\n".join(f"- step {i}: done" for i in range(120)),
    )
    add_messages(session, conversation(8), tokens=20_000)
    return session, job


def _top(page, selector: str) -> float:
    return page.locator(selector).first.evaluate("e => e.getBoundingClientRect().top + window.scrollY")


@pytest.mark.parametrize("width,height,label", WIDTHS)
def test_the_compaction_page_opens_with_its_outcome(live_server, page_factory, compacted, width, height, label):
    session, job = compacted
    page = page_factory(width, height)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/compactions/{job.pk}/")
    outcome = page.locator("section.outcome")
    assert "167,094 → 21,380" in outcome.inner_text() and "145,714 tokens" in outcome.inner_text()
    assert "120,000 tokens" in outcome.inner_text() and "summarize: lands at 21,380" in outcome.inner_text()
    box = outcome.bounding_box()
    assert box["y"] + box["height"] <= height, f"the outcome ends below the first screen at {width}px"
    assert _top(page, "section.outcome") < _top(page, "#summary-h")
    assert page.locator("details.fidelity-missed").evaluate("d => d.open") is False
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
    screenshot(page, f"first-hour-{label}-compaction", full_page=False)
    assert page.errors == []


@pytest.mark.parametrize("width,height,label", WIDTHS)
def test_compact_sits_beside_the_gauge_and_trash_far_from_the_title(
    live_server, page_factory, compacted, width, height, label
):
    session, _ = compacted
    page = page_factory(width, height)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    compact = page.get_by_role("button", name="Compact now")
    preview = page.get_by_role("button", name="Preview")
    gauge = page.locator(".gauge-words")
    assert gauge.bounding_box()["width"] > 0.5 * min(width, 1200)  # the panel never squeezes the gauge
    if width >= 1000:  # side by side: the buttons level with the gauge, on the first screen
        assert abs(compact.bounding_box()["y"] - gauge.bounding_box()["y"]) < 260
        assert compact.bounding_box()["x"] > gauge.bounding_box()["x"] + 300
        assert compact.bounding_box()["y"] + 40 < height
    # Before the chart, the breakdown and history tables, and the timeline, at every width.
    assert compact.bounding_box()["y"] < page.locator(".chart").bounding_box()["y"]
    assert preview.bounding_box()["y"] < page.locator("#history-h").bounding_box()["y"]
    first_button = page.locator("main button:visible").first.inner_text()
    assert first_button != "Move to trash"
    assert _top(page, "button.danger") > _top(page, "#timeline-h")
    screenshot(page, f"first-hour-{label}-session", full_page=False)
    assert page.errors == []


@pytest.mark.parametrize("width,height,label", WIDTHS)
def test_the_chart_labels_do_not_sit_on_the_other_line(live_server, page_factory, compacted, width, height, label):
    session, _ = compacted
    page = page_factory(width, height)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    overlaps = page.evaluate(
        """() => {
          const box = s => document.querySelector('.chart ' + s).getBoundingClientRect();
          const crosses = (label, line) => line.top >= label.top - 1 && line.top <= label.bottom + 1;
          const w = box('.window-label'), t = box('.trigger-label');
          return {window_on_trigger: crosses(w, box('line.trigger')), trigger_on_window: crosses(t, box('line.window')),
                  labels: (w.right > t.left && w.bottom > t.top && t.bottom > w.top)};
        }"""
    )
    assert overlaps == {"window_on_trigger": False, "trigger_on_window": False, "labels": False}
    page.locator(".chart").scroll_into_view_if_needed()
    screenshot(page, f"first-hour-{label}-chart", full_page=False)


def test_the_trash_is_cards_on_a_phone(live_server, page_factory, user):
    for i in range(3):
        s = make_session(user, title=f"An old experiment with a rather long title number {i} " * 2)
        s.deleted_at = timezone.now()
        s.save(update_fields=["deleted_at"])
    page = page_factory(390, 844)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/trash/")
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
    assert page.locator("table.trash thead").is_hidden()
    rows = page.locator("table.trash tbody tr")
    assert rows.count() == 3 and rows.first.evaluate("r => getComputedStyle(r).display") == "block"
    restore = page.get_by_role("button", name="Restore").first.bounding_box()
    assert restore["x"] + restore["width"] <= 390
    screenshot(page, "first-hour-phone-trash", full_page=False)


def test_the_session_page_copies_the_full_id(live_server, page_factory, user):
    session = make_session(user, title="Copy me")
    add_messages(session, conversation(4))
    page = page_factory(1366, 900)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    assert f"id {str(session.pk)[:8]}" in page.locator("#session-meta").inner_text()
    page.get_by_role("button", name="copy full id").click()
    page.wait_for_function("() => document.getElementById('session-id-copied').textContent.length > 0")
    assert page.evaluate("navigator.clipboard.readText()") == str(session.pk)
    assert page.errors == []


def test_a_live_refresh_of_the_gauge_keeps_what_is_typed_in_the_compact_panel(live_server, page_factory, user):
    from sessions.services import messages_append, session_create

    session = session_create(owner=user, title="Live", model="claude-sonnet-4-5")
    messages_append(session=session, messages=[{"role": "user", "content": "Start."}])
    page = page_factory(1366, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    before = page.locator(".gauge-words").inner_text()
    page.get_by_label("Focus instructions (optional)").fill("keep the migration plan")
    messages_append(session=session, messages=[{"role": "assistant", "content": "Working on it. " * 400}])
    page.wait_for_function(
        "before => document.querySelector('.gauge-words').innerText !== before", arg=before, timeout=10_000
    )
    assert page.get_by_label("Focus instructions (optional)").input_value() == "keep the migration plan"
    assert page.errors == []
