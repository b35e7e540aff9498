from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from compaction.api.imports import ImportView
from gateway import views as gateway_views
from gateway.openai import views as openai_views

urlpatterns = [
    path("admin/", admin.site.urls),
    # Agents' REST API: sessions/messages/context/usage (sessions app), compactions,
    # overflow and events (compaction app), schema and Swagger UI.
    path("api/v1/", include("sessions.api.urls")),
    path("api/v1/imports/", ImportView.as_view(), name="imports"),
    path("api/v1/sessions/<uuid:session_id>/", include("compaction.api.urls")),
    # Agents that only change their Anthropic base URL: the Messages API, compacted (gateway app).
    path("anthropic/", include("gateway.urls")),
    path("anthropic", gateway_views.root_view),  # the base URL without its slash: no redirect
    # Agents on OpenAI's Chat Completions or Responses API (Codex, opencode, aider, LiteLLM…).
    path("openai/", include("gateway.openai.urls")),
    path("openai", openai_views.root_view),
    # People: login and the dashboard.
    path("", include("sessions.dashboard.urls")),
]

# JSON errors for agents under /api/, Django's HTML pages elsewhere.
handler404 = "sessions.api.errors.handler404"
handler500 = "sessions.api.errors.handler500"
