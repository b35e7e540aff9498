from __future__ import annotations

from django.urls import path, re_path

from . import views

# Included at openai/ (project/urls.py): clients use base_url=<server>/openai/v1.
urlpatterns = [
    path("", views.root_view, name="gateway-openai-root"),
    path("v1/chat/completions", views.chat_completions_view, name="gateway-openai-chat"),
    path("v1/responses", views.responses_view, name="gateway-openai-responses"),
    path("v1/models", views.models_view, name="gateway-openai-models"),
    path("v1/models/<path:model>", views.models_view, name="gateway-openai-model"),
    re_path(r"^.*$", views.not_found_view, name="gateway-openai-not-found"),
]
