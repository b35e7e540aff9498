"""Import page in a real browser: a bad file is named, a real one uploads with progress, then open the session."""

from __future__ import annotations

import pytest

from sessions.models import Session
from tests.browser.conftest import log_in, shot
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = [corpus, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DATA = TRANSCRIPTS


def test_upload_a_transcript_and_open_the_session(live_server, page_factory, user):
    base = live_server.url
    page = page_factory()
    log_in(page, base, "alice", "alice-password")
    page.get_by_role("link", name="Import").click()
    page.wait_for_url(f"{base}/import/")

    # A file that is not a transcript: the problem, named, and nothing stored.
    page.get_by_label("Transcript file").set_input_files(
        files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello\nworld\n"}]
    )
    page.get_by_role("button", name="Import").click()
    page.locator("#import-error").wait_for()
    assert "notes.txt: line 1: not JSON" in page.locator("#import-error").inner_text()
    assert not Session.objects.exists()

    # A real Claude Code session (2.9 MB): progress while it uploads, then the report.
    path = DATA / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    page.get_by_label("Transcript file").set_input_files(str(path))
    page.get_by_role("button", name="Import").click()
    page.locator("#import-done").wait_for(timeout=60_000)
    done = page.locator("#import-done").inner_text()
    session = Session.objects.get(owner=user)
    assert f"{session.message_count} messages" in done and "143 usage reports" in done, done
    assert "1 compaction" in done and "progress 1,117" in done
    assert page.locator("#import-progress").evaluate("el => el.value") == 100  # the upload was tracked
    shot(page, "08-import-done")

    page.get_by_role("link", name=session.title).click()
    page.wait_for_url(f"{base}/sessions/{session.pk}/")
    assert page.get_by_role("heading", name=session.title).is_visible()
    assert page.errors == [] and page.dialogs == []
