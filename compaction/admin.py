"""Compaction review in the Django admin. Actions and views parse input and call compaction.review."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from compaction.core.kept import plan_from_json
from sessions.breakdown import kept_trimmed_words
from sessions.dashboard.present import (
    fidelity_view,
    message_blocks,
    render_markdown,
    strip_file_tags,
    summarizer_calls,
)
from sessions.models import Message, Session

from . import review
from .models import Compaction, Event, ReviewStatus, SummaryVersion
from .services import STRATEGIES

# The review page shows the summarized source beside the summary; past this many messages
# it links to the dashboard timeline instead of rendering thousands of rows at once.
REVIEW_SOURCE_LIMIT = 300
# The changelist's session column: enough to recognise a session, short enough for 1280px.
SESSION_TITLE_CHARS = 32


class ReviewForm(forms.Form):
    # "No summary to review" is the engine's mark for skipped/failed jobs, not a reviewer's verdict.
    review_status = forms.ChoiceField(
        choices=[c for c in ReviewStatus.choices if c[0] != ReviewStatus.NOT_APPLICABLE], label="Review status"
    )
    review_notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Notes")


class EditSummaryForm(forms.Form):
    summary = forms.CharField(widget=forms.Textarea(attrs={"rows": 18, "class": "vLargeTextField"}), label="Summary")
    note = forms.CharField(required=False, max_length=150, label="Why (kept with the version)")
    activate = forms.BooleanField(
        required=False, initial=True, label="Serve the edited summary now (the current text is kept as a version)"
    )


class RerunForm(forms.Form):
    strategy = forms.ChoiceField(choices=[(s, s) for s in STRATEGIES], initial="auto", label="Strategy")
    instructions = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Focus instructions")
    prompt = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 4}), label="Custom summary prompt (optional)"
    )


class SummaryVersionInline(admin.TabularInline):
    model = SummaryVersion
    extra = 0
    fields = ["created_at", "created_by", "note", "excerpt"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Text")
    def excerpt(self, obj: SummaryVersion) -> str:
        return obj.summary[:200] + ("…" if len(obj.summary) > 200 else "")


@admin.register(Compaction)
class CompactionAdmin(admin.ModelAdmin):
    # Narrowest first: at 1280px (admin nav + filters beside it) the review link, strategy,
    # status, tokens and review status stay in view; creation time and re-run link come last.
    list_display = [
        "session_short", "review_link", "reason", "strategy", "status", "tokens", "review_status",
        "created_at", "rerun_link",
    ]  # fmt: skip
    list_filter = ["status", "reason", "strategy", "review_status", "created_at"]
    search_fields = ["session__title", "=session__id", "=id", "summary", "instructions"]
    list_select_related = ["session"]
    date_hierarchy = "created_at"
    actions = ["approve", "reject", "needs_changes"]
    inlines = [SummaryVersionInline]
    # The record of what happened is read-only; changes go through the review page.
    readonly_fields = [f.name for f in Compaction._meta.fields] + ["rerun_link", "review_link", "kept_served"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(description="Kept messages served")
    def kept_served(self, obj: Compaction) -> str:
        plan = plan_from_json(obj.kept_plan)
        if plan.empty:
            return "as stored (no tool output trimmed)"
        rows = ", ".join(
            f"#{seq}: {'/'.join(edit.kind + (f' → #{edit.ref}' if edit.ref else '') for edit in edits)}"
            for seq, edits in sorted(plan.edits.items())
        )
        return f"lean — {kept_trimmed_words(plan.counts())}; {plan.tokens_saved:,} tokens saved. {rows}"

    def has_delete_permission(self, request, obj: Compaction | None = None) -> bool:
        # The active compaction is what the session serves: deleting it would silently put the
        # whole history back in the context. Undo it first (the session page or the revert API).
        if obj is not None and Session.objects.filter(active_compaction=obj).exists():
            return False
        return super().has_delete_permission(request, obj)

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is not None and Session.objects.filter(active_compaction=obj).exists():
            messages.error(
                request,
                "This is the session's active compaction and cannot be deleted: undo it first "
                "(Undo on the session's dashboard page, or POST …/compactions/{id}/revert/).",
            )
            return redirect("admin:compaction_compaction_change", obj.pk)
        return super().delete_view(request, object_id, extra_context)

    @admin.display(description="Tokens")
    def tokens(self, obj: Compaction) -> str:
        if obj.tokens_before is None:
            return "—"
        after = f"{obj.tokens_after:,}" if obj.tokens_after is not None else "?"
        return f"{obj.tokens_before:,} → {after}"

    @admin.display(description="Review")
    def review_link(self, obj: Compaction) -> str:
        return format_html('<a href="{}">review</a>', reverse("admin:compaction_compaction_review", args=[obj.pk]))

    @admin.display(description="Session", ordering="session__title")
    def session_short(self, obj: Compaction) -> str:
        # Long titles would squeeze strategy/status/tokens/review off a laptop screen.
        title = str(obj.session)
        short = title if len(title) <= SESSION_TITLE_CHARS else title[: SESSION_TITLE_CHARS - 1] + "…"
        if obj.session.active_compaction_id == obj.pk:
            # Two runs of one session can look identical: mark the one the agent is served (in
            # this column, so the list still fits a laptop's width).
            return format_html(
                '<span title="{}">{}</span> <strong class="served-mark" title="{}">● active</strong>',
                title,
                short,
                "The session's active compaction: what the agent is served",
            )
        return format_html('<span title="{}">{}</span>', title, short)

    @admin.display(description="Re-run of")
    def rerun_link(self, obj: Compaction) -> str:
        original = review.rerun_of(obj)
        if not original:
            return "—"
        return format_html(
            '<a href="{}">{}…</a>', reverse("admin:compaction_compaction_review", args=[original]), original[:8]
        )

    # --- actions ---------------------------------------------------------------------

    def _bulk(self, request: HttpRequest, queryset, status: str) -> None:
        updated, problems = review.review_bulk_set(compactions=queryset, status=status, reviewer=request.user)
        label = ReviewStatus(status).label.lower()
        self.message_user(request, f"{updated} compaction(s) marked {label}.", messages.SUCCESS)
        for problem in problems:
            self.message_user(request, f"Skipped {problem}", messages.WARNING)

    @admin.action(description="Approve selected summaries", permissions=["change"])
    def approve(self, request, queryset) -> None:
        self._bulk(request, queryset, ReviewStatus.APPROVED)

    @admin.action(description="Reject selected summaries", permissions=["change"])
    def reject(self, request, queryset) -> None:
        self._bulk(request, queryset, ReviewStatus.REJECTED)

    @admin.action(description="Mark selected summaries as needing changes", permissions=["change"])
    def needs_changes(self, request, queryset) -> None:
        self._bulk(request, queryset, ReviewStatus.NEEDS_CHANGES)

    # --- review page -------------------------------------------------------------------

    def get_urls(self):
        return [
            path(
                "<uuid:object_id>/review/",
                self.admin_site.admin_view(self.review_view),
                name="compaction_compaction_review",
            ),
        ] + super().get_urls()

    def review_view(self, request: HttpRequest, object_id) -> HttpResponse:
        compaction = get_object_or_404(Compaction.objects.select_related("session", "reviewed_by"), pk=object_id)
        if not self.has_view_permission(request, compaction):
            raise PermissionDenied
        can_change = self.has_change_permission(request, compaction)
        forms_shown = {
            "review_form": ReviewForm(
                initial={"review_status": compaction.review_status, "review_notes": compaction.review_notes}
            ),
            "edit_form": EditSummaryForm(initial={"summary": compaction.summary, "activate": True}),
            "rerun_form": RerunForm(initial={"strategy": "auto", "instructions": compaction.instructions}),
        }
        if request.method == "POST":
            if not can_change:
                raise PermissionDenied
            done = self._review_post(request, compaction, forms_shown)
            if done is not None:
                return done
        context = self._review_context(request, compaction, forms_shown, can_change=can_change)
        return TemplateResponse(request, "admin/compaction/compaction/review.html", context)

    def _review_post(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse | None:
        """Carry out the posted action: a redirect when done, None to show the page again (with
        the posted form and its errors in `forms_shown`)."""
        action = request.POST.get("action")
        handler = {
            "review": self._post_review,
            "edit": self._post_edit,
            "activate_version": self._post_activate_version,
            "undo": self._post_undo,
            "rerun": self._post_rerun,
        }.get(action)
        if handler is None:
            self.message_user(request, f"Unknown action {action!r}.", messages.ERROR)
            return None
        try:
            return handler(request, compaction, forms_shown)
        except review.ReviewError as exc:
            self.message_user(request, f"{exc.field}: {exc}", messages.ERROR)
            return None

    def _post_review(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse | None:
        form = forms_shown["review_form"] = ReviewForm(request.POST)
        if not form.is_valid():
            return None
        review.review_set(
            compaction=compaction,
            status=form.cleaned_data["review_status"],
            reviewer=request.user,
            notes=form.cleaned_data["review_notes"],
        )
        self.message_user(request, f"Review saved: {compaction.get_review_status_display()}.")
        return HttpResponseRedirect(_review_url(compaction.pk))

    def _post_edit(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse | None:
        form = forms_shown["edit_form"] = EditSummaryForm(request.POST)
        if not form.is_valid():
            return None
        draft = review.summary_edit(
            compaction=compaction,
            summary=form.cleaned_data["summary"],
            editor=request.user,
            note=form.cleaned_data["note"],
            activate=form.cleaned_data["activate"],
        )
        self.message_user(
            request,
            "Edit saved as a draft version."
            if draft
            else "Edited summary is now served; the previous text is kept as a version.",
        )
        return HttpResponseRedirect(_review_url(compaction.pk))

    def _post_activate_version(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse:
        version = get_object_or_404(SummaryVersion, pk=request.POST.get("version"), compaction=compaction)
        review.summary_version_activate(version=version, user=request.user)
        self.message_user(request, "That version is now the served summary.")
        return HttpResponseRedirect(_review_url(compaction.pk))

    def _post_undo(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse:
        review.compaction_undo(compaction=compaction, user=request.user)
        self.message_user(request, "Undone: the session is served what it was before this compaction.")
        return HttpResponseRedirect(_review_url(compaction.pk))

    def _post_rerun(self, request: HttpRequest, compaction: Compaction, forms_shown: dict) -> HttpResponse | None:
        form = forms_shown["rerun_form"] = RerunForm(request.POST)
        if not form.is_valid():
            return None
        job = review.compaction_rerun(
            compaction=compaction,
            user=request.user,
            strategy=form.cleaned_data["strategy"],
            instructions=form.cleaned_data["instructions"],
            prompt=form.cleaned_data["prompt"],
        )
        self.message_user(request, f"New compaction queued ({job.strategy_requested}).")
        return HttpResponseRedirect(_review_url(job.pk))

    def _review_context(
        self, request: HttpRequest, compaction: Compaction, forms_shown: dict, *, can_change: bool
    ) -> dict:
        source, source_total = _review_source(compaction)
        is_active = compaction.session.active_compaction_id == compaction.pk
        turn_prefix = compaction.turn_prefix_summary
        return {
            **self.admin_site.each_context(request),
            **forms_shown,
            "opts": self.model._meta,
            "original": compaction,
            "title": f"Review compaction of “{compaction.session}”",
            "c": compaction,
            "tokens_line": self.tokens(compaction),
            "summary_html": render_markdown(strip_file_tags(compaction.summary)),
            "turn_prefix_html": render_markdown(turn_prefix) if turn_prefix else "",
            "source": source,
            "source_total": source_total,
            "source_truncated": source_total > len(source),
            "versions": compaction.versions.select_related("created_by"),
            "can_change": can_change,
            "is_active": is_active,
            "rejected_active": is_active and compaction.review_status == ReviewStatus.REJECTED,
            "fidelity": fidelity_view(compaction.fidelity),
            "summarizer_calls": summarizer_calls(compaction.usage),
            "rerun_of": review.rerun_of(compaction),
            "dashboard_url": reverse("dashboard:compaction-detail", args=[compaction.session_id, compaction.pk]),
            "timeline_url": reverse("dashboard:session-detail", args=[compaction.session_id]),
        }


def _review_url(compaction_id) -> str:
    return reverse("admin:compaction_compaction_review", args=[compaction_id])


def _review_source(compaction: Compaction) -> tuple[list[dict], int]:
    """The summarized messages shown beside the summary (at most REVIEW_SOURCE_LIMIT), and how many there are."""
    if compaction.first_summarized_seq is None:
        return [], 0
    messages_summarized = Message.objects.filter(
        session_id=compaction.session_id,
        seq__gte=compaction.first_summarized_seq,
        seq__lte=compaction.last_summarized_seq,
    ).order_by("seq")
    total = compaction.last_summarized_seq - compaction.first_summarized_seq + 1
    return [{"m": m, "blocks": message_blocks(m.content)} for m in messages_summarized[:REVIEW_SOURCE_LIMIT]], total


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "session", "kind", "message"]
    list_filter = ["kind"]
    search_fields = ["=session__id", "message"]
    list_select_related = ["session"]
    readonly_fields = ["session", "kind", "compaction", "message", "data", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
