"""Review workflow services (compaction.review) and the admin pages that call them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from compaction import review
from compaction.models import Compaction, ReviewStatus, Status, SummaryVersion
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def compacted(user):
    session = make_session(user, title="Review me")
    add_messages(session, conversation(16), tokens=500)
    compaction = make_compaction(session, summary="## Goal\nOriginal summary text.", summary_tokens=8)
    from sessions import services

    services.session_recompute_usage(session=session)
    session.refresh_from_db()
    return session, compaction


def test_review_set_records_reviewer_time_and_notes(compacted, staff_user):
    _, c = compacted
    review.review_set(compaction=c, status=ReviewStatus.NEEDS_CHANGES, reviewer=staff_user, notes="misses the error")
    c.refresh_from_db()
    assert c.review_status == "needs_changes" and c.reviewed_by == staff_user and c.reviewed_at is not None
    assert c.review_notes == "misses the error"


def test_review_rejects_unknown_status_and_unfinished_jobs(compacted, staff_user):
    session, c = compacted
    with pytest.raises(review.ReviewError) as exc:
        review.review_set(compaction=c, status="great", reviewer=staff_user)
    assert exc.value.field == "status"
    queued = Compaction.objects.create(session=session, reason="manual", status=Status.QUEUED)
    with pytest.raises(review.ReviewError):
        review.review_set(compaction=queued, status=ReviewStatus.APPROVED, reviewer=staff_user)
    queued.refresh_from_db()
    assert queued.review_status == "pending"


def test_edit_keeps_the_original_as_a_version_and_recomputes_usage(compacted, staff_user):
    session, c = compacted
    before = session.context_tokens
    longer = "## Goal\nOriginal summary text.\n\n" + "Exact error: `KeyError: 'spam'` in parser.py line 12.\n" * 40
    assert review.summary_edit(compaction=c, summary=longer, editor=staff_user, note="add the error") is None
    c.refresh_from_db()
    session.refresh_from_db()
    assert c.summary == longer.strip()
    version = SummaryVersion.objects.get(compaction=c)
    assert version.summary == "## Goal\nOriginal summary text." and version.created_by == staff_user
    assert "add the error" in version.note
    assert c.summary_tokens > 8
    assert session.context_tokens > before  # the served summary grew, so did the meter


def test_draft_edit_does_not_change_the_served_summary(compacted, staff_user):
    session, c = compacted
    draft = review.summary_edit(compaction=c, summary="Draft text", editor=staff_user, activate=False)
    c.refresh_from_db()
    assert draft is not None and draft.summary == "Draft text"
    assert c.summary == "## Goal\nOriginal summary text."
    review.summary_version_activate(version=draft, user=staff_user)
    c.refresh_from_db()
    assert c.summary == "Draft text"
    assert SummaryVersion.objects.filter(compaction=c, summary="## Goal\nOriginal summary text.").exists()


def test_edit_rejects_empty_and_identical(compacted, staff_user):
    _, c = compacted
    for text in ("   ", "## Goal\nOriginal summary text."):
        with pytest.raises(review.ReviewError) as exc:
            review.summary_edit(compaction=c, summary=text, editor=staff_user)
        assert exc.value.field == "summary"
    assert not SummaryVersion.objects.exists()


def test_rerun_undoes_the_active_one_and_queues_a_new_job(compacted, staff_user):
    session, c = compacted
    job = review.compaction_rerun(compaction=c, user=staff_user, strategy="truncate", instructions="keep errors")
    session.refresh_from_db()
    assert session.active_compaction_id is None  # undone: the new job summarizes the same history
    assert job.status == Status.QUEUED and job.strategy_requested == "truncate" and job.instructions == "keep errors"
    job.refresh_from_db()
    assert job.rerun_of_id == c.pk and job.params["overrides"] == {}


def test_changelist_shortens_long_session_titles(client, user, staff_user):
    session = make_session(user, title="Implement the spotter-gqc pipeline with retries, metrics and a dashboard")
    add_messages(session, conversation(12))
    make_compaction(session)
    client.force_login(staff_user)
    body = client.get(reverse("admin:compaction_compaction_changelist")).content.decode()
    assert "Implement the spotter-gqc pipel…" in body  # 32 characters shown
    assert 'title="Implement the spotter-gqc pipeline with retries, metrics and a dashboard"' in body


def test_rerun_with_bad_strategy_or_prompt_changes_nothing(compacted, staff_user):
    session, c = compacted
    with pytest.raises(review.ReviewError) as exc:
        review.compaction_rerun(compaction=c, user=staff_user, strategy="magic")
    assert exc.value.field == "strategy"
    with pytest.raises(review.ReviewError) as exc:
        review.compaction_rerun(compaction=c, user=staff_user, prompt="Summarize {nonsense_placeholder}")
    assert exc.value.field == "prompt"
    session.refresh_from_db()
    assert session.active_compaction_id == c.pk
    assert Compaction.objects.filter(session=session).count() == 1


def test_rerun_while_a_job_is_in_flight_rolls_back_the_undo(compacted, staff_user):
    session, c = compacted
    Compaction.objects.create(session=session, reason="threshold", status=Status.RUNNING)
    with pytest.raises(review.ReviewError):
        review.compaction_rerun(compaction=c, user=staff_user)
    session.refresh_from_db()
    assert session.active_compaction_id == c.pk


# --- admin -----------------------------------------------------------------------------


def test_admin_lists_compactions_and_approves_with_the_action(client, compacted, staff_user):
    session, c = compacted
    client.force_login(staff_user)
    url = reverse("admin:compaction_compaction_changelist")
    body = client.get(url).content.decode()
    assert "167,094 → 21,380" in body and "Review me" in body
    response = client.post(url, {"action": "approve", "_selected_action": [str(c.pk)]})
    assert response.status_code == 302
    c.refresh_from_db()
    assert c.review_status == "approved" and c.reviewed_by == staff_user
    client.post(url, {"action": "reject", "_selected_action": [str(c.pk)]})
    c.refresh_from_db()
    assert c.review_status == "rejected"


def test_admin_review_page_shows_source_beside_summary_and_edits(client, compacted, staff_user):
    session, c = compacted
    client.force_login(staff_user)
    url = reverse("admin:compaction_compaction_review", args=[c.pk])
    body = client.get(url).content.decode()
    assert "Summarized messages #1–#8 (8)" in body and "167,094 → 21,380 tokens" in body
    assert "Please look at step 1." in body and "<h2>Goal</h2>" in body
    response = client.post(url, {"action": "edit", "summary": "## Goal\nBetter.", "note": "clearer", "activate": "on"})
    assert response.status_code == 302
    c.refresh_from_db()
    assert c.summary == "## Goal\nBetter." and c.versions.count() == 1
    client.post(url, {"action": "review", "review_status": "approved", "review_notes": "good now"})
    c.refresh_from_db()
    assert c.review_status == "approved" and c.review_notes == "good now"
    response = client.post(url, {"action": "rerun", "strategy": "extractive", "instructions": "", "prompt": ""})
    assert response.status_code == 302
    job = Compaction.objects.get(session=session, status=Status.QUEUED, strategy_requested="extractive")
    assert job.rerun_of_id == c.pk
    # The re-run links back to what it re-ran: review page, changelist and dashboard detail.
    body = client.get(response["Location"]).content.decode()
    assert "re-run of" in body and reverse("admin:compaction_compaction_review", args=[c.pk]) in body
    body = client.get(reverse("admin:compaction_compaction_changelist")).content.decode()
    assert f'{reverse("admin:compaction_compaction_review", args=[c.pk])}">{str(c.pk)[:8]}…</a>' in body
    session.owner = staff_user
    session.save(update_fields=["owner"])
    detail = client.get(reverse("dashboard:compaction-detail", args=[session.pk, job.pk])).content.decode()
    assert "re-run of" in detail and reverse("dashboard:compaction-detail", args=[session.pk, c.pk]) in detail
    original = client.get(reverse("dashboard:compaction-detail", args=[session.pk, c.pk])).content.decode()
    assert reverse("dashboard:compaction-detail", args=[session.pk, job.pk]) in original  # "re-run …"


def test_admin_message_pages_are_read_only_and_filter_by_role(client, compacted, staff_user):
    client.force_login(staff_user)
    body = client.get(reverse("admin:agent_sessions_message_changelist"), {"role__exact": "user"}).content.decode()
    assert 'field-role">User<' in body and 'field-role">Assistant<' not in body
    assert client.get(reverse("admin:agent_sessions_message_add")).status_code == 403
    session, _ = compacted
    body = client.get(reverse("admin:agent_sessions_session_change", args=[session.pk])).content.decode()
    assert "167,094 → 21,380" in body  # compactions inline


def test_admin_review_needs_staff(client, compacted, user):
    _, c = compacted
    client.force_login(user)
    response = client.get(reverse("admin:compaction_compaction_review", args=[c.pk]))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_jobs_without_a_summary_stay_out_of_the_pending_review_queue(client, compacted, staff_user, user):
    session, c = compacted
    skipped = Compaction.objects.create(
        session=session, reason="threshold", status=Status.SKIPPED, detail="nothing to compact: only 3 messages",
        review_status=ReviewStatus.NOT_APPLICABLE,
    )  # fmt: skip
    with pytest.raises(review.ReviewError) as exc:  # the engine's mark, not a reviewer's verdict
        review.review_set(compaction=c, status=ReviewStatus.NOT_APPLICABLE, reviewer=staff_user)
    assert exc.value.field == "status"
    client.force_login(staff_user)
    url = reverse("admin:compaction_compaction_changelist")
    pending = client.get(url, {"review_status__exact": "pending"}).content.decode()
    assert str(c.pk) in pending and str(skipped.pk) not in pending
    page = client.get(reverse("admin:compaction_compaction_review", args=[c.pk])).content.decode()
    assert 'value="not_applicable"' not in page  # not offered in the review form
    client.force_login(user)  # the session's owner
    overview = client.get(reverse("dashboard:session-overview", args=[session.pk])).content.decode()
    assert 'title="No summary to review">—</span>' in overview


def test_changelist_marks_the_active_compaction_among_identical_rows(client, user, staff_user):
    session = make_session(user, title="Twice compacted")
    add_messages(session, conversation(12))
    older = make_compaction(session, activate=False, summary="## Goal\nSame.")
    served = make_compaction(session, summary="## Goal\nSame.")
    client.force_login(staff_user)
    body = client.get(reverse("admin:compaction_compaction_changelist")).content.decode()
    assert body.count("● active</strong>") == 1
    row = next(line for line in body.split("<tr") if "● active" in line)
    assert str(served.pk) in row and str(older.pk) not in row
