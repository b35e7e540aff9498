"""OpenAI's streamed replies, relayed event by event and reassembled as they pass. Pure Python.

`EventRelay` reads the whole events gateway.sse frames: each is handed on as soon as its blank
line arrives, byte for byte, unless its assembler drops it (the usage chunk the gateway asked
for on the client's behalf). `ChatAssembler` rebuilds a Chat
Completions reply from its chunks (content, refusal, tool-call deltas by index, finish_reason,
usage); `ResponsesAssembler` keeps the `response.completed` event's response. A stream that
stops before its end (`data: [DONE]`, or `response.completed`) is not finished: the gateway
then ends the client's stream with an error event instead of letting it look complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..sse import Event, EventFramer, encode_event

DONE = "[DONE]"


def error_event(message: str, *, kind: str = "api_error", responses: bool = False) -> bytes:
    """An error event the OpenAI SDKs raise on: a Chat Completions chunk with `error`, or the
    Responses API's `error` event."""
    error = {"message": message, "type": kind, "param": None, "code": None}
    if responses:
        # The Responses API's error event; its `error` object is what the SDKs raise on.
        payload = {"type": "error", "code": None, "message": message, "param": None, "error": error}
        return encode_event(payload, "error")
    return encode_event({"error": error})


class EventRelay:
    """Whole events (framed by gateway.sse) through an assembler: `on_event(name, data)` sees
    each event's parsed data (DONE for `[DONE]`, None when it is not JSON) and returns False to
    drop it from what goes to the client."""

    def __init__(self, on_event: Callable[[str, Any], bool]) -> None:
        self._on_event = on_event
        self._framer = EventFramer()

    def keep(self, event: Event) -> bool:
        if not event.data:
            return True  # a comment or keep-alive: passed on as it is
        if event.data.strip() == DONE:
            return self._on_event(event.name, DONE)
        return self._on_event(event.name, event.json())

    def feed(self, chunk: bytes) -> bytes:
        """Bytes in, the whole events to pass on out."""
        return b"".join(event.raw for event in self._framer.feed(chunk) if self.keep(event))

    def finish(self) -> bytes:
        """The upstream closed: an event it sent without its closing blank line still counts."""
        last = self._framer.finish()
        return last.raw if last is not None and self.keep(last) else b""


class ChatAssembler:
    """A Chat Completions reply rebuilt from its chunks (the first choice's)."""

    def __init__(self, *, drop_usage_chunk: bool = False) -> None:
        self.drop_usage_chunk = drop_usage_chunk
        self.done = False
        self.error: Any = None
        self.model = ""
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None

    def on_event(self, _event: str, data: Any) -> bool:
        if data == DONE:
            self.done = True
            return True
        if not isinstance(data, dict):
            return True
        if data.get("error") is not None:
            self.error = data["error"]
            return True
        self.model = self.model or str(data.get("model") or "")
        if isinstance(data.get("usage"), dict):
            self.usage = data["usage"]
        choices = data.get("choices") or []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)
        # The usage-only chunk the gateway asked for: the client did not.
        return not (self.drop_usage_chunk and not choices and data.get("usage") is not None)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            slot = self.tool_calls.setdefault(
                int(call.get("index", len(self.tool_calls))), {"type": "function", "function": {"arguments": ""}}
            )
            if call.get("id"):
                slot["id"] = call["id"]
            if call.get("type"):
                slot["type"] = call["type"]
            function = call.get("function") or {}
            if function.get("name"):
                slot["function"]["name"] = slot["function"].get("name", "") + function["name"]
            if isinstance(function.get("arguments"), str):
                slot["function"]["arguments"] += function["arguments"]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    @property
    def ended(self) -> bool:
        """The stream reached its end: [DONE], or an error the upstream sent itself."""
        return self.done or self.error is not None

    def completion(self) -> dict[str, Any] | None:
        """The reply as the non-streaming API would have returned it; None unless finished."""
        if not self.done or self.error is not None:
            return None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        return {
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }


class ResponsesAssembler:
    """The Responses API's stream: the `response.completed` event carries the whole response."""

    def __init__(self) -> None:
        self.done = False
        self.error: Any = None
        self.response: dict[str, Any] | None = None

    def on_event(self, event: str, data: Any) -> bool:
        kind = data.get("type") if isinstance(data, dict) else event
        if kind == "response.completed" and isinstance(data, dict):
            self.response = data.get("response") if isinstance(data.get("response"), dict) else None
            self.done = True
        elif kind == "response.incomplete" and isinstance(data, dict):
            # Cut short by max_output_tokens or a content filter: stored as far as it went.
            self.response = data.get("response") if isinstance(data.get("response"), dict) else None
            self.done = True
        elif kind in ("response.failed", "error"):
            self.error = data
            self.done = True
        return True

    @property
    def ended(self) -> bool:
        return self.done

    def completion(self) -> dict[str, Any] | None:
        return self.response if self.done and self.error is None else None
