from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from compaction.core.config import window_errors
from compaction.models import Compaction

from . import services, trash
from .auth import api_key_forget
from .models import ApiKey, Message, Session, ToolCall

# Same bounds as the API's `context_window` (sessions/api/serializers.py SessionInSerializer).
WINDOW_MIN = 1024
WINDOW_MAX = 10_000_000


class ReadOnlyMixin:
    """Messages and tool calls are the agent's record: never edited by hand."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class CompactionInline(ReadOnlyMixin, admin.TabularInline):
    model = Compaction
    fk_name = "session"
    extra = 0
    show_change_link = True
    ordering = ["-created_at"]
    fields = ["created_at", "reason", "status", "strategy", "tokens", "review_status", "review_link"]
    readonly_fields = fields

    @admin.display(description="Tokens")
    def tokens(self, obj: Compaction) -> str:
        if obj.tokens_before is None:
            return "—"
        return f"{obj.tokens_before:,} → {obj.tokens_after or 0:,}"

    @admin.display(description="Review")
    def review_link(self, obj: Compaction) -> str:
        if obj.status != "succeeded":
            return "—"
        return format_html('<a href="{}">review</a>', reverse("admin:compaction_compaction_review", args=[obj.pk]))


class SessionAdminForm(forms.ModelForm):
    """The admin saves only what the API would accept: a bad setting here would make every
    later preview, compaction and usage figure of the session fail."""

    context_window_override = forms.IntegerField(
        required=False,
        min_value=WINDOW_MIN,
        max_value=WINDOW_MAX,
        label="Context window override",
        help_text="Empty: the model registry's window.",
    )

    class Meta:
        model = Session
        fields = [
            "owner", "title", "agent", "model", "system_prompt", "context_window_override", "compaction_settings",
        ]  # fmt: skip

    def clean_compaction_settings(self) -> dict[str, Any]:
        value = self.cleaned_data.get("compaction_settings")
        if value in (None, ""):
            return {}
        errors = services.compaction_settings_errors(value)
        if errors:
            raise forms.ValidationError(
                [f"{key}: {problem}" if key else problem for key, problem in sorted(errors.items())]
            )
        # Nulls mean "not set" (as a PATCH removing the key): store the object without them.
        return {key: v for key, v in value.items() if v is not None}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        # Cross-field checks run on the session as it would be saved (window × settings).
        candidate = Session(
            model=data.get("model", self.instance.model),
            context_window_override=data.get("context_window_override"),
            compaction_settings=data.get("compaction_settings") or {},
        )
        for key, problem in _window_errors(candidate).items():
            self.add_error("compaction_settings", f"{key}: {problem}")
        return data


def _window_errors(session: Session) -> dict[str, str]:
    """Settings that cannot work with the session's effective window: the API's own check
    (compaction.core.config.window_errors on the resolved config, as sessions.services uses)."""
    return window_errors(services.session_config(session))


class TrashFilter(admin.SimpleListFilter):
    title = "trash"
    parameter_name = "trash"

    def lookups(self, request, model_admin):
        return [("no", "Not in the trash"), ("yes", "In the trash")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(deleted_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(deleted_at__isnull=True)
        return queryset


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    """Deleting here moves sessions to the trash, like the API: the purge deletes them for good
    after COMPACTOR_TRASH_RETENTION_DAYS, `purge_trash --days 0` at once."""

    form = SessionAdminForm
    list_display = [
        "__str__", "owner", "agent", "model", "message_count", "context_tokens", "last_activity_at", "deleted_at",
    ]  # fmt: skip
    list_filter = [TrashFilter, "agent", "model"]
    actions = ["restore"]
    search_fields = ["title", "agent", "model", "owner__username", "=id"]
    list_select_related = ["owner"]
    raw_id_fields = ["owner"]
    readonly_fields = [
        "id", "active_compaction", "last_seq", "message_count", "total_message_tokens", "context_tokens",
        "system_prompt_tokens", "reported_input_tokens", "reported_at_seq", "last_usage", "created_at",
        "updated_at", "last_activity_at", "deleted_at", "dashboard_link",
    ]  # fmt: skip
    inlines = [CompactionInline]

    def get_deleted_objects(self, objs, request):
        # Moving to the trash deletes nothing else (messages are read-only here): the
        # confirmation lists the sessions only and needs no permission on their rows.
        return [f"{obj} (moved to the trash)" for obj in objs], {"sessions": len(objs)}, set(), []

    def delete_model(self, request, obj: Session) -> None:
        trash.session_trash(session=obj)

    def delete_queryset(self, request, queryset) -> None:
        for session in queryset:
            trash.session_trash(session=session)

    @admin.action(description="Restore the selected sessions from the trash")
    def restore(self, request, queryset) -> None:
        restored = 0
        for session in queryset.filter(deleted_at__isnull=False):
            trash.session_restore(session=session)
            restored += 1
        self.message_user(request, f"{restored} session(s) restored from the trash.")

    @admin.display(description="Dashboard")
    def dashboard_link(self, obj: Session) -> str:
        return format_html('<a href="{}">open in the dashboard</a>', reverse("dashboard:session-detail", args=[obj.pk]))


@admin.register(Message)
class MessageAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["session", "seq", "role", "provenance", "token_count", "created_at"]
    list_filter = ["role", "provenance"]
    search_fields = ["=session__id", "session__title"]
    list_select_related = ["session"]
    ordering = ["session", "seq"]
    show_full_result_count = False  # COUNT(*) over millions of messages is not worth a page load


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ["name", "tool_use_id", "session", "use_seq", "result_seq"]
    list_filter = ["name"]
    search_fields = ["tool_use_id", "name", "=session__id"]
    list_select_related = ["session"]
    show_full_result_count = False


# The package registers its own concrete APIKey model, which Compactor does not use (keys are
# sessions.ApiKey, owned by a user); hide it so nobody creates keys that authenticate nothing.
if admin.site.is_registered(APIKey):
    admin.site.unregister(APIKey)


@admin.register(ApiKey)
class ApiKeyAdmin(APIKeyModelAdmin):
    # The package is typed (py.typed) but leaves these unannotated, so mypy reads each as a tuple
    # of exactly its own length and any longer one, the package's columns plus ours, as a wrong override.
    list_display = [*APIKeyModelAdmin.list_display, "owner", "last_used_at"]  # type: ignore[assignment]
    list_filter = [*APIKeyModelAdmin.list_filter, "owner"]  # type: ignore[assignment]
    search_fields = [*APIKeyModelAdmin.search_fields, "owner__username"]  # type: ignore[assignment]
    raw_id_fields = ["owner"]
    list_select_related = ["owner"]

    def get_readonly_fields(self, request, obj=None):
        return (*super().get_readonly_fields(request, obj), "last_used_at")

    # A revoked, changed or deleted key must not stay usable from the authentication cache.
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        api_key_forget(prefix=obj.prefix)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        api_key_forget(prefix=obj.prefix)

    def delete_queryset(self, request, queryset):
        prefixes = list(queryset.values_list("prefix", flat=True))
        super().delete_queryset(request, queryset)
        for prefix in prefixes:
            api_key_forget(prefix=prefix)
