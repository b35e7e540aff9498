"""A local HTTP server speaking the Anthropic Messages API, scriptable per request.

Tests drive the real `anthropic` SDK against it (base_url=server.base_url), so retries,
timeouts, headers and response parsing are the SDK's own. Each request consumes the next
scripted step; when the script is empty the `default` step (or callable) answers.

    server = FakeAnthropic().start()
    server.push(Step.status(429), Step.success("## Goal ..."))
    ...
    server.requests[0].headers["x-api-key"], server.requests[0].body["system"]
    server.stop()

Prompt caching is simulated: a request whose blocks carry `cache_control` creates a cache entry
for the prefix up to its last breakpoint, and a later request with the same prefix reads it —
the usage reports `cache_creation_input_tokens` / `cache_read_input_tokens` like the API does.
`Step.hang()` never answers (until the server stops): a hung provider.
`recorded_compaction(path)` loads a compaction call Claude Code really made (a session's
`subagents/agent-acompact-*.jsonl`): the prompt it sent and the summary the model returned.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# A hung step holds its connection at most this long (or until the server stops).
HANG_SECONDS = 120.0

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

    @classmethod
    def hang(cls) -> Step:
        """Accept the request and never answer (a hung provider), until the server stops."""
        return cls(200, "", delay=HANG_SECONDS)


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

    @property
    def system_text(self) -> str:
        system = self.body.get("system") or ""
        return system if isinstance(system, str) else "".join(b.get("text", "") for b in system)

    def blocks(self) -> list[tuple[str, dict[str, Any]]]:
        """(where, block) for every system and message content block, in prompt order."""
        out: list[tuple[str, dict[str, Any]]] = []
        system = self.body.get("system")
        if isinstance(system, list):
            out += [(f"system[{i}]", b) for i, b in enumerate(system)]
        for m, message in enumerate(self.body.get("messages") or []):
            content = message.get("content")
            if isinstance(content, list):
                out += [(f"messages[{m}].content[{i}]", b) for i, b in enumerate(content)]
        return out

    @property
    def cache_breakpoints(self) -> list[str]:
        """Where the request asks for prompt caching (`cache_control` on a block)."""
        return [where for where, block in self.blocks() if isinstance(block, dict) and block.get("cache_control")]

    def cached_prefix(self) -> str:
        """The text up to and including the last block marked for caching ("" if none)."""
        blocks = self.blocks()
        marked = [i for i, (_, block) in enumerate(blocks) if block.get("cache_control")]
        if not marked:
            return ""
        return "".join(str(block.get("text", "")) for _, block in blocks[: marked[-1] + 1])


Responder = Callable[[Recorded], Step]


class FakeAnthropic:
    def __init__(self, default: Step | Responder | None = None) -> None:
        self.script: list[Step] = []
        self.default: Step | Responder = default or Step.error(500, "script exhausted")
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cache: set[str] = set()  # digests of cached prompt prefixes

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
                    fake._stopping.wait(step.delay)
                    if fake._stopping.is_set() and step.delay >= HANG_SECONDS:
                        return  # a hung step never answers
                payload, status = fake._render(step, body, fake._cache_usage(record, step))
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
        self._stopping.set()  # release hung and slow steps
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

    def _cache_usage(self, record: Recorded, step: Step) -> dict[str, int]:
        """Usage split like the API's: a cached prefix is written once, then read."""
        prefix = record.cached_prefix()
        total = max(1, len(json.dumps(record.body.get("messages", ""))) + len(record.system_text)) // 4
        if not prefix or step.status != 200:
            return {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        cached = len(prefix) // 4
        digest = hashlib.sha256(f"{record.body.get('model')}\0{prefix}".encode()).hexdigest()
        with self._lock:
            hit = digest in self._cache
            self._cache.add(digest)
        return {
            "input_tokens": max(1, total - cached),
            "cache_creation_input_tokens": 0 if hit else cached,
            "cache_read_input_tokens": cached if hit else 0,
        }

    @staticmethod
    def _render(step: Step, body: dict[str, Any], usage: dict[str, int] | None = None) -> tuple[bytes, int]:
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
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                **(usage or {}),
                "output_tokens": max(1, len(step.text) // 4),
            },
        }
        return json.dumps(message).encode(), 200

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@dataclass
class RecordedCompaction:
    """A compaction call Claude Code made: what it sent and what the model answered."""

    prompt: str  # the compaction instructions (the last user message of the call)
    response: str  # the model's reply as returned: <analysis>…</analysis> then <summary>…</summary>
    model: str
    session_id: str


def recorded_compaction(path: Path) -> RecordedCompaction:
    """Read a session's `subagents/agent-acompact-*.jsonl`."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    prompt = response = model = ""
    for row in rows:
        message = row.get("message") or {}
        content = message.get("content")
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content or [])
        if row.get("type") == "user" and text.strip():
            prompt = text
        elif row.get("type") == "assistant" and text.strip():
            response, model = text, str(message.get("model") or "")
    if not prompt or not response:
        raise ValueError(f"{path}: no compaction prompt and reply found")
    return RecordedCompaction(prompt, response, model, str(rows[0].get("sessionId", "")))
