"""Compactor API keys on the Messages API's terms: `x-api-key` (what Anthropic's SDKs and Claude
Code send) or `Authorization: Bearer` — checked exactly like the REST API's keys."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.http import HttpRequest
from rest_framework import exceptions

from sessions.auth import BearerAPIKeyAuthentication


def authenticate(request: HttpRequest) -> Any:  # the key's owner (Django's user model)
    """The key's owner, or raises AuthenticationFailed with a message that names the problem."""
    key = request.headers.get("x-api-key", "").strip()
    header = request.headers.get("authorization", "").strip()
    if not key and header.lower().startswith("bearer "):
        key = header[len("bearer ") :].strip()
    if not key:
        raise exceptions.AuthenticationFailed(
            "No API key: send your Compactor API key as x-api-key (or Authorization: Bearer)."
        )
    # The REST API's authentication (hash lookup, revoked/expired keys, inactive owners,
    # last_used_at), given the key the way it reads it.
    credential = f"Bearer {key}".encode("latin-1", "replace")
    shim = SimpleNamespace(headers={"authorization": credential}, META={"HTTP_AUTHORIZATION": credential})
    result = BearerAPIKeyAuthentication().authenticate(shim)
    if result is None:
        raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
    return result[0]
