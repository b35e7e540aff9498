"""A local stand-in for the upstream Messages API, for the gateway's tests.

Records every request (path, query, headers, body); answers /v1/messages whole or as SSE
(`stream: true`) with usage counted on the prompt it received, and /v1/messages/count_tokens.
It enforces a context window like the real API ("prompt is too long: N tokens > W maximum")
and can be told to refuse the next calls with an overflow error regardless.

    fake = FakeUpstream(window=6000).start()
    fake.reply = lambda rec: Reply(text="ok")      # or Reply(tool_use=("Bash", {"command": "ls"}))
    ...
    fake.requests[-1].body["messages"]
    fake.stop()

Faults after the headers (`fault`, after `fault_after` SSE events or half a whole body):
"stall" sends nothing more until the server stops, "reset" aborts the connection (TCP RST),
"cut" closes it cleanly, a whole body then without its length (the client sees a fragment);
"silent" never sends the headers at all.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from compaction.core import tokens


@dataclass
class Reply:
    text: str = "Done."
    tool_use: tuple[str, dict[str, Any]] | None = None  # (name, input): the reply calls a tool
    thinking: str | None = None
    content: list[dict[str, Any]] | None = None  # exact blocks to answer with (a recorded reply)


@dataclass
class Recorded:
    path: str
    query: str
    headers: dict[str, str]
    body: dict[str, Any]
    prompt_tokens: int = 0
    status: int = 200
    raw: bytes = b""  # the body's bytes as they arrived


def prompt_tokens(body: dict[str, Any]) -> int:
    """What the fake 'provider' counts: system + tools + messages (cl100k, like our estimate)."""
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    total = tokens.count_text(system) if system else 0
    if body.get("tools"):
        total += tokens.count_text(json.dumps(body["tools"]))
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            # Only the keys the provider reads; cache_control etc. are not prompt tokens.
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content if isinstance(b, dict)]
        total += tokens.count_content(content or "")
    return total


@dataclass
class FakeUpstream:
    window: int | None = None  # refuse prompts larger than this, like the real API
    stream_delay: float = 0.0  # seconds between SSE events (a slow stream)
    overflow_next: int = 0  # refuse this many next calls with an overflow error
    # Set: a stream sends its start and first delta, then waits for this event before the rest
    # (a reply still being written, for as long as a test needs it).
    gate: threading.Event | None = None
    reply: Callable[[Recorded], Reply] = field(default=lambda rec: Reply())
    counter: Callable[[dict[str, Any]], int] = prompt_tokens  # the fake provider's token count
    requests: list[Recorded] = field(default_factory=list)
    fault: str | None = None  # "stall" | "reset" | "cut" after the headers; "silent" before them
    fault_after: int = 4  # SSE events sent before a stream's fault

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()

    # -- control
    def start(self) -> FakeUpstream:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go in separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold the body back ~40 ms on every answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                path, _, query = self.path.partition("?")
                body = json.loads(raw or b"{}")
                record = Recorded(path, query, {k.lower(): v for k, v in self.headers.items()}, body)
                record.prompt_tokens = fake.counter(body)
                record.raw = raw
                with fake._lock:
                    fake.requests.append(record)
                try:
                    fake._answer(self, record)
                except (BrokenPipeError, ConnectionResetError, _Aborted):
                    self.close_connection = True

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def message_calls(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/messages"]

    # -- answers
    def _json(self, handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        faulty = status == 200 and self.fault is not None
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("request-id", f"req_{uuid.uuid4().hex[:20]}")
        if faulty and self.fault == "cut":
            handler.send_header("connection", "close")  # no length: the close ends the body
        else:
            handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        if not faulty:
            handler.wfile.write(data)
            return
        handler.wfile.write(data[: len(data) // 2])
        self._break(handler)

    def _break(self, handler: BaseHTTPRequestHandler) -> None:
        """Apply `fault` to a connection whose answer has begun."""
        handler.wfile.flush()
        if self.fault == "stall":
            self._stopping.wait(120)
        elif self.fault == "reset":
            # Linger 0: close() sends RST, as a crashed proxy or a dropped route does.
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        handler.connection.close()
        raise _Aborted

    def _error(self, handler: BaseHTTPRequestHandler, record: Recorded, status: int, kind: str, message: str) -> None:
        record.status = status
        self._json(handler, status, {"type": "error", "error": {"type": kind, "message": message}})

    def _answer(self, handler: BaseHTTPRequestHandler, record: Recorded) -> None:
        if self.fault == "silent":  # accepts the request, never answers
            self._stopping.wait(120)
            raise _Aborted
        if record.headers.get("x-api-key") != "upstream-secret":
            return self._error(handler, record, 401, "authentication_error", "invalid x-api-key")
        if record.path == "/v1/messages/count_tokens":
            return self._json(handler, 200, {"input_tokens": record.prompt_tokens})
        if record.path != "/v1/messages":
            return self._error(handler, record, 404, "not_found_error", f"no route {record.path}")
        with self._lock:
            forced = self.overflow_next > 0
            self.overflow_next -= 1 if forced else 0
        if forced or (self.window is not None and record.prompt_tokens > self.window):
            limit = self.window or 1000
            return self._error(
                handler,
                record,
                400,
                "invalid_request_error",
                f"prompt is too long: {max(record.prompt_tokens, limit + 1)} tokens > {limit} maximum",
            )
        reply = self.reply(record)
        blocks: list[dict[str, Any]] = list(reply.content or [])
        if reply.thinking:
            blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": "sig-" + uuid.uuid4().hex})
        if reply.text and reply.content is None:
            blocks.append({"type": "text", "text": reply.text})
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
        if reply.tool_use:
            name, tool_input = reply.tool_use
            blocks.append(
                {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": tool_input}
            )
            stop_reason = "tool_use"
        usage = {
            "input_tokens": record.prompt_tokens,
            "output_tokens": max(1, sum(tokens.count_text(json.dumps(b)) for b in blocks)),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message = {
            "id": f"msg_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": record.body.get("model", "claude-sonnet-4-5"),
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        if not record.body.get("stream"):
            return self._json(handler, 200, message)
        self._sse(handler, message)

    def _sse(self, handler: BaseHTTPRequestHandler, message: dict[str, Any]) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("request-id", f"req_{uuid.uuid4().hex[:20]}")
        handler.send_header("connection", "close")
        handler.end_headers()
        usage = message["usage"]
        sent = [0]

        def event(kind: str, data: dict[str, Any]) -> None:
            if self.fault is not None and sent[0] >= self.fault_after:
                # Half an event goes out first: the client must not see it as a whole one.
                handler.wfile.write(f"event: {kind}\ndata: {json.dumps(data)[:12]}".encode())
                self._break(handler)
            sent[0] += 1
            handler.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
            if self.stream_delay:
                time.sleep(self.stream_delay)

        start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        event("message_start", {"type": "message_start", "message": start})
        event("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
                words = block["text"].split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                    )
                    if self.gate is not None and i == 0:
                        self.gate.wait(60)
            elif block["type"] == "thinking":
                event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": ""},
                    },
                )
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                    },
                )
                event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": block["signature"]},
                    },
                )
            else:
                event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                )
                raw = json.dumps(block["input"])
                half = len(raw) // 2
                for part in (raw[:half], raw[half:]):
                    event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part},
                        },
                    )
            event("content_block_stop", {"type": "content_block_stop", "index": index})
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        event("message_stop", {"type": "message_stop"})


class _Aborted(Exception):
    """The scripted fault closed the connection: the handler just returns."""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # an aborted connection's teardown errors are the point of the fault, not news
