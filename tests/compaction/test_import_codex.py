"""A Codex CLI rollout through every import path: manage.py import_transcript (bulk and --replay),
POST /api/v1/imports/, the dashboard's Import page and `compactor import`."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from compaction.models import Compaction, Status
from sessions import services as session_services
from sessions.models import Message, Session, ToolCall
from tests import codex_rollouts as cr

from .factories import orphan_tool_results

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_transcript", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def rollout_file(tmp_path: Path) -> Path:
    return cr.long_rollout().write(tmp_path / "rollout-2025-10-02T09-14-03-0199a1b2.jsonl")


def compacted_line(path: Path) -> dict:
    lines = [json.loads(raw) for raw in path.read_text().splitlines()]
    return next(x["payload"] for x in lines if x["type"] == "compacted")


def test_bulk_import_records_codexs_compaction_and_every_usage_report(user, rollout_file: Path):
    output = run(str(rollout_file), "--user", user.username)
    session = Session.objects.get(owner=user)
    assert session.agent == "codex" and session.model == "gpt-5-codex"
    assert session.title.startswith("Turn 1: make balance() in module_1")
    assert f"Imported {session.message_count} messages (Codex) into session {session.pk}" in output
    assert "42 tool calls, 1 Codex compaction(s) recorded, 71 usage reports" in output
    skipped = output.split("skipped: ")[1].splitlines()[0]
    assert "event user message mirrors 30" in skipped and "reasoning encrypted content dropped 31" in skipped
    assert ToolCall.objects.filter(session=session).count() == 42
    assert Message.objects.filter(session=session, provider_usage__isnull=False).count() == 71
    job = session.active_compaction
    assert job is not None and job.reason == "import" and job.status == Status.SUCCEEDED
    assert job.summary == compacted_line(rollout_file)["message"]
    assert job.tokens_before == 50_000  # the usage Codex reported for its summarization call
    assert job.messages_summarized == job.first_kept_seq - 1
    first_kept = Message.objects.get(session=session, seq=job.first_kept_seq)
    assert "Turn 21: make balance()" in json.dumps(first_kept.content)
    # The messages Codex's compaction replaced are kept, behind it.
    assert Message.objects.filter(session=session, seq__lt=job.first_kept_seq, content__icontains="Turn 1:").exists()
    context = session_services.context_build(session=session)
    assert orphan_tool_results(context["messages"]) == []
    # Codex's own instructions and environment are the harness's words, the turn the person's.
    first = Message.objects.get(session=session, seq=1)
    assert first.provenance == "person"
    assert [b.get("provenance") for b in first.content] == ["harness", "harness", "harness", None]


@pytest.mark.slow
def test_replay_compacts_where_the_window_demands(user, rollout_file: Path):
    # 60k window: the default trigger (45,000 there) is crossed before turn 20,
    # where Codex itself compacted at 50,000 on its 272k window.
    output = run(str(rollout_file), "--user", user.username, "--replay", "--window", "60000")
    session = Session.objects.get(owner=user)
    jobs = Compaction.objects.filter(session=session, status=Status.SUCCEEDED)
    assert jobs.exclude(reason="import").exists() and not jobs.filter(reason="import").exists()
    first = jobs.order_by("created_at").first()
    assert first.tokens_before > session_services.session_usage(session).trigger_tokens
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"Replayed {session.message_count} messages into session {session.pk}")
    assert "first at message" in last
    assert Message.objects.get(session=session, seq=1).provenance == "person"
    assert Message.objects.get(session=session, seq=1).content[0]["provenance"] == "harness"


def damaged_rollout(tmp_path: Path) -> Path:
    """The short rollout with an item type this reader does not know and a cut-off last line."""
    rollout = cr.long_rollout(turns=3, compact_after=2)
    rollout.item({"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBOR"})
    path = tmp_path / "damaged.jsonl"
    path.write_text(rollout.text() + '{"timestamp": "2025-10-02T09:30:00.000Z", "type": "event_m')
    return path


def test_the_api_imports_a_rollout_and_names_what_it_skipped(api, user, tmp_path: Path):
    path = damaged_rollout(tmp_path)
    upload = SimpleUploadedFile("rollout.jsonl", path.read_bytes())
    response = api.post("/api/v1/imports/", {"file": upload}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["format"] == "codex" and body["session"]["agent"] == "codex"
    report = body["report"]
    assert report["compactions"] == 1 and report["tool_calls"] == 4 and report["usage_reports"] == 7
    assert report["skipped"]["skipped_item_image_generation_call"] == 1
    assert report["skipped"]["skipped_truncated_last_line"] == 1
    assert report["skipped"]["skipped_event_agent_message_mirrors"] == 6


def test_a_forced_format_reads_a_rollout_and_refuses_a_non_rollout(user, rollout_file: Path, tmp_path: Path):
    output = run(str(rollout_file), "--user", user.username, "--format", "codex", "--title", "forced")
    assert "(Codex)" in output and Session.objects.get(owner=user).title == "forced"
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    with pytest.raises(CommandError, match="chat.json: line 1: a JSON array, not an object"):
        run(str(chat), "--user", user.username, "--format", "codex")
    assert Session.objects.filter(owner=user).count() == 1
