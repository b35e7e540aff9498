"""SWE-agent trajectory (.traj) → Anthropic messages.

`history[]` holds system/user/assistant/tool messages. Function-calling runs carry
`tool_calls [{id, function {name, arguments}}]` on assistant messages and `tool_call_ids`
on tool messages; older text-format runs put the command in the assistant's `action` and
the observation in the next user message. Both become tool_use / tool_result pairs, so the
service sees (and can cut around) the same structure either way.

Demonstrations (a solved example run SWE-agent shows the model before its task, marked
`is_demo`) join the system prompt: they are fixed prompt material the model keeps seeing,
not the conversation, and read as messages they would make another issue look like the
task and the example's actions look like work done. A run's last action (`submit`) is not
answered in `history`; its observation (the submitted patch) is in `trajectory[-1]`.

Provenance: the first user message is the task, which SWE-agent writes into its template
("We're currently solving the following issue … ISSUE:", then INSTRUCTIONS and tips): the
issue statement is the person's (what whoever started the run asked for), the template
around it the harness's, each in a block of its own. Every later user-role text is the
environment's (observations, format reminders): the harness's.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE
from compaction.core.provenance import HARNESS
from compaction.core.transcripts.base import (
    MAX_JSON_DEPTH,
    ImportedTranscript,
    TranscriptError,
    assemble,
    first_line,
    loads_embedded,
    too_deep,
)

# json.load gave up (RecursionError): deeper than MAX_JSON_DEPTH for sure.
_TOO_DEEP: object = object()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = loads_embedded(raw)
        except ValueError:
            return {"raw": raw}
    return raw if isinstance(raw, dict) else {}


def _model(traj: dict[str, Any]) -> str | None:
    config = traj.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads_embedded(config)
        except ValueError:
            config = None
    if isinstance(config, dict):
        name = ((config.get("agent") or {}).get("model") or {}).get("name")
        if isinstance(name, str):
            return name
    return None


def read_swe_agent(path: str | Path) -> ImportedTranscript:
    """Read one .traj file. System messages become `system_prompt` (not messages)."""
    with open(path, encoding="utf-8-sig") as handle:
        try:
            traj = json.load(handle)
        except json.JSONDecodeError as exc:
            raise TranscriptError(f"not JSON ({exc.msg}, column {exc.colno})", line=exc.lineno) from None
        except RecursionError:
            traj = _TOO_DEEP
    if traj is _TOO_DEEP or too_deep(traj):
        raise TranscriptError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", line=1)
    return parse_swe_agent(traj)


def _demonstration_text(item: dict[str, Any], text: str) -> str:
    """A demonstration entry as prompt text: its content, and its action when the content
    does not already show it (demos put in the history one message at a time)."""
    action = item.get("action")
    if isinstance(action, str) and action.strip() and action.strip() not in text:
        return f"{text}\n{action.strip()}".strip()
    return text


def _final_observation(traj: dict[str, Any], last: dict[str, Any]) -> str | None:
    """The observation of the run's last action, which `history` ends without (the agent
    stopped there, usually on `submit`): the trajectory's last step, when its action is
    the same one."""
    steps = traj.get("trajectory")
    step = steps[-1] if isinstance(steps, list) and steps and isinstance(steps[-1], dict) else None
    calls = [b for b in last.get("content", []) if isinstance(b, dict) and b.get("type") == TOOL_USE]
    action = str((calls[-1].get("input") or {}).get("command", "")).strip() if calls else ""
    if step is None or not action or str(step.get("action", "")).strip() != action:
        return None
    observation = observation if isinstance(observation := step.get("observation"), str) else ""
    info = info if isinstance(info := traj.get("info"), dict) else {}
    if not observation.strip() and info.get("exit_status") == "submitted" and isinstance(info.get("submission"), str):
        # The run ended on the submission without printing it: what was submitted answers it.
        observation = info["submission"]
    return observation if observation.strip() else None  # nothing recorded: left unanswered, as the agent left it


def _result(tool_use_id: str, content: Any) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": TOOL_RESULT, "tool_use_id": tool_use_id, "content": content}]}


def _assistant_blocks(
    item: dict[str, Any], text: str, number: int, stats: Counter[str]
) -> tuple[list[dict[str, Any]], str | None]:
    """An assistant item's blocks, and the id given to its text-format action (which the next
    user item, its observation, answers), if it has one."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    tool_calls = item.get("tool_calls") or []
    for call in tool_calls:
        function = call.get("function") or {}
        blocks.append(
            {
                "type": TOOL_USE,
                "id": call.get("id") or f"swe_call_{number}",
                "name": function.get("name") or "unknown",
                "input": _arguments(function.get("arguments")),
            }
        )
    action = item.get("action")
    if tool_calls or not isinstance(action, str) or not action.strip():
        return blocks, None
    action_id = f"swe_action_{number}"
    blocks.append(
        {"type": TOOL_USE, "id": action_id, "name": action.strip().split()[0], "input": {"command": action.strip()}}
    )
    stats["text_actions_as_tool_calls"] += 1
    return blocks, action_id


def parse_swe_agent(traj: Any) -> ImportedTranscript:
    """Like `read_swe_agent`, from the decoded document."""
    stats: Counter[str] = Counter()
    history = traj.get("history") if isinstance(traj, dict) else None
    if not isinstance(history, list):
        raise TranscriptError("not a SWE-agent trajectory: no `history` list", line=1)
    stats["history_items"] = len(history)

    raw: list[dict[str, Any]] = []
    system_parts: list[str] = []
    pending_action_id: str | None = None  # text-format action waiting for its observation
    task: str | None = None  # the first user message's text
    for number, item in enumerate(history):
        if not isinstance(item, dict):
            stats["skipped_history_items_not_objects"] += 1
            continue
        role = item.get("role")
        text = _text(item.get("content"))
        if role == "system":
            system_parts.append(text)
            continue
        if item.get("is_demo"):
            system_parts.append(_demonstration_text(item, text))
            stats["demonstration_messages_moved_to_system_prompt"] += 1
            continue
        if role == "assistant":
            blocks, pending_action_id = _assistant_blocks(item, text, number, stats)
            raw.append({"role": "assistant", "content": blocks})
        elif role == "tool":
            raw.extend(_result(tool_id, text) for tool_id in item.get("tool_call_ids") or [])
            if not item.get("tool_call_ids"):
                stats["tool_messages_without_ids"] += 1
                raw.append({"role": "user", "content": text, "provenance": HARNESS})
        elif role == "user":
            if pending_action_id is not None:
                raw.append(_result(pending_action_id, text))
                pending_action_id = None
            else:
                raw.append({"role": "user", "content": text, **({"provenance": HARNESS} if task is not None else {})})
                task = text if task is None else task
        else:
            stats[f"skipped_role_{role}"] += 1
    if pending_action_id is not None:
        final = _final_observation(traj, raw[-1])
        if final is not None:
            raw.append(_result(pending_action_id, final))
            stats["final_observation_from_trajectory"] += 1

    messages, reported, _, _ = assemble(raw, stats)
    return ImportedTranscript(
        messages=messages,
        title=first_line(task.split("ISSUE:", 1)[-1] if task else ""),
        model=_model(traj),
        reported_context_tokens=reported,
        source="swe-agent",
        session_id=None,
        stats=stats,
        system_prompt="\n\n".join(p for p in system_parts if p.strip()),
    )
