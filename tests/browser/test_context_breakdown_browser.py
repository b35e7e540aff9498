"""The session page's context breakdown in a real browser, on a real Claude Code session (replayed
with its recorded usage, then compacted with old tool output pruned): every part visible in the bar
and the table, no sideways scrolling at desktop and phone widths.
Screenshots: test-artifacts/screenshots/breakdown-{desktop,phone}.png (the card) and -page.png."""

from __future__ import annotations

import pytest

from compaction import services as engine
from sessions import services
from tests.browser.conftest import SCREENSHOTS, log_in, screenshot
from tests.compaction.factories import replay_claude_code_session
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRANSCRIPT = TRANSCRIPTS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


@pytest.fixture
def compacted(user):
    session, messages, boundary = replay_claude_code_session(
        user,
        TRANSCRIPT,
        title="Spotter: implement the import command",
        system_prompt="You are Claude Code, working in the spotter repository.",
    )
    job = engine.compaction_request(
        session=session,
        reason="manual",
        strategy="extractive",
        # A summary alone (its kept part not trimmed), so that the prune below has old output to trim.
        overrides={"keep_recent_tokens": 30_000, "prune_tool_outputs": False},
    )
    engine.compaction_run(compaction_id=job.pk)
    # The agent goes on after the compaction (no usage reports: the recorded ones describe Claude
    # Code's own compacted context, not this one), then old tool output is pruned.
    later = [{"role": m["role"], "content": m["content"]} for m in messages[boundary : boundary + 120]]
    services.messages_append(session=session, messages=later)
    job = engine.compaction_request(session=session, reason="manual", strategy="prune")
    pruned = engine.compaction_run(compaction_id=job.pk)
    assert pruned.strategy == "prune" and pruned.summary, pruned.detail
    session.refresh_from_db()
    return session


@corpus
@pytest.mark.parametrize("width,label", [(1280, "desktop"), (375, "phone")])
def test_the_breakdown_shows_every_part_and_fits_the_screen(live_server, page_factory, compacted, width, label):
    usage = services.session_usage(compacted)
    page = page_factory(width, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{compacted.pk}/")
    card = page.locator("#context-breakdown")
    card.scroll_into_view_if_needed()
    assert card.is_visible()

    # The table: every part named, in words, and the used parts add up to the gauge's figure.
    rows = card.locator("tr[data-segment]")
    keys = [rows.nth(i).get_attribute("data-segment") for i in range(rows.count())]
    assert keys == ["system", "fixed", "summary", "messages", "free", "reserve"]
    figures = {}
    for i, key in enumerate(keys):
        row = rows.nth(i)
        assert row.is_visible()
        figures[key] = int(row.locator("td").first.inner_text().replace(",", ""))
    assert sum(figures[k] for k in ("system", "fixed", "summary", "messages")) == usage.tokens
    assert page.locator(".gauge-words").inner_text().startswith(f"{usage.tokens:,} / ")
    assert "inferred" in rows.nth(1).inner_text()
    assert "served as one-line placeholders" in card.inner_text()

    # The bar: one visible slice per non-empty part, sized by its share.
    bar_width = card.locator(".stack").bounding_box()["width"]
    for key, tokens in figures.items():
        if not tokens:
            continue
        box = card.locator(f".stack .seg-{key}").bounding_box()
        assert box is not None and box["width"] >= 1.5, key
        share = tokens / max(usage.context_window, usage.tokens)
        assert abs(box["width"] - share * bar_width) <= max(3, 0.02 * bar_width), (key, box["width"], share)

    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the session page scrolls sideways by {overflow}px at {width}px"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    card.screenshot(path=str(SCREENSHOTS / f"breakdown-{label}.png"))
    screenshot(page, f"breakdown-{label}-page")
    assert page.errors == [] and page.csp_violations == []


def test_an_implausible_report_is_a_visible_warning_above_the_parts(live_server, page_factory, user):
    session = services.session_create(owner=user, title="Cache-dropping client", model="claude-sonnet-4-5")
    services.messages_append(session=session, messages=[{"role": "user", "content": "Fix the parser. " * 400}])
    # The client forwarded input_tokens only: the meter flags the report (below what was served).
    reason = services.usage_report(session=session, input_tokens=1_105).usage.implausible["reason"]
    page = page_factory(375, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    warning = page.locator("#context-breakdown .usage-warning")
    warning.scroll_into_view_if_needed()
    assert warning.is_visible() and reason in warning.inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#context-breakdown").screenshot(path=str(SCREENSHOTS / "breakdown-warning-phone.png"))
    assert page.errors == [] and page.csp_violations == []
