"""POST /openai/v1/chat/completions through Compactor: the Anthropic gateway's steps
(gateway.services) on Chat Completions messages.

The request's messages are mapped to blocks (gateway.openai.chat_map) and found or stored like
a Messages API history; what goes upstream is the served context mapped back, with the
client's own copies of every message it still holds; the reply (whole, or assembled from the
relayed chunks) is mapped, stored and its usage reported. A context overflow compacts the
session at once, sized by the limit the error states, and the call is retried once.
"""

from __future__ import annotations

import logging
from typing import Any

from sessions.models import Session

from ..errors import GatewayError
from ..extras import extras_store
from ..locate import side_call_finish
from ..resent import Parsed
from ..services import GatewayResult, Turn, gateway_record_reply, overflow_context
from . import common
from .chat_map import Mapped, MappingError, Reuse, to_blocks, to_chat
from .stream import ChatAssembler

logger = logging.getLogger(__name__)

PATH = "/chat/completions"
MAPPING = "chat_map"  # the memo of a request's mapping, kept with its parse
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


def map_messages(messages: Any, resent: Parsed | None = None) -> Mapped:
    """The messages as blocks; `resent`: the request's parse, whose previous request's mapping is
    reused for the messages they share, and which keeps this one's for the next."""
    if not isinstance(messages, list) or not messages:
        raise GatewayError(400, "invalid_request_error", "messages: required, a non-empty list", param="messages")
    try:
        mapped = to_blocks(messages, _reuse(messages, resent))
    except MappingError as exc:
        raise GatewayError(400, "invalid_request_error", str(exc), param=exc.path) from None
    if not mapped.messages:
        raise GatewayError(
            400, "invalid_request_error", "messages: needs a user message after the system messages", param="messages"
        )
    if resent is not None:
        resent.memo[MAPPING] = (messages, mapped)
    return mapped


def _reuse(messages: list[Any], resent: Parsed | None) -> Reuse | None:
    """The previous request's mapping when this request's leading messages are its objects."""
    previous = resent.previous_memo.get(MAPPING) if resent is not None else None
    if previous is None or resent is None or not resent.reused:
        return None
    before, mapped = previous
    shared = resent.reused
    if len(before) < shared or messages[0] is not before[0] or messages[shared - 1] is not before[shared - 1]:
        return None
    return Reuse(mapped=mapped, shared=shared)


def served_chat(
    *, session: Session, mapped: Mapped, served: list[dict[str, Any]] | None = None, resent: Parsed | None = None
) -> list[dict]:
    """The served context as Chat Completions messages (see common.served_wire)."""
    return common.served_wire(to_chat, session=session, mapped=mapped, served=served, resent=resent)


def _reply(completion: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the reply in the Messages API's terms, its stored message, its extras)."""
    choices = choices if isinstance(choices := completion.get("choices"), list) else []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    usage = common.meter_usage(
        completion.get("usage"), prompt="prompt_tokens", completion="completion_tokens", details="prompt_tokens_details"
    )
    reply = {
        "usage": usage,
        "model": completion.get("model"),
        "stop_reason": STOP_REASONS.get(str(choice.get("finish_reason"))),
    }
    message = choice.get("message")
    if not isinstance(message, dict):
        return reply, {}, {}
    try:
        mapped = to_blocks([{**message, "role": "assistant"}])
    except MappingError:
        return reply, {}, {}
    return {**reply, "content": mapped.messages[0]["content"]}, mapped.messages[0], mapped.extras[0]


def record(turn: Turn, completion: dict[str, Any], status: int = 200) -> None:
    """Store the reply and its usage; a failure is logged (the client has its answer and resends it)."""
    try:
        reply, message, extras = _reply(completion)
        if turn.side_call is not None:
            side_call_finish(turn.side_call, status=status, reply=reply)
            return
        gateway_record_reply(turn=turn, reply=reply)
        if message:
            extras_store(session=turn.session, pairs=[(message, extras)])
    except Exception:  # noqa: BLE001 - the client has its answer; its next call appends what is missing
        logger.exception("OpenAI gateway: recording the reply for session %s failed", turn.session.pk)


def _payload(body: dict[str, Any], messages: list[dict[str, Any]]) -> tuple[dict[str, Any], bool]:
    """The upstream body, and whether the gateway asked for the usage chunk the client did not
    (the meter needs it; the client does not get it)."""
    payload = {**body, "messages": messages}
    options = options if isinstance(options := body.get("stream_options"), dict) else {}
    if not body.get("stream") or options.get("include_usage"):
        return payload, False
    payload["stream_options"] = {**options, "include_usage": True}
    return payload, True


def openai_chat_call(
    *,
    user,
    body: dict[str, Any],
    session_id: str | None,
    headers: dict[str, str],
    agent: str = "",
    raw: bytes | None = None,
    resent: Parsed | None = None,
) -> GatewayResult:
    """One chat completion through Compactor (see the module docstring). `raw`: the request's
    bytes, sent upstream as they came when the payload is the request itself (no re-encoding);
    `resent`: the request's parse (gateway.resent)."""
    mapped = map_messages(body.get("messages"), resent)
    turn = common.begin(
        user=user, body=body, mapped=mapped, system=mapped.system_text(), session_id=session_id, agent=agent
    )
    if turn.side_call is None:
        messages = served_chat(session=turn.session, mapped=mapped, resent=resent)
    else:
        messages = body["messages"]  # a side call goes as it came
    payload, drop_usage = _payload(body, messages)
    sent = body["messages"]
    unchanged = not drop_usage and (
        messages is sent or (len(messages) == len(sent) and all(a is b for a, b in zip(messages, sent, strict=True)))
    )

    def retry(status: int, text: str) -> dict[str, Any] | None:
        served = overflow_context(turn, status, text)
        return (
            None
            if served is None
            else _payload(body, served_chat(session=turn.session, mapped=mapped, served=served))[0]
        )

    return common.exchange(
        turn,
        path=PATH,
        headers=headers,
        payload=payload,
        verbatim=raw if unchanged else None,
        retry=retry,
        assembler=lambda: ChatAssembler(drop_usage_chunk=drop_usage),
        record=lambda completion: record(turn, completion),
        responses=False,
    )
