"""Server-sent events, framed in one place for every wire format the gateway relays (the
Messages API's stream, Chat Completions' chunks, the Responses API's events), and the Messages
API's reply reassembled from its events as they pass. Pure Python, no Django.

`EventFramer` cuts the upstream's bytes at event boundaries (a blank line: "\n\n", "\r\n\r\n"
or a mix; the providers never end lines with a lone "\r") and parses each event once: its
`event:` name and its `data:` lines, with its bytes as they came, which go to the client
untouched. What the gateway needs of a stream (that it ended properly, the reply and usage to
store) is read from the parsed events; a half event is never passed on (gateway.relay). A
library was considered: the SSE parsers at hand (the SDKs', httpx-sse) decode lines into events
and give back neither the bytes nor the boundaries a relay must forward.

`StreamAssembler` rebuilds the Messages API's reply: once `message_stop` arrives,
`assistant_message()` is the assistant message the client has just received and
`response_message()` the reply as the non-streaming API would have returned it (input figures
in message_start, output in message_delta).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Where an event ends: an empty line after its last line, whatever mix of "\n" and "\r\n".
_EVENT_END = re.compile(rb"\r?\n\r?\n")
_LINE_END = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class Event:
    raw: bytes  # the event's bytes as they came, its closing blank line included
    name: str  # the `event:` field; "" when the event has none
    data: str  # its `data:` lines joined by "\n"; "" for a comment or a keep-alive

    def json(self) -> Any:
        """The data parsed as JSON; None when it is none or not JSON."""
        if not self.data:
            return None
        try:
            return json.loads(self.data)
        except json.JSONDecodeError:
            return None


def parse_event(raw: bytes) -> Event:
    name, data = "", []
    for line in _LINE_END.split(raw.decode("utf-8", "replace")):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value.strip()
        elif field == "data":
            data.append(value)
    return Event(raw, name, "\n".join(data))


def encode_event(data: Any, event: str | None = None) -> bytes:
    """One event on the wire, the inverse of `parse_event`: `data` as JSON, named by `event`
    when the API names its events (the Messages API, OpenAI's Responses API)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


class EventFramer:
    """Bytes in, whole events out, however the bytes were split."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # the buffer's first bytes hold no event end (not searched again)

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer
        buffer += chunk
        events: list[Event] = []
        start, search = 0, max(0, self._scanned - 3)  # an end may straddle two chunks
        while (end := _EVENT_END.search(buffer, search)) is not None:
            events.append(parse_event(bytes(buffer[start : end.end()])))
            start = search = end.end()
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        return events

    def finish(self) -> Event | None:
        """The upstream closed: an event it sent without its closing blank line still counts
        (`data: [DONE]` and nothing after), completed with one; None when nothing is left."""
        rest, self._buffer, self._scanned = bytes(self._buffer), bytearray(), 0
        if not rest.strip():
            return None
        return parse_event(rest + (b"\n" if rest.endswith(b"\n") else b"\n\n"))

    @property
    def pending(self) -> bytes:
        """Bytes of an event not complete yet."""
        return bytes(self._buffer)


class StreamAssembler:
    def __init__(self) -> None:
        self._framer = EventFramer()
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self._partial_json: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage_fields: dict[str, Any] = {}
        self.finished = False
        self.error: dict[str, Any] | None = None

    # -- events in
    def feed(self, chunk: bytes) -> None:
        """Bytes of the stream, however split (for a caller without a framer of its own)."""
        for event in self._framer.feed(chunk):
            self.on_event(event)

    def on_event(self, event: Event) -> bool:
        """One whole event (gateway.relay hands each on); always passed on to the client."""
        if event.data:
            self._dispatch(event.name, event.data)
        return True

    # -- events
    def _dispatch(self, event: str, data: str) -> None:
        try:
            payload = json.loads(data)
        except json.JSONDecodeError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type") or event
        if kind == "message_start":
            self.message = dict(payload.get("message") or {})
            self._merge_usage(self.message.get("usage"))
        elif kind == "content_block_start":
            index = int(payload.get("index", len(self.blocks)))
            self.blocks[index] = dict(payload.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(int(payload.get("index", 0)), payload.get("delta") or {})
        elif kind == "content_block_stop":
            index = int(payload.get("index", 0))
            if index in self._partial_json:
                raw = self._partial_json.pop(index)
                try:
                    self.blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
                except json.JSONDecodeError:
                    self.blocks[index]["input"] = {}
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            if "stop_reason" in delta:
                self.stop_reason = delta["stop_reason"]
            self._merge_usage(payload.get("usage"))
        elif kind == "message_stop":
            self.finished = True
        elif kind == "error":
            self.error = payload.get("error") or payload

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
        elif kind == "input_json_delta":
            self._partial_json[index] = self._partial_json.get(index, "") + delta.get("partial_json", "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
        elif kind == "citations_delta":
            block.setdefault("citations", [])
            if block["citations"] is None:
                block["citations"] = []
            block["citations"].append(delta.get("citation"))

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage_fields.update({k: v for k, v in usage.items() if v is not None})

    # -- results
    def assistant_message(self) -> dict[str, Any] | None:
        """{role, content} of the complete reply, or None if the stream did not finish."""
        if not self.finished or self.error is not None:
            return None
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return {"role": "assistant", "content": content}

    def response_message(self) -> dict[str, Any] | None:
        """The reply as the non-streaming API would have returned it (for usage and stop_reason)."""
        if self.message is None:
            return None
        out = dict(self.message)
        out["content"] = [self.blocks[i] for i in sorted(self.blocks)]
        out["stop_reason"] = self.stop_reason or out.get("stop_reason")
        out["usage"] = dict(self.usage_fields)
        return out
