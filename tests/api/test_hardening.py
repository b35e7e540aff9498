"""Bodies that used to end as 500s (lone surrogates, deep nesting, non-finite numbers), loose
block checks, the Bearer scheme's case, and JSON 404/500 pages under /api/."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from sessions import selectors, services, validation
from sessions.models import Message, Session
from tests.corpus import TRANSCRIPTS, corpus

from .helpers import snapshot, tool_use, url

pytestmark = pytest.mark.django_db

SURROGATE = "must not contain an unpaired surrogate"


def post_raw(api, path: str, body: str):
    return api.post(path, body, content_type="application/json")


def patch_raw(api, path: str, body: str):
    return api.patch(path, body, content_type="application/json")


# ---- 1. unpaired surrogates ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ('{"role": "user", "content": "half a pair: \\ud800"}', "content"),
        ('{"role": "user", "content": [{"type": "text", "text": "\\udc80 low"}]}', "content[0].text"),
        (
            '{"messages": [{"role": "user", "content": "ok"}, '
            '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", '
            '"input": {"command": "ls \\ud83d"}}]}]}',
            "messages[1].content[0].input.command",
        ),
        ('{"role": "user", "content": "ok", "usage": {"note": "\\ud800"}}', "usage.note"),
    ],
)
def test_an_unpaired_surrogate_in_a_message_is_a_400_naming_the_path(api, session, body, path):
    before = snapshot(session)
    response = post_raw(api, url(session, "messages/"), body)
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["error"].startswith(f"{path}: {SURROGATE}"), error
    assert snapshot(session) == before
    # The session and the list are still readable (they used to 500 forever after).
    assert api.get(url(session)).status_code == 200
    assert api.get("/api/v1/sessions/").status_code == 200
    assert api.get(url(session, "messages/")).status_code == 200


def test_an_unpaired_surrogate_in_a_key_is_named_escaped(api, session):
    body = '{"role": "user", "content": [{"type": "text", "text": "x", "\\udc80": 1}]}'
    response = post_raw(api, url(session, "messages/"), body)
    assert response.status_code == 400
    assert response.json()["error"] == f"content[0].'\\udc80': {validation.SURROGATE_PROBLEM}"


def test_a_valid_surrogate_pair_is_fine(api, session):
    response = post_raw(api, url(session, "messages/"), '{"role": "user", "content": "rocket \\ud83d\\ude80"}')
    assert response.status_code == 201, response.json()
    assert Message.objects.get(session=session).content == "rocket 🚀"


@pytest.mark.parametrize(
    ("method", "tail", "body", "path"),
    [
        ("post", None, '{"title": "\\ud800"}', "title"),
        ("post", None, '{"system_prompt": "You are \\udfff"}', "system_prompt"),
        ("post", None, '{"compaction_settings": {"compact_prompt": "\\ud800"}}', "compaction_settings.compact_prompt"),
        (
            "patch",
            "",
            '{"compaction_settings": {"summarizer_model": "\\ud800"}}',
            "compaction_settings.summarizer_model",
        ),
        ("post", "usage/", '{"input_tokens": 1, "model": "\\ud800"}', "model"),
    ],
)
def test_an_unpaired_surrogate_anywhere_else_is_a_400(api, session, method, tail, body, path):
    target = "/api/v1/sessions/" if tail is None else url(session, tail)
    response = (post_raw if method == "post" else patch_raw)(api, target, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"{path}: "), response.json()
    assert Session.objects.count() == 1
    session.refresh_from_db()
    assert session.compaction_settings == {} and session.last_usage is None


def test_the_services_refuse_surrogates_too(session):
    """Callers that bypass the HTTP parser (transcript import, replay) get the same check."""
    with pytest.raises(ValidationError) as caught:
        services.messages_append(session=session, messages=[{"role": "user", "content": "a\ud800"}], single=True)
    assert caught.value.message_dict == {"content": [validation.SURROGATE_PROBLEM]}
    assert services.compaction_settings_errors({"compact_prompt": "\udc00"}) == {
        "compact_prompt": validation.SURROGATE_PROBLEM
    }
    with pytest.raises(ValidationError):
        services.session_update(session=session, compaction_settings={"summarizer_model": "\ud800"})
    assert not Message.objects.exists()


def test_nul_is_still_refused_before_the_surrogate_walk(session):
    errors = validation.Errors()
    validation.check_message({"role": "user", "content": "a\x00b"}, "", errors)
    assert errors.items == {"content": validation.NUL_PROBLEM}


# ---- 3. deep nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("tail", ["messages/", "usage/", "", None])
def test_absurdly_nested_json_is_a_json_400_not_a_500(api, session, tail):
    body = "[" * 100_000 + "]" * 100_000
    target = "/api/v1/sessions/" if tail is None else url(session, tail)
    response = (api.patch if tail == "" else api.post)(target, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "JSON parse error - nested too deeply"


def nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_nesting_that_parses_is_still_bounded(api, session):
    # 500 levels parse, but DRF's JSONField check and json encoding would recurse on them.
    body = json.dumps({"compaction_settings": {"compact_prompt": nested(500)}})
    response = api.post("/api/v1/sessions/", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested more than" in response.json()["error"]
    assert Session.objects.count() == 1


def test_message_content_deeper_than_64_levels_is_a_400_naming_the_path(api, session):
    ok = tool_use("t1")
    ok["content"][0]["input"] = {"tree": nested(60)}
    assert api.post(url(session, "messages/"), ok, format="json").status_code == 201
    deep = tool_use("t2")
    deep["content"][0]["input"] = {"tree": nested(70)}
    before = snapshot(session)
    response = api.post(url(session, "messages/"), deep, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith("content[0].input.tree.k.k.") and error.endswith("nested more than 64 levels deep")
    assert snapshot(session) == before


# ---- 4. non-finite numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_a_400(api, session, number):
    before = snapshot(session)
    body = (
        '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Calc", '
        f'"input": {{"x": {number}}}}}]}}'
    )
    response = post_raw(api, url(session, "messages/"), body)
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith("JSON parse error - ")
    assert snapshot(session) == before
    created = post_raw(api, "/api/v1/sessions/", f'{{"compaction_settings": {{"auto_compact_ratio": {number}}}}}')
    assert created.status_code == 400
    usage = post_raw(api, url(session, "usage/"), f'{{"input_tokens": 1, "output_tokens": {number}}}')
    assert usage.status_code == 400
    assert Session.objects.count() == 1


def test_finite_floats_still_parse(api, session):
    body = (
        '{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Calc", "input": {"x": 1.5e300}}]}'
    )
    assert post_raw(api, url(session, "messages/"), body).status_code == 201


# ---- 6. block shapes ---------------------------------------------------------------------------


def image(source: dict) -> dict:
    return {"role": "user", "content": [{"type": "image", "source": source}]}


@pytest.mark.parametrize(
    ("message", "path", "problem"),
    [
        (image({"type": "base64", "media_type": "image/png"}), "content[0].source.data", "required for a base64"),
        (image({"type": "base64", "data": "iVBORw0KGgo="}), "content[0].source.media_type", "required for a base64"),
        (image({"type": "url"}), "content[0].source.url", "required for a url source"),
        (image({"type": "text", "data": "x"}), "content[0].source.type", "must be one of base64, url, file"),
        (
            image({"type": "url", "url": "https://x/y.png", "extra": 1}),
            "content[0].source.extra",
            "unknown field for a url source",
        ),
        (
            {"role": "user", "content": [{"type": "document", "source": {"type": "base64", "data": "JVBE"}}]},
            "content[0].source.media_type",
            "required for a base64 source",
        ),
        (
            {"role": "user", "content": [{"type": "document", "source": {"type": "text", "media_type": "text/plain"}}]},
            "content[0].source.data",
            "required for a text source",
        ),
        (
            {"role": "user", "content": [{"type": "document", "source": {"type": "content", "content": []}}]},
            "content[0].source.content",
            "must not be empty",
        ),
        (
            {"role": "user", "content": [{"type": "text", "text": "hi", "txet": "typo"}]},
            "content[0].txet",
            "unknown field for a text block",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}, "output": 1}]},
            "content[0].output",
            "unknown field for a tool_use block",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "x", "z": 1}]}
                ],
            },
            "content[0].content[0].z",
            "unknown field for a text block",
        ),
    ],
)
def test_malformed_blocks_are_a_400_naming_the_field(api, session, message, path, problem):
    before = snapshot(session)
    response = api.post(url(session, "messages/"), message, format="json")
    assert response.status_code == 400
    assert response.json()["error"].startswith(f"{path}: {problem}"), response.json()
    assert snapshot(session) == before


def test_well_formed_media_blocks_are_accepted(api, session):
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/a.png"},
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "spec"}, "title": "Spec"},
        {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "a"}]}},
        {"type": "document", "source": {"type": "file", "file_id": "file_01"}, "citations": {"enabled": True}},
        {"type": "text", "text": "What do these say?", "cache_control": {"type": "ephemeral"}},
    ]
    response = api.post(url(session, "messages/"), {"role": "user", "content": content}, format="json")
    assert response.status_code == 201, response.json()


SHARED = TRANSCRIPTS / "claude-code"


@corpus
def test_every_message_of_every_real_claude_code_transcript_validates():
    from compaction.core.transcripts import read_claude_code
    from compaction.services import transcript_messages_for_api

    paths = sorted(SHARED.rglob("*.jsonl"))
    assert paths, f"no transcripts under {SHARED}"
    checked = 0
    for path in paths:
        for index, message in enumerate(transcript_messages_for_api(read_claude_code(path).messages)):
            errors = validation.Errors()
            validation.check_message(message, f"{path.name}[{index}]", errors)
            assert not errors, errors.items
            checked += 1
    assert checked > 500


# ---- 10. auth scheme, JSON 404/500 ------------------------------------------------------------


def test_the_bearer_scheme_is_case_insensitive(session, api_key):
    for scheme in ("bearer", "BEARER", "Bearer"):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"{scheme} {api_key}")
        assert client.get(url(session)).status_code == 200, scheme
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="bearer not-a-key")
    assert client.get(url(session)).status_code == 401


@pytest.mark.parametrize(
    "path", ["/api/v1/sessions/123/", "/api/v1/sessions/123/messages/", "/api/v1/nothing/", "/api/v2/"]
)
def test_unknown_api_paths_are_a_json_404(api, path):
    response = api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"].startswith(f"not found: no API endpoint at {path}")
    assert body["detail"] == {"path": path}


def test_unknown_pages_elsewhere_stay_html(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_a_crash_under_api_is_a_json_500(api, monkeypatch):
    def boom(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(selectors, "session_list", boom)
    api.raise_request_exception = False
    response = api.get("/api/v1/sessions/")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "internal server error; the failure was logged", "detail": {"status": 500}}
    assert "boom" not in response.content.decode()
