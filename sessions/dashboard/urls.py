from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import search, views

# Pages live under the "dashboard" namespace; login/logout stay un-namespaced because
# settings.LOGIN_URL / LOGOUT_REDIRECT_URL name them as "login".
dashboard_patterns = [
    path("", views.session_list, name="session-list"),
    path("sessions/<uuid:session_id>/", views.session_detail, name="session-detail"),
    # A short id as the pages show it (8 hex digits or more): the session, or the list of matches.
    path("sessions/<str:short_id>/", views.session_short_id, name="session-short-id"),
    path("sessions/<uuid:session_id>/messages/", views.session_messages, name="session-messages"),
    path("sessions/<uuid:session_id>/overview/", views.session_overview, name="session-overview"),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:compaction_id>/",
        views.compaction_detail,
        name="compaction-detail",
    ),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:compaction_id>/progress/",
        views.compaction_progress,
        name="compaction-progress",
    ),
    path(
        "sessions/<uuid:session_id>/compactions/<uuid:compaction_id>/rerun/",
        views.compaction_rerun,
        name="compaction-rerun",
    ),
    path("sessions/<uuid:session_id>/search/", search.session_search, name="session-search"),
    path("search/", search.search_all, name="search"),
    path("import/", views.transcript_import, name="import"),
    path("sessions/<uuid:session_id>/trash/", views.session_trash, name="session-trash"),
    path("sessions/<uuid:session_id>/restore/", views.session_restore, name="session-restore"),
    path("trash/", views.trash_list, name="trash"),
    path("keys/", views.api_keys, name="api-keys"),
    path("keys/<str:prefix>/revoke/", views.api_key_revoke, name="api-key-revoke"),
]

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include((dashboard_patterns, "dashboard"), namespace="dashboard")),
]
