"""The served context as a typed read (sessions.selectors.context_build → ContextView), with the
active compaction handed to the store as a typed Overlay (compaction.selectors.active_overlay)."""

from __future__ import annotations

import pytest

from compaction.models import Compaction
from compaction.selectors import Overlay, active_overlay
from sessions import services
from sessions.selectors import ContextView, context_build

from .helpers import tool_result, tool_use, url

pytestmark = pytest.mark.django_db


def _append(session, *messages):
    services.messages_append(session=session, messages=list(messages))


def test_the_view_is_what_the_api_answers(api, session):
    _append(session, {"role": "user", "content": "ls"}, tool_use("t1"), tool_result("t1", "a.py"))
    view = context_build(session=session)
    assert isinstance(view, ContextView) and view.active_compaction is None
    assert view.seqs == [1, 2, 3] and [m["role"] for m in view.messages] == ["user", "assistant", "user"]
    assert view.estimated_tokens == view.breakdown.system + view.breakdown.summary + view.breakdown.messages
    assert api.get(url(session, "context/")).json() == view.as_dict()


def test_a_compacted_session_is_served_from_its_overlay(api, session):
    for n in range(1, 4):
        _append(session, {"role": "user", "content": f"question {n}"}, {"role": "assistant", "content": f"answer {n}"})
    compaction = Compaction.objects.create(
        session=session, reason="manual", status="succeeded", summary="The user asked twice.", first_kept_seq=5
    )
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)

    overlay = active_overlay(session)
    assert isinstance(overlay, Overlay) and overlay.kept_from == 5 and overlay.prune_below == 0
    view = context_build(session=session)
    assert view.active_compaction == overlay
    assert view.seqs == [None, 5, 6]  # the summary first, then the kept messages
    assert "The user asked twice." in view.messages[0]["content"]
    assert view.breakdown.summary > 0 and view.estimated_tokens == session.context_tokens
    answered = api.get(url(session, "context/")).json()
    assert answered["active_compaction"]["id"] == str(compaction.pk)
    assert answered["active_compaction"]["first_kept_seq"] == 5


def test_a_session_without_a_compaction_has_no_overlay(session):
    assert active_overlay(session) is None
