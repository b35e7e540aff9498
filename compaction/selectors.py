"""Compaction queries (reads only). Writes live in compaction.services."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from compaction.models import IN_FLIGHT, Compaction, Event
from sessions.models import Session

EVENTS_PAGE_SIZE = 200


@dataclass(frozen=True)
class Overlay:
    """The active compaction as the message store serves it: where the kept messages start,
    below which tool results are pruned, how the kept messages are served, and the summary
    served before them."""

    id: Any
    first_kept_seq: int | None
    prune_before_seq: int | None
    kept_plan: dict[str, Any]  # compaction.core.kept.KeptPlan, as JSON
    snapshot_seq: int | None
    summary: str
    turn_prefix_summary: str
    summary_message_tokens: int | None  # the summary as served, counted with summary_tokenizer
    summary_tokenizer: str
    # What the context's `active_compaction` reports besides.
    reason: str
    strategy: str
    summary_tokens: int
    messages_summarized: int
    tokens_before: int | None
    tokens_after: int | None
    activated_at: datetime | None

    @property
    def kept_from(self) -> int:
        """The first seq in context."""
        return self.first_kept_seq or 1

    @property
    def prune_below(self) -> int:
        """Tool results of messages below this seq are served pruned (0: none)."""
        return self.prune_before_seq or 0

    @property
    def has_summary(self) -> bool:
        return bool(self.summary.strip())

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "reason": self.reason,
            "strategy": self.strategy,
            "summary_tokens": self.summary_tokens,
            "first_kept_seq": self.first_kept_seq,
            "prune_before_seq": self.prune_before_seq,
            "messages_summarized": self.messages_summarized,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "activated_at": self.activated_at.isoformat() if self.activated_at else None,
        }


# The columns of an Overlay: a read that locks the session and joins its active compaction
# loads these (`active_compaction__<name>`) and nothing else of the compaction row.
OVERLAY_FIELDS = tuple(f.name for f in fields(Overlay))


def active_overlay(session: Session) -> Overlay | None:
    """The session's active compaction as an Overlay (None when nothing is compacted). Reads the
    joined row when the session was loaded with select_related("active_compaction")."""
    active = session.active_compaction
    if active is None:
        return None
    return Overlay(**{name: getattr(active, name) for name in OVERLAY_FIELDS})


def active_tool_results_pruned(session: Session) -> int | None:
    """How many tool results the active compaction's prune trims, as it recorded (None: no
    prune, or not recorded)."""
    active = session.active_compaction
    if active is None or not active.prune_before_seq:
        return None
    count = (active.usage or {}).get("tool_results_pruned")
    return count if isinstance(count, int) else None


def compaction_list(*, session: Session) -> QuerySet[Compaction]:
    return Compaction.objects.filter(session=session).order_by("-created_at")


def compaction_get(*, session: Session, compaction_id) -> Compaction:
    try:
        return Compaction.objects.get(id=compaction_id, session=session)
    except Compaction.DoesNotExist:
        raise Http404(f"compaction {compaction_id} not found in session {session.pk}") from None


def compaction_in_flight(*, session_id) -> Compaction | None:
    return Compaction.objects.filter(session_id=session_id, status__in=IN_FLIGHT).first()


def event_list_after(*, session: Session, after: int = 0, limit: int = EVENTS_PAGE_SIZE) -> list[Event]:
    return list(Event.objects.filter(session=session, id__gt=after).order_by("id")[:limit])
