"""Every shared transcript imports whole: checked against an independent reader of each file.

The readers here are deliberately small and separate from compaction.core.transcripts: they
walk the raw file and list what must survive an import — every tool call id, every text and
thinking block of 20+ characters, every queued user message, every usage report — and the
test looks for each one in what was stored (messages, tool calls, the agent's own compaction
summaries, the system prompt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from compaction.core.provenance import QUEUED_TEMPLATE, user_words
from compaction.models import Compaction
from sessions.models import Message, Session, ToolCall
from sessions.services import context_messages
from tests import codex_rollouts
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = pytest.mark.django_db

DATA = TRANSCRIPTS
MIN_TEXT = 20


@dataclass
class Expected:
    tool_ids: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    usage_reports: int = 0
    queued: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)  # SWE-agent text-format commands
    system: list[str] = field(default_factory=list)


def _add_text(expected: Expected, text) -> None:
    if isinstance(text, str) and len(text.strip()) >= MIN_TEXT:
        expected.texts.append(text.strip())


def expected_claude_code(path: Path) -> Expected:
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    with_uuid = [x for x in lines if "uuid" in x]
    conversation = [x for x in with_uuid if not x.get("isSidechain")] or with_uuid
    out = Expected()
    usage_ids = set()
    for x in conversation:
        if x.get("type") not in ("user", "assistant"):
            continue
        message = x["message"]
        if message.get("model") == "<synthetic>":
            continue  # Claude Code's own notes; never sent to the model
        content = message.get("content")
        if isinstance(content, str):
            _add_text(out, content)
            continue
        for block in content:
            if block["type"] == "text":
                _add_text(out, block["text"])
            elif block["type"] == "thinking":
                _add_text(out, block["thinking"])
            elif block["type"] == "tool_use":
                out.tool_ids.add(block["id"])
        usage = message.get("usage")
        if x["type"] == "assistant" and usage and usage.get("input_tokens") is not None:
            usage_ids.add(message["id"])
    out.usage_reports = len(usage_ids)
    for x in lines:
        if x.get("type") == "queue-operation" and x.get("operation") == "enqueue" and x.get("content"):
            out.queued.append(x["content"].strip())
    return out


def expected_pi(path: Path) -> Expected:
    out = Expected()
    for raw in path.read_text().splitlines():
        x = json.loads(raw)
        if x.get("type") != "message":
            continue
        message = x["message"]
        for block in message.get("content") or []:
            if block["type"] == "text":
                _add_text(out, block["text"])
            elif block["type"] == "thinking":
                _add_text(out, block["thinking"])
            elif block["type"] == "toolCall":
                out.tool_ids.add(block["id"])
        usage = message.get("usage")
        if message["role"] == "assistant" and usage and usage["input"] + usage["cacheRead"] + usage["cacheWrite"]:
            out.usage_reports += 1
    return out


def expected_swe_agent(path: Path) -> Expected:
    out = Expected()
    for item in json.loads(path.read_text())["history"]:
        if item["role"] == "system":
            out.system.append(item["content"].strip())
            continue
        _add_text(out, item["content"])
        for call in item.get("tool_calls") or []:
            out.tool_ids.add(call["id"])
        if item["role"] == "assistant" and not item.get("tool_calls") and (item.get("action") or "").strip():
            out.actions.append(item["action"].strip())
    return out


def expected_codex(path: Path) -> Expected:
    """What a Codex rollout must keep: every message, reasoning summary, call and output, the
    compaction's summary, and one usage report per token_count with new totals after a reply."""
    out = Expected()
    totals: list = []
    replied = False
    for raw in path.read_text().splitlines():
        line = json.loads(raw)
        payload = line["payload"]
        if line["type"] == "compacted":
            _add_text(out, payload["message"])
        elif line["type"] == "event_msg" and payload["type"] == "token_count" and payload["info"]:
            total = payload["info"]["total_token_usage"]
            if total not in totals and replied:
                out.usage_reports += 1
                replied = False
            totals.append(total)
        if line["type"] != "response_item":
            continue
        kind = payload["type"]
        replied = replied or (kind != "message" or payload["role"] == "assistant") and not kind.endswith("_output")
        for part in payload.get("content") or []:
            _add_text(out, part.get("text"))
        for part in payload.get("summary") or []:
            _add_text(out, part["text"])
        if "call_id" in payload and not kind.endswith("_output"):
            out.tool_ids.add(payload["call_id"])
        _add_text(out, payload.get("input"))  # apply_patch's patch, kept as text
        _add_text(out, payload.get("output"))
    return out


