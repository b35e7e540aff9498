"""The chart's line ends where the gauge is: session_usage().tokens, whatever compacted the session."""

from __future__ import annotations

import pytest
from django.urls import reverse

from compaction import services as compaction_services
from compaction.core.transcripts.claude_code import read_claude_code
from compaction.models import Compaction, Status
from sessions import services as session_services
from sessions.dashboard import queries
from sessions.dashboard.chart import context_series
from tests.corpus import TRANSCRIPTS, corpus
from tests.dashboard.factories import add_messages, conversation

pytestmark = pytest.mark.django_db


def _chart_and_usage(client, session):
    response = client.get(reverse("dashboard:session-detail", args=[session.pk]))
    assert response.status_code == 200
    session.refresh_from_db()
    return response.context["chart"], session_services.session_usage(session).tokens


def test_plain_session_ends_at_the_gauge(logged_in, user):
    session = session_services.session_create(owner=user, title="plain", context_window=64_000)
    session_services.messages_append(session=session, messages=conversation(24))
    chart, tokens = _chart_and_usage(logged_in, session)
    assert chart.last_tokens == tokens
    assert f"now {tokens:,}" in chart.description


def test_imported_compaction_is_not_counted_twice(logged_in, user):
    session = session_services.session_create(owner=user, title="imported", context_window=64_000)
    add_messages(session, conversation(40), tokens=700)
    # The agent compacted before #31 when its provider said 30,353 tokens (above the 21,000 the
    # estimates add up to).
    compaction = compaction_services.compaction_record_import(
        session=session, summary="## Goal\nImported summary.", first_kept_seq=31, tokens_before=30_353
    )
    chart, tokens = _chart_and_usage(logged_in, session)
    assert chart.last_tokens == tokens
    assert len(chart.drops) == 1 and "30,353" in chart.drops[0]["label"]
    # The drop runs from tokens_before to tokens_after less the kept messages that figure
    # already counts (those up to snapshot_seq), which are then drawn on top.
    points, drops = context_series(
        messages=queries.message_token_series(session=session),
        compactions=[compaction],
        base_tokens=session.system_prompt_tokens,
        current_tokens=tokens,
    )
    snapshot = compaction.snapshot_seq
    counted_after_cut = 700 * max(0, snapshot - 30)
    assert drops[0].seq == 30 and drops[0].before == 30_353
    assert drops[0].after == compaction.tokens_after - counted_after_cut
    assert points[-1] == (40, tokens)


@corpus
@pytest.mark.slow
def test_replayed_session_with_several_compactions_ends_at_the_gauge(logged_in, user):
    transcript = read_claude_code(TRANSCRIPTS / "claude-code" / "reliability-python-to-rust-port.jsonl")
    session = session_services.session_create(
        owner=user,
        title="replayed",
        context_window=16_000,
        compaction_settings={"auto_compact_token_limit": 9000, "keep_recent_tokens": 2500},
    )
    compaction_services.transcript_replay(
        session=session,
        messages=compaction_services.transcript_messages_for_api(transcript.messages),
        run_inline=True,
    )
    assert Compaction.objects.filter(session=session, status=Status.SUCCEEDED).count() >= 2
    chart, tokens = _chart_and_usage(logged_in, session)
    assert len(chart.drops) >= 2
    assert chart.last_tokens == tokens


@corpus
@pytest.mark.slow
def test_an_imported_session_charts_the_providers_real_peak(logged_in, user):
    """The chart used to be rebuilt from message sizes: 258c7280's import printed a peak of
    167,081 while the chart said 79,517. The usage history puts the provider's figures on it."""
    from compaction.importing import transcript_import

    path = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    session = transcript_import(owner=user, path=path, window=200_000, subagents=False).session
    chart, tokens = _chart_and_usage(logged_in, session)
    # Claude Code's last report before compacting said 166,759 and its boundary 167,094 (preTokens):
    # the line reaches them, then drops.
    compaction = Compaction.objects.get(session=session, status=Status.SUCCEEDED)
    assert compaction.tokens_before == 167_094
    assert "peak 167,094" in chart.description, chart.description
    assert len(chart.drops) == 1 and chart.last_tokens == tokens
    points, _drops = context_series(
        messages=queries.message_token_series(session=session),
        compactions=[compaction],
        base_tokens=session.system_prompt_tokens,
        current_tokens=tokens,
        reports=queries.usage_history(session=session, compactions=[]).reports,
    )
    assert 166_759 in {t for _s, t in points}


def test_the_usage_history_is_read_bounded_and_keeps_the_peak(user, django_assert_num_queries):
    from django.utils import timezone

    from sessions.models import Session, UsageSample

    session = session_services.session_create(owner=user, title="long")
    last = 3 * queries.SERIES_MAX_ROWS + 7
    Session.objects.filter(pk=session.pk).update(last_seq=last)
    session.refresh_from_db()
    now = timezone.now()
    UsageSample.objects.bulk_create(
        UsageSample(session=session, seq=seq, kind="report", tokens=1_000 + seq, estimated_tokens=seq, created_at=now)
        for seq in range(1, last + 1)
    )
    UsageSample.objects.filter(session=session, seq=1_234).update(tokens=190_000)
    compaction = Compaction.objects.create(session=session, status=Status.SUCCEEDED, reason="manual")
    UsageSample.objects.create(
        session=session, seq=2_000, kind="compaction", tokens=9_000, compaction=compaction, created_at=now
    )
    with django_assert_num_queries(1):
        history = queries.usage_history(session=session, compactions=[compaction])
    assert len(history.reports) <= queries.SERIES_MAX_ROWS
    assert max(t for _s, t in history.reports) == 190_000
    assert history.reports[-1] == (last, 1_000 + last)
    assert history.measured_at == {compaction.pk: 2_000}
