"""POST /openai/v1/responses through Compactor, for Codex-style clients.

Such a client (`store: false`) resends its whole input every call; it is found, stored and
served like a Messages API history (gateway.services), its items mapped to blocks and back by
gateway.openai.responses_map, reasoning items passed on untouched. `previous_response_id` is
refused: the history would then live at the provider, out of Compactor's sight, and nothing
could be compacted.
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
from .chat_map import Mapped, MappingError, Reuse
from .responses_map import to_blocks, to_items
from .stream import ResponsesAssembler

logger = logging.getLogger(__name__)

PATH = "/responses"
MAPPING = "responses_map"  # the memo of a request's mapping, kept with its parse
STOP_REASONS = {"completed": "end_turn", "incomplete": "max_tokens"}


def map_input(body: dict[str, Any], resent: Parsed | None = None) -> Mapped:
    """The input as blocks; `resent`: the request's parse, whose previous request's mapping is
    reused for the items they share (Codex resends its whole input every call), and which keeps
    this one's for the next."""
    if body.get("previous_response_id"):
        raise GatewayError(
            400,
            "invalid_request_error",
            "previous_response_id: not supported through Compactor, which must see the history it compacts; "
            "send the whole conversation as input with store: false (Codex does this by default)",
            param="previous_response_id",
        )
    if body.get("input") in (None, "", []):
        raise GatewayError(400, "invalid_request_error", "input: required, a string or a list of items", param="input")
    items = body["input"]
    try:
        mapped = to_blocks(items, _reuse(items, resent))
    except MappingError as exc:
        raise GatewayError(400, "invalid_request_error", str(exc), param=exc.path) from None
    if not mapped.messages:
        raise GatewayError(
            400, "invalid_request_error", "input: needs an item after the system messages", param="input"
        )
    if resent is not None and isinstance(items, list):
        resent.memo[MAPPING] = (items, mapped)
    return mapped


def _reuse(items: Any, resent: Parsed | None) -> Reuse | None:
    """The previous request's mapping when this request's leading items are its objects."""
    previous = resent.previous_memo.get(MAPPING) if resent is not None else None
    if previous is None or resent is None or not resent.reused or not isinstance(items, list):
        return None
    before, mapped = previous
    shared = resent.reused
    if len(before) < shared or items[0] is not before[0] or items[shared - 1] is not before[shared - 1]:
        return None
    return Reuse(mapped=mapped, shared=shared)


def served_items(
    *, session: Session, mapped: Mapped, served: list[dict[str, Any]] | None = None, resent: Parsed | None = None
) -> list[dict]:
    """The served context as input items (see common.served_wire)."""
    return common.served_wire(to_items, session=session, mapped=mapped, served=served, resent=resent)


def record(turn: Turn, response: dict[str, Any], status: int = 200) -> None:
    """Store the response's output as the assistant's message and report its usage."""
    try:
        usage = common.meter_usage(
            response.get("usage"), prompt="input_tokens", completion="output_tokens", details="input_tokens_details"
        )
        reply: dict[str, Any] = {
            "usage": usage,
            "model": response.get("model"),
            "stop_reason": STOP_REASONS.get(str(response.get("status"))),
        }
        if turn.side_call is not None:
            side_call_finish(turn.side_call, status=status, reply=reply)
            return
        output = output if isinstance(output := response.get("output"), list) else []
        mapped = to_blocks(output) if output else None
        if mapped is not None and len(mapped.messages) == 1 and mapped.messages[0]["role"] == "assistant":
            reply["content"] = mapped.messages[0]["content"]
        gateway_record_reply(turn=turn, reply=reply)
        if "content" in reply and mapped is not None:
            extras_store(session=turn.session, pairs=[(mapped.messages[0], mapped.extras[0])])
    except Exception:  # noqa: BLE001 - the client has its answer; its next call appends what is missing
        logger.exception("OpenAI gateway: recording the response for session %s failed", turn.session.pk)


def openai_responses_call(
    *,
    user,
    body: dict[str, Any],
    session_id: str | None,
    headers: dict[str, str],
    agent: str = "",
    raw: bytes | None = None,
    resent: Parsed | None = None,
) -> GatewayResult:
    """One Responses API call through Compactor. `raw`: the request's bytes, sent upstream as they
    came when the input goes unchanged (no re-encoding of megabytes); `resent`: its parse."""
    mapped = map_input(body, resent)
    instructions = instructions if isinstance(instructions := body.get("instructions"), str) else ""
    system = "\n\n".join(t for t in (instructions, mapped.system_text()) if t)
    turn = common.begin(user=user, body=body, mapped=mapped, system=system, session_id=session_id, agent=agent)
    if turn.side_call is None:
        items = served_items(session=turn.session, mapped=mapped, resent=resent)
    else:
        items = body["input"]  # a side call goes as it came
    sent = body["input"]
    unchanged = items is sent or (
        isinstance(sent, list) and len(items) == len(sent) and all(a is b for a, b in zip(items, sent, strict=True))
    )

    def retry(status: int, text: str) -> dict[str, Any] | None:
        served = overflow_context(turn, status, text)
        return (
            None
            if served is None
            else {**body, "input": served_items(session=turn.session, mapped=mapped, served=served)}
        )

    return common.exchange(
        turn,
        path=PATH,
        headers=headers,
        payload={**body, "input": items},
        verbatim=raw if unchanged else None,
        retry=retry,
        assembler=ResponsesAssembler,
        record=lambda response: record(turn, response),
        responses=True,
    )
