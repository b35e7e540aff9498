"""GET /healthz, /readyz and /metrics (served by ops.middleware.ProbeMiddleware, ahead of the
host check and the HTTPS redirect)."""

from __future__ import annotations

import hmac
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from . import metrics
from .health import readiness
from .scrape import DatabaseCollector

READ_METHODS = ("GET", "HEAD")


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


def _method_not_allowed(request: HttpRequest) -> HttpResponse:
    response = JsonResponse({"error": f"method {request.method} not allowed; use GET"}, status=405)
    response["Allow"] = ", ".join(READ_METHODS)
    return response


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: the process answers. Touches nothing else, so a database outage never gets
    healthy web processes restarted."""
    if request.method not in READ_METHODS:
        return _method_not_allowed(request)
    return _no_store(JsonResponse({"status": "ok"}))


def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: 200 when the database, the broker and a worker are there; 503 naming what is not."""
    if request.method not in READ_METHODS:
        return _method_not_allowed(request)
    state = readiness(now=timezone.now())
    response = JsonResponse(state.as_json(), status=200 if state.ready else 503)
    # ops.health logged what is down; Django would add an ERROR line per probe (every few seconds).
    response._has_been_logged = True
    return _no_store(response)


@lru_cache(maxsize=1)
def _single_process_registry() -> CollectorRegistry:
    REGISTRY.register(DatabaseCollector())
    return REGISTRY


def _registry() -> CollectorRegistry:
    if metrics.MULTIPROCESS:
        # Per scrape, as prometheus_client's multiprocess mode asks: the files of every process.
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(DatabaseCollector())
        return registry
    return _single_process_registry()


def _authorized(request: HttpRequest, token: str) -> bool | None:
    """True for the right bearer token, False for a wrong one, None when none was sent."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    return hmac.compare_digest(given.strip().encode(), token.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, for `Authorization: Bearer $COMPACTOR_METRICS_TOKEN` only; a 404
    while the variable is unset (as if there were no such page)."""
    token = settings.METRICS_TOKEN
    if not token:
        return JsonResponse(
            {"error": "not found: /metrics is off; set COMPACTOR_METRICS_TOKEN to serve it"}, status=404
        )
    authorized = _authorized(request, token)
    if authorized is None:
        response = JsonResponse({"error": "/metrics needs Authorization: Bearer <COMPACTOR_METRICS_TOKEN>"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not authorized:
        return JsonResponse({"error": "wrong metrics token"}, status=403)
    if request.method not in READ_METHODS:
        return _method_not_allowed(request)
    # The classic text format, or OpenMetrics when the scraper asks for it (Accept).
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    rss = metrics.resident_bytes()  # the scraping process's own figure, fresh
    if rss is not None:
        metrics.web_memory_observe(rss)
    return _no_store(HttpResponse(encoder(_registry()), content_type=content_type))
