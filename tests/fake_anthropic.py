"""A local HTTP server speaking the Anthropic Messages API, scriptable per request.

Tests drive the real `anthropic` SDK against it (base_url=server.base_url), so retries,
timeouts, headers and response parsing are the SDK's own. Each request consumes the next
scripted step; when the script is empty the `default` step (or callable) answers.

    server = FakeAnthropic().start()
    server.push(Step.status(429), Step.success("## Goal ..."))
    ...
    server.requests[0].headers["x-api-key"], server.requests[0].body["system"]
    server.stop()
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Step:
    status: int = 200
    text: str = ""
    delay: float = 0.0
    error_type: str | None = None
    error_message: str = ""
    stop_reason: str = "end_turn"
    raw_body: str | None = None  # sent as-is (e.g. not JSON at all)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def success(cls, text: str, *, delay: float = 0.0, stop_reason: str = "end_turn") -> Step:
        return cls(200, text, delay=delay, stop_reason=stop_reason)

    @classmethod
    def error(cls, status: int, message: str = "", *, retry_after_ms: int | None = 5) -> Step:
        headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
        return cls(
            status,
            error_type=ERROR_TYPES.get(status, "api_error"),
            error_message=message or ERROR_TYPES.get(status, "error"),
            headers=headers,
        )

    @classmethod
    def overloaded(cls) -> Step:
        return cls.error(529, "Overloaded")

    @classmethod
    def slow(cls, delay: float, text: str = "") -> Step:
        return cls(200, text, delay=delay)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api_key(self) -> str | None:
        """The key the client sent: `x-api-key`, or `Authorization: Bearer` (SDK 2.x)."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    @property
    def prompt(self) -> str:
        """Text of the (single) user message."""
        content = self.body["messages"][0]["content"]
        if isinstance(content, str):
            return content
        return "".join(block.get("text", "") for block in content)


Responder = Callable[[Recorded], Step]


class FakeAnthropic:
    def __init__(self, default: Step | Responder | None = None) -> None:
        self.script: list[Step] = []
        self.default: Step | Responder = default or Step.error(500, "script exhausted")
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control
    def push(self, *steps: Step) -> FakeAnthropic:
        with self._lock:
            self.script.extend(steps)
        return self

    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                record = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                step = fake._next(record)
                if step.delay:
                    time.sleep(step.delay)
                payload, status = fake._render(step, body)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
                    for key, value in step.headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up (timeout test): nothing to answer.
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- internals
    def _next(self, record: Recorded) -> Step:
        with self._lock:
            if record.path.rstrip("/").endswith("/v1/messages"):
                self.requests.append(record)
            else:
                return Step.error(404, f"unknown path {record.path}", retry_after_ms=None)
            if self.script:
                return self.script.pop(0)
        return self.default(record) if callable(self.default) else self.default

    @staticmethod
    def _render(step: Step, body: dict[str, Any]) -> tuple[bytes, int]:
        if step.raw_body is not None:
            return step.raw_body.encode(), step.status
        if step.status != 200:
            error = {"type": "error", "error": {"type": step.error_type, "message": step.error_message}}
            return json.dumps(error).encode(), step.status
        prompt = json.dumps(body.get("messages", ""))
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": step.text}],
            "model": body.get("model", "claude-haiku-4-5"),
            "stop_reason": step.stop_reason,
            "stop_sequence": None,
            "usage": {
                # Roughly what the real API would count; tests assert they are recorded.
                "input_tokens": max(1, len(prompt) // 4),
                "output_tokens": max(1, len(step.text) // 4),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        return json.dumps(message).encode(), 200

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
