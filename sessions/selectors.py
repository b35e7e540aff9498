"""Reads for sessions and messages, always scoped to the caller."""

from __future__ import annotations

from django.db.models import Max, Min, Q, QuerySet
from django.shortcuts import get_object_or_404

from .models import Message, Session, SideCall, ToolCall


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


def message_list(*, session: Session, from_seq: int | None = None, to_seq: int | None = None) -> QuerySet:
    """Full history in seq order; compaction never affects it. With a range, the messages from
    `from_seq` to `to_seq` (both included), widened so that every tool call in it comes with its
    result and every result with its call (`message_range_whole_pairs`)."""
    qs = Message.objects.filter(session=session).order_by("seq")
    if from_seq is None and to_seq is None:
        return qs
    low, high = message_range_whole_pairs(session=session, from_seq=from_seq or 1, to_seq=to_seq)
    qs = qs.filter(seq__gte=low)
    return qs if high is None else qs.filter(seq__lte=high)


def message_range_whole_pairs(*, session: Session, from_seq: int, to_seq: int | None) -> tuple[int, int | None]:
    """The smallest range holding `from_seq..to_seq` in which no tool call is without its result
    nor result without its call (a call never answered stays as it is). Widening can take in
    more pairs, so it repeats until nothing moves; each round is one indexed aggregate."""
    low, high = from_seq, to_seq
    while True:
        in_range = Q(use_seq__gte=low) if high is None else Q(use_seq__gte=low, use_seq__lte=high)
        answered_in_range = Q(result_seq__gte=low) if high is None else Q(result_seq__gte=low, result_seq__lte=high)
        bounds = ToolCall.objects.filter(Q(session=session) & (in_range | answered_in_range)).aggregate(
            low=Min("use_seq"), high=Max("result_seq")
        )
        new_low = min(low, bounds["low"] or low)
        new_high = high if high is None else max(high, bounds["high"] or high)
        if (new_low, new_high) == (low, high):
            return low, high
        low, high = new_low, new_high


def side_call_list(*, session: Session) -> QuerySet:
    """Calls made beside the session's conversation, newest first."""
    return SideCall.objects.filter(session=session).order_by("-created_at", "-id")
