"""Planted script/img payloads stay inert in a real browser: no dialog opens, nothing runs."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in
from tests.dashboard.factories import add_messages, make_compaction, make_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "<script>alert('xss-script')</script>"
IMG = "<img src=x onerror=\"alert('xss-img')\">"
PAYLOAD = SCRIPT + IMG


def test_payloads_render_as_text_and_fire_nothing(live_server, page_factory, user):
    session = make_session(user, title=f"Hostile {PAYLOAD}", agent=f"a{IMG}")
    add_messages(
        session,
        [
            {"role": "user", "content": f"hello {PAYLOAD}"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"{PAYLOAD} " + "y" * 1500},
                    {"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {"command": PAYLOAD}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": PAYLOAD}]},
        ]
        + [{"role": "user", "content": "pad"}] * 8,
    )
    compaction = make_compaction(
        session,
        summary=f"## S {SCRIPT}\n\n{IMG}\n\n[x](javascript:alert('xss-link'))",
        read_files=[IMG],
        instructions=PAYLOAD,
    )
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    assert page.get_by_text(f"Hostile {PAYLOAD}").count() == 1  # shown as text
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.locator("details.tool summary").first.click()
    page.locator("details.result summary").first.click()
    page.locator("details.text-long summary").first.click()
    assert page.get_by_text(f"hello {PAYLOAD}").count() == 1
    page.goto(f"{live_server.url}/sessions/{session.pk}/compactions/{compaction.pk}/")
    page.get_by_text("[x](javascript:alert('xss-link'))").click()
    assert page.locator(".markdown img, .markdown script, a[href^='javascript']").count() == 0
    page.wait_for_timeout(300)
    assert page.dialogs == []
    assert page.errors == []
