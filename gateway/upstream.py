"""HTTP to the upstream Messages API (COMPACTOR_UPSTREAM_URL) with the server's own key.

httpx2 is the HTTP client the anthropic SDK itself depends on (no new requirement). One pooled
client per process (thread-safe), so a streaming call and the calls around it
reuse connections. The client's headers go on except hop-by-hop ones, its credentials and
Compactor's own (`client_headers`); the server's key replaces the client's.
"""

from __future__ import annotations

import threading
import time

import httpx2 as httpx
from django.conf import settings
from django.http import HttpRequest

from ops import metrics

# Headers the gateway does not pass on, either way. Hop-by-hop (RFC 9110 7.6.1: they describe one
# connection, and a Connection header names more of them); the client's credentials (its
# Compactor key) and cookies; what describes the hop to the gateway (a proxy in front adds
# them); what the gateway sets itself because the bytes it sends may not be the client's
# (length, type, encoding: bytes pass through undecoded, so `identity`); Compactor's own.
HOP_BY_HOP = frozenset(
    ("connection", "proxy-connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade")
)
CREDENTIALS = frozenset(("authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "x-goog-api-key"))
HOP_HEADERS = frozenset(("host", "forwarded", "via", "x-real-ip", "expect"))
RECOMPUTED = frozenset(("content-length", "content-type", "accept-encoding", "content-encoding"))
NOT_FORWARDED_PREFIXES = ("x-forwarded-", "x-compactor-")
# The answer's headers the gateway sets itself (Django/gunicorn frame the response).
NOT_RETURNED = HOP_BY_HOP | frozenset(("content-length", "content-encoding", "set-cookie", "server", "date"))

_client: httpx.Client | None = None
_lock = threading.Lock()


def client() -> httpx.Client:
    global _client
    with _lock:
        if _client is None:
            _client = httpx.Client(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=20),
                follow_redirects=False,
            )
        return _client


def client_headers(request: HttpRequest) -> dict[str, str]:
    """Every header the client sent, lower-cased, except those listed above (and any its
    Connection header names): the rule every route of the gateway forwards by."""
    named = {token.strip().lower() for token in request.headers.get("connection", "").split(",")}
    out: dict[str, str] = {}
    for name, value in request.headers.items():
        lower = name.lower()
        if (
            lower in HOP_BY_HOP
            or lower in CREDENTIALS
            or lower in HOP_HEADERS
            or lower in RECOMPUTED
            or lower in named
            or lower.startswith(NOT_FORWARDED_PREFIXES)
        ):
            continue
        out[lower] = value
    out["content-type"] = "application/json"
    out["accept-encoding"] = "identity"  # bytes pass through to the client as they come
    return out


def request_headers(request: HttpRequest) -> dict[str, str]:
    out = client_headers(request)
    out.setdefault("anthropic-version", "2023-06-01")
    if settings.GATEWAY_UPSTREAM_API_KEY:
        out["x-api-key"] = settings.GATEWAY_UPSTREAM_API_KEY
    return out


def response_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream's answer headers as they came (request ids, rate limits, retry hints, a
    provider's own), less what frames the gateway's own response."""
    named = {token.strip().lower() for token in response.headers.get("connection", "").split(",")}
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower() not in NOT_RETURNED and name.lower() not in named
    }


def send(*, path: str, query: str, headers: dict[str, str], body: bytes) -> httpx.Response:
    """POST and return as soon as the status and headers arrived (the body is read by the caller)."""
    url = f"{settings.GATEWAY_UPSTREAM_URL}{path}"
    if query:
        url += f"?{query}"
    return post_streamed(url=url, endpoint=path, headers=headers, body=body)


def post_streamed(*, url: str, endpoint: str, headers: dict[str, str], body: bytes) -> httpx.Response:
    """POST with the gateway's timeouts, timed into the upstream metrics under `endpoint`; returns
    once the status and headers arrived (the caller reads the body)."""
    timeout = httpx.Timeout(settings.GATEWAY_UPSTREAM_TIMEOUT, connect=min(30.0, settings.GATEWAY_UPSTREAM_TIMEOUT))
    req = client().build_request("POST", url, headers=headers, content=body, timeout=timeout)
    started = time.perf_counter()
    try:
        response = client().send(req, stream=True)
    except httpx.HTTPError as exc:
        # The class only (ConnectError, ReadTimeout, ...): bounded, and no URL or credentials.
        metrics.upstream_observe(endpoint=endpoint, seconds=time.perf_counter() - started, error=type(exc).__name__)
        raise
    metrics.upstream_observe(endpoint=endpoint, seconds=time.perf_counter() - started, status=response.status_code)
    return response


def stream_interrupted(*, path: str) -> None:
    """A streamed answer that broke before its end (counted with the upstream errors)."""
    metrics.upstream_stream_interrupted(endpoint=path)
