"""Probes and scrapes ahead of everything else, and every other request timed and counted."""

from __future__ import annotations

import time

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from . import metrics, views

PROBES = {"/healthz": views.healthz, "/readyz": views.readyz, "/metrics": views.metrics_view}
KNOWN_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class ProbeMiddleware:
    """Answers /healthz, /readyz and /metrics before any other middleware.

    Load balancers, Kubernetes probes and Prometheus address a process by its IP over plain
    HTTP: the host check (ALLOWED_HOSTS) would answer 400 and the HTTPS redirect 301. These
    answers build no URL from the Host header, so skipping the check is safe; /metrics is still
    guarded by its own token. Probes are not counted in the request metrics (a scrape every
    few seconds would drown the real traffic).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        view = PROBES.get(request.path_info.rstrip("/") or "/")
        if view is not None:
            return view(request)
        return self.get_response(request)


def view_label(request: HttpRequest) -> str:
    """The URL pattern's name (bounded), never the path: paths carry session ids."""
    match = getattr(request, "resolver_match", None)
    if match is not None:
        return match.view_name or match._func_path
    if settings.STATIC_URL and request.path_info.startswith("/" + settings.STATIC_URL.lstrip("/")):
        return "static"
    return "unmatched"


MEMORY_EVERY_SECONDS = 1.0


class RequestMetricsMiddleware:
    """compactor_http_requests_total and compactor_http_request_duration_seconds, by view, method
    and status. Outermost after the probes, so the time includes every other middleware. Also the
    process's resident memory (compactor_web_process_resident_bytes), at most once a second."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.memory_at = 0.0

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in KNOWN_METHODS else "other"
        metrics.request_observe(
            view=view_label(request),
            method=method,
            status=response.status_code,
            seconds=time.perf_counter() - started,
        )
        now = time.monotonic()
        if now - self.memory_at >= MEMORY_EVERY_SECONDS:
            self.memory_at = now
            rss = metrics.resident_bytes()
            if rss is not None:
                metrics.web_memory_observe(rss)
        return response
