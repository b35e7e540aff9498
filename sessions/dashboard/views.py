"""Dashboard pages. Each view: authorize (login + scoped lookup) → parse → one read or write → render.

Buttons that change compactions (Compact, Preview, Undo) call the REST API the agents use
(static/js/dashboard.js); these views only render pages and the fragments htmx swaps in.
"""

from __future__ import annotations

from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from compaction import importing, review
from compaction.core.transcripts import FORMATS
from compaction.models import EventKind
from compaction.services import describe
from sessions import selectors, trash

from . import keys, queries, search
from .chart import build_chart
from .context_breakdown import context_breakdown_view
from .forms import ApiKeyForm, ImportForm, SessionFilterForm
from .present import (
    HIDDEN_USAGE_KEYS,
    collapse_skipped,
    fidelity_view,
    fmt_duration,
    fmt_int,
    kept_trims,
    render_markdown,
    skip_reason,
    strip_file_tags,
    summarizer_calls,
    tokens_saved,
)
from .timeline import build_timeline, fallbacks_text, usage_items

# Live pages: the session page and the list re-ask every LIVE_POLL (while the tab is visible,
# static/js/dashboard.js) with the fingerprint of what they show as ?v=. Unchanged, the answer
# is a 204 (htmx swaps nothing) after one aggregate query: cheap enough for many open tabs on
# gunicorn's threads, where a server-sent-events stream would hold a thread per tab. The period
# keeps "an append shows within 2 s" with room for the request itself.
LIVE_VERSION_PARAM = "v"
LIVE_POLL = "1500ms"


def _unchanged(request: HttpRequest, version: str) -> bool:
    return bool(request.htmx) and request.GET.get(LIVE_VERSION_PARAM) == version


def _no_change() -> HttpResponse:
    return HttpResponse(status=204)


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    version = queries.session_list_version(user=request.user)
    if _unchanged(request, version):
        return _no_change()
    form = SessionFilterForm(request.GET or None, models=queries.model_choices(user=request.user))
    filters = (
        form.filters() if request.GET else {"q": "", "model": "", "status": "", "sort": "activity", "single": False}
    )
    page = queries.session_list_page(user=request.user, page=request.GET.get("page", 1), **filters)
    query = request.GET.copy()
    query.pop("page", None)
    query.pop(LIVE_VERSION_PARAM, None)
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "show_owner": request.user.is_staff,
        "version": version,
        "live_poll": LIVE_POLL,
    }
    template = "dashboard/_session_table.html" if request.htmx else "dashboard/session_list.html"
    return render(request, template, context)


def _overview_context(request: HttpRequest, session, compactions, *, version: str) -> dict:
    usage = queries.session_usage_view(session)
    effective = queries.effective_compactions(session=session, compactions=compactions)
    usage_history = queries.usage_history(session=session, compactions=effective)
    chart = build_chart(
        messages=queries.message_token_series(session=session),
        compactions=effective,
        base_tokens=session.system_prompt_tokens,
        trigger_tokens=usage.trigger_tokens,
        context_window=usage.context_window,
        current_tokens=usage.tokens,  # the line ends where the gauge says the context is
        reports=usage_history.reports,
        measured_at=usage_history.measured_at,
    )
    undone = queries.reverted_ids(session=session) if compactions else set()
    history = collapse_skipped(
        [
            {
                "c": c,
                "fallbacks": fallbacks_text(c),
                "duration": fmt_duration(c.duration_ms),
                "before": fmt_int(c.tokens_before),
                "after": fmt_int(c.tokens_after),
                "active": c.pk == session.active_compaction_id,
                "undone": c.pk in undone and c.pk != session.active_compaction_id,
            }
            for c in compactions
        ]
    )
    in_flight = next((c for c in compactions if c.in_flight), None)
    return {
        "session": session,
        "usage": usage,
        "breakdown": context_breakdown_view(session),
        "chart": chart,
        "history": history,
        "in_flight": in_flight,
        # The REST API serves owners only; staff looking at someone else's session read only.
        "can_compact": session.owner_id == request.user.id,
        "retention_days": settings.TRASH_RETENTION_DAYS,
        "version": version,
        "live_poll": LIVE_POLL,
    }


