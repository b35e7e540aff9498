from __future__ import annotations

from django.urls import path

from . import views

# Included at api/v1/sessions/<uuid:session_id>/ (project/urls.py).
urlpatterns = [
    path("compactions/", views.CompactionListCreateView.as_view(), name="compaction-list"),
    path("compactions/<uuid:compaction_id>/", views.CompactionDetailView.as_view(), name="compaction-detail"),
    path("compactions/<uuid:compaction_id>/revert/", views.CompactionRevertView.as_view(), name="compaction-revert"),
    path("overflow/", views.OverflowView.as_view(), name="compaction-overflow"),
    path("events/", views.EventListView.as_view(), name="session-events"),
]
