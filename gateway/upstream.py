"""HTTP to the upstream Messages API (COMPACTOR_UPSTREAM_URL) with the server's own key.

httpx2 is the HTTP client the anthropic SDK itself depends on (no new requirement). One pooled
client per process (thread-safe), so a streaming call and the calls around it
reuse connections. Only the Messages API's own headers go on; the agent's credentials and
Compactor's headers never leave the service.
"""

from __future__ import annotations

import threading
import time

import httpx2 as httpx
from django.conf import settings
from django.http import HttpRequest

from ops import metrics

# Client headers passed on: the API version and beta flags decide what the request means.
FORWARDED_PREFIXES = ("anthropic-",)
FORWARDED_HEADERS = ("user-agent", "accept")
# Response headers passed back (request ids, rate limits, retry hints); hop-by-hop and
# length/encoding headers are the gateway's own business.
RETURNED_PREFIXES = ("anthropic-", "x-should-retry")
RETURNED_HEADERS = ("request-id", "retry-after", "retry-after-ms", "content-type", "cache-control")

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


def request_headers(request: HttpRequest) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in request.headers.items():
        lower = name.lower()
        if lower.startswith(FORWARDED_PREFIXES) or lower in FORWARDED_HEADERS:
            out[lower] = value
    out.setdefault("anthropic-version", "2023-06-01")
    out["content-type"] = "application/json"
    # Bytes pass through to the client as they come: no compression to undo in between.
    out["accept-encoding"] = "identity"
    if settings.GATEWAY_UPSTREAM_API_KEY:
        out["x-api-key"] = settings.GATEWAY_UPSTREAM_API_KEY
    return out


def response_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower().startswith(RETURNED_PREFIXES) or name.lower() in RETURNED_HEADERS
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
