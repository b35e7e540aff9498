"""HTTP to the upstream OpenAI-compatible API (COMPACTOR_OPENAI_UPSTREAM_URL) with the server's key.

The Anthropic gateway's pooled client (gateway.upstream.client) and header rule: the client's
headers go on, its `Authorization` (its Compactor key) never does.
"""

from __future__ import annotations

import httpx2 as httpx
from django.conf import settings
from django.http import HttpRequest

from gateway.upstream import client, client_headers, post_streamed  # noqa: F401 - the routes read it here
from gateway.upstream import response_headers as response_headers  # re-exported: the routes read it here
from ops import metrics

KEY_VARIABLES = "COMPACTOR_OPENAI_UPSTREAM_API_KEY (or OPENAI_API_KEY)"


def request_headers(request: HttpRequest) -> dict[str, str]:
    """The client's headers by the gateway's rule (gateway.upstream.client_headers: Codex's
    session-id, thread-id, originator and x-codex-* included), with the server's key."""
    out = client_headers(request)
    if settings.OPENAI_GATEWAY_UPSTREAM_API_KEY:
        out["authorization"] = f"Bearer {settings.OPENAI_GATEWAY_UPSTREAM_API_KEY}"
    return out


def send(*, path: str, headers: dict[str, str], body: bytes) -> httpx.Response:
    """POST and return once the status and headers arrived (the caller reads the body)."""
    url = f"{settings.OPENAI_GATEWAY_UPSTREAM_URL}{path}"
    # beside the Messages API's paths in the upstream metrics
    return post_streamed(url=url, endpoint=f"/openai{path}", headers=headers, body=body)


def stream_interrupted(*, path: str) -> None:
    metrics.upstream_stream_interrupted(endpoint=f"/openai{path}")


def get(*, path: str, headers: dict[str, str]) -> httpx.Response:
    """GET (the model list), read whole."""
    url = f"{settings.OPENAI_GATEWAY_UPSTREAM_URL}{path}"
    timeout = httpx.Timeout(30.0)
    return client().get(url, headers={k: v for k, v in headers.items() if k != "content-type"}, timeout=timeout)
