"""Security headers and login throttling (Django 5.2 has no CSP or login limiter of its own).

- `SecurityHeadersMiddleware` adds Content-Security-Policy and Permissions-Policy to every
  response. The dashboard needs no inline script (htmx and dashboard.js are files under
  static/, htmx's own <style> injection is switched off in base.html); inline `style`
  attributes are allowed because the usage bars position themselves with one.
- Login throttling counts failed logins (the `user_login_failed` signal, so the dashboard's
  and the admin's login forms alike) per client address and per address + username in the
  cache, and answers further login POSTs with 429 and a lockout message until the window
  has passed. With REDIS_URL the cache is Redis, shared by every web process.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from rest_framework.throttling import SimpleRateThrottle


class SecurityHeadersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        if settings.PERMISSIONS_POLICY and "Permissions-Policy" not in response:
            response["Permissions-Policy"] = settings.PERMISSIONS_POLICY
        return response


# --- login throttling ---------------------------------------------------------------------


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or behind a trusted proxy (COMPACTOR_TRUST_X_FORWARDED_FOR)
    the right-most X-Forwarded-For entry, the one the proxy itself appended (the left ones are
    whatever the client sent)."""
    if settings.TRUST_X_FORWARDED_FOR:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if forwarded and forwarded[-1]:
            return forwarded[-1][:64]
    return request.META.get("REMOTE_ADDR", "")[:64]


def _keys(ip: str, username: str | None) -> list[str]:
    keys = [f"login-fail:ip:{ip}"]
    if username:
        keys.append(f"login-fail:user:{ip}:{username.strip().lower()[:150]}")
    return keys


def _limits() -> tuple[int, int]:
    return settings.LOGIN_FAILURE_LIMIT, settings.LOGIN_FAILURE_LIMIT_PER_ADDRESS


def login_locked_until(request: HttpRequest, username: str | None) -> float | None:
    """When this client (and username) may try again, or None if it may now."""
    per_user, per_ip = _limits()
    entries = cache.get_many(_keys(client_ip(request), username))
    until = None
    for key, entry in entries.items():
        count, expires = entry
        limit = per_ip if key.startswith("login-fail:ip:") else per_user
        if count >= limit and expires > time.time():
            until = max(until or 0, expires)
    return until


@receiver(user_login_failed)
def _count_failure(sender, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs) -> None:
    if request is None:
        return
    window = settings.LOGIN_LOCKOUT_SECONDS
    now = time.time()
    for key in _keys(client_ip(request), credentials.get("username")):
        # Read-modify-write: two concurrent failures may count once, which only delays the
        # lockout by an attempt; the window starts at the first failure and is not extended.
        count, expires = cache.get(key) or (0, now + window)
        if expires <= now:
            count, expires = 0, now + window
        cache.set(key, (count + 1, expires), timeout=max(1, int(expires - now) + 1))


@receiver(user_logged_in)
def _reset_on_success(sender, request: HttpRequest | None = None, user=None, **kwargs) -> None:
    if request is None or user is None:
        return
    cache.delete(f"login-fail:user:{client_ip(request)}:{user.get_username().strip().lower()[:150]}")


class LoginThrottleMiddleware:
    """Refuses login POSTs (dashboard and admin) from a locked-out client with a 429."""

    def __init__(self, get_response):
        self.get_response = get_response
        self._paths: set[str] | None = None

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._paths is None:
            self._paths = {reverse("login"), reverse("admin:login")}
        if request.method == "POST" and request.path in self._paths:
            until = login_locked_until(request, request.POST.get("username"))
            if until is not None:
                wait = max(1, int(until - time.time() + 0.999))
                minutes = max(1, (wait + 59) // 60)
                response = render(
                    request,
                    "registration/login.html",
                    {
                        "lockout": f"Too many failed login attempts. Try again in {minutes} minute"
                        f"{'s' if minutes != 1 else ''}.",
                        "form": None,
                        "next": request.POST.get("next", ""),
                    },
                    status=429,
                )
                response["Retry-After"] = str(wait)
                return response
        return self.get_response(request)


# --- API throttling -------------------------------------------------------------------------


class ApiKeyRateThrottle(SimpleRateThrottle):
    """COMPACTOR_API_THROTTLE_RATE requests per API key (per user for the dashboard's session
    calls, per address otherwise); over it DRF answers 429 with Retry-After."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        # Read at request time (not class definition), so the setting can change in tests.
        return settings.API_THROTTLE_RATE

    def allow_request(self, request, view) -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request, view) -> str:
        auth = getattr(request, "auth", None)
        if auth is not None and getattr(auth, "pk", None) is not None:
            ident = f"key:{auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
