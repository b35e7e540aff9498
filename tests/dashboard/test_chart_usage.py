"""The chart's line ends where the gauge is: session_usage()["tokens"], whatever compacted the session."""

from __future__ import annotations

import pytest
from django.urls import reverse

from compaction import services as compaction_services
from compaction.core.transcripts.claude_code import read_claude_code
from compaction.models import Compaction, Status
from sessions import services as session_services
from tests.dashboard.factories import add_messages, conversation
from tests.services import TRANSCRIPTS

pytestmark = pytest.mark.django_db


def _chart_and_usage(client, session):
    response = client.get(reverse("dashboard:session-detail", args=[session.pk]))
    assert response.status_code == 200
    session.refresh_from_db()
    return response.context["chart"], session_services.session_usage(session)["tokens"]


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
    # estimates add up to); tokens_after counts the summary plus #31–#40.
    compaction = compaction_services.compaction_record_import(
        session=session, summary="## Goal\nImported summary.", first_kept_seq=31, tokens_before=30_353
    )
    assert compaction.params["snapshot_seq"] == 40
    chart, tokens = _chart_and_usage(logged_in, session)
    assert chart.last_tokens == tokens == compaction.tokens_after
    drop = chart.drops[0]
    assert "30,353" in drop["label"]
    # The drop's top is the calibrated 30,353, its bottom leaves room for #31–#40 (7,000) on top.
    points = [tuple(map(float, p.split(","))) for p in chart.points.split()]
    assert any(abs(py - drop["y1"]) < 0.2 for _, py in points)


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
