"""What the gateway forwards: every header the client sent except hop-by-hop ones, its
credentials, what describes the hop to the gateway and what the gateway recomputes (Codex's
session-id, thread-id, originator and x-codex-* headers were dropped); and its base URLs answer
GET and HEAD as the providers do (Claude Code's start-up HEAD /anthropic got a 301, then a 404
with a body gunicorn warned about)."""

from __future__ import annotations

import json

import pytest
from django.test import Client, RequestFactory

from gateway import views
from gateway.openai import views as openai_views
from tests.gateway.openai_upstream import KEY as OPENAI_KEY

pytestmark = pytest.mark.django_db

CODEX = {
    "HTTP_SESSION_ID": "019a-session",
    "HTTP_THREAD_ID": "019a-thread",
    "HTTP_ORIGINATOR": "codex_exec",
    "HTTP_X_CODEX_TURN_METADATA": '{"turn": 3}',
    "HTTP_X_CODEX_BETA_FEATURES": "unified_exec",
    "HTTP_OPENAI_BETA": "responses=experimental",
    "HTTP_USER_AGENT": "codex_exec/0.171.0",
}
NOT_FORWARDED = {
    "HTTP_COOKIE": "sessionid=secret",
    "HTTP_PROXY_AUTHORIZATION": "Basic c2VjcmV0",
    "HTTP_X_FORWARDED_FOR": "10.0.0.7",
    "HTTP_KEEP_ALIVE": "timeout=5",
    "HTTP_TE": "trailers",
    "HTTP_X_COMPACTOR_AGENT": "mine",
    "HTTP_CONNECTION": "keep-alive, x-hop",
    "HTTP_X_HOP": "named by Connection",
    "HTTP_ACCEPT_ENCODING": "gzip, br",
}


def test_codex_headers_go_upstream_and_credentials_do_not(openai_upstream, api_key):
    body = {"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": "hi"}], "stream": False}
    response = Client().post(
        "/openai/v1/responses",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_key}",
        **CODEX,
        **NOT_FORWARDED,
    )
    assert response.status_code == 200, response.content
    sent = openai_upstream.requests[-1].headers
    for name, value in CODEX.items():
        assert sent[name[5:].lower().replace("_", "-")] == value
    for name in NOT_FORWARDED:
        header = name[5:].lower().replace("_", "-")
        if header not in ("accept-encoding", "connection"):  # the gateway's own HTTP client sets these
            assert header not in sent, header
    assert sent["accept-encoding"] == "identity"  # the bytes are relayed as they come
    assert sent["connection"] == "keep-alive"  # the gateway's pooled connection, not the client's "x-hop"
    assert sent["authorization"] == f"Bearer {OPENAI_KEY}" and api_key not in json.dumps(sent)


def test_anthropic_headers_go_upstream_with_the_servers_key(upstream, api_key):
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    response = Client().post(
        "/anthropic/v1/messages",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_X_API_KEY=api_key,
        HTTP_X_CLAUDE_CODE_SESSION_ID="f745694a",
        HTTP_X_STAINLESS_RETRY_COUNT="0",
        HTTP_ANTHROPIC_BETA="mid-conversation-system-2026-04-07",
        **NOT_FORWARDED,
    )
    assert response.status_code == 200
    sent = upstream.requests[-1].headers
    assert sent["x-claude-code-session-id"] == "f745694a" and sent["x-stainless-retry-count"] == "0"
    assert sent["anthropic-beta"] == "mid-conversation-system-2026-04-07"
    assert sent["x-api-key"] == "upstream-secret" and "cookie" not in sent and "x-hop" not in sent
    assert "x-forwarded-for" not in sent and "x-compactor-agent" not in sent


@pytest.mark.parametrize("path", ["/anthropic", "/anthropic/", "/openai", "/openai/"])
def test_the_base_urls_answer_get_and_head_without_a_redirect_or_a_body_on_head(path, db):
    got = Client().get(path)
    assert got.status_code == 200 and got.json()["serves"]
    head = Client().head(path)
    assert head.status_code == 200
    view = views.root_view if path.startswith("/anthropic") else openai_views.root_view
    direct = view(RequestFactory().head(path))  # what the WSGI server is handed: no body bytes
    assert direct.status_code == 200 and direct.content == b""
    assert Client().post(path).status_code == 405


def test_a_head_on_an_unknown_gateway_path_has_no_body(db):
    assert views.not_found_view(RequestFactory().head("/anthropic/v2/x")).content == b""
    assert openai_views.not_found_view(RequestFactory().head("/openai/v2/x")).content == b""