@login_required
@require_GET
def session_short_id(request: HttpRequest, short_id: str) -> HttpResponse:
    problem = selectors.id_prefix_problem(short_id)
    if problem:
        raise Http404(f"session {short_id}: {problem}")
    matches = queries.session_short_id_matches(user=request.user, prefix=short_id)
    if not matches:
        raise Http404(f"session {short_id} not found")
    if len(matches) == 1:
        return redirect("dashboard:session-detail", session_id=matches[0].pk)
    flash.info(request, f"Several sessions have an id starting with {short_id}: pick one.")
    return redirect(f"{reverse('dashboard:session-list')}?{urlencode({'q': short_id})}")


@login_required
@require_GET
def session_detail(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    # The fingerprint before the reads it stands for: a write in between shows on the next poll.
    version = queries.session_overview_version(session=session)
    compactions = queries.compaction_history(session=session)
    # Without ?from= the timeline opens at the latest messages (what the agent works on now);
    # "Load earlier messages" and "First messages" go back.
    start = _int_param(request, "from", _latest_from(session))
    page = queries.messages_page(session=session, start=start)
    context = _overview_context(request, session, compactions, version=version)
    context.update(_timeline_context(session, compactions, page, start, full_page=True))
    # Subagents imported with the session (Claude Code's subagents/*.jsonl), and its parent.
    context["children"] = queries.session_children(user=request.user, session=session)
    context["side_calls"] = queries.side_calls(session=session) if session.side_call_count else []
    context.update(search.highlight(request))  # a search hit's message, marked in the timeline
    return render(request, "dashboard/session_detail.html", context)


def _latest_from(session) -> int:
    return max(1, session.last_seq - queries.MESSAGES_PAGE_SIZE + 1)


@login_required
@require_GET
def session_overview(request: HttpRequest, session_id: UUID) -> HttpResponse:
    """Gauge, chart and history: polled by the open page (204 while nothing changed) and
    re-fetched by htmx after a compaction finishes or is undone."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    version = queries.session_overview_version(session=session)
    if _unchanged(request, version):
        return _no_change()
    compactions = queries.compaction_history(session=session)
    context = _overview_context(request, session, compactions, version=version)
    # The message count and last activity under the title change with the gauge.
    context["meta_oob"] = True
    response = render(request, "dashboard/_overview.html", context)
    # Something changed: the timeline's tail asks for messages appended since it was drawn.
    response["HX-Trigger"] = "compactor:refreshed"
    return response


@login_required
@require_GET
def session_messages(request: HttpRequest, session_id: UUID) -> HttpResponse:
    """A page of the timeline for htmx: the next one ("load more", ?from=), with ?to= the
    messages before what is shown ("load earlier", ?from=N&to=first shown), or with ?tail=1
    the messages appended since the page was drawn (204 when there are none). A full page when
    opened directly."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    if not request.htmx:
        return redirect(
            f"{reverse('dashboard:session-detail', args=[session.pk])}?from={_int_param(request, 'from', 1)}"
        )
    compactions = queries.compaction_history(session=session)
    start = _int_param(request, "from", 1)
    end = _int_param(request, "to", 0) if request.GET.get("to") else None
    if end is not None and end > start:
        page = queries.messages_page(session=session, start=start, limit=min(end - start, queries.MESSAGES_PAGE_SIZE))
    else:
        end = None
        page = queries.messages_page(session=session, start=start)
    tail = request.GET.get("tail") == "1"
    if tail and not page:
        return _no_change()
    context = _timeline_context(session, compactions, page, start, full_page=request.GET.get("full") == "1")
    if end is not None:
        context["next_from"] = None  # the messages from `end` on are already on the page
        context["tail_from"] = None
        # The range line above the timeline now starts where the earlier page does.
        context["range_oob"] = True
        context["shown_from"] = start
    if tail:
        context["earlier_from"] = None  # what comes before the tail is on the page already
    return render(request, "dashboard/_timeline_page.html", context)


def _timeline_context(session, compactions, page, start: int, *, full_page: bool) -> dict:
    active = next((c for c in compactions if c.pk == session.active_compaction_id), None)
    items = build_timeline(messages=page, compactions=compactions, active=active, first_page=full_page)
    next_from = (
        page[-1].seq + 1 if len(page) == queries.MESSAGES_PAGE_SIZE and page[-1].seq < session.last_seq else None
    )
    first_shown = page[0].seq if page else start
    return {
        "session": session,
        "items": items,
        "next_from": next_from,
        # At the end of the history the timeline follows the agent: its tail asks for what
        # comes after the last message shown whenever the overview saw a change.
        "tail_from": (page[-1].seq + 1 if page else start) if next_from is None else None,
        "start": start,
        "shown_from": first_shown,
        # "Load earlier messages": the page before the first message shown.
        "earlier_from": max(1, first_shown - queries.MESSAGES_PAGE_SIZE) if first_shown > 1 else None,
        "earlier_to": first_shown,
        "latest_from": _latest_from(session),
    }


def _int_param(request: HttpRequest, name: str, default: int) -> int:
    try:
        return max(1, int(request.GET.get(name, default)))
    except (TypeError, ValueError):
        return default


# Longer file lists start collapsed so the page's figures stay in view.
FILES_OPEN_LIMIT = 12


@login_required
@require_GET
def compaction_detail(request: HttpRequest, session_id: UUID, compaction_id: UUID) -> HttpResponse:
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    compaction = queries.compaction_get_visible(session=session, compaction_id=compaction_id)
    context = {
        "session": session,
        "c": compaction,
        "summary_html": render_markdown(strip_file_tags(compaction.summary)),
        "turn_prefix_html": render_markdown(compaction.turn_prefix_summary) if compaction.turn_prefix_summary else "",
        "fallbacks": compaction.fallbacks or [],
        "usage_items": usage_items({k: v for k, v in (compaction.usage or {}).items() if k not in HIDDEN_USAGE_KEYS}),
        "summarizer_calls": summarizer_calls(compaction.usage),
        "saved": fmt_int(tokens_saved(compaction)),
        "fidelity": fidelity_view(compaction.fidelity),
        "pruned_outputs": queries.compaction_pruned_outputs(session=session, compaction=compaction),
        "pruned_outputs_cap": queries.PRUNED_OUTPUTS_SHOWN,
        "kept_trims": kept_trims(compaction.kept_plan),
        "rerun_of": queries.compaction_rerun_source(session=session, compaction=compaction),
        "reruns": queries.compaction_reruns(session=session, compaction=compaction),
        "file_lists": [("Read", compaction.read_files or []), ("Modified", compaction.modified_files or [])],
        "files_open_limit": FILES_OPEN_LIMIT,
        "duration": fmt_duration(compaction.duration_ms),
        "before": fmt_int(compaction.tokens_before),
        "after": fmt_int(compaction.tokens_after),
        "active": compaction.pk == session.active_compaction_id,
        "can_compact": session.owner_id == request.user.id,
        "review_url": reverse("admin:compaction_compaction_review", args=[compaction.pk])
        if request.user.is_staff
        else "",
    }
    return render(request, "dashboard/compaction_detail.html", context)


@login_required
@require_POST
def compaction_rerun(request: HttpRequest, session_id: UUID, compaction_id: UUID) -> HttpResponse:
    """The owner re-runs a compaction (e.g. a rejected summary still served): undone first if
    active, then a new job; the session page shows its progress."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    if session.owner_id != request.user.id:
        raise Http404("not your session")
    compaction = queries.compaction_get_visible(session=session, compaction_id=compaction_id)
    was_active = compaction.pk == session.active_compaction_id
    try:
        review.compaction_rerun(compaction=compaction, user=request.user)
    except review.ReviewError as exc:
        flash.error(request, f"Could not re-run: {exc}")
        return redirect("dashboard:compaction-detail", session_id=session.pk, compaction_id=compaction.pk)
    flash.success(
        request,
        "Re-run queued" + (": the summary it re-runs is undone and no longer served." if was_active else "."),
    )
    return redirect("dashboard:session-detail", session_id=session.pk)


@login_required
@require_GET
def compaction_progress(request: HttpRequest, session_id: UUID, compaction_id: UUID) -> HttpResponse:
    """The job's state; polls itself while queued/running (the fragment drops hx-trigger when done)."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    compaction = queries.compaction_get_visible(session=session, compaction_id=compaction_id)
    reverted = compaction.events.filter(kind=EventKind.COMPACTION_REVERTED).exists()
    context = {
        "session": session,
        "c": compaction,
        "active": compaction.pk == session.active_compaction_id,
        "reverted": reverted,
        "outcome": describe(compaction),
        "skip_reason": skip_reason(compaction.detail),
        "before": fmt_int(compaction.tokens_before),
        "after": fmt_int(compaction.tokens_after),
        "duration": fmt_duration(compaction.duration_ms),
        "can_compact": session.owner_id == request.user.id,
    }
    response = render(request, "dashboard/_compaction_progress.html", context)
    if not compaction.in_flight:
        # Tell the page to refresh gauge, chart and history once the outcome is known.
        response["HX-Trigger"] = "compactor:changed"
    return response


NEW_KEY_SESSION = "dashboard_new_api_key"


@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request: HttpRequest) -> HttpResponse:
    """Post/redirect/get: a reload after creating a key must not create another one. The new
    key travels to the next GET in the (server-side) session and is popped when shown."""
    if request.method == "POST":
        form = ApiKeyForm(request.POST)
        if form.is_valid():
            key, secret = keys.apikey_create(user=request.user, name=form.cleaned_data["name"])
            request.session[NEW_KEY_SESSION] = {"key": secret, "name": key.name, "prefix": key.prefix}
            return redirect("dashboard:api-keys")
    else:
        form = ApiKeyForm()
    new_key = request.session.pop(NEW_KEY_SESSION, None) if request.method == "GET" else None
    response = render(
        request,
        "dashboard/api_keys.html",
        {"form": form, "keys": keys.apikey_list(user=request.user), "new_key": new_key},
    )
    if new_key:
        # The page holds a secret: keep it out of caches and the back/forward cache.
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def api_key_revoke(request: HttpRequest, prefix: str) -> HttpResponse:
    key = keys.apikey_revoke(user=request.user, prefix=prefix)
    flash.success(request, f"Key “{key.name}” ({key.prefix}…) revoked: agents using it get 401 from now on.")
    return redirect("dashboard:api-keys")