def stored_text(session: Session) -> str:
    """Everything the session holds as text: message blocks, tool results, tool inputs, summaries."""
    parts: list[str] = [session.system_prompt]

    def walk(value) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key not in ("type", "id", "tool_use_id", "signature"):
                    walk(item)

    for content in Message.objects.filter(session=session).order_by("seq").values_list("content", flat=True):
        walk(content)
    parts.extend(Compaction.objects.filter(session=session).values_list("summary", flat=True))
    return "\n\x00\n".join(parts)


def assert_imported_whole(session: Session, expected: Expected) -> None:
    stored_ids = set(ToolCall.objects.filter(session=session).values_list("tool_use_id", flat=True))
    assert expected.tool_ids - stored_ids == set(), "tool calls lost"
    haystack = stored_text(session)
    lost = [text[:80] for text in expected.texts if text not in haystack]
    assert lost == [], f"{len(lost)} of {len(expected.texts)} text blocks lost"
    lost_queued = [text for text in expected.queued if text not in haystack]
    assert lost_queued == [], "queued user messages lost"
    assert [a for a in expected.actions if a not in haystack] == []
    assert all(s in session.system_prompt for s in expected.system)
    usage = Message.objects.filter(session=session, provider_usage__isnull=False).count()
    assert usage == expected.usage_reports


def run(path: Path, user, *args: str) -> str:
    out = StringIO()
    call_command("import_transcript", str(path), "--user", user.username, *args, stdout=out)
    return out.getvalue()


def imported(path: Path, user, *args: str) -> Session:
    """The top-level session an import of `path` created (sessions are dated by the transcript)."""
    known = set(Session.objects.filter(owner=user).values_list("pk", flat=True))
    run(path, user, *args)
    return Session.objects.filter(owner=user, parent=None).exclude(pk__in=known).get()


MAIN_CLAUDE_CODE = sorted(p for p in (DATA / "claude-code").glob("*.jsonl"))
SUBAGENT_FILES = sorted((DATA / "claude-code").glob("*/subagents/*.jsonl"))


@corpus
@pytest.mark.parametrize("path", MAIN_CLAUDE_CODE, ids=lambda p: p.name[:40])
def test_every_claude_code_file_imports_whole_with_its_subagents(path: Path, user) -> None:
    output = run(path, user)
    session = Session.objects.get(owner=user, parent=None)
    assert session.agent == "claude-code"
    assert_imported_whole(session, expected_claude_code(path))
    subagents = sorted((path.with_suffix("") / "subagents").glob("*.jsonl"))
    assert session.children.count() == len(subagents)
    assert all(child.parent_id == session.pk for child in session.children.all())
    for child_file in subagents:
        child = next(c for c in session.children.all() if f"subagent {child_file.name} → session {c.pk}" in output)
        assert_imported_whole(child, expected_claude_code(child_file))
    assert "skipped:" in output and "usage reports" in output


@corpus
def test_subagent_logs_with_broken_parent_links_import_whole(user) -> None:
    # Claude Code's compaction subagent logs hang off lines of the parent session that are not
    # in the file: every one of their messages must still be there.
    sessions = [imported(path, user) for path in SUBAGENT_FILES]
    assert Session.objects.filter(owner=user).count() == len(SUBAGENT_FILES)
    for path, session in zip(SUBAGENT_FILES, sessions, strict=True):
        expected = expected_claude_code(path)
        assert_imported_whole(session, expected)
        lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
        user_texts = [x["message"]["content"] for x in lines if x.get("type") == "user"]
        assert user_texts, path
        for text in user_texts:
            assert (text if isinstance(text, str) else json.dumps(text))[:200] in stored_text(session) or all(
                b.get("text", "")[:200] in stored_text(session) for b in text if isinstance(b, dict)
            )


@corpus
def test_the_pi_session_imports_whole(user) -> None:
    path = DATA / "pi" / "large-session.jsonl"
    output = run(path, user)
    session = Session.objects.get(owner=user)
    assert session.agent == "pi"
    expected = expected_pi(path)
    assert len(expected.tool_ids) > 300 and expected.usage_reports > 400
    assert_imported_whole(session, expected)
    assert "skipped: empty failed assistant 14" in output


