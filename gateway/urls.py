from __future__ import annotations

from django.urls import path, re_path

from . import views

# Included at anthropic/ (project/urls.py): clients use base_url=<server>/anthropic.
urlpatterns = [
    path("", views.root_view, name="gateway-root"),
    path("v1/messages", views.messages_view, name="gateway-messages"),
    path("v1/messages/count_tokens", views.count_tokens_view, name="gateway-count-tokens"),
    re_path(r"^.*$", views.not_found_view, name="gateway-not-found"),
]
