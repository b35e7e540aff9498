"""Builders and assertions shared by the API tests."""

from __future__ import annotations

from typing import Any

from sessions.models import Message, Session, ToolCall


def url(session: Session, tail: str = "") -> str:
    return f"/api/v1/sessions/{session.pk}/{tail}"


def tool_use(tool_id: str, name: str = "Bash", command: str = "ls", text: str | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": {"command": command}})
    return {"role": "assistant", "content": blocks}


def tool_result(tool_id: str, output: str = "ok", **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output, **extra}]}


def snapshot(session: Session) -> dict[str, Any]:
    """Everything an append may change, to assert a rejected request changed nothing."""
    session.refresh_from_db()
    return {
        "messages": list(Message.objects.filter(session=session).values_list("seq", "role", "content")),
        "tool_calls": list(
            ToolCall.objects.filter(session=session).order_by("id").values_list("tool_use_id", "use_seq", "result_seq")
        ),
        "session": (
            session.last_seq,
            session.message_count,
            session.total_message_tokens,
            session.context_tokens,
            session.reported_input_tokens,
        ),
    }
