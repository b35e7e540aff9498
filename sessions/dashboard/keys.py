"""API key management for people (the dashboard's keys page)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from sessions.auth import api_key_forget
from sessions.models import ApiKey


def apikey_list(*, user) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(owner=user).order_by("revoked", "-created")


def apikey_create(*, user, name: str) -> tuple[ApiKey, str]:
    """Returns the row and the full key; only a hash is stored, so this is the one chance to show it."""
    return ApiKey.objects.create_key(owner=user, name=name)


def apikey_revoke(*, user, prefix: str) -> ApiKey:
    key = get_object_or_404(ApiKey, owner=user, prefix=prefix)
    if not key.revoked:
        key.revoked = True
        key.save(update_fields=["revoked"])
    api_key_forget(prefix=key.prefix)  # refused from the next request on, in this process at once
    return key
