from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from . import search, views

urlpatterns = [
    path("sessions/", views.SessionListView.as_view(), name="session-list"),
    path("sessions/<uuid:session_id>/", views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<uuid:session_id>/restore/", views.SessionRestoreView.as_view(), name="session-restore"),
    path("sessions/<uuid:session_id>/messages/", views.MessageListView.as_view(), name="session-messages"),
    path("sessions/<uuid:session_id>/side-calls/", views.SideCallListView.as_view(), name="session-side-calls"),
    path("sessions/<uuid:session_id>/search/", search.SessionSearchView.as_view(), name="session-search"),
    path("search/", search.SearchView.as_view(), name="search"),
    path("sessions/<uuid:session_id>/context/", views.ContextView.as_view(), name="session-context"),
    path(
        "sessions/<uuid:session_id>/context/breakdown/",
        views.ContextBreakdownView.as_view(),
        name="session-context-breakdown",
    ),
    path("sessions/<uuid:session_id>/usage/", views.UsageView.as_view(), name="session-usage"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