@login_required
@require_http_methods(["GET", "POST"])
def transcript_import(request: HttpRequest) -> HttpResponse:
    """Upload a transcript (the API's POST /api/v1/imports/ does the same for agents).

    htmx posts the form and swaps in the outcome fragment (the page shows the upload's progress
    meanwhile); without JavaScript a success redirects to the new session.
    """
    form = ImportForm(formats=FORMATS)
    error = None
    if request.method == "POST":
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.MAX_REQUEST_BYTES:
            # Checked before the body is read, like the API's 413.
            error = (
                f"The upload is {length:,} bytes; the limit is {settings.MAX_REQUEST_BYTES:,} bytes "
                "(COMPACTOR_MAX_REQUEST_BYTES)."
            )
        else:
            form = ImportForm(request.POST, request.FILES, formats=FORMATS)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    report = importing.transcript_import_upload(
                        owner=request.user,
                        upload=data["file"],
                        format=data["format"] or None,
                        title=data["title"] or None,
                        replay=data["replay"],
                    )
                except importing.TranscriptImportError as exc:
                    error = f"{data['file'].name}: {exc.problem}"
                else:
                    if not request.htmx:
                        flash.success(request, f"Imported {report.messages} messages from {data['file'].name}.")
                        return redirect("dashboard:session-detail", session_id=report.session.pk)
                    context = {"report": report, "name": data["file"].name, "skipped": _skipped(report)}
                    return render(request, "dashboard/_import_result.html", context)
            else:
                error = " ".join(f"{form.fields[k].label}: {' '.join(v)}" for k, v in form.errors.items())
        if request.htmx:
            return render(request, "dashboard/_import_result.html", {"error": error}, status=400)
    return render(request, "dashboard/import.html", {"form": form, "error": error}, status=400 if error else 200)


