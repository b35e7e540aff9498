"""Pages stay bounded on big data: 10,000 sessions in the list, 5,000 messages in one session."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from compaction.models import Compaction, Status
from sessions import services as session_services
from sessions.models import Session
from tests.dashboard.factories import add_messages, conversation, make_compaction, make_session

pytestmark = pytest.mark.django_db

# Measured: list 5 (auth session, user, model choices, count or slim rows, page rows) and
# detail 10 (auth ×2, session, the live fingerprint's compaction aggregate, compactions, message
# page, usage history, token series, undone ids, subagents), +1 slack. Independent of the data size.
LIST_QUERIES = 7
DETAIL_QUERIES = 11


@pytest.fixture
def ten_thousand(user, other_user):
    now = timezone.now()
    models = ["claude-sonnet-4-5", "gpt-5", "gemini-2.5-pro", "unknown-model"]
    rows = [
        Session(
            owner=user if i % 10 else other_user,
            title=f"Session {i}",
            agent="claude-code" if i % 2 else "codex",
            model=models[i % 4],
            context_tokens=(i * 37) % 200_000,
            message_count=i % 50,
            last_activity_at=now,
            compaction_settings={"auto_compact_ratio": 0.5} if i % 7 == 0 else {},
        )
        for i in range(10_000)
    ]
    Session.objects.bulk_create(rows, batch_size=2000)
    session_services.session_meter_refresh()  # the meter columns the write path stores
    # a few compactions (one running) so rows show the last compaction and the indicator
    sessions = list(Session.objects.filter(owner=user).order_by("-last_activity_at", "id")[:30])
    for s in sessions[:20]:
        make_compaction(s)
    Compaction.objects.create(session=sessions[21], reason="manual", status=Status.RUNNING)
    return sessions


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"page": "3"},
        {"q": "Session 1", "model": "gpt-5"},
        {"status": "compacting"},
        {"status": "over"},
        {"status": "ok", "sort": "usage", "page": "4"},
        {"sort": "usage"},
    ],
)
def test_session_list_queries_are_bounded(logged_in, ten_thousand, django_assert_max_num_queries, params):
    with django_assert_max_num_queries(LIST_QUERIES):
        response = logged_in.get(reverse("dashboard:session-list"), params)
    assert response.status_code == 200
    assert response.content.decode().count('<td data-label="Title">') > 0


def test_session_list_with_10k_shows_the_right_total(logged_in, ten_thousand):
    body = logged_in.get(reverse("dashboard:session-list")).content.decode()
    assert "9,000 sessions" in body and "Page 1 of 360" in body
    assert "compacting</span>" in body and "167k → 21k" in body


def test_detail_of_5000_message_session_is_bounded(logged_in, user, django_assert_max_num_queries):
    session = make_session(user, title="Huge")
    add_messages(session, conversation(5000), tokens=40)
    for first_kept in (1000, 2500, 4000):
        make_compaction(
            session,
            first_summarized_seq=1,
            last_summarized_seq=first_kept - 1,
            first_kept_seq=first_kept,
            based_on=session.active_compaction,
        )
    session.refresh_from_db()
    url = reverse("dashboard:session-detail", args=[session.pk])
    with django_assert_max_num_queries(DETAIL_QUERIES):
        response = logged_in.get(url)
    body = response.content.decode()
    assert body.count('class="msg ') == 100
    assert body.count('class="drop"') == 3
    with django_assert_max_num_queries(DETAIL_QUERIES):
        response = logged_in.get(url, {"from": 3950})
    assert "Compacted · auto" in response.content.decode()
    with django_assert_max_num_queries(DETAIL_QUERIES):
        response = logged_in.get(
            reverse("dashboard:session-messages", args=[session.pk]), {"from": 2400}, HTTP_HX_REQUEST="true"
        )
    assert response.content.decode().count('class="msg ') == 100
    with django_assert_max_num_queries(DETAIL_QUERIES):
        response = logged_in.get(reverse("dashboard:session-overview", args=[session.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200


def test_the_chart_series_is_bounded_and_keeps_the_totals(user):
    from sessions.dashboard import queries

    session = make_session(user)
    rows = add_messages(session, conversation(3 * queries.SERIES_MAX_ROWS + 7), tokens=10)
    series = queries.message_token_series(session=session)
    assert len(series) <= queries.SERIES_MAX_ROWS
    assert sum(tokens for _seq, tokens, _at in series) == sum(r.token_count for r in rows)
    assert [seq for seq, _t, _a in series] == sorted({seq for seq, _t, _a in series})
    assert series[-1][0] == session.last_seq
    short = make_session(user)
    add_messages(short, conversation(10), tokens=10)
    assert [seq for seq, _t, _a in queries.message_token_series(session=short)] == list(range(1, 11))


def test_refresh_session_usage_rewrites_stale_meter_columns(user):
    from django.core.management import call_command

    session = make_session(user)
    add_messages(session, conversation(8), tokens=30_000)  # 240k on a 200k window: over
    Session.objects.filter(pk=session.pk).update(usage_tokens=0, usage_percent=0, usage_level="ok")
    call_command("refresh_session_usage", stdout=__import__("io").StringIO())
    session.refresh_from_db()
    assert session.usage_level == "over" and session.usage_tokens == session_services.session_usage(session).tokens
