"""Review and detail pages: a rejected summary still served says so and can be
undone or re-run; fidelity score and missed items on the detail and review pages; the review
page's forms come first; same-titled sessions can be told apart; "nothing to compact" runs are
folded; a prune names what it pruned and its saving is before − after; queued_seconds is the
wait for the first worker."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from compaction import services as compaction_services
from compaction.core.ledger import Ledger, fidelity_report
from compaction.models import Compaction, ReviewStatus, Status
from sessions.models import ToolCall
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session, tool_pair

pytestmark = pytest.mark.django_db

MISSED_COMMAND = "pytest -k nested --maxfail=1"


def detail_url(c: Compaction) -> str:
    return reverse("dashboard:compaction-detail", args=[c.session_id, c.pk])


def review_url(c: Compaction) -> str:
    return reverse("admin:compaction_compaction_review", args=[c.pk])


@pytest.fixture
def rejected(user, staff_user):
    session = make_session(user, title="Rejected one")
    add_messages(session, conversation(16), tokens=500)
    c = make_compaction(session, review_status=ReviewStatus.REJECTED, reviewed_by=staff_user)
    return session, c


def test_a_rejected_summary_still_served_says_so_and_offers_undo_and_rerun(logged_in, rejected):
    session, c = rejected
    body = logged_in.get(detail_url(c)).content.decode()
    assert "Rejected, but still served" in body
    assert reverse("compaction-revert", kwargs={"session_id": session.pk, "compaction_id": c.pk}) in body
    rerun = reverse("dashboard:compaction-rerun", args=[session.pk, c.pk])
    assert f'action="{rerun}"' in body

    response = logged_in.post(rerun)
    assert response.status_code == 302 and response["Location"] == reverse(
        "dashboard:session-detail", args=[session.pk]
    )
    session.refresh_from_db()
    assert session.active_compaction_id is None  # the rejected summary is no longer served
    job = Compaction.objects.get(session=session, status=Status.QUEUED)
    assert job.rerun_of_id == c.pk
    assert "Rejected, but still served" not in logged_in.get(detail_url(c)).content.decode()


def test_an_approved_or_inactive_summary_shows_no_rejection_notice(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    approved = make_compaction(session, review_status=ReviewStatus.APPROVED)
    assert "Rejected, but still served" not in logged_in.get(detail_url(approved)).content.decode()
    inactive = make_compaction(session, review_status=ReviewStatus.REJECTED, activate=False)
    assert "Rejected, but still served" not in logged_in.get(detail_url(inactive)).content.decode()


def test_only_the_owner_can_rerun_from_the_dashboard(client, rejected, other_user, staff_user):
    session, c = rejected
    client.force_login(staff_user)  # staff may look at it, not act as the owner
    assert client.post(reverse("dashboard:compaction-rerun", args=[session.pk, c.pk])).status_code == 404
    client.force_login(other_user)
    assert client.post(reverse("dashboard:compaction-rerun", args=[session.pk, c.pk])).status_code == 404
    session.refresh_from_db()
    assert session.active_compaction_id == c.pk and not Compaction.objects.filter(status=Status.QUEUED).exists()


def test_admin_review_page_says_rejected_and_undo_stops_serving_it(client, rejected, staff_user):
    session, c = rejected
    client.force_login(staff_user)
    body = client.get(review_url(c)).content.decode()
    assert "Rejected, but still served" in body and 'value="undo"' in body and 'href="#rerun-h"' in body
    response = client.post(review_url(c), {"action": "undo"})
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.active_compaction_id is None
    assert "Rejected, but still served" not in client.get(review_url(c)).content.decode()


def _fidelity() -> dict:
    ledger = Ledger()
    ledger.items["files"].append("src/parser.py")
    ledger.items["commands"].append(MISSED_COMMAND)
    _, report = fidelity_report("## Goal\nFix `src/parser.py`.", ledger)
    return report.as_json()


def test_detail_and_review_pages_show_the_fidelity_score_and_missed_items(logged_in, client, user, staff_user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    c = make_compaction(session, fidelity=_fidelity())
    assert c.fidelity["score"] == 0.5
    for body in (
        logged_in.get(detail_url(c)).content.decode(),
        (client.force_login(staff_user), client.get(review_url(c)))[1].content.decode(),
    ):
        assert re.search(r'class="fidelity-score">50 %<', body)
        assert "1 of 2" in body and "Missed: 1 item" in body and MISSED_COMMAND in body


PER_CALL = [
    {
        "input_tokens": 1_200, "output_tokens": 2_345, "cache_creation_input_tokens": 104_000,
        "cache_read_input_tokens": 0, "ms": 41_500, "stop_reason": "end_turn", "cost_usd": 0.143,
        "transcript_tokens": 101_234, "tool_output_cap": None,
    },
    {
        "input_tokens": 900, "output_tokens": 1_000, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 50_000, "ms": 12_000, "stop_reason": "max_tokens", "cost_usd": 0.011,
        "transcript_tokens": 50_000, "tool_output_cap": 2_219,
    },
]  # fmt: skip


def test_detail_and_review_pages_show_each_summarizer_call(logged_in, client, user, staff_user):
    """Cost, tokens and latency of every call to the summarizer model, and how much of the
    history it was shown."""
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    usage = {"calls": 2, "input_tokens": 2_100, "output_tokens": 3_345, "cost_usd": 0.154, "per_call": PER_CALL}
    c = make_compaction(session, strategy="anthropic", summarizer_model="claude-haiku-4-5", usage=usage)
    for body in (
        logged_in.get(detail_url(c)).content.decode(),
        (client.force_login(staff_user), client.get(review_url(c)))[1].content.decode(),
    ):
        calls = body[body.index('class="usage summarizer-calls"') :]
        calls = calls[: calls.index("</table>")]
        rows = re.findall(r"<tr[^>]*><th scope=\"row\">(\w+)</th>(.*?)</tr>", calls)
        assert [label for label, _ in rows] == ["1", "2", "Total"]
        first, second, total = (re.findall(r"<td[^>]*>([^<]*)</td>", cells) for _, cells in rows)
        assert first == ["1,200", "104,000", "0", "2,345", "$0.1430", "41.5 s", "end_turn", "101,234 tokens, whole"]
        assert second[5:] == ["12.0 s", "max_tokens", "50,000 tokens, tool outputs cut to 2,219 characters"]
        assert total[:6] == ["2,100", "104,000", "50,000", "3,345", "$0.1540", "53.5 s"]
    # The per-call list is not repeated raw in the usage table.
    assert "Per call" not in logged_in.get(detail_url(c)).content.decode()


def test_a_compaction_without_calls_shows_no_calls_table(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    c = make_compaction(session, strategy="extractive", usage={"duration_ms": {"extractive": 120}})
    assert "summarizer-calls" not in logged_in.get(detail_url(c)).content.decode()


def test_a_failed_fidelity_check_is_shown_as_such(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    c = make_compaction(session, fidelity={"error": "ValueError: bad ledger"})
    assert "The fidelity check did not run: ValueError: bad ledger" in logged_in.get(detail_url(c)).content.decode()


def test_review_page_puts_review_rerun_and_edit_before_the_long_source_and_summary(client, rejected, staff_user):
    _, c = rejected
    client.force_login(staff_user)
    body = client.get(review_url(c)).content.decode()
    source = body.index('id="source-h"')
    for marker in ("Save review", "Re-run compaction", 'id="edit-h"'):
        assert body.index(marker) < source, marker


def test_sessions_with_the_same_title_can_be_told_apart(logged_in, user):
    first = make_session(user, title="Fix the build")
    second = make_session(user, title="Fix the build")
    body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    idents = re.findall(r'class="session-ident[^"]*">([^<]+)<', body)
    assert len(idents) == 2 and idents[0] != idents[1]
    assert {str(first.pk)[:8], str(second.pk)[:8]} == {i.split(" ")[0] for i in idents}
    page = logged_in.get(reverse("dashboard:session-detail", args=[second.pk])).content.decode()
    assert f"id {str(second.pk)[:8]}" in page and f"id {str(first.pk)[:8]}" not in page


def test_nothing_to_compact_runs_are_folded_into_one_row(logged_in, user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    now = timezone.now()
    older = make_compaction(session, tokens_before=90_000, tokens_after=20_000)
    Compaction.objects.filter(pk=older.pk).update(created_at=now - timedelta(hours=2))
    for minutes in range(5):
        skipped = Compaction.objects.create(
            session=session,
            reason="manual",
            status=Status.SKIPPED,
            review_status=ReviewStatus.NOT_APPLICABLE,
            detail="nothing to compact: the conversation is already short enough",
        )
        Compaction.objects.filter(pk=skipped.pk).update(created_at=now - timedelta(minutes=50 - minutes))
    body = logged_in.get(reverse("dashboard:session-overview", args=[session.pk])).content.decode()
    history = body[body.index('id="history-h"') :]
    assert history.count('class="skipped-row"') == 1 and "×5" in history
    assert history.count("<tr") == 1 + 2  # header, the folded attempts, the real compaction


def test_prune_detail_names_the_pruned_outputs_and_saved_is_before_minus_after(logged_in, user):
    session = make_session(user, title="Pruned")
    big = "x = 1\n" * 400
    payloads = tool_pair(1, name="Read", output=big) + tool_pair(2, name="Bash", output=big)
    payloads += tool_pair(3, name="Bash", output="ok") + conversation(6)
    add_messages(session, payloads, tokens=800)
    ToolCall.objects.bulk_create(
        [
            ToolCall(session=session, tool_use_id=f"toolu_{n:05d}", name=name, use_seq=2 * n - 1, result_seq=2 * n)
            for n, name in ((1, "Read"), (2, "Bash"), (3, "Bash"))
        ]
    )
    c = make_compaction(
        session,
        strategy="prune",
        first_summarized_seq=None,
        last_summarized_seq=None,
        first_kept_seq=1,
        prune_before_seq=7,
        messages_summarized=0,
        tokens_before=12_400,
        tokens_after=10_100,
        usage={"tokens_saved_estimate": 2_450, "tool_results_pruned": 2},
    )
    body = logged_in.get(detail_url(c)).content.decode()
    assert '<dd class="saved">2,300 tokens</dd>' in body and "2,450" not in body
    rows = re.findall(r"#(\d+)</a></td><td>(\w+)</td>", body)
    assert rows == [("2", "Read"), ("4", "Bash")]  # the tiny "ok" output at #6 is served as is
    assert "2 tool outputs served as placeholders" in body


def test_queued_seconds_is_the_wait_for_the_first_worker(user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    job = compaction_services.compaction_request(session=session, reason="manual")
    created = job.created_at
    assert Compaction.objects.get(pk=job.pk).queued_seconds(now=created + timedelta(seconds=7)) == 7
    # Claimed 4 s after it was queued...
    Compaction.objects.filter(pk=job.pk).update(
        status=Status.RUNNING,
        started_at=created + timedelta(seconds=4),
        first_started_at=created + timedelta(seconds=4),
    )
    # ...its worker died, the sweeper re-queued it and another worker claimed it 100 s later.
    Compaction.objects.filter(pk=job.pk).update(
        status=Status.QUEUED, started_at=None, enqueued_at=created + timedelta(seconds=40)
    )
    requeued = Compaction.objects.get(pk=job.pk)
    assert requeued.queued_seconds(now=created + timedelta(seconds=60)) == 4
    # The "no worker?" hint counts the wait since it was handed back, not since it was created.
    assert requeued.queued_hint(now=created + timedelta(seconds=50)) == ""
    assert requeued.queued_hint(now=created + timedelta(seconds=60)).startswith("Still queued after 20 s")
    compaction_services.compaction_run(compaction_id=job.pk, now=created + timedelta(seconds=140))
    job.refresh_from_db()
    assert job.started_at == created + timedelta(seconds=140)
    assert job.queued_seconds() == 4


def test_a_claim_records_the_first_start_once(user):
    session = make_session(user)
    add_messages(session, conversation(16), tokens=500)
    job = compaction_services.compaction_request(session=session, reason="manual")
    start = job.created_at + timedelta(seconds=2)
    compaction_services.compaction_run(compaction_id=job.pk, now=start)
    job.refresh_from_db()
    assert job.first_started_at == start and job.queued_seconds() == 2


def test_a_real_prune_lists_as_many_outputs_as_the_engine_pruned(logged_in, user):
    from tests.compaction.factories import append
    from tests.compaction.factories import conversation as tool_conversation
    from tests.compaction.factories import make_session as engine_session

    session = engine_session(user, window=200_000, auto_compact_token_limit=60_000, keep_recent_tokens=20_000)
    append(session, tool_conversation(12, tools=2, size=150))
    job = compaction_services.compaction_request(session=session, reason="manual", strategy="prune")
    job = compaction_services.compaction_run(compaction_id=job.pk)
    assert job.status == Status.SUCCEEDED and job.strategy == "prune", job.detail
    body = logged_in.get(detail_url(job)).content.decode()
    rows = re.findall(r"#(\d+)</a></td><td>([^<]+)</td>", body)
    assert len(rows) == job.usage["tool_results_pruned"] > 0
    assert all(int(seq) < job.prune_before_seq and name != "unknown tool" for seq, name in rows)
    assert f'<dd class="saved">{job.tokens_before - job.tokens_after:,} tokens</dd>' in body