def _skipped(report) -> list[tuple[str, int]]:
    return [(key.removeprefix("skipped_").replace("_", " "), count) for key, count in report.skipped.items()]


# --- trash -------------------------------------------------------------------------------------


@login_required
@require_POST
def session_trash(request: HttpRequest, session_id: UUID) -> HttpResponse:
    """The owner moves a session to the trash (the API's DELETE); staff only look."""
    session = queries.session_get_visible(user=request.user, session_id=session_id)
    if session.owner_id != request.user.id:
        raise Http404("not your session")
    trash.session_trash(session=session)
    flash.success(request, f"“{session}” moved to the trash. Restore it from Trash.")
    return redirect("dashboard:trash")


@login_required
@require_GET
def trash_list(request: HttpRequest) -> HttpResponse:
    sessions = trash.sessions_trashed(user=None if request.user.is_staff else request.user)
    rows = [
        {"session": s, "purge_at": trash.purge_at(s), "can_restore": s.owner_id == request.user.id}
        for s in sessions[:200]
    ]
    context = {"rows": rows, "show_owner": request.user.is_staff, "retention_days": settings.TRASH_RETENTION_DAYS}
    return render(request, "dashboard/trash.html", context)


@login_required
@require_POST
def session_restore(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = get_object_or_404(trash.sessions_trashed(user=request.user), pk=session_id)
    trash.session_restore(session=session)
    flash.success(request, f"“{session}” restored.")
    return redirect("dashboard:session-detail", session.pk)
