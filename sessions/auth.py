from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import ApiKey

# last_used_at is written at most this often per key and process, so a busy agent does not
# turn every read into a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


def _now() -> float:
    return time.time()


def _cache_key(prefix: str) -> str:
    # The key's public prefix (shown in the dashboard), never the secret part.
    return f"compactor:apikey:{prefix}"


def api_key_forget(*, prefix: str) -> None:
    """Forget a cached key at once (revoked, deleted, changed): the next request looks it up."""
    cache.delete(_cache_key(prefix))


def _usable_key(prefix: str) -> ApiKey | None:
    """The unrevoked key with this prefix (owner loaded), from the cache while it is fresh.

    The entry holds the row as read (its hash, expiry, owner); the secret is checked against
    the hash on every request, so a cached entry never lets a wrong secret in.
    """
    ttl = settings.API_KEY_CACHE_SECONDS
    if ttl:
        cached = cache.get(_cache_key(prefix))
        # The read time travels with the entry: a cache backend that keeps entries longer
        # than asked still cannot stretch the revocation bound.
        if cached is not None and 0 <= _now() - cached[0] <= ttl:
            return cached[1]
    key = ApiKey.objects.get_usable_keys().filter(prefix=prefix).first()
    if key is not None and ttl:
        cache.set(_cache_key(prefix), (_now(), key), timeout=ttl)
    return key


class BearerAPIKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>` with keys hashed by djangorestframework-api-key, or the same key
    as `x-api-key` (what the gateway and Anthropic's SDKs send), so one key works the same everywhere."""

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:  # (user, key), DRF's contract
        raw = self._raw_key(request)
        if raw is None:
            return None
        prefix, _, _ = raw.partition(".")
        key = _usable_key(prefix)
        if key is None or not key.is_valid(raw):
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        if key.has_expired:
            raise exceptions.AuthenticationFailed("API key has expired.")
        if not key.owner.is_active:
            raise exceptions.AuthenticationFailed("The owner of this API key is inactive.")
        # One write per key, process and LAST_USED_RESOLUTION (cache.add is atomic per cache).
        if cache.add(f"compactor:apikey-used:{key.pk}", 1, timeout=LAST_USED_RESOLUTION.total_seconds()):
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
        return key.owner, key

    def _raw_key(self, request) -> str | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            raw = request.headers.get("x-api-key", "").strip()
            return raw or None
        parts = header.split()
        # The scheme is case-insensitive (RFC 9110 §11.1): "bearer <key>" is the same credential.
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <api key>'.")
        return parts[1]

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) with a WWW-Authenticate header.
        return 'Bearer realm="api"'


class BearerAPIKeyScheme(OpenApiAuthenticationExtension):
    target_class = BearerAPIKeyAuthentication
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "API key from `manage.py create_api_key` or the dashboard's API keys page; the same "
            "key is also accepted as an `x-api-key` header.",
        }
