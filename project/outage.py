"""The database unavailable (restarting, unreachable, out of connections): every API answers 503
with `Retry-After`, in its own error shape, never a 500.

A request whose database work raises Django's OperationalError or InterfaceError (a connection
refused or dropped, "the database system is shutting down", a connection closed under it) gets:
- under /api/: the REST API's {"error", "detail"} body;
- under /anthropic/: the Messages API's {"type": "error", "error": {"type", "message"}};
- under /openai/: OpenAI's {"error": {"message", "type", "param", "code"}};
- anywhere else (the dashboard, the admin, login): a plain HTML page.
Clients and SDKs retry a 503 after `Retry-After` (COMPACTOR_DB_RETRY_AFTER seconds); the stale
connection is dropped at the end of the request (Django closes a connection that had errors and
fails its check), and CONN_HEALTH_CHECKS makes the next request's first query reconnect.

Two ways in, because Django turns an exception into a 500 page at the boundary of the layer that
raised it: a view's exception is answered here (`process_exception`); one raised by a middleware
inside this one (the session or the user loaded from the database) has already become that 500
page when it gets here, so `got_request_exception` marks the request and the page is replaced.
"""

from __future__ import annotations

import logging
import sys
import time

from django.conf import settings
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

OUTAGE_ERRORS = (OperationalError, InterfaceError)
_MARK = "_compactor_database_outage"
# Logged once per this many seconds per process, not once per failed request (the traceback is
# Django's own "Internal Server Error" log line, which a handled exception no longer writes).
_LOG_EVERY = 30.0
_last_logged = 0.0


def is_outage(exc: BaseException | None) -> bool:
    return isinstance(exc, OUTAGE_ERRORS)


def _message(seconds: int) -> str:
    return f"the database is unavailable (restarting or unreachable); nothing was changed, retry in {seconds} s"


def outage_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """503 + Retry-After in the error shape of the API `request` addressed."""
    global _last_logged
    seconds = int(settings.DB_RETRY_AFTER_SECONDS)
    now = time.monotonic()
    if now - _last_logged >= _LOG_EVERY:
        _last_logged = now
        logger.warning("Database unavailable, answering 503: %s: %s", type(exc).__name__, str(exc)[:300])
    message = _message(seconds)
    path = request.path
    if path.startswith("/api/"):
        response: HttpResponse = JsonResponse(
            {"error": message, "detail": {"status": 503, "retry_after": seconds, "cause": type(exc).__name__}},
            status=503,
        )
    elif path.startswith("/anthropic"):
        response = JsonResponse({"type": "error", "error": {"type": "api_error", "message": message}}, status=503)
    elif path.startswith("/openai"):
        response = JsonResponse(
            {"error": {"message": message, "type": "server_error", "param": None, "code": "database_unavailable"}},
            status=503,
        )
    else:
        response = HttpResponse(
            "<!doctype html><html lang=en><head><meta charset=utf-8><title>503 Service Unavailable</title></head>"
            f"<body><h1>Service unavailable</h1><p>Compactor's {message}.</p></body></html>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


@receiver(got_request_exception)
def _mark_outage(sender, request: HttpRequest | None = None, **kwargs) -> None:
    """Whatever layer raised it: remember that this request failed on the database."""
    exc = sys.exc_info()[1]  # the exception being handled: Django sends this signal from its except block
    if request is not None and is_outage(exc):
        setattr(request, _MARK, exc)


class DatabaseOutageMiddleware:
    """Outside every middleware that may touch the database (sessions, auth, CSRF, the API's JSON
    errors), inside the request metrics (which then count the 503s)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        exc = getattr(request, _MARK, None)
        if exc is not None and response.status_code >= 500:
            return outage_response(request, exc)
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if is_outage(exc):
            return outage_response(request, exc)
        return None
