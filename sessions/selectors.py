"""Reads for sessions and messages, always scoped to the caller."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from .models import Message, Session, SideCall


def session_list(
    *,
    user,
    agent: str | None = None,
    model: str | None = None,
    search: str | None = None,
    one_off: bool = False,
) -> QuerySet:
    """The caller's sessions; lone gateway calls no conversation continued only with `one_off`."""
    qs = Session.objects.filter(owner=user, deleted_at__isnull=True, one_off=one_off).select_related(
        "active_compaction"
    )
    if agent:
        qs = qs.filter(agent=agent)
    if model:
        qs = qs.filter(model=model)
    if search:
        qs = qs.filter(title__icontains=search)
    return qs.order_by("-last_activity_at", "-created_at")


def session_get(*, user, session_id, trashed: bool = False) -> Session:
    """The caller's session, or 404 (another owner's session is indistinguishable from none).
    A session in the trash is a 404 too, unless `trashed` asks for exactly such one (restore)."""
    return get_object_or_404(
        Session.objects.select_related("active_compaction"), pk=session_id, owner=user, deleted_at__isnull=not trashed
    )


def message_list(*, session: Session) -> QuerySet:
    """Full history in seq order; compaction never affects it."""
    return Message.objects.filter(session=session).order_by("seq")


def side_call_list(*, session: Session) -> QuerySet:
    """Calls made beside the session's conversation, newest first."""
    return SideCall.objects.filter(session=session).order_by("-created_at", "-id")
