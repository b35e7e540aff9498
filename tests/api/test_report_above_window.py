"""A usage report above the session's context window (a client adding the cache figures twice)
is stored and flagged `above_window`: it never moves the meter, never confirms a change, and never
starts a compaction, however many such reports arrive."""

from __future__ import annotations

import pytest

from compaction.models import Compaction
from sessions.models import Session

from .helpers import url

pytestmark = pytest.mark.django_db


def words(i: int, n: int = 300) -> str:
    return " ".join(f"step{i}-word{j}" for j in range(n))


def turn(api, session, i: int) -> None:
    messages = [{"role": "user", "content": words(i)}, {"role": "assistant", "content": f"Done with step {i}."}]
    response = api.post(url(session, "messages/"), {"messages": messages}, format="json")
    assert response.status_code == 201, response.json()


def report(api, session, **usage) -> dict:
    response = api.post(url(session, "usage/"), usage, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["usage"]


def test_reports_above_the_window_never_drive_the_meter_or_a_compaction(api, user, django_capture_on_commit_callbacks):
    session = Session.objects.create(owner=user, title="Doubling client", model="claude-sonnet-4-5")
    turn(api, session, 0)
    honest = report(api, session, input_tokens=3, cache_read_input_tokens=30_000)
    assert honest["implausible"] is None
    meter = honest["tokens"]
    for i in range(1, 4):  # each report doubles the previous: the shape that reached 443M tokens
        turn(api, session, i)
        with django_capture_on_commit_callbacks(execute=True):
            usage = report(api, session, input_tokens=3, cache_read_input_tokens=30_000 * 10**i)
        assert usage["implausible"]["code"] == "above_window"
        assert "200,000-token context window" in usage["implausible"]["reason"]
        assert usage["tokens"] < 200_000 and usage["tokens"] >= meter
    assert not Compaction.objects.filter(session=session).exists()
    session.refresh_from_db()
    assert session.reported_input_tokens == 30_003 and session.usage_percent < 100


def test_a_session_window_set_larger_accepts_a_report_up_to_it(api, user):
    session = Session.objects.create(
        owner=user, title="1M beta", model="claude-sonnet-4-5", context_window_override=1_000_000
    )
    turn(api, session, 0)
    assert report(api, session, input_tokens=450_000)["implausible"] is None
