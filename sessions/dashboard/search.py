"""The dashboard's history search: a session's (its page's search box) and every session of the
user (the list's). A hit links to its message in the session's timeline, highlighted."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from sessions.search import MAX_LIMIT, SearchHit, history_search
from sessions.search_text import MARK_CLOSE, MARK_OPEN, QueryError

from . import queries

STATUS_LABELS = {
    "verbatim": "in context",
    "pruned": "output pruned",
    "summarized": "in summary",
    "dropped": "cut from context",
}
KIND_LABELS = {"text": "text", "tool_call": "tool call", "tool_result": "tool result", "thinking": "thinking"}
# Messages shown above the hit when the timeline opens on it, so it reads in its context.
LEAD_MESSAGES = 2


@dataclass(frozen=True)
class HitRow:
    hit: SearchHit
    parts: list[tuple[str, bool]]  # the snippet in pieces, True where a match is
    url: str
    status: str
    kind: str


def snippet_parts(hit: SearchHit) -> list[tuple[str, bool]]:
    """The snippet cut at its highlights, the markers left out (the template marks the pieces)."""
    text, parts, cursor = hit.snippet, [], 0
    for start, end in hit.highlights:
        parts.append((text[cursor : start - len(MARK_OPEN)], False))
        parts.append((text[start:end], True))
        cursor = end + len(MARK_CLOSE)
    parts.append((text[cursor:], False))
    return [(piece, marked) for piece, marked in parts if piece]


def hit_url(hit: SearchHit) -> str:
    base = reverse("dashboard:session-detail", args=[hit.session_id])
    block = "" if hit.block_index is None else f"&b={hit.block_index}"
    return f"{base}?from={max(1, hit.seq - LEAD_MESSAGES)}&hl={hit.seq}{block}#m-{hit.seq}"


def highlight(request: HttpRequest) -> dict[str, int | None]:
    """The timeline's marks for a hit's link (`?hl=SEQ&b=BLOCK`): the message, and its block
    shown open (a tool result is folded otherwise); None for what the link does not say."""
    values: dict[str, int | None] = {}
    for name, key in (("highlight", "hl"), ("highlight_block", "b")):
        raw = request.GET.get(key, "")
        values[name] = int(raw) if raw.isdigit() and len(raw) < 10 else None
    return values


def _rows(hits: list[SearchHit]) -> list[HitRow]:
    return [
        HitRow(
            hit=hit,
            parts=snippet_parts(hit),
            url=hit_url(hit),
            status=STATUS_LABELS.get(hit.status, hit.status),
            kind=KIND_LABELS.get(hit.kind, hit.kind),
        )
        for hit in hits
    ]


def _search(request: HttpRequest, *, owner, session=None) -> dict:
    q = request.GET.get("q", "").strip()
    context: dict = {"q": q, "rows": [], "error": "", "searched": bool(q), "search_session": session}
    if q:
        try:
            hits = history_search(user=owner, q=q, session=session, limit=MAX_LIMIT)
        except QueryError as exc:
            context["error"] = f"The search {exc}."
        else:
            context["rows"] = _rows(hits)
    return context


@login_required
@require_GET
def session_search(request: HttpRequest, session_id: UUID) -> HttpResponse:
    """The session page's search: the results fragment for htmx, a page of its own otherwise."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    # Staff may look at another owner's session: its history is searched as its owner's.
    context = _search(request, owner=session.owner, session=session)
    template = "dashboard/_search_results.html" if request.htmx else "dashboard/search.html"
    return render(request, template, context, status=400 if context["error"] else 200)


@login_required
@require_GET
def search_all(request: HttpRequest) -> HttpResponse:
    """Every session of the user (the list's search box); a page of its own."""
    context = _search(request, owner=request.user)
    template = "dashboard/_search_results.html" if request.htmx else "dashboard/search.html"
    return render(request, template, context, status=400 if context["error"] else 200)
