"""Conversation builders for the engine tests: real-looking turns with tool pairs."""

from __future__ import annotations

from typing import Any

from compaction import services as compaction_services
from compaction.models import Compaction
from sessions import services as session_services
from sessions.models import Session
from sessions.selectors import context_build

FILLER = (
    "The parser reads the token stream, builds the syntax tree and reports the first error with its "
    "line and column so the caller can show it next to the source. "
)


def turn(index: int, *, tools: int = 2, size: int = 6) -> list[dict[str, Any]]:
    """One user request followed by `tools` tool_use/tool_result pairs and a final answer."""
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": f"Request {index}: update src/module_{index}.py so step {index} passes. {FILLER * 2}",
        }
    ]
    for t in range(tools):
        tool_id = f"toolu_{index}_{t}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading the file for step {index}.{t}. {FILLER}"},
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": "Read",
                        "input": {"file_path": f"/repo/src/module_{index}_{t}.py"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": f"line {t}: " + FILLER * size}],
            }
        )
    messages.append({"role": "assistant", "content": f"Step {index} is done. {FILLER}"})
    return messages


def conversation(turns: int, *, start: int = 0, tools: int = 2, size: int = 6) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index in range(start, start + turns):
        out.extend(turn(index, tools=tools, size=size))
    return out


def make_session(owner, *, window: int = 20_000, **settings: Any):
    compaction_settings = {"keep_recent_tokens": 2_000, "reserve_tokens": 2_000, "auto_compact": False}
    compaction_settings.update(settings)
    return session_services.session_create(
        owner=owner,
        title="engine test",
        agent="test",
        model="",
        context_window=window,
        compaction_settings=compaction_settings,
    )


def append(session, messages: list[dict[str, Any]]):
    # As the API appends: the auto-compaction decision follows the append's commit.
    result = compaction_services.messages_append_then_compact(session=session, messages=messages)
    session.refresh_from_db()
    return result


def served_seqs(session) -> list[int]:
    session.refresh_from_db()
    context = context_build(session=session).as_dict()
    return [seq for seq in context["seqs"] if seq is not None]


def orphan_tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """tool_result ids in a served context whose tool_use is not before them in that context."""
    seen: set[str] = set()
    orphans: list[str] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                seen.add(block["id"])
            elif block.get("type") == "tool_result" and block["tool_use_id"] not in seen:
                orphans.append(block["tool_use_id"])
    return orphans


def replay_claude_code_session(owner, path, **fields: Any):
    """A session replayed from a real Claude Code transcript up to Claude Code's own first compaction,
    reporting each call's recorded usage (so the calibration is fitted on real reports), with
    auto-compaction off. Returns (session, the transcript's messages as the API takes them, the
    index of Claude Code's boundary)."""
    from compaction.core.transcripts.claude_code import read_claude_code

    transcript = read_claude_code(path)
    messages = compaction_services.transcript_messages_for_api(transcript.messages)
    boundary = transcript.compactions[0]["before_message_index"]
    fields.setdefault("title", path.stem[:8])
    session = session_services.session_create(
        owner=owner,
        agent="claude-code",
        model=transcript.model or "",
        compaction_settings={"auto_compact": False},
        **fields,
    )
    result = compaction_services.transcript_replay(session=session, messages=messages[:boundary])
    assert result.reports > 50, result
    return session, messages, boundary


def compaction_active_chain(*, session: Session) -> list[Compaction]:
    """The active compaction and the ones it was based on, newest first."""
    chain: list[Compaction] = []
    seen: set = set()
    current = session.active_compaction
    while current is not None and current.id not in seen:
        chain.append(current)
        seen.add(current.id)
        current = current.based_on
    return chain
