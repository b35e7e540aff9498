"""Dashboard reads. Every query is scoped to what the caller may see (own sessions; staff: all)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    UUIDField,
    Value,
)
from django.shortcuts import get_object_or_404

from compaction.core import prune
from compaction.models import IN_FLIGHT, Compaction, Event, EventKind, Status
from compaction.review import rerun_of
from sessions import selectors
from sessions import services as session_services
from sessions.models import Message, Session, SideCall, ToolCall, UsageSample

from .present import Usage, compaction_line

LIST_PAGE_SIZE = 25
MESSAGES_PAGE_SIZE = 100

STATUS_CHOICES = [
    ("", "Any status"),
    ("compacting", "Compacting"),
    ("over", "Over trigger"),
    ("near", "Near trigger"),
    ("ok", "OK"),
]
SIDE_CALLS_SHOWN = 20
SORT_CHOICES = [("activity", "Last activity"), ("usage", "Usage (highest first)")]


def sessions_visible(*, user, trashed: bool = False) -> QuerySet[Session]:
    """Sessions this user may see (staff: everyone's); the trash is its own list."""
    qs = Session.objects.filter(deleted_at__isnull=not trashed)
    return qs if user.is_staff else qs.filter(owner=user)


def session_get_visible(*, user, session_id: UUID) -> Session:
    return get_object_or_404(
        sessions_visible(user=user).select_related("owner", "active_compaction", "parent"), id=session_id
    )


def session_short_id_matches(*, user, prefix: str, limit: int = 2) -> list[Session]:
    """Up to `limit` visible sessions whose id starts with `prefix` (a valid id prefix)."""
    return list(sessions_visible(user=user).filter(selectors.id_prefix_q(prefix)).only("id")[:limit])


def session_children(*, user, session: Session) -> list[Session]:
    """The session's subagents this user may see, oldest first (one query)."""
    return list(sessions_visible(user=user).filter(parent=session).order_by("created_at", "id")[:200])


def compaction_get_visible(*, session: Session, compaction_id: UUID) -> Compaction:
    return get_object_or_404(
        Compaction.objects.select_related("session", "based_on", "reviewed_by"), id=compaction_id, session=session
    )


def session_usage_view(session: Session) -> Usage:
    """The same figures the API and the trigger use (sessions.services), shaped for drawing.

    session_usage reads only the row (running counters and calibration), so list rows and the
    gauge agree at no query per row."""
    usage = session_services.session_usage(session)
    return Usage(tokens=usage.tokens, context_window=usage.context_window, trigger_tokens=usage.trigger_tokens)


@dataclass
class SessionRow:
    session: Session
    usage: Usage
    running: bool
    last_compaction: str  # "167k → 21k · 2 min ago" for the active compaction, or ""


def session_list_page(
    *,
    user,
    q: str = "",
    model: str = "",
    status: str = "",
    sort: str = "activity",
    single: bool = False,
    page: Any = 1,
) -> Page:
    """One page of SessionRow. Bounded queries whatever the number of sessions.

    Status "over"/"near"/"ok" and sorting by usage read the meter columns the write path
    stores on each session (usage_level, usage_percent; indexed with the owner), so the
    database filters, sorts and pages: no session's config or usage is computed in Python
    beyond the page's rows.
    """
    in_flight = Compaction.objects.filter(session=OuterRef("pk"), status__in=IN_FLIGHT)
    # Lone calls the gateway could not tie to a conversation are listed only when asked for.
    qs = sessions_visible(user=user).filter(one_off=single).annotate(running=Exists(in_flight))
    if q:
        # The search box also takes a session id's start, as the pages show ids (8 hex digits).
        by_id = selectors.id_prefix_q(q) if selectors.id_prefix_problem(q) is None else Q(pk=None)
        qs = qs.filter(Q(title__icontains=q) | Q(agent__icontains=q) | by_id)
    if model:
        qs = qs.filter(model=model)
    if status == "compacting":
        qs = qs.filter(running=True)
    elif status in {"over", "near", "ok"}:
        qs = qs.filter(usage_level=status)
    order = ("-usage_percent", "-last_activity_at", "id") if sort == "usage" else ("-last_activity_at", "id")
    ordered = qs.select_related("owner", "active_compaction").order_by(*order)
    page_obj = Paginator(ordered, LIST_PAGE_SIZE).get_page(page)
    sessions = list(page_obj.object_list)
    page_obj.object_list = [
        SessionRow(
            session=s,
            usage=session_usage_view(s),
            running=s.running,
            last_compaction=compaction_line(s.active_compaction) if s.active_compaction else "",
        )
        for s in sessions
    ]
    return page_obj


def side_calls(*, session: Session, limit: int = SIDE_CALLS_SHOWN) -> list[SideCall]:
    """The session's newest side calls (Claude Code's title and topic checks)."""
    return list(SideCall.objects.filter(session=session).order_by("-created_at", "-id")[:limit])


def model_choices(*, user) -> list[str]:
    return list(
        sessions_visible(user=user).exclude(model="").order_by("model").values_list("model", flat=True).distinct()
    )


# --- live pages: what changed since the page was drawn ----------------------------------------
#
# The session page and the list poll; an unchanged page answers 204 from these fingerprints
# (one aggregate query each) instead of rendering gauge, chart, history or table. Every write
# that changes what those show moves one of the figures below: appends and usage reports set
# the session's updated_at/last_seq/usage columns, activation and undo its active compaction,
# a job's progress its created/started/finished times, a review its reviewed_at.

_COMPACTION_MARKS = {
    "compactions": Count("id"),
    "created": Max("created_at"),
    "started": Max("started_at"),
    "finished": Max("finished_at"),
    "reviewed": Max("reviewed_at"),
    "activated": Max("activated_at"),
}


def _fingerprint(*parts: Any) -> str:
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def session_overview_version(*, session: Session) -> str:
    """Changes whenever the session page's overview (gauge, chart, history) would."""
    marks = Compaction.objects.filter(session=session).aggregate(**_COMPACTION_MARKS)
    return _fingerprint(
        session.updated_at,
        session.last_seq,
        session.usage_tokens,
        session.active_compaction_id,
        session.reported_input_tokens,
        sorted(marks.items()),
    )


def session_list_version(*, user) -> str:
    """Changes whenever any row of the user's session list could (any filter, sort or page)."""
    visible = sessions_visible(user=user)
    rows = visible.aggregate(
        sessions=Count("id"), updated=Max("updated_at"), activity=Max("last_activity_at"), seq=Sum("last_seq")
    )
    marks = Compaction.objects.filter(session__in=visible).aggregate(**_COMPACTION_MARKS)
    return _fingerprint(sorted(rows.items()), sorted(marks.items()))


def compaction_history(*, session: Session) -> list[Compaction]:
    return list(Compaction.objects.filter(session=session).select_related("reviewed_by").order_by("-created_at"))


def reverted_ids(*, session: Session) -> set:
    """Compactions that were undone (their COMPACTION_REVERTED events)."""
    return set(
        Event.objects.filter(session=session, kind=EventKind.COMPACTION_REVERTED).values_list(
            "compaction_id", flat=True
        )
    )


def effective_compactions(*, session: Session, compactions: list[Compaction]) -> list[Compaction]:
    """The active compaction and its based_on ancestors (what shaped today's context), oldest first."""
    by_id = {c.id: c for c in compactions}
    chain: list[Compaction] = []
    current = by_id.get(session.active_compaction_id) if session.active_compaction_id else None
    while current is not None and current not in chain:
        chain.append(current)
        current = by_id.get(current.based_on_id) if current.based_on_id else None
    return list(reversed(chain))


# The detail page lists at most this many pruned outputs (a long session prunes thousands).
PRUNED_OUTPUTS_SHOWN = 500


def compaction_pruned_outputs(*, session: Session, compaction: Compaction) -> list[prune.PrunedOutput]:
    """The tool outputs a prune serves as placeholders: below its boundary, after its cut."""
    if compaction.prune_before_seq is None:
        return []
    below = Message.objects.filter(
        session=session, seq__gte=compaction.first_kept_seq or 1, seq__lt=compaction.prune_before_seq
    )
    # Only messages carrying tool results are read in full (their ids first: small rows).
    results = {seq: ids for seq, ids in below.values_list("seq", "tool_result_ids") if ids}
    names = dict(
        ToolCall.objects.filter(
            session=session, tool_use_id__in=[i for ids in results.values() for i in ids]
        ).values_list("tool_use_id", "name")
    )
    rows = below.filter(seq__in=list(results)).order_by("seq").values_list("seq", "content")
    found = prune.pruned_outputs(
        rows,
        tool_names=names,
        tokenizer=session_services.session_tokenizer(session),
    )
    return found[:PRUNED_OUTPUTS_SHOWN]


def compaction_rerun_source(*, session: Session, compaction: Compaction) -> Compaction | None:
    """The compaction this one re-ran from the admin (`rerun_of`), in the same session."""
    original = rerun_of(compaction)
    if not original:
        return None
    return Compaction.objects.filter(session=session, pk=original).first()


def compaction_reruns(*, session: Session, compaction: Compaction) -> list[Compaction]:
    """Compactions that re-ran this one (newest first)."""
    return list(Compaction.objects.filter(session=session, rerun_of=compaction).order_by("-created_at"))


# The chart draws at most chart.MAX_POINTS points; its series is read in at most this many
# rows, whatever the session's length (reading and parsing every message's timestamp cost
# ~90 ms at 10,000 messages).
SERIES_MAX_ROWS = 1_200


def message_token_series(*, session: Session) -> list[tuple[int, int, Any]]:
    """(seq, tokens, created_at) in seq order, bounded: up to SERIES_MAX_ROWS messages one row
    each; beyond, consecutive messages summed into equal seq buckets, each standing at its last
    seq and time (a compaction's drop then lands on its bucket's end, < 1 px at chart width)."""
    rows = Message.objects.filter(session=session)
    if session.last_seq <= SERIES_MAX_ROWS:
        return list(rows.order_by("seq").values_list("seq", "token_count", "created_at"))
    size = -(-session.last_seq // SERIES_MAX_ROWS)
    buckets = (
        rows.annotate(bucket=ExpressionWrapper((F("seq") - 1) / size, output_field=IntegerField()))
        .values("bucket")
        .annotate(last=Max("seq"), tokens=Sum("token_count"), at=Max("created_at"))
        .order_by("bucket")
        .values_list("last", "tokens", "at")
    )
    return list(buckets)


@dataclass
class UsageHistory:
    """The usage history the chart draws (UsageSample rows, read by usage_history)."""

    # (seq, tokens) per usage report: the provider's figure, or the meter's prediction where the
    # report was flagged; at most SERIES_MAX_ROWS rows.
    reports: list[tuple[int, int]]
    # Compaction id → the last seq its tokens_after counted (its "after" sample).
    measured_at: dict[Any, int]


def usage_history(*, session: Session, compactions: list[Compaction]) -> UsageHistory:
    """The session's usage reports and its compactions' "after" points, in one query and bounded
    like message_token_series: beyond SERIES_MAX_ROWS seqs, one report row per seq bucket holding
    its highest figure (the peak survives), at the bucket's last report."""
    samples = UsageSample.objects.filter(session=session)
    ids = [c.pk for c in compactions]
    bucket = 1 if session.last_seq <= SERIES_MAX_ROWS else -(-session.last_seq // SERIES_MAX_ROWS)
    reports = (
        samples.filter(kind=UsageSample.Kind.REPORT)
        .annotate(bucket=ExpressionWrapper((F("seq") - 1) / bucket, output_field=IntegerField()))
        .values("bucket")
        .annotate(last=Max("seq"), peak=Max("tokens"))
        .order_by()
        .values_list("last", "peak", Value(None, output_field=UUIDField()))
    )
    afters = (
        samples.filter(kind=UsageSample.Kind.COMPACTION, compaction__in=ids)
        .values("compaction_id")
        .annotate(last=Max("seq"), peak=Max("tokens"))
        .order_by()
        .values_list("last", "peak", "compaction_id")
    )
    history = UsageHistory(reports=[], measured_at={})
    for seq, tokens, compaction_id in reports.union(afters, all=True) if ids else reports:
        if compaction_id is None:
            history.reports.append((seq, tokens))
        else:
            history.measured_at[compaction_id] = seq
    history.reports.sort()
    return history


def messages_page(*, session: Session, start: int, limit: int = MESSAGES_PAGE_SIZE) -> list[Message]:
    return list(Message.objects.filter(session=session, seq__gte=start).order_by("seq")[:limit])


def succeeded(compactions: list[Compaction]) -> list[Compaction]:
    return [c for c in compactions if c.status == Status.SUCCEEDED]