def test_the_generated_codex_rollout_imports_whole(user) -> None:
    # A generated rollout (tests/codex_rollouts.py writes it): no real Codex session is shared.
    output = run(codex_rollouts.SAMPLE, user)
    session = Session.objects.get(owner=user)
    assert session.agent == "codex"
    expected = expected_codex(codex_rollouts.SAMPLE)
    assert len(expected.tool_ids) == 41 and expected.usage_reports == 71
    assert_imported_whole(session, expected)
    assert "1 Codex compaction(s) recorded" in output


@corpus
@pytest.mark.parametrize("path", sorted((DATA / "swe-agent").glob("*.traj")), ids=lambda p: p.name)
def test_every_swe_agent_trajectory_imports_whole(path: Path, user) -> None:
    run(path, user)
    session = Session.objects.get(owner=user)
    assert session.agent == "swe-agent"
    expected = expected_swe_agent(path)
    assert expected.tool_ids or expected.actions
    assert_imported_whole(session, expected)


@corpus
def test_queued_instructions_arrive_where_the_agent_received_them(user) -> None:
    path = DATA / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    output = run(path, user, "--no-subagents")
    assert "2 queued user messages" in output
    session = Session.objects.get(owner=user)
    for text in ("new beads for the epic were added. tackle them", "check again"):
        row = Message.objects.get(session=session, content__icontains=text)
        # Typed while a tool ran: delivered with that tool's result, right after its call, in
        # the reminder Claude Code wraps it in.
        assert row.role == "user"
        assert row.content[0]["type"] == "tool_result"
        assert row.content[-1] == {"type": "text", "text": QUEUED_TEMPLATE.format(text=text)}
        call = Message.objects.get(session=session, seq=row.seq - 1)
        assert row.content[0]["tool_use_id"] in call.tool_use_ids


@corpus
def test_imports_store_whose_words_each_message_carries(user) -> None:
    # Claude Code marks what it injected (a skill body, hook output) as meta lines; the person's
    # own lines and the command they typed stay theirs.
    beads = imported(DATA / "claude-code" / "subagent.jsonl", user, "--no-subagents")
    hooked = imported(DATA / "claude-code" / "reliability-coverage-test-fix.jsonl", user)
    swe = imported(DATA / "swe-agent" / "pydicom__pydicom-1458.traj", user)
    first = Message.objects.get(session=beads, seq=1)
    assert first.provenance == "person"
    assert first.content[0]["text"].startswith("<command-message>handgemacht:create-beads")
    assert first.content[1]["provenance"] == "harness"  # the skill body Claude Code expanded it to
    assert first.content[1]["text"].startswith("Create beads (epic + tasks + dependencies)")
    said = [w for m in context_messages(beads) for w in user_words(m)]
    assert [kind for _w, kind in said] == ["command", ""] and said[1][0] == "create the beads"
    rows = Message.objects.filter(session=hooked, role="user")
    hooks = [m for m in rows if isinstance(m.content, str) and m.content.startswith("Stop hook feedback")]
    assert len(hooks) == 2 and {m.provenance for m in hooks} == {"harness"}
    assert Message.objects.get(session=hooked, seq=1).provenance == "person"
    assert set(Message.objects.filter(role="assistant").values_list("provenance", flat=True)) == {""}
    # SWE-agent: the issue is the person's task, its template and every observation the harness's.
    task = [w for m in context_messages(swe) for w in user_words(m)]
    assert [kind for _w, kind in task] == ["task"]
    assert task[0][0].startswith("Pixel Representation attribute should be optional")
    assert "INSTRUCTIONS" not in task[0][0]


