"""Reassemble a streamed Messages API reply from its server-sent events, as the bytes pass through.

The gateway forwards each chunk to the client untouched and feeds the same bytes here; once
`message_stop` arrives, `message()` is the assistant message the client has just received, and
`usage()` the usage it reported (input figures in message_start, output in message_delta).
Pure Python, no Django.
"""

from __future__ import annotations

import json
from typing import Any


class StreamAssembler:
    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event = ""
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self._partial_json: dict[int, str] = {}
        self.stop_reason: str | None = None
        self.usage_fields: dict[str, Any] = {}
        self.finished = False
        self.error: dict[str, Any] | None = None

    # -- bytes in
    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                return
            line = self._buffer[:newline].rstrip(b"\r").decode("utf-8", "replace")
            self._buffer = self._buffer[newline + 1 :]
            self._line(line)

    def _line(self, line: str) -> None:
        if line == "":
            if self._data:
                self._dispatch(self._event, "\n".join(self._data))
            self._data, self._event = [], ""
        elif line.startswith(":"):
            return
        elif line.startswith("event:"):
            self._event = line[6:].strip()
        elif line.startswith("data:"):
            self._data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])

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
