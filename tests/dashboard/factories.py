"""Factories for dashboard tests: rows written directly (fast, any size), shaped like the engine's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from compaction.models import Compaction, Reason, Status
from sessions import services as session_services
from sessions.models import Message, Session


def make_session(owner, **fields: Any) -> Session:
    fields.setdefault("title", "Refactor the parser")
    fields.setdefault("agent", "claude-code")
    fields.setdefault("model", "claude-sonnet-4-5")
    return Session.objects.create(owner=owner, **fields)


def tool_pair(seq: int, name: str = "Bash", command: str = "ls -la", output: str = "total 0") -> list[dict[str, Any]]:
    tool_id = f"toolu_{seq:05d}"
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": {"command": command}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]},
    ]


def add_messages(session: Session, payloads: list[dict[str, Any]], tokens: int = 100) -> list[Message]:
    """Store messages with gap-free seqs and keep the session's counters consistent."""
    start = session.last_seq
    rows = []
    for offset, payload in enumerate(payloads, start=1):
        content = payload["content"]
        blocks = content if isinstance(content, list) else []
        rows.append(
            Message(
                session=session,
                seq=start + offset,
                role=payload["role"],
                content=content,
                token_count=payload.get("tokens", tokens),
                tool_use_ids=[b["id"] for b in blocks if b.get("type") == "tool_use"],
                tool_result_ids=[b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"],
            )
        )
    Message.objects.bulk_create(rows, batch_size=1000)
    total = sum(r.token_count for r in rows)
    session.last_seq = start + len(rows)
    session.message_count += len(rows)
    session.total_message_tokens += total
    session.context_tokens += total
    session.save(update_fields=["last_seq", "message_count", "total_message_tokens", "context_tokens"])
    store_meter(session)
    return rows


def store_meter(session: Session) -> None:
    """The meter columns the write path stores (the list filters and sorts on them)."""
    session_services.session_meter_refresh(sessions=Session.objects.filter(pk=session.pk))
    session.refresh_from_db(fields=["usage_tokens", "usage_percent", "usage_level"])


def conversation(n: int) -> list[dict[str, Any]]:
    """n messages alternating user text, tool use/result pairs and assistant text."""
    out: list[dict[str, Any]] = []
    seq = 0
    while len(out) < n:
        seq += 1
        out.append({"role": "user", "content": f"Please look at step {seq}."})
        out.extend(tool_pair(seq, command=f"cat file_{seq}.py", output=f"def f{seq}():\n    return {seq}\n"))
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"Step {seq} looks fine."}]})
    return out[:n]


def make_compaction(session: Session, *, activate: bool = True, **fields: Any) -> Compaction:
    now = timezone.now()
    fields.setdefault("reason", Reason.THRESHOLD)
    fields.setdefault("status", Status.SUCCEEDED)
    fields.setdefault("strategy", "extractive")
    fields.setdefault("first_summarized_seq", 1)
    fields.setdefault("last_summarized_seq", 8)
    fields.setdefault("first_kept_seq", 9)
    fields.setdefault("messages_summarized", 8)
    fields.setdefault("tokens_before", 167_094)
    fields.setdefault("tokens_after", 21_380)
    fields.setdefault("duration_ms", 3200)
    fields.setdefault("summary", "## Goal\nRefactor the parser.\n\n## Files\n- `parser.py`")
    fields.setdefault("summarizer_model", "extractive")
    if fields["status"] == Status.SUCCEEDED:
        fields.setdefault("finished_at", now - timedelta(minutes=2))
        fields.setdefault("activated_at", now - timedelta(minutes=2))
    compaction = Compaction.objects.create(session=session, **fields)
    if activate and compaction.status == Status.SUCCEEDED:
        session.active_compaction = compaction
        session.context_tokens = compaction.tokens_after or session.context_tokens
        session.save(update_fields=["active_compaction", "context_tokens"])
    return compaction
