"""The server as deployed (gunicorn with deploy/gunicorn.conf.py) cannot be held by slow clients,
and its own refusals are JSON (issue 35 items 2 and 6).

Before: a client that sent headers with `Content-Length: 100` and 10 bytes held a gunicorn
thread until the worker timeout; 70 of them took every thread (2 workers x 32), and ordinary
requests and /healthz timed out. Now each request is read whole by the worker's event loop before a
thread takes it (project/web_worker.py), and one that stalls is answered 408 once its deadline
passes."""

from __future__ import annotations

import io
import json
import socket
import time

import pytest

from sessions.models import ApiKey, Session
from tests.services import require_postgres

from .servers import free_port, server_env, start_gunicorn, stop

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SLOW_CLIENTS = 70
IDLE_TIMEOUT = 3


@pytest.fixture
def deployed(tmp_path):
    """gunicorn exactly as `make serve`, the Procfile and the systemd unit start it (its
    defaults: 2 workers x 32 threads), a short read deadline so the test sees the 408s."""
    require_postgres()
    port = free_port()
    env = server_env(
        HOST="127.0.0.1",
        PORT=str(port),
        COMPACTOR_VAR_DIR=str(tmp_path / "var"),
        WEB_READ_IDLE_TIMEOUT=str(IDLE_TIMEOUT),
        WEB_ACCESS_LOG="0",
    )
    log = tmp_path / "gunicorn.log"
    process = start_gunicorn(env, log)
    try:
        deadline = time.monotonic() + 90
        while True:  # the port listens before the workers have booted
            try:
                if _exchange(port, _get("/healthz"), timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield port
    finally:
        stop(process)


def _exchange(port: int, request: bytes, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        return _read_response(sock)


def _read_response(sock: socket.socket | io.BufferedReader) -> tuple[int, dict[str, str], bytes]:
    """One response; pass the same `sock.makefile("rb")` to read several from one connection
    (bytes of the next one stay buffered in it)."""
    stream = sock.makefile("rb") if isinstance(sock, socket.socket) else sock
    status_line = stream.readline().decode("latin-1")
    headers: dict[str, str] = {}
    while (line := stream.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", ""):
        body = b""
        while size := int(stream.readline().split(b";")[0], 16):
            body += stream.read(size)
            stream.readline()
        stream.readline()  # the empty line after the last chunk (no trailers)
    else:
        body = stream.read(int(headers.get("content-length", "0")))
    return int(status_line.split(" ")[1]), headers, body


def _get(path: str, key: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n".encode()


def _post_head(path: str, key: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n{extra}Connection: close\r\n\r\n"
    ).encode()


def test_seventy_slow_bodies_hold_no_thread_and_get_a_408(deployed, user):
    port = deployed
    _, key = ApiKey.objects.create_key(owner=user, name="slow")
    for _ in range(6):  # both workers warm (their first request imports the views)
        assert _exchange(port, _get("/api/v1/sessions/", key))[0] == 200
    sessions_before = Session.objects.count()

    slow: list[socket.socket] = []
    try:
        for _ in range(SLOW_CLIENTS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(_post_head("/api/v1/sessions/", key, 100) + b'{"title": ')  # 10 of 100 bytes
            slow.append(sock)
        time.sleep(0.5)  # every slow request is in by now

        timings: list[float] = []
        for path in ["/api/v1/sessions/", "/healthz"] * 10:
            started = time.monotonic()
            status, _, body = _exchange(port, _get(path, key if path.startswith("/api") else ""))
            timings.append(time.monotonic() - started)
            assert status == 200, body
        assert max(timings) < 1.0, f"ordinary requests while {SLOW_CLIENTS} bodies stall: {timings}"

        # Once the deadline passes, each slow one is told why, as the API's JSON.
        answers = [_read_response(sock) for sock in slow]
    finally:
        for sock in slow:
            sock.close()
    assert {status for status, _, _ in answers} == {408}
    status, headers, body = answers[0]
    assert headers["content-type"] == "application/json"
    assert f"nothing received for {IDLE_TIMEOUT} s" in json.loads(body)["error"]
    assert Session.objects.count() == sessions_before  # no half-read request reached the app


def test_a_body_sent_in_pieces_within_the_deadline_is_served(deployed, user):
    port = deployed
    _, key = ApiKey.objects.create_key(owner=user, name="pieces")
    body = json.dumps({"title": "sent in pieces"}).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_post_head("/api/v1/sessions/", key, len(body))[:30])
        time.sleep(0.3)
        sock.sendall(_post_head("/api/v1/sessions/", key, len(body))[30:] + body[:5])
        time.sleep(0.3)
        sock.sendall(body[5:])
        status, _, answer = _read_response(sock)
    assert status == 201, answer

    # A client that waits for `100 Continue` gets it, once, and then its answer.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_post_head("/api/v1/sessions/", key, len(body), "Expect: 100-continue\r\n"))
        stream = sock.makefile("rb")
        assert stream.readline() == b"HTTP/1.1 100 Continue\r\n" and stream.readline() == b"\r\n"
        sock.sendall(body)
        status, _, answer = _read_response(stream)
    assert status == 201, answer

    # Two requests in one send (pipelined, kept alive): both answered, in order.
    keep = _get("/healthz").replace(b"Connection: close", b"Connection: keep-alive")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(keep + _get("/api/v1/sessions/", key))
        stream = sock.makefile("rb")
        assert _read_response(stream)[0] == 200
        assert _read_response(stream)[0] == 200
    assert Session.objects.filter(title="sent in pieces").count() == 2


def test_the_web_servers_own_refusals_are_json(deployed, user):
    port = deployed
    _, key = ApiKey.objects.create_key(owner=user, name="limits")
    # A 5 KB query string reaches the app (limit_request_line 8,190): its JSON 400.
    status, _, body = _exchange(port, _get("/api/v1/search/?q=" + "x" * 5000, key))
    assert status == 400 and "longer than 500 characters" in json.loads(body)["error"]
    # Past gunicorn's limit: a 414 as JSON, in the REST API's shape and in the Messages API's.
    status, headers, body = _exchange(port, _get("/api/v1/search/?q=" + "x" * 9000, key))
    assert status == 414 and headers["content-type"] == "application/json"
    assert "request line is too long" in json.loads(body)["error"]
    status, _, body = _exchange(port, _get("/anthropic/v1/messages?" + "x" * 9000))
    assert status == 414 and json.loads(body)["type"] == "error"
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    # A request gunicorn cannot parse: its 400 as JSON.
    status, headers, body = _exchange(port, b"GET /api/v1/sessions/ HTTP/1.1\r\nBad Header\r\n\r\n")
    assert status == 400 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]
