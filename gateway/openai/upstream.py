"""HTTP to the upstream OpenAI-compatible API (COMPACTOR_OPENAI_UPSTREAM_URL) with the server's key.

The Anthropic gateway's pooled client (gateway.upstream.client), other headers: only OpenAI's
own go on, the client's `Authorization` (its Compactor key) never does.
"""

from __future__ import annotations

import httpx2 as httpx
from django.conf import settings
from django.http import HttpRequest

from gateway.upstream import client, post_streamed
from ops import metrics

# Organisation, project and beta flags decide what the request means.
FORWARDED_PREFIXES = ("openai-",)
FORWARDED_HEADERS = ("user-agent", "accept")
RETURNED_PREFIXES = ("openai-", "x-ratelimit-", "x-should-retry")
RETURNED_HEADERS = ("x-request-id", "retry-after", "retry-after-ms", "content-type", "cache-control")
KEY_VARIABLES = "COMPACTOR_OPENAI_UPSTREAM_API_KEY (or OPENAI_API_KEY)"


def request_headers(request: HttpRequest) -> dict[str, str]:
    out = {
        name.lower(): value
        for name, value in request.headers.items()
        if name.lower().startswith(FORWARDED_PREFIXES) or name.lower() in FORWARDED_HEADERS
    }
    out["content-type"] = "application/json"
    out["accept-encoding"] = "identity"  # bytes pass through as they come
    if settings.OPENAI_GATEWAY_UPSTREAM_API_KEY:
        out["authorization"] = f"Bearer {settings.OPENAI_GATEWAY_UPSTREAM_API_KEY}"
    return out


def response_headers(response: httpx.Response) -> dict[str, str]:
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower().startswith(RETURNED_PREFIXES) or name.lower() in RETURNED_HEADERS
    }


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
