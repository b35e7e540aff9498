"""manage.py import_transcript: bulk load (with Claude Code's own compaction) and --replay."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from compaction.models import Compaction, Status
from sessions import services as session_services
from sessions.models import Message, Session
from sessions.selectors import context_build
from tests.corpus import corpus

from .factories import orphan_tool_results
from .test_replay import TRANSCRIPTS

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_transcript", *args, stdout=out)
    return out.getvalue()


@corpus
def test_bulk_import_records_claude_codes_compaction(user):
    path = TRANSCRIPTS / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    output = run(str(path), "--user", user.username, "--window", "200000")
    session = Session.objects.get(owner=user, parent=None)
    assert f"into session {session.pk}" in output and "1 Claude Code compaction(s) recorded" in output
    job = session.active_compaction
    assert job is not None and job.reason == "import" and job.status == Status.SUCCEEDED
    assert job.tokens_before == 167_731
    assert len(job.summary) > 5_000
    assert job.messages_summarized == job.first_kept_seq - 1
    assert Message.objects.filter(session=session).count() == session.last_seq
    context = context_build(session=session).as_dict()
    assert context["active_compaction"]["id"] == str(job.pk)
    assert orphan_tool_results(context["messages"]) == []
    assert session_services.session_config(session).auto_compact is True  # restored after the load
    # Both figures on the provider's scale: the recorded usage just before Claude Code's
    # boundary calibrated the meter, so tokens_after carries the same offset (the ~26k+ only
    # the provider counts) as the preTokens figure in tokens_before.
    usage = session_services.session_usage(session).as_dict()
    offset = usage["calibration_offset"]
    assert offset is not None and offset > 20_000
    # tokens_after = right after Claude Code compacted: its summary (+ the offset), not the
    # messages that came after the boundary (already stored when a bulk load activates it).
    # (The offset then was the one calibrated by the last call before the boundary.)
    summary = context_build(session=session).as_dict()["breakdown"]["summary"]
    assert 20_000 < job.tokens_after - summary < job.tokens_before - summary
    finished = job.events.get(kind="compaction_finished")
    assert f"{job.tokens_before:,} → {job.tokens_after:,} tokens" in finished.message
    assert job.snapshot_seq == job.first_kept_seq - 1
    # The last recorded call (after the boundary, on the compacted context) calibrates the meter.
    assert usage["source"] == "provider+estimate"
    assert abs(usage["tokens"] - (usage["estimated_tokens"] + offset)) < 5_000
    print(f"import: {job.tokens_before:,} → {job.tokens_after:,} (offset {offset:,}); meter {usage['tokens']:,}")


@corpus
@pytest.mark.slow
def test_replay_compacts_as_it_goes_and_prints_a_summary_line(user):
    path = TRANSCRIPTS / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    output = run(str(path), "--user", user.username, "--replay", "--window", "200000", "--trigger", "167000")
    session = Session.objects.get(owner=user, parent=None)
    assert (
        output.strip()
        .splitlines()[-1]
        .startswith(f"Replayed {session.message_count} messages into session {session.pk}")
    )
    jobs = Compaction.objects.filter(session=session, status=Status.SUCCEEDED)
    assert jobs.filter(reason="threshold").exists()
    assert "Conversation compacted" in output or "Tool output pruned" in output


@corpus
def test_bad_arguments_are_errors(user, tmp_path):
    with pytest.raises(CommandError, match="PATH: no such file"):
        run(str(tmp_path / "missing.jsonl"), "--user", user.username)
    with pytest.raises(CommandError, match="--user: no user named"):
        run(str(TRANSCRIPTS / "short.jsonl"), "--user", "nobody")
    assert not Session.objects.exists()


@corpus
@pytest.mark.slow
def test_a_replay_that_never_compacts_says_why(user):
    # On a 400k window the default trigger (window − 16,384 = 383,616) is above anything this
    # session reached: no compaction, and the output names the trigger and the peak usage.
    # (On 200k the served history passes 183,616 after Claude Code's own compaction point, whose
    # later reports describe Claude Code's compacted context: flagged, they no longer hold the
    # meter down, and the replay compacts there.)
    path = TRANSCRIPTS / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    output = run(str(path), "--user", user.username, "--replay", "--window", "400000")
    session = Session.objects.get(owner=user, parent=None)
    assert not Compaction.objects.filter(session=session).exists()
    trigger = session_services.session_usage(session).trigger_tokens
    assert trigger == 383_616
    last = output.strip().splitlines()[-1]
    assert "0 compaction(s), none" in last and f"trigger {trigger:,}" in last
    match = re.search(r"peak usage ([\d,]+) tokens at message (\d+)", last)
    assert match, last
    peak = int(match.group(1).replace(",", ""))
    assert 167_000 < peak <= trigger  # above Claude Code's own compaction point, under ours
    assert f"usage peaked at {peak:,} tokens, never above the trigger {trigger:,}" in output
    assert "--trigger" in output


def test_trigger_option_is_documented():
    from compaction.management.commands.import_transcript import Command

    parser = Command().create_parser("manage.py", "import_transcript")
    text = " ".join(parser.format_help().split())
    assert "--trigger" in text and "183,616" in text and "167000" in text
