"""Reads for sessions and messages, always scoped to the caller."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Max, Min, Q, QuerySet
from django.http import Http404

from compaction.selectors import Overlay

from .models import Message, Session, SideCall, ToolCall
from .services import Usage, served_context, session_usage


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
    try:
        return Session.objects.select_related("active_compaction").get(
            pk=session_id, owner=user, deleted_at__isnull=not trashed
        )
    except Session.DoesNotExist:
        raise Http404(session_not_found(session_id)) from None


def session_not_found(session_id) -> str:
    """The 404 an unknown (or another owner's) session id gets, everywhere in the API."""
    return f"session {session_id} not found"


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


# A session id as the dashboard shows it (the first 8 hex digits) or any longer piece of it.
MIN_ID_PREFIX = 8
# The same rule as id_prefix_problem, for the API schema (dashes anywhere, as in a printed id).
ID_PREFIX_PATTERN = r"^-*(?:[0-9a-fA-F]-*){8,32}$"
_HEX = re.compile(r"[0-9a-f]+")


def id_prefix_problem(prefix: str) -> str | None:
    """Why `prefix` cannot name sessions (None when it can): hex digits of an id, dashes allowed."""
    digits = prefix.strip().lower().replace("-", "")
    if not _HEX.fullmatch(digits or "-") or len(digits) > 32:
        return "must be the start of a session id: hex digits (0-9, a-f), dashes allowed"
    if len(digits) < MIN_ID_PREFIX:
        return f"give at least {MIN_ID_PREFIX} hex digits of the session id, got {len(digits)}"
    return None


def id_prefix_q(prefix: str) -> Q:
    """The sessions whose id starts with `prefix` (valid per id_prefix_problem), as a filter.

    A range on the primary key, not a string match: it uses the key's index, and orders the same
    on PostgreSQL (uuid, byte order) and SQLite (32 lowercase hex characters)."""
    digits = prefix.strip().lower().replace("-", "")
    return Q(pk__gte=uuid.UUID(digits.ljust(32, "0")), pk__lte=uuid.UUID(digits.ljust(32, "f")))


@dataclass(frozen=True)
class ContextTokens:
    """Our estimate of the served context, by part (the meter's figure is on top of it)."""

    system: int
    summary: int
    messages: int
    pruned_tool_results_saved: int  # stored − served of the pruned tool results


@dataclass(frozen=True)
class ContextView:
    """The LLM-ready history of a session and its figures. `messages` hold {role, content} only,
    so they can be sent to the provider as they are; `seqs` names each one's stored message
    (None for the summary). The API's JSON is `as_dict()`."""

    system: str
    messages: list[dict[str, Any]]
    seqs: list[int | None]
    tokens: int  # the meter's figure (provider's scale)
    estimated_tokens: int
    breakdown: ContextTokens
    context_window: int
    usage_ratio: float | None
    trigger_tokens: int
    active_compaction: Overlay | None
    usage: Usage

    def as_dict(self) -> dict[str, Any]:
        b = self.breakdown
        return {
            "system": self.system,
            "messages": self.messages,
            "seqs": self.seqs,
            "tokens": self.tokens,
            "estimated_tokens": self.estimated_tokens,
            "breakdown": {
                "system": b.system,
                "summary": b.summary,
                "messages": b.messages,
                "pruned_tool_results_saved": b.pruned_tool_results_saved,
            },
            "context_window": self.context_window,
            "usage_ratio": self.usage_ratio,
            "trigger_tokens": self.trigger_tokens,
            "active_compaction": self.active_compaction.as_dict() if self.active_compaction else None,
            "usage": self.usage.as_dict(),
        }


def context_build(*, session: Session) -> ContextView:
    """The served context, the active summary first as a user message, then the kept messages."""
    view = served_context(session)
    usage = session_usage(session)
    messages: list[dict[str, Any]] = []
    seqs: list[int | None] = []
    if view.summary_text:
        messages.append({"role": "user", "content": view.summary_text})
        seqs.append(None)
    for m in view.messages:
        if m.dropped:  # only whitespace-only text: the provider rejects it
            continue
        messages.append({"role": m.role, "content": m.content})
        seqs.append(m.seq)
    return ContextView(
        system=view.system,
        messages=messages,
        seqs=seqs,
        tokens=usage.tokens,
        estimated_tokens=view.tokens,
        breakdown=ContextTokens(
            system=view.system_tokens,
            summary=view.summary_tokens,
            messages=sum(m.tokens for m in view.messages),
            pruned_tool_results_saved=sum(m.stored_tokens - m.tokens for m in view.messages if m.pruned),
        ),
        context_window=usage.context_window,
        usage_ratio=usage.usage_ratio,
        trigger_tokens=usage.trigger_tokens,
        active_compaction=view.overlay,
        usage=usage,
    )
