"""gunicorn's threaded worker, with each request read whole before a thread takes it.

gthread hands a connection to a request thread as soon as its first byte arrives; the thread
then reads the headers and the app reads the body, blocking. A client that sends headers with
`Content-Length: 100` and 10 bytes held that thread until gunicorn's worker timeout (over 180 s
in the issue 35 probe); 70 of them took every thread, and ordinary requests and /healthz timed out.

Here the worker's event loop (the thread that accepts connections) reads the request line, the
headers and the whole body (by Content-Length, or to the end of a chunked body) without blocking,
as a buffering proxy would, and hands the connection to a request thread only when all of it has
arrived: the app then reads the body from memory. A request that does not arrive within
WEB_READ_TIMEOUT seconds (default 30) of its first byte, or stalls for WEB_READ_IDLE_TIMEOUT
(default 10) between two reads, is answered 408 and closed; a new connection that sends nothing
for WEB_READ_IDLE_TIMEOUT is closed. Bodies larger than WEB_MAX_BUFFERED_BODY (default: the larger
of COMPACTOR_MAX_REQUEST_BYTES and COMPACTOR_GATEWAY_MAX_REQUEST_BYTES) are not buffered: the
app refuses them (413) from their Content-Length.

gunicorn's own refusals (a request line over limit_request_line, bad headers, an invalid chunk)
are JSON in the shape of the API the path belongs to, like the app's errors, instead of HTML.

Not buffered: TLS terminated by gunicorn itself and HTTP/2 (Compactor is deployed behind a proxy
that terminates TLS; see README "Deploy").
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import threading
import time
from functools import partial

from gunicorn import util
from gunicorn.http import get_parser
from gunicorn.http.unreader import SocketUnreader, Unreader
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import ThreadWorker

_html_write_error = util.write_error

_CRLF2 = b"\r\n\r\n"
# The request line and headers together; gunicorn's own limits (limit_request_line,
# limit_request_fields x limit_request_field_size) refuse what is over them once handed over.
MAX_HEAD_BYTES = 64 * 1024
READ_CHUNK = 256 * 1024


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


def error_body(path: str, status: int, message: str) -> bytes:
    """`message` as JSON in the error shape of the API `path` is under: the Messages API's at
    /anthropic, OpenAI's at /openai, the REST API's ({"error", "detail"}) elsewhere."""
    if path.startswith("/anthropic"):
        kind = {408: "timeout_error", 413: "request_too_large"}.get(status, "invalid_request_error")
        body: dict = {"type": "error", "error": {"type": kind, "message": message}}
    elif path.startswith("/openai"):
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    else:
        body = {"error": message, "detail": {"status": status}}
    return json.dumps(body).encode()


_REASONS = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long", 417: "Expectation Failed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
            403: "Forbidden"}  # fmt: skip


def error_response(path: str, status: int, message: str) -> bytes:
    body = error_body(path, status, message)
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


class _Incomplete(Exception):
    """More bytes are needed (args[0]: where to resume scanning)."""


def _chunked_end(data: bytearray, at: int) -> int:
    """Offset just past a chunked body whose next chunk starts at `at`; _Incomplete(offset of the
    first chunk not yet whole) when it has not all arrived; ValueError when it is not chunked
    framing (gunicorn answers that once handed over)."""
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            if len(data) - at > 1024:
                raise ValueError("chunk size line too long")
            raise _Incomplete(at)
        size = int(bytes(data[at:line_end]).split(b";", 1)[0].strip(), 16)  # ValueError when not hex
        if size < 0:
            raise ValueError("negative chunk size")
        if size == 0:
            # Trailers (none, usually), then the empty line.
            end = line_end + 2
            while True:
                next_end = data.find(b"\r\n", end)
                if next_end < 0:
                    raise _Incomplete(at)
                if next_end == end:
                    return end + 2
                end = next_end + 2
        if len(data) < line_end + 2 + size + 2:
            raise _Incomplete(at)
        at = line_end + 2 + size + 2


class _Pending:
    """A connection whose request is being read by the event loop."""

    __slots__ = ("conn", "data", "started", "last_read", "body_start", "length", "chunk_at")

    def __init__(self, conn, data: bytes) -> None:
        self.conn = conn
        self.data = bytearray(data)
        self.started = time.monotonic()
        self.last_read = self.started
        self.body_start = -1  # once the head is read: where the body starts,
        self.length = -1  # its Content-Length (-1: chunked),
        self.chunk_at = 0  # and, chunked, the first chunk not yet whole


class _MemoryUnreader(Unreader):
    """The request read whole by the event loop, served to gunicorn's parser piece by piece as a
    socket would serve it (SocketUnreader's sizes), then the socket itself.

    Unread into the parser's buffer whole instead, every read of the parser and of the body
    copied everything still buffered (io.BytesIO getvalue + the rest written back): ~10 ms of CPU
    per 3 MB gateway call (bench/cli_replay_bench.py, Codex and pi: 28-30 ms per call against
    18 with stock gthread)."""

    def __init__(self, data: bytearray, then: Unreader) -> None:
        super().__init__()
        self._data = memoryview(bytes(data))
        self._at = 0
        self.source = then

    def chunk(self, size_hint=None):
        if self._at >= len(self._data):
            self._data, self._at = memoryview(b""), 0  # served: not held for the connection's life
            return self.source.chunk(size_hint)
        size = SocketUnreader.max_body_chunk if size_hint is None else size_hint
        size = min(max(size, 8192), SocketUnreader.max_body_chunk)
        piece = self._data[self._at : self._at + size].tobytes()
        self._at += len(piece)
        return piece

    def take_buffered(self):
        # Bytes pipelined behind this request: what the parser holds, then what it never asked for.
        held = super().take_buffered() + self._data[self._at :].tobytes()
        self._data, self._at = memoryview(b""), 0
        return held


def read_from_memory(parser, data: bytearray) -> None:
    """The parser reads `data` (a request the event loop read whole) before its socket again."""
    then = parser.unreader
    if isinstance(then, _MemoryUnreader):  # the previous request's on this connection: its socket
        then = then.source
    parser.unreader = _MemoryUnreader(data, then)


class BufferedThreadWorker(ThreadWorker):
    """gunicorn's gthread worker; a request reaches a thread only once it has arrived whole."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout = _env_float("WEB_READ_TIMEOUT", 30.0)
        self.read_idle_timeout = _env_float("WEB_READ_IDLE_TIMEOUT", 10.0)
        self.max_buffered_body = _env_int(
            "WEB_MAX_BUFFERED_BODY",
            max(
                _env_int("COMPACTOR_MAX_REQUEST_BYTES", 8 * 1024 * 1024),
                _env_int("COMPACTOR_GATEWAY_MAX_REQUEST_BYTES", 32 * 1024 * 1024),
            ),
        )
        self.reading: dict[int, _Pending] = {}
        self._local = threading.local()

    # --- the event loop: read a request whole, then hand it to a thread --------------------

    def _buffers(self, conn) -> bool:
        if self.cfg.is_ssl or conn.is_http2:
            return False
        if negotiation.prior_knowledge_allowed(self.cfg, conn.client):
            return False
        return not getattr(conn, "request_whole", False)

    def enqueue_req(self, conn) -> None:
        if not self._buffers(conn):
            conn.request_whole = False
            super().enqueue_req(conn)
            return
        # Bytes a previous request's read took past its end (pipelining) come first.
        ahead = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        pending = _Pending(conn, ahead)
        conn.sock.setblocking(False)
        if self._complete(pending):
            self._hand_over(pending)
            return
        self.reading[conn.sock.fileno()] = pending
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, pending))

    def _on_readable(self, pending: _Pending, _sock) -> None:
        conn = pending.conn
        try:
            for _ in range(8):  # at most 2 MiB per wake-up: other connections get their turn
                chunk = conn.sock.recv(READ_CHUNK)
                if not chunk:
                    if pending.data and self._complete(pending):
                        break  # sent whole, then closed its side: still answered
                    self._drop(pending)  # the client closed: nobody to answer
                    return
                pending.data += chunk
                pending.last_read = time.monotonic()
                if len(chunk) < READ_CHUNK:
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(pending)
            return
        if self._complete(pending):
            self._stop_reading(pending)
            self._hand_over(pending)

    def _complete(self, pending: _Pending) -> bool:
        """Whether the request has arrived whole (or is to be handed over as it is, for gunicorn
        or the app to refuse). Sends `100 Continue` once when the client waits for it."""
        data = pending.data
        if pending.body_start < 0:
            head_end = data.find(_CRLF2)
            if head_end < 0:
                return len(data) > MAX_HEAD_BYTES
            headers = _headers(bytes(data[:head_end]))
            if headers is None:
                return True  # malformed or ambiguous framing: gunicorn's parser refuses it
            if "chunked" in headers.get("transfer-encoding", "").lower():
                pending.length = -1
            else:
                length_text = headers.get("content-length", "0")
                if not (length_text.isascii() and length_text.isdigit()) or len(length_text) > 15:
                    return True
                pending.length = int(length_text)
                if pending.length > self.max_buffered_body:
                    return True  # the app refuses it by its Content-Length (413)
            if headers.get("expect", "").lower() == "100-continue":
                self._continue(pending, head_end)
                head_end = data.find(_CRLF2)
            pending.body_start = pending.chunk_at = head_end + 4
        if pending.length >= 0:
            return len(data) - pending.body_start >= pending.length
        try:
            _chunked_end(data, pending.chunk_at)
        except _Incomplete as incomplete:
            pending.chunk_at = incomplete.args[0]
            return len(data) - pending.body_start > self.max_buffered_body
        except ValueError:
            return True
        return True

    def _continue(self, pending: _Pending, head_end: int) -> None:
        """The client waits for `100 Continue` before it sends the body: sent here, and the
        Expect header taken out of the head (gunicorn would send its own when it reads it)."""
        try:
            pending.conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        except OSError:
            pass
        lines = bytes(pending.data[:head_end]).split(b"\r\n")
        kept = b"\r\n".join(line for line in lines if not line.lower().startswith(b"expect:"))
        pending.data[:head_end] = kept

    def _hand_over(self, pending: _Pending) -> None:
        conn = pending.conn
        if conn.parser is None:
            conn.parser = get_parser(self.cfg, conn.sock, conn.client)
        read_from_memory(conn.parser, pending.data)
        conn.data_ready = True
        conn.request_whole = True
        conn.request_path = _path(pending.data)
        conn.sock.setblocking(True)
        super().enqueue_req(conn)

    def finish_request(self, conn, fs) -> None:
        conn.request_whole = False  # the next request on this connection is read whole again
        super().finish_request(conn, fs)

    def _stop_reading(self, pending: _Pending) -> None:
        self.reading.pop(pending.conn.sock.fileno(), None)
        try:
            self.poller.unregister(pending.conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _drop(self, pending: _Pending) -> None:
        self._stop_reading(pending)
        self.nr_conns -= 1
        util.close(pending.conn.sock)

    def _time_out(self, pending: _Pending, message: str) -> None:
        """408 in the API's error shape, then close (after what the client sent meanwhile, so
        the close is not a reset that could discard the answer)."""
        self._stop_reading(pending)
        sock = pending.conn.sock
        path = _path(pending.data)
        self.log.warning("Request not read within its deadline from ip=%s: %s", pending.conn.client[0], message)
        try:
            sock.send(error_response(path, 408, message))
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(READ_CHUNK):
                pass
        except OSError:
            pass
        self.nr_conns -= 1
        util.close(sock)

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        for pending in list(self.reading.values()):
            if not pending.data:
                if now - pending.started > self.read_idle_timeout or not self.alive:
                    self._drop(pending)  # nothing sent: a connection opened ahead of need
            elif now - pending.started > self.read_timeout:
                self._time_out(
                    pending, f"the request did not arrive whole within {self.read_timeout:g} s of its first byte"
                )
            elif now - pending.last_read > self.read_idle_timeout:
                self._time_out(pending, f"the request stalled: nothing received for {self.read_idle_timeout:g} s")

    # --- gunicorn's own refusals as JSON ------------------------------------------------------

    def handle(self, conn):
        self._local.path = getattr(conn, "request_path", "")
        return super().handle(conn)

    def handle_error(self, req, client, addr, exc) -> None:
        self._local.path = getattr(req, "path", None) or getattr(self._local, "path", "") or ""
        self._local.writing_error = True
        try:
            super().handle_error(req, client, addr, exc)
        finally:
            self._local.writing_error = False

    def init_process(self) -> None:
        # gunicorn's Worker.handle_error writes its refusal with util.write_error (an HTML page):
        # in this worker's process, the API's JSON instead.
        util.write_error = self._write_error
        super().init_process()

    def _write_error(self, sock, status_int: int, reason: str, mesg: str) -> None:
        if not getattr(self._local, "writing_error", False):
            _html_write_error(sock, status_int, reason, mesg)
            return
        message = mesg or reason
        if status_int == 414:
            message = f"the request line is too long ({mesg}); send long parameters in a POST body"
        util.write_nonblock(sock, error_response(getattr(self._local, "path", ""), status_int, message))


def _headers(head: bytes) -> dict[str, str] | None:
    """The head's header fields by lowercased name; None when a line is not a field or the
    framing headers come twice."""
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        key = name.strip().lower()
        if not sep or (key in headers and key in ("content-length", "transfer-encoding")):
            return None
        headers[key] = value.strip()
    return headers


def _path(data: bytes | bytearray) -> str:
    line = bytes(data[: data.find(b"\r\n") if b"\r\n" in data else 2048]).decode("latin-1")
    parts = line.split(" ")
    return parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
