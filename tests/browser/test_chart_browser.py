"""The context chart of a session imported from a real Claude Code transcript (with the agent's own
compaction): the line ends at the gauge's figure, axis labels stay inside the drawing at laptop and
phone width, and a prune-only boundary reads as such. Screenshots: chart-*.png, prune-boundary.png."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from sessions import services as session_services
from sessions.models import Session
from tests.browser.conftest import SCREENSHOTS, log_in
from tests.corpus import TRANSCRIPTS, corpus
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session, tool_pair

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRANSCRIPT = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


@pytest.fixture
def imported(user):
    call_command(
        "import_transcript",
        str(TRANSCRIPT),
        "--user",
        user.get_username(),
        "--title",
        "Implement spotter-gqc",
        stdout=open("/dev/null", "w"),  # noqa: SIM115 - the command's summary line is not needed here
    )
    return Session.objects.get(owner=user, title="Implement spotter-gqc")


@corpus
@pytest.mark.parametrize("width,label", [(1280, "laptop"), (390, "phone")])
def test_chart_matches_the_gauge_and_keeps_its_labels_inside(live_server, page_factory, imported, width, label):
    session = imported
    assert session.compactions.filter(reason="import").count() == 1
    tokens = session_services.session_usage(session).tokens
    page = page_factory(width, 900)
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    gauge = page.locator(".gauge-words").inner_text()
    assert gauge.startswith(f"{tokens:,} / ")
    caption = page.locator(".chart figcaption").inner_text()
    assert f"now {tokens:,}" in caption
    # The drop's tooltip gives the agent's own figures; the line's top at the drop is that figure.
    drop_title = page.locator(".chart .drop title").first.text_content()
    assert re.search(r"167,094 → [\d,]+ tokens", drop_title)
    # Every axis label lies inside the SVG's drawing area (none clipped at either edge).
    boxes = page.evaluate(
        """() => Array.from(document.querySelectorAll('.chart text')).map(t => {
             const b = t.getBBox(); return [t.textContent, b.x, b.x + b.width, b.y, b.y + b.height]; })"""
    )
    view_w, view_h = 800, 220
    for text, x1, x2, y1, y2 in boxes:
        assert x1 >= 0 and x2 <= view_w and y1 >= 0 and y2 <= view_h, (text, x1, x2, y1, y2)
    # Readable: axis text at least ~10 CSS px on screen.
    size = page.evaluate(
        """() => { const t = document.querySelector('.chart .axis'); const svg = t.ownerSVGElement;
                   return parseFloat(getComputedStyle(t).fontSize) * svg.getBoundingClientRect().width / 800; }"""
    )
    assert size >= 10.5, size
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#overview .card").first.screenshot(path=str(SCREENSHOTS / f"chart-{label}.png"))
    assert page.errors == []


def test_prune_boundary_reads_as_a_prune(live_server, page_factory, user):
    session = make_session(user, title="Pruned session")
    add_messages(session, tool_pair(1) + tool_pair(2) + tool_pair(3) + conversation(12), tokens=2000)
    make_compaction(
        session,
        reason="manual",
        first_kept_seq=1,
        first_summarized_seq=None,
        last_summarized_seq=None,
        prune_before_seq=5,
        strategy="prune",
        messages_summarized=0,
        summary="",
        tokens_before=40_000,
        tokens_after=28_000,
        usage={"tokens_saved_estimate": 12_000, "tool_results_pruned": 2},
    )
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/?from=1")
    boundary = page.locator("li.boundary")
    assert boundary.count() == 1
    text = boundary.inner_text()
    assert text.startswith("Tool output pruned · manual · 2 tool results before #5 · 40,000 → 28,000 tokens")
    assert "view summary" not in text
    # It sits between #4 and #5.
    order = page.evaluate(
        "() => Array.from(document.querySelectorAll('.timeline > li')).map(li => li.id || li.className)"
    )
    assert order.index("m-4") < order.index("boundary boundary-active boundary-prune") < order.index("m-5")
    page.locator("#m-3").scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator(".timeline").screenshot(path=str(SCREENSHOTS / "prune-boundary.png"))
