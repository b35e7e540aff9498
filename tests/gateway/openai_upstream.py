"""A local stand-in for OpenAI's API (Chat Completions and Responses), for the gateway's tests.

Records every request; answers whole or streamed (`stream: true`: chat chunks ending with
`data: [DONE]`, tool-call deltas split in pieces, the usage chunk only with
`stream_options.include_usage`; Responses events ending with `response.completed`), with usage
counted on the prompt it received. With `window`, a larger prompt is refused the way OpenAI
refuses it (400, code context_length_exceeded, "maximum context length is N tokens").

    fake = FakeOpenAI(window=3000).start()
    fake.reply = lambda rec: OpenAIReply(text="ok")    # or OpenAIReply(tool_call=("bash", {"cmd": "ls"}))
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

from compaction.core import tokens

KEY = "sk-upstream-openai"


@dataclass
class OpenAIReply:
    text: str = "Done."
    tool_call: tuple[str, dict[str, Any]] | None = None
    cached: int = 0  # prompt tokens reported as cached


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    prompt_tokens: int = 0
    status: int = 200
    raw: bytes = b""  # the body's bytes as they arrived


def _words(value: Any) -> str:
    """The text a prompt holds, wherever it sits (content strings, parts, tool arguments, outputs)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_words(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(_words(v) for k, v in value.items() if k not in ("role", "type", "id", "call_id", "status"))
    return ""


def prompt_tokens(body: dict[str, Any]) -> int:
    items = body.get("messages") if "messages" in body else [body.get("instructions") or "", body.get("input")]
    return sum(tokens.count_text(_words(item)) + 4 for item in items or [])


@dataclass
class FakeOpenAI:
    window: int | None = None
    reply: Callable[[Recorded], OpenAIReply] = field(default=lambda rec: OpenAIReply())
    requests: list[Recorded] = field(default_factory=list)
    cut_stream: bool = False  # stop a stream half-way, without its end
    stall_stream: float = 0.0  # seconds a stream goes silent after its first chunk, then stops
    counter: Callable[[dict[str, Any]], int] = prompt_tokens  # the fake provider's token count

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go in separate writes: without this, Nagle's algorithm and the
            # client's delayed ACK hold the body back ~40 ms on every answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                record = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, {})
                with fake._lock:
                    fake.requests.append(record)
                if record.headers.get("authorization") != f"Bearer {KEY}":
                    return fake._error(self, record, 401, "Incorrect API key provided", "invalid_api_key", "x")
                models = [{"id": "gpt-4o", "object": "model", "created": 0, "owned_by": "openai"}]
                if self.path == "/v1/models":
                    return fake._json(self, 200, {"object": "list", "data": models})
                if self.path == "/v1/models/gpt-4o":
                    return fake._json(self, 200, models[0])
                return fake._error(
                    self, record, 404, f"no model {self.path}", "model_not_found", "invalid_request_error"
                )

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.loads(raw or b"{}")
                record = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                record.prompt_tokens = fake.counter(body)
                record.raw = raw
                with fake._lock:
                    fake.requests.append(record)
                try:
                    fake._answer(self, record)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def calls(self, path: str = "/v1/chat/completions") -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    # -- answers
    def _json(self, handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _error(self, handler, record: Recorded, status: int, message: str, code: str | None, kind: str) -> None:
        record.status = status
        self._json(handler, status, {"error": {"message": message, "type": kind, "param": None, "code": code}})

    def _answer(self, handler: BaseHTTPRequestHandler, record: Recorded) -> None:
        if record.headers.get("authorization") != f"Bearer {KEY}":
            return self._error(
                handler, record, 401, "Incorrect API key provided", "invalid_api_key", "invalid_request_error"
            )
        if record.path not in ("/v1/chat/completions", "/v1/responses"):
            return self._error(handler, record, 404, f"no route {record.path}", None, "invalid_request_error")
        if self.window is not None and record.prompt_tokens > self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your messages resulted in "
                f"{record.prompt_tokens} tokens. Please reduce the length of the messages."
            )
            return self._error(handler, record, 400, message, "context_length_exceeded", "invalid_request_error")
        reply = self.reply(record)
        if record.path == "/v1/responses":
            return self._response(handler, record, reply)
        return self._chat(handler, record, reply)

    def _usage(self, record: Recorded, reply: OpenAIReply, output: int) -> dict[str, Any]:
        return {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": output,
            "total_tokens": record.prompt_tokens + output,
            "prompt_tokens_details": {"cached_tokens": reply.cached},
        }

    def _chat(self, handler: BaseHTTPRequestHandler, record: Recorded, reply: OpenAIReply) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.tool_call:
            name, args = reply.tool_call
            call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function"}
            message["tool_calls"] = [{**call, "function": {"name": name, "arguments": json.dumps(args)}}]
        finish = "tool_calls" if reply.tool_call else "stop"
        usage = self._usage(record, reply, max(1, tokens.count_text(json.dumps(message))))
        completion = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": record.body.get("model", "gpt-4o"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }
        if not record.body.get("stream"):
            return self._json(handler, 200, completion)
        self._begin_stream(handler)
        base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
            choices = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
            handler.wfile.write(f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n".encode())
            handler.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if self.stall_stream:
            time.sleep(self.stall_stream)
            return
        for i, word in enumerate((reply.text or "").split(" ")):
            if reply.text:
                chunk({"content": word if i == 0 else " " + word})
            if self.cut_stream:
                return  # the connection closes without the end
        for index, call in enumerate(message.get("tool_calls") or []):
            raw = call["function"]["arguments"]
            head = {"index": index, "id": call["id"], "type": "function"}
            chunk({"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]})
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        chunk({}, finish)
        if (record.body.get("stream_options") or {}).get("include_usage"):
            handler.wfile.write(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode())
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    def _begin_stream(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        handler.send_header("connection", "close")
        handler.end_headers()

    def _response(self, handler: BaseHTTPRequestHandler, record: Recorded, reply: OpenAIReply) -> None:
        output: list[dict[str, Any]] = [
            {"type": "reasoning", "id": f"rs_{uuid.uuid4().hex[:12]}", "summary": [], "encrypted_content": "gAAA=="}
        ]
        if reply.text:
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        if reply.tool_call:
            name, args = reply.tool_call
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{uuid.uuid4().hex[:12]}",
                    "call_id": f"call_{uuid.uuid4().hex[:12]}",
                    "name": name,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            )
        out_tokens = max(1, tokens.count_text(json.dumps(output)))
        response = {
            "id": f"resp_{uuid.uuid4().hex[:12]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": record.body.get("model", "gpt-5-codex"),
            "output": output,
            "usage": {
                "input_tokens": record.prompt_tokens,
                "input_tokens_details": {"cached_tokens": reply.cached},
                "output_tokens": out_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": record.prompt_tokens + out_tokens,
            },
        }
        if not record.body.get("stream"):
            return self._json(handler, 200, response)
        self._begin_stream(handler)
        sequence = 0

        def event(kind: str, data: dict[str, Any]) -> None:
            nonlocal sequence
            payload = {"type": kind, "sequence_number": sequence, **data}
            sequence += 1
            handler.wfile.write(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())
            handler.wfile.flush()

        event("response.created", {"response": {**response, "status": "in_progress", "output": []}})
        for index, item in enumerate(output):
            event("response.output_item.added", {"output_index": index, "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                event("response.output_text.delta", {"output_index": index, "content_index": 0, "delta": text})
                if self.cut_stream:
                    return
            event("response.output_item.done", {"output_index": index, "item": item})
        event("response.completed", {"response": response})
