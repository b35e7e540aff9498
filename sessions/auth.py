from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import ApiKey

# last_used_at is written at most this often per key, so a busy agent does not turn
# every read into a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class BearerAPIKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>` with keys hashed by djangorestframework-api-key."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        # The scheme is case-insensitive (RFC 9110 §11.1): "bearer <key>" is the same credential.
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <api key>'.")
        try:
            key = ApiKey.objects.get_from_key(parts[1])
        except ApiKey.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.") from None
        if key.has_expired:
            raise exceptions.AuthenticationFailed("API key has expired.")
        if not key.owner.is_active:
            raise exceptions.AuthenticationFailed("The owner of this API key is inactive.")
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        return key.owner, key

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) with a WWW-Authenticate header.
        return 'Bearer realm="api"'


class BearerAPIKeyScheme(OpenApiAuthenticationExtension):
    target_class = BearerAPIKeyAuthentication
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "API key from `manage.py create_api_key`."}
