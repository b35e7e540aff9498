"""The context breakdown on a real Claude Code session: replayed through the services with its
recorded usage up to Claude Code's own compaction (so the calibration is fitted on real reports),
then pruned, then compacted by Compactor.

At every stage the parts Compactor counts, derived from the session row and the active compaction
alone (sessions.breakdown), must equal what the served context holds message by message
(context_build's breakdown), and the parts must add up to the meter and the window.
"""

from __future__ import annotations

import pytest

from compaction import services as engine
from compaction.core import breakdown as core
from sessions import services
from sessions.breakdown import session_context_breakdown
from sessions.models import Session
from sessions.selectors import context_build
from tests.corpus import corpus

from .factories import replay_claude_code_session
from .test_replay import TRANSCRIPTS

pytestmark = [corpus, pytest.mark.django_db]

TRANSCRIPT = TRANSCRIPTS / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"


def check(session: Session) -> core.Breakdown:
    """The breakdown agrees with the full served view and adds up; returns it."""
    session = Session.objects.select_related("active_compaction").get(pk=session.pk)
    sb = session_context_breakdown(session=session)
    b = sb.breakdown
    served = context_build(session=session).as_dict()
    usage = services.session_usage(session)
    own = {k: b.segment(k).estimated_tokens for k in (core.SYSTEM, core.SUMMARY, core.MESSAGES)}
    assert own == {
        core.SYSTEM: served["breakdown"]["system"],
        core.SUMMARY: served["breakdown"]["summary"],
        core.MESSAGES: served["breakdown"]["messages"],
    }
    assert b.used_tokens == usage.tokens == sum(b.segment(k).tokens for k in core.USED_KEYS)
    assert sum(s.tokens for s in b.segments) == max(usage.context_window, usage.tokens)
    if served["breakdown"]["pruned_tool_results_saved"]:
        assert b.pruned is not None
        assert b.pruned.saved_estimated_tokens == served["breakdown"]["pruned_tool_results_saved"]
    return b


def test_replayed_pruned_and_compacted_session_adds_up(user):
    session, _messages, _boundary = replay_claude_code_session(user, TRANSCRIPT)

    imported = check(session)
    # Claude Code's hidden prompt and tool definitions: tens of thousands of tokens the transcript
    # never shows, inferred from its recorded usage; its tokenizer counts more than ours.
    assert 15_000 < imported.segment(core.FIXED).tokens < 60_000, imported.segment(core.FIXED)
    assert imported.calibrated and 1.1 < imported.scale < 1.5, imported.scale
    assert imported.segment(core.SUMMARY).tokens == 0 and imported.pruned is None

    job = engine.compaction_request(session=session, reason="manual", strategy="prune")
    pruned_job = engine.compaction_run(compaction_id=job.pk)
    assert pruned_job.strategy == "prune" and pruned_job.prune_before_seq, pruned_job.detail
    pruned = check(session)
    # What the prune planned to save is what the overlay saves as served.
    assert pruned.pruned.saved_estimated_tokens == pruned_job.usage["tokens_saved_estimate"]
    assert pruned.segment(core.MESSAGES).estimated_tokens < imported.segment(core.MESSAGES).estimated_tokens

    job = engine.compaction_request(session=session, reason="manual", strategy="extractive")
    compacted_job = engine.compaction_run(compaction_id=job.pk)
    session.refresh_from_db()
    assert session.active_compaction_id == compacted_job.pk
    compacted = check(session)
    assert compacted.used_tokens == compacted_job.tokens_after
    # The fixed part carries over a compaction (it is the calibration's, not the messages').
    assert abs(compacted.segment(core.FIXED).tokens - pruned.segment(core.FIXED).tokens) < 5_000
    print(
        "\n".join(
            f"{name}: " + ", ".join(f"{s.key} {s.tokens:,}" for s in b.segments)
            for name, b in (("imported", imported), ("pruned", pruned), ("compacted", compacted))
        )
    )
