"""Every error under /api/ is JSON, with DEBUG on (`make run`) as with DEBUG off."""

from __future__ import annotations

import pytest

from sessions import selectors

from .helpers import url

pytestmark = pytest.mark.django_db


@pytest.fixture(params=[True, False], ids=["debug", "no-debug"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.mark.parametrize(
    "path",
    ["/api/v1/sessions/not-a-uuid/context/", "/api/v1/nothing-here/", "/api/v2/sessions/"],
)
def test_unknown_api_urls_are_a_json_404(api, debug, path):
    response = api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"].startswith(f"not found: no API endpoint at {path}")
    assert body["detail"] == {"path": path}


def test_a_missing_session_is_a_json_404(api, debug):
    response = api.get("/api/v1/sessions/00000000-0000-0000-0000-000000000000/context/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()


def test_a_crash_is_a_json_500_without_traceback(api, debug, session, monkeypatch):
    def crash(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(selectors, "context_build", crash)
    api.raise_request_exception = False
    response = api.get(url(session, "context/"))
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "internal server error; the failure was logged", "detail": {"status": 500}}
    assert b"secret internals" not in response.content and b"Traceback" not in response.content


def test_html_pages_outside_the_api_stay_html(client, debug):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("path", ["/anthropic/v1/messages", "/openai/v1/chat/completions"])
def test_the_gateways_django_error_pages_are_its_apis_json(client, debug, path):
    """A Host not allowed (Django's own 400 page) on the gateway's paths, in the calling API's
    error shape: Claude Code and the OpenAI SDKs parse it (it was an HTML page)."""
    response = client.post(path, b"{}", content_type="application/json", HTTP_HOST="not-allowed.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    if path.startswith("/anthropic"):
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    else:
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]


def test_a_gateway_crash_is_a_json_500_in_the_messages_api_shape(client, debug, monkeypatch):
    from gateway import views

    def crash(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(views, "read_request", crash)
    client.raise_request_exception = False
    response = client.post("/anthropic/v1/messages", b"{}", content_type="application/json")
    assert response.status_code == 500
    assert response.json() == {
        "type": "error",
        "error": {"type": "api_error", "message": "internal server error; the failure was logged"},
    }
    assert b"secret internals" not in response.content


def test_a_post_without_its_trailing_slash_is_redirected_with_its_method_and_body_kept(api, debug):
    # Django answers it with a RuntimeError under DEBUG (a 500) and a 301 the client follows as a
    # GET (the body lost) without: a 308 repeats the POST at the slashed path.
    response = api.post("/api/v1/sessions", {"title": "slashless"}, format="json")
    assert response.status_code == 308
    assert response["Location"] == "/api/v1/sessions/"
    followed = api.post("/api/v1/sessions", {"title": "slashless"}, format="json", follow=True)
    assert followed.status_code == 201, followed.content
    assert followed.json()["title"] == "slashless"
    # A GET keeps Django's 301.
    assert api.get("/api/v1/sessions").status_code == 301
