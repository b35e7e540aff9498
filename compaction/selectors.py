"""Compaction queries (reads only). Writes live in compaction.services."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from compaction.models import IN_FLIGHT, Compaction, Event
from sessions.models import Session

EVENTS_PAGE_SIZE = 200


def compaction_list(*, session: Session) -> QuerySet[Compaction]:
    return Compaction.objects.filter(session=session).order_by("-created_at")


def compaction_get(*, session: Session, compaction_id) -> Compaction:
    try:
        return Compaction.objects.get(id=compaction_id, session=session)
    except Compaction.DoesNotExist:
        raise Http404(f"compaction {compaction_id} not found in session {session.pk}") from None


def compaction_in_flight(*, session_id) -> Compaction | None:
    return Compaction.objects.filter(session_id=session_id, status__in=IN_FLIGHT).first()


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


def event_list_after(*, session: Session, after: int = 0, limit: int = EVENTS_PAGE_SIZE) -> list[Event]:
    return list(Event.objects.filter(session=session, id__gt=after).order_by("id")[:limit])
