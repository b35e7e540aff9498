"""The whole dashboard flow in Chromium on a session imported from a real Claude Code transcript:
log in → list → session → preview → Compact (figures appear without a reload) → compaction
detail → Undo → an admin approves the summary. Screenshots go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from compaction.models import Compaction, Status
from sessions.dashboard.present import skip_reason
from sessions.models import Session
from tests.browser.conftest import log_in, shot
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRANSCRIPT = TRANSCRIPTS / "claude-code" / "reliability-python-to-rust-port.jsonl"
# Small enough that the imported history is over the trigger, so compaction has work.
WINDOW = "16000"


@pytest.fixture
def imported(user):
    call_command(
        "import_transcript",
        str(TRANSCRIPT),
        "--user",
        user.get_username(),
        "--window",
        WINDOW,
        "--title",
        "Port Python to Rust (Claude Code)",
        stdout=open("/dev/null", "w"),  # noqa: SIM115 - the command's summary line is not needed here
    )
    return Session.objects.get(owner=user, title="Port Python to Rust (Claude Code)")


@corpus
def test_compact_undo_and_review_in_a_real_browser(live_server, page_factory, eager_tasks, imported, staff_user):
    session = imported
    base = live_server.url
    page = page_factory()

    # log in → list
    log_in(page, base, "alice", "alice-password")
    row = page.get_by_role("link", name="Port Python to Rust (Claude Code)")
    assert row.count() == 1
    shot(page, "01-sessions-list")

    # → session detail
    row.click()
    page.wait_for_url(f"{base}/sessions/{session.pk}/")
    gauge = page.locator(".gauge-words").first
    assert re.search(r"[\d,]+ / 16,000 tokens \(\d+%\) · auto-compact at [\d,]+", gauge.inner_text())
    before_text = gauge.inner_text()
    assert page.locator(".chart svg").count() == 1
    assert page.locator("details.tool").count() > 0  # tool calls collapsed to name + argument
    shot(page, "02-session-detail")

    # Marker that survives only if the page is never reloaded.
    page.evaluate("window.__noReload = true")

    # preview (dry run): what would be summarized, nothing changes
    page.get_by_label("Focus instructions (optional)").fill("Keep the file paths and the commands that were run.")
    page.get_by_role("button", name="Preview").click()
    preview = page.locator(".preview-figures")
    preview.wait_for()
    assert re.search(r"\d+ messages \(#\d+–#\d+\) → summary, [\d,]+ → ~[\d,]+ tokens", preview.inner_text())
    assert not Compaction.objects.filter(session=session).exclude(reason="import").exists()

    # compact: the job runs; the progress fragment turns into the before/after figures
    page.get_by_role("button", name="Compact now").click()
    result = page.locator(".result-figures")
    result.wait_for(timeout=60_000)
    text = result.inner_text()
    match = re.search(r"Conversation compacted: ([\d,]+) messages? → summary, ([\d,]+) → ([\d,]+) tokens", text)
    assert match, text
    assert page.evaluate("window.__noReload") is True
    job = Compaction.objects.get(session=session, reason="manual")
    assert job.status == Status.SUCCEEDED
    assert match.group(2) == f"{job.tokens_before:,}" and match.group(3) == f"{job.tokens_after:,}"
    assert job.instructions == "Keep the file paths and the commands that were run."
    # gauge, chart and history refreshed in place (htmx, on the fragment's HX-Trigger)
    page.wait_for_function(
        "before => document.querySelector('.gauge-words').innerText !== before", arg=before_text, timeout=10_000
    )
    assert page.locator("tr.active-row").count() == 1
    # the timeline re-rendered in place too: the new boundary and the compacted region
    page.locator("li.boundary-active").wait_for()
    assert page.locator("li.msg-compacted").count() == job.messages_summarized
    assert page.evaluate("window.__noReload") is True
    shot(page, "03-session-detail-compacted")

    # compaction detail: summary rendered, figures, range link
    page.locator("#compact-status").get_by_role("link", name="View summary").click()
    page.wait_for_url(f"{base}/sessions/{session.pk}/compactions/{job.pk}/")
    assert page.locator(".markdown").first.inner_text().strip()
    assert page.get_by_text(f"{job.tokens_before:,} → {job.tokens_after:,}").count() >= 1
    shot(page, "04-compaction-detail")

    # undo from the session page
    page.goto(f"{base}/sessions/{session.pk}/")
    page.evaluate("window.__noReload = true")
    page.locator("#overview tr.active-row").get_by_role("button", name=re.compile("Undo")).click()
    page.get_by_text("Compaction undone:").wait_for()
    assert page.evaluate("window.__noReload") is True
    session.refresh_from_db()
    assert session.active_compaction_id == job.based_on_id  # back to what was active before
    page.locator("#overview .badge", has_text="undone").wait_for()  # history refreshed in place
    shot(page, "05-session-detail-undone")

    # an admin approves the summary
    admin = page_factory()
    admin.goto(f"{base}/admin/login/?next=/admin/compaction/compaction/")
    admin.get_by_label("Username").fill("root")
    admin.get_by_label("Password").fill("root-password")
    admin.get_by_role("button", name="Log in").click()
    admin.wait_for_url(re.compile(r".*/admin/compaction/compaction/$"))
    admin.locator(f"input[name=_selected_action][value='{job.pk}']").check()
    admin.locator("select[name=action]").select_option("approve")
    admin.locator("button[name=index]").click()  # the changelist's "Go"
    admin.get_by_text("1 compaction(s) marked approved.").wait_for()
    # At 1280px the shortened session column leaves strategy, status, tokens and review in view.
    results = admin.locator("#changelist .results").bounding_box()
    for column in ("review_link", "strategy", "status", "tokens", "review_status"):
        box = admin.locator(f"th.column-{column}").bounding_box()
        assert box is not None and box["x"] + box["width"] <= results["x"] + results["width"], column
    shot(admin, "06-admin-compactions")
    job.refresh_from_db()
    assert job.review_status == "approved" and job.reviewed_by.get_username() == "root"
    admin.goto(f"{base}/admin/compaction/compaction/{job.pk}/review/")
    assert admin.locator(".review-status").inner_text() == "Approved"
    shot(admin, "06-admin-review")

    for p in (page, admin):
        assert p.dialogs == [] and p.errors == []
        assert p.csp_violations == []  # every step above ran under the Content-Security-Policy


@corpus
def test_progress_updates_by_itself_while_a_worker_runs_the_job(live_server, page_factory, imported):
    """No eager tasks here: the job stays queued until "the worker" (this test) runs it; the
    page, left alone, goes from queued to the figures by polling the fragment."""
    from compaction import services

    session = imported
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.evaluate("window.__noReload = true")
    page.get_by_role("button", name="Compact now").click()
    page.get_by_text("Compaction queued").wait_for()
    job = Compaction.objects.get(session=session, status=Status.QUEUED)
    services.compaction_run(compaction_id=job.pk)
    page.locator(".result-figures").wait_for(timeout=10_000)
    assert "Conversation compacted:" in page.locator(".result-figures").inner_text()
    assert page.locator(".progress [hx-trigger], .progress[hx-trigger]").count() == 0  # polling stopped
    assert page.evaluate("window.__noReload") is True


def test_nothing_to_compact_is_said_plainly(live_server, page_factory, eager_tasks, user):
    from tests.dashboard.factories import add_messages, make_session

    session = make_session(user, title="Tiny")
    add_messages(session, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], tokens=5)
    page = page_factory()
    log_in(page, live_server.url, "alice", "alice-password")
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.get_by_role("button", name="Preview").click()
    page.locator("#compact-preview").get_by_text("Nothing to compact:").wait_for()
    preview = page.locator("#compact-preview").inner_text()
    page.get_by_role("button", name="Compact now").click()
    page.locator("#compact-status").get_by_text("Nothing to compact:").wait_for()
    job = Compaction.objects.get(session=session)
    status = page.locator("#compact-status").inner_text()
    assert job.status == Status.SKIPPED and skip_reason(job.detail) in status
    for text in (status, preview):  # said once, not "Nothing to compact: nothing to compact: …"
        assert text.lower().count("nothing to compact") == 1, text
    session.refresh_from_db()
    assert session.active_compaction_id is None
