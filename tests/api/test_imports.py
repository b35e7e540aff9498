"""POST /api/v1/imports/: a transcript file in, a session out; a bad file is a 400 that stores nothing."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from compaction.models import Compaction
from sessions.models import Message, Session
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = pytest.mark.django_db

URL = "/api/v1/imports/"
DATA = TRANSCRIPTS


def upload(path, name=None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name or path.name, path.read_bytes(), content_type="application/octet-stream")


@corpus
def test_it_imports_a_claude_code_file_with_its_compaction_and_usage(api, user):
    path = DATA / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
    response = api.post(URL, {"file": upload(path)}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    session = Session.objects.get(owner=user)
    assert body["format"] == "claude-code"
    assert body["session"]["id"] == str(session.pk) and body["messages"] == session.message_count > 250
    assert body["session"]["usage"]["source"] == "provider+estimate"
    report = body["report"]
    assert (
        report["usage_reports"] == 143 == Message.objects.filter(session=session, provider_usage__isnull=False).count()
    )
    assert report["compactions"] == 1 and session.active_compaction.reason == "import"
    assert report["skipped"]["skipped_progress"] == 1117
    assert report["subagents"] == []  # an upload is one file
    assert body["session"]["parent"] is None


@corpus
def test_it_detects_other_formats_and_takes_title_and_format(api, user):
    path = DATA / "swe-agent" / "katy.traj"
    response = api.post(URL, {"file": upload(path), "title": "Katy's run"}, format="multipart")
    assert response.status_code == 201, response.json()
    assert response.json()["format"] == "swe-agent" and response.json()["session"]["title"] == "Katy's run"
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
    ]
    file = SimpleUploadedFile("chat.json", json.dumps(chat).encode())
    response = api.post(URL, {"file": file, "format": "openai-chat"}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["format"] == "openai-chat" and body["messages"] == 2
    assert body["session"]["system_prompt"] == "Be brief." and body["session"]["title"] == "hello there"


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"name,age\nbob,3\n", "file: line 1: not JSON; a transcript is JSON or JSON lines"),
        (b"", "file: line 1: the file is empty"),
        (b'[{"role": "robot", "content": "x"}]', "file: messages[0].role: 'robot' is not one of user, assistant"),
    ],
)
def test_a_file_that_is_not_a_transcript_is_a_400_naming_the_problem(api, user, content, error):
    response = api.post(URL, {"file": SimpleUploadedFile("x.json", content)}, format="multipart")
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert not Session.objects.exists()


@corpus
def test_a_file_the_service_rejects_half_way_stores_nothing(api, user, tmp_path):
    # Valid JSON lines up to a bad one in the middle: nothing of the first part stays.
    lines = (DATA / "claude-code" / "tool_heavy.jsonl").read_text().splitlines()
    lines.insert(20, "{not json")
    file = SimpleUploadedFile("cut.jsonl", "\n".join(lines).encode())
    response = api.post(URL, {"file": file}, format="multipart")
    assert response.status_code == 400
    assert response.json()["error"].startswith("file: line 21: not JSON")
    # A transcript whose messages the service refuses (a tool id it cannot store) after others
    # were appended: the transaction is rolled back.
    messages = [{"role": r, "content": f"message {n}"} for n in range(600) for r in ("user", "assistant")]
    messages.append({"role": "assistant", "content": [{"type": "tool_use", "id": "x" * 300, "name": "t", "input": {}}]})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x" * 300, "content": "ok"}]})
    file = SimpleUploadedFile("big.json", json.dumps(messages).encode())
    response = api.post(URL, {"file": file}, format="multipart")
    assert response.status_code == 400, response.json()
    assert "rejected" in response.json()["error"]
    assert not Session.objects.exists() and not Message.objects.exists() and not Compaction.objects.exists()


@corpus
def test_bad_fields_are_400s(api):
    path = DATA / "claude-code" / "short.jsonl"
    response = api.post(URL, {"file": upload(path), "format": "csv"}, format="multipart")
    assert response.status_code == 400 and response.json()["error"].startswith("format:")
    response = api.post(URL, {"file": upload(path), "colour": "red"}, format="multipart")
    assert response.status_code == 400 and response.json()["error"].startswith("colour: unknown field")
    response = api.post(URL, {"format": "pi"}, format="multipart")
    assert response.status_code == 400 and response.json()["error"].startswith("file:")
    response = api.post(URL, {"file": "x"}, format="json")
    assert response.status_code == 415
    assert not Session.objects.exists()


@corpus
@override_settings(MAX_REQUEST_BYTES=4096)
def test_the_request_size_limit_applies(api):
    response = api.post(URL, {"file": upload(DATA / "claude-code" / "short.jsonl")}, format="multipart")
    assert response.status_code == 413
    assert "4,096" in response.json()["error"]
    assert not Session.objects.exists()


@corpus
def test_it_needs_credentials(client):
    response = client.post(URL, {"file": upload(DATA / "claude-code" / "short.jsonl")})
    assert response.status_code in (401, 403)
    assert not Session.objects.exists()


@corpus
def test_replay_through_the_api_appends_message_by_message(api, user):
    response = api.post(
        URL, {"file": upload(DATA / "claude-code" / "short.jsonl"), "replay": "true"}, format="multipart"
    )
    assert response.status_code == 201, response.json()
    session = Session.objects.get(owner=user)
    assert response.json()["messages"] == session.message_count == 4
    assert session.replaying is False


def test_the_endpoint_is_in_the_openapi_schema(client, admin_user):
    client.force_login(admin_user)
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/imports/"]["post"]
    assert "multipart/form-data" in operation["requestBody"]["content"]
    assert {"201", "400", "413"} <= set(operation["responses"])


def test_characters_no_database_stores_are_replaced_not_fatal(api, user):
    messages = [
        {"role": "user", "content": "cat the binary file please"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "cat a.bin"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ELF\u0000\u0000x \ud800"}],
        },
    ]
    text = "[" + ",".join(json.dumps(m) for m in messages) + "]"
    response = api.post(URL, {"file": SimpleUploadedFile("bin.json", text.encode())}, format="multipart")
    assert response.status_code == 201, response.json()
    assert response.json()["report"]["strings_with_unstorable_characters"] == 1
    row = Message.objects.get(session__owner=user, seq=3)
    assert row.content[0]["content"] == "ELF\u2400\u2400x \ufffd"


def test_a_subagent_session_names_its_parent(api, user):
    from sessions import services as session_services

    parent = session_services.session_create(owner=user, title="main")
    child = session_services.session_create(owner=user, title="subagent")
    Session.objects.filter(pk=child.pk).update(parent=parent)
    assert api.get(f"/api/v1/sessions/{child.pk}/").json()["parent"] == str(parent.pk)
    assert api.get(f"/api/v1/sessions/{parent.pk}/").json()["parent"] is None


def test_blocks_the_service_does_not_store_are_kept_as_text(api, user):
    # Newer agents log block types the Messages API added later (server tools, tool references)
    # and extra fields: one odd block must not cost the whole file, nor its content.
    messages = [
        {"role": "user", "content": "search the web for the release date"},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "release date"}},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [{"title": "Release notes"}]},
                {"type": "text", "text": "It ships on Friday.", "annotations": ["x"]},
                {"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"q": "x"}, "extra": 1},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "tool_reference", "tool_name": "mcp__db__query"}],
                }
            ],
        },
    ]
    file = SimpleUploadedFile("odd.json", json.dumps(messages).encode())
    response = api.post(URL, {"file": file, "format": "anthropic-messages"}, format="multipart")
    assert response.status_code == 201, response.json()
    skipped = response.json()["report"]["skipped"]
    assert skipped == {"skipped_block_field_text.annotations": 1, "skipped_block_field_tool_use.extra": 1}
    rows = {m.seq: m.content for m in Message.objects.filter(session__owner=user)}
    assistant = rows[2]
    assert assistant[0]["type"] == "text" and "web_search" in assistant[0]["text"]
    assert "Release notes" in assistant[1]["text"]
    assert assistant[2] == {"type": "text", "text": "It ships on Friday."}
    assert assistant[3] == {"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"q": "x"}}
    inner = rows[3][0]["content"][0]
    assert inner["type"] == "text" and "mcp__db__query" in inner["text"]


def test_media_the_provider_refuses_is_reported_per_message_not_stored(api, user):
    """An image with data that is not base64, or a url source that is not https, is not stored
    (it would be sent on every later call, each refused): a text block says so, and the report
    names the message, the block and the problem (issue 35 item 4)."""
    png = "iVBORw0KGgo="
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What is in these?"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "!!notb64"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file": "a.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
            {"type": "image", "source": {"type": "url", "url": "javascript:alert(1)"}},
        ]}]},
        {"role": "assistant", "content": "A screenshot."},
    ]  # fmt: skip
    text = "[" + ",".join(json.dumps(m) for m in messages) + "]"
    response = api.post(URL, {"file": SimpleUploadedFile("media.json", text.encode())}, format="multipart")
    assert response.status_code == 201, response.json()
    report = response.json()["report"]
    assert report["blocks_not_stored"] == [
        {"message": 1, "block": "content[1].source.data", "problem": "is not valid base64 (RFC 4648: A-Z, a-z, "
         "0-9, + and /, padded with =; no spaces)"},
        {"message": 3, "block": "content[0].content[1].source.url", "problem": "must be an https:// URL, got "
         "'javascript:alert(1)'"},
    ]  # fmt: skip
    assert report["skipped"]["skipped_image_blocks_the_provider_refuses"] == 2
    session = Session.objects.get(owner=user)
    stored = json.dumps(list(Message.objects.filter(session=session).values_list("content", flat=True)))
    assert "!!notb64" not in stored and '"url": "javascript:' not in stored
    first = Message.objects.get(session=session, seq=1).content
    assert first[1] == {"type": "text", "text": "[image not stored: content[1].source.data: " + report[
        "blocks_not_stored"][0]["problem"] + "]"}  # fmt: skip
    result = Message.objects.get(session=session, seq=3).content[0]["content"]
    assert result[0]["source"]["data"] == png  # the valid one is kept as it is
