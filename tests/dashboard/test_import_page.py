"""Dashboard Import page (upload → session) and the subagent links on the session page."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse

from sessions.models import Session
from tests.compaction.test_import_codex import damaged_rollout
from tests.corpus import TRANSCRIPTS, corpus

from .factories import make_session

pytestmark = pytest.mark.django_db

URL = reverse("dashboard:import")
DATA = TRANSCRIPTS


def upload(path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes())


def test_the_page_needs_a_login(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_page_has_a_file_picker_and_is_in_the_nav(logged_in):
    body = logged_in.get(URL).content.decode()
    assert 'type="file"' in body and 'name="file"' in body and 'hx-encoding="multipart/form-data"' in body
    assert 'id="import-progress"' in body
    assert '<option value="codex">codex</option>' in body and "Codex CLI rollouts" in body
    assert f'href="{URL}" aria-current="page">Import</a>' in body


@corpus
def test_htmx_upload_shows_the_report_with_a_link(logged_in, user):
    path = DATA / "claude-code" / "tool_heavy.jsonl"
    response = logged_in.post(URL, {"file": upload(path)}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    session = Session.objects.get(owner=user)
    body = response.content.decode()
    assert reverse("dashboard:session-detail", args=[session.pk]) in body
    assert f"{session.message_count} messages" in body and "1 queued user message" in body
    assert "Skipped: blank text blocks dropped 1, file-history-snapshot 3" in body


@corpus
def test_without_javascript_a_success_redirects_to_the_session(logged_in, user):
    response = logged_in.post(URL, {"file": upload(DATA / "swe-agent" / "katy.traj"), "title": "Katy"})
    session = Session.objects.get(owner=user)
    assert response.status_code == 302 and response["Location"] == reverse(
        "dashboard:session-detail", args=[session.pk]
    )
    assert session.title == "Katy" and session.agent == "swe-agent"


def test_a_bad_file_names_the_line_and_stores_nothing(logged_in):
    bad = SimpleUploadedFile("notes.txt", b"hello\nworld\n")
    response = logged_in.post(URL, {"file": bad}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    body = response.content.decode()
    assert 'role="alert"' in body and "notes.txt: line 1: not JSON" in body and "Nothing was stored" in body
    response = logged_in.post(URL, {"file": SimpleUploadedFile("notes.txt", b"hello\nworld\n")})
    assert response.status_code == 400 and "notes.txt: line 1: not JSON" in response.content.decode()
    response = logged_in.post(URL, {}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400 and "Transcript file: This field is required." in response.content.decode()
    assert not Session.objects.exists()


@corpus
@override_settings(MAX_REQUEST_BYTES=2048)
def test_the_size_limit_applies(logged_in):
    response = logged_in.post(URL, {"file": upload(DATA / "claude-code" / "short.jsonl")}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "the limit is 2,048 bytes" in response.content.decode()
    assert not Session.objects.exists()


def test_session_page_lists_subagents_and_links_back_to_the_parent(logged_in, user, other_user):
    parent = make_session(user, title="Main run")
    child = make_session(user, title="Explore the repo", parent=parent)
    make_session(other_user, title="Someone else's child", parent=parent)
    body = logged_in.get(reverse("dashboard:session-detail", args=[parent.pk])).content.decode()
    assert "Subagents" in body and reverse("dashboard:session-detail", args=[child.pk]) in body
    assert "Someone else" not in body
    body = logged_in.get(reverse("dashboard:session-detail", args=[child.pk])).content.decode()
    assert "subagent of" in body and reverse("dashboard:session-detail", args=[parent.pk]) in body
    body = logged_in.get(reverse("dashboard:session-detail", args=[make_session(user).pk])).content.decode()
    assert "Subagents" not in body and "subagent of" not in body


def test_a_codex_rollout_imports_and_the_result_names_its_skips(logged_in, user, tmp_path):
    path = damaged_rollout(tmp_path)
    response = logged_in.post(
        URL,
        {"file": SimpleUploadedFile("rollout.jsonl", path.read_bytes())},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    session = Session.objects.get(owner=user)
    body = response.content.decode()
    assert reverse("dashboard:session-detail", args=[session.pk]) in body
    assert "(codex)" in body and "1 compaction " in body
    assert "item image generation call 1" in body and "truncated last line 1" in body