def cut_lines(source: Path, target: Path) -> tuple[int, set[str]]:
    """Write `source` without the line the compaction points back to and without some lines
    that others hang off (parents missing), as a partially copied or corrupted log has."""
    lines = [json.loads(raw) for raw in source.read_text().splitlines() if raw.strip()]
    boundary = next(x for x in lines if x.get("subtype") == "compact_boundary")
    cut = {boundary["logicalParentUuid"]}
    parents = [x["parentUuid"] for x in lines if x.get("type") in ("user", "assistant") and x.get("parentUuid")]
    by_uuid = {x["uuid"]: x for x in lines if "uuid" in x}
    # Progress lines that messages hang off, spread over the file.
    progress_parents = [p for p in parents if by_uuid.get(p, {}).get("type") == "progress"]
    cut.update(progress_parents[:: max(1, len(progress_parents) // 6)])
    # And a few plain assistant text lines in the middle of the conversation.
    texts = [
        x["uuid"]
        for x in lines
        if x.get("type") == "assistant" and all(b["type"] == "text" for b in x["message"]["content"])
    ]
    cut.update(texts[10:40:10])
    kept = [x for x in lines if x.get("uuid") not in cut]
    target.write_text("".join(json.dumps(x) + "\n" for x in kept))
    return len(lines) - len(kept), cut


@corpus
def test_a_file_with_broken_parent_links_imports_whole(user, tmp_path: Path) -> None:
    source = DATA / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"
    broken = tmp_path / "broken.jsonl"
    removed, cut = cut_lines(source, broken)
    assert removed >= 8
    remaining = {json.loads(raw).get("uuid") for raw in broken.read_text().splitlines()}
    dangling = [json.loads(raw) for raw in broken.read_text().splitlines() if json.loads(raw).get("parentUuid") in cut]
    assert len(dangling) >= 5 and not (cut & remaining)
    output = run(broken, user)
    session = Session.objects.get(owner=user)
    assert_imported_whole(session, expected_claude_code(broken))
    # The compaction still lands where Claude Code made it, after the whole history before it
    # (an importer that stops at the missing parent drops those ~124 messages).
    job = session.active_compaction
    assert job is not None and job.reason == "import"
    assert job.messages_summarized > 120
    assert "1 Claude Code compaction(s) recorded" in output


@corpus
def test_a_bad_subagent_log_is_left_out_and_named_not_fatal(user, tmp_path: Path) -> None:
    main = tmp_path / "s1.jsonl"
    main.write_text((DATA / "claude-code" / "short.jsonl").read_text())
    folder = tmp_path / "s1" / "subagents"
    folder.mkdir(parents=True)
    (folder / "agent-good.jsonl").write_text((DATA / "claude-code" / "agent-a0294d5.jsonl").read_text())
    (folder / "agent-bad.jsonl").write_text("not json at all\n{}\n")
    output = run(main, user)
    session = Session.objects.get(owner=user, parent=None)
    assert [c.title for c in session.children.all()] and session.children.count() == 1
    assert "subagent agent-bad.jsonl not imported: line 1: not JSON" in output


@corpus
def test_sidechains_inside_a_main_log_become_child_sessions(user, tmp_path: Path) -> None:
    # Older Claude Code wrote a Task's subagent conversation into the main log (isSidechain).
    main = tmp_path / "older.jsonl"
    sidechain = DATA / "claude-code" / "agent-a0294d5.jsonl"
    main.write_text((DATA / "claude-code" / "short.jsonl").read_text() + sidechain.read_text())
    output = run(main, user)
    session = Session.objects.get(owner=user, parent=None)
    assert_imported_whole(session, expected_claude_code(DATA / "claude-code" / "short.jsonl"))
    child = session.children.get()
    assert_imported_whole(child, expected_claude_code(sidechain))
    assert f"subagent older.jsonl (sidechain 1) → session {child.pk}" in output
    assert "sidechain" not in output.split("skipped:")[1].split("\n")[0]  # read, not skipped


@corpus
def test_an_imported_session_and_its_messages_are_dated_when_the_agent_logged_them(user) -> None:
    from datetime import UTC, datetime

    session = imported(DATA / "pi" / "large-session.jsonl", user)
    # pi logged this session on 2025-11-20/21: the import does not date it today.
    assert session.created_at == datetime(2025, 11, 20, 23, 33, 1, 550000, tzinfo=UTC)
    assert session.last_activity_at == datetime(2025, 11, 21, 2, 14, 2, 980000, tzinfo=UTC)
    times = list(Message.objects.filter(session=session).order_by("seq").values_list("created_at", flat=True))
    assert times[0] == session.created_at and times[-1] == session.last_activity_at
    assert all(a <= b for a, b in zip(times, times[1:], strict=False))  # in the order they were logged
    # A tool result is dated by its own line, after the call it answers.
    claude = imported(DATA / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl", user, "--no-subagents")
    call, result = Message.objects.filter(session=claude, seq__in=[2, 3]).order_by("seq")
    assert call.created_at.year == 2026 and call.created_at < result.created_at
    # A format without times (SWE-agent) is dated by the import.
    swe = imported(DATA / "swe-agent" / "katy.traj", user)
    assert swe.created_at.date() == datetime.now(UTC).date()
