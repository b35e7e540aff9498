"""`Transfer-Encoding: chunked` bodies are read (and size-limited) like sized ones."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from django.test import override_settings

from sessions.models import ApiKey, Message
from tests.services import require_postgres

from .servers import ROOT, chunked, free_port, raw_http, server_env, stop, wait_for_port

MESSAGE = {"role": "user", "content": "List the files in src/ and tell me which one is the largest."}


def _chunked_post(api_key: str, path: str, body: bytes, *, terminated: bool = True) -> dict:
    """WSGI extras for the test client: no Content-Length, the body as a de-chunking server
    (gunicorn) hands it over."""
    extra = {
        "CONTENT_LENGTH": "",
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_AUTHORIZATION": f"Bearer {api_key}",
        "wsgi.input": io.BytesIO(body),
    }
    if terminated:
        extra["wsgi.input_terminated"] = True
    return extra


@pytest.mark.django_db
def test_a_chunked_message_is_stored(client, api_key, session):
    body = json.dumps(MESSAGE).encode()
    path = f"/api/v1/sessions/{session.pk}/messages/"
    response = client.generic("POST", path, **_chunked_post(api_key, path, body))
    assert response.status_code == 201, response.content
    seq = response.json()["messages"][0]["seq"]
    assert Message.objects.get(session=session, seq=seq).content == MESSAGE["content"]


@pytest.mark.django_db
@override_settings(MAX_REQUEST_BYTES=2048)
def test_a_chunked_body_over_the_limit_is_413(client, api_key, session):
    before = Message.objects.filter(session=session).count()
    body = json.dumps({"role": "user", "content": "x" * 5000}).encode()
    path = f"/api/v1/sessions/{session.pk}/messages/"
    response = client.generic("POST", path, **_chunked_post(api_key, path, body))
    assert response.status_code == 413
    assert "the limit is 2,048 bytes" in response.json()["error"]
    assert Message.objects.filter(session=session).count() == before


@pytest.mark.django_db
def test_a_chunked_body_on_a_server_that_does_not_dechunk_is_411(client, api_key, session):
    path = f"/api/v1/sessions/{session.pk}/messages/"
    extra = _chunked_post(api_key, path, b"5\r\nhello\r\n0\r\n\r\n", terminated=False)
    response = client.generic("POST", path, **extra)
    assert response.status_code == 411
    assert "Content-Length" in response.json()["error"]


@pytest.fixture
def gunicorn(transactional_db, tmp_path):
    require_postgres()
    port = free_port()
    log = tmp_path / "gunicorn.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "project.wsgi:application", "-b", f"127.0.0.1:{port}", "-w", "1"],
            cwd=ROOT,
            env=server_env(COMPACTOR_MAX_REQUEST_BYTES="65536"),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(port, process, log)
        yield port
    finally:
        stop(process)


def _request(port: int, path: str, key: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode() + chunked(body, 7)


@pytest.mark.postgres
def test_gunicorn_reads_a_raw_chunked_request(gunicorn, user):
    from sessions import services

    session = services.session_create(owner=user, title="chunked")
    _, key = ApiKey.objects.create_key(owner=user, name="chunked")
    path = f"/api/v1/sessions/{session.pk}/messages/"
    status, body = raw_http(gunicorn, _request(gunicorn, path, key, json.dumps(MESSAGE).encode()))
    assert status == 201, body
    assert json.loads(body)["messages"][0]["seq"] == 1
    assert Message.objects.get(session=session).content == MESSAGE["content"]

    big = json.dumps({"role": "user", "content": "y" * 70_000}).encode()
    status, body = raw_http(gunicorn, _request(gunicorn, path, key, big))
    assert status == 413, body
    assert "the limit is 65,536 bytes" in json.loads(body)["error"]
    assert Message.objects.filter(session=session).count() == 1
