"""The message timeline: messages with their display blocks, compaction boundaries inline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compaction.core.kept import plan_from_json
from compaction.models import Compaction, Status
from sessions.models import Message

from .present import Block, boundary_line, boundary_seq, is_prune, message_blocks


@dataclass
class TimelineItem:
    kind: str  # "message" | "boundary" | "region"
    message: Message | None = None
    blocks: list[Block] = field(default_factory=list)
    state: str = ""  # "" | "compacted" | "pruned"
    compaction: Compaction | None = None
    line: str = ""
    active: bool = False
    prune: bool = False  # a prune-only boundary: no summary to link to


def message_state(message: Message, active: Compaction | None, trimmed: frozenset[int] = frozenset()) -> str:
    """How the served context treats this message under the active compaction (`trimmed`: the
    seqs its kept plan serves with some tool output trimmed or as a pointer)."""
    if active is None:
        return ""
    if active.first_kept_seq is not None and message.seq < active.first_kept_seq:
        return "compacted"
    if active.prune_before_seq is not None and message.seq < active.prune_before_seq and message.tool_result_ids:
        return "pruned"
    return "pruned" if message.seq in trimmed else ""


def build_timeline(
    *, messages: list[Message], compactions: list[Compaction], active: Compaction | None, first_page: bool
) -> list[TimelineItem]:
    boundaries: dict[int, list[Compaction]] = {}
    for compaction in compactions:
        at = boundary_seq(compaction)
        if compaction.status == Status.SUCCEEDED and at is not None:
            boundaries.setdefault(at, []).append(compaction)
    items: list[TimelineItem] = []
    trimmed = frozenset(plan_from_json(active.kept_plan).edits) if active is not None else frozenset()
    if (
        first_page
        and messages
        and active is not None
        and active.first_kept_seq
        and messages[0].seq < active.first_kept_seq
    ):
        # Say once, where the compacted region starts on this page, what it means.
        items.append(
            TimelineItem(
                kind="region",
                compaction=active,
                line=(
                    f"Messages before #{active.first_kept_seq} are compacted: the model sees the summary "
                    "instead. They are kept here in full."
                ),
            )
        )
    for message in messages:
        for compaction in sorted(boundaries.get(message.seq, []), key=lambda c: c.created_at):
            items.append(
                TimelineItem(
                    kind="boundary",
                    compaction=compaction,
                    line=boundary_line(compaction),
                    active=active is not None and compaction.pk == active.pk,
                    prune=is_prune(compaction),
                )
            )
        items.append(
            TimelineItem(
                kind="message",
                message=message,
                blocks=message_blocks(message.content),
                state=message_state(message, active, trimmed),
            )
        )
    return items


def fallbacks_text(compaction: Compaction) -> str:
    parts: list[str] = []
    for item in compaction.fallbacks or []:
        if isinstance(item, dict):
            parts.append(f"{item.get('strategy', '?')}: {item.get('reason', '')}".strip())
        else:
            parts.append(str(item))
    return "; ".join(parts)


def _usage_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, list):
        return ", ".join(_usage_value(v) for v in value)
    return str(value)


def _usage_label(key: Any) -> str:
    """ "duration_ms" → "Duration (ms)", "input_tokens" → "Input tokens"."""
    text = str(key).replace("_", " ").strip()
    if text.endswith(" ms"):
        text = text[:-3] + " (ms)"
    return text[:1].upper() + text[1:]


def usage_items(usage: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Summarizer usage as table rows (figure, part, value): nested figures (e.g. the duration
    of each strategy tried) get one row per part instead of "duration ms anthropic 0, …"."""
    rows: list[tuple[str, str, str]] = []
    for key, value in (usage or {}).items():
        label = _usage_label(key)
        if isinstance(value, dict) and value:
            for index, (part, inner) in enumerate(value.items()):
                rows.append((label if index == 0 else "", str(part), _usage_value(inner)))
        else:
            rows.append((label, "", _usage_value(value) if not isinstance(value, dict) else "—"))
    return rows
