"""What the Chat Completions and Responses routes share: sending upstream, relaying a stream,
passing a whole answer back, and the usage an OpenAI reply reports in the meter's terms."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx2 as httpx
import orjson
from django.conf import settings

from sessions.models import Session
from sessions.selectors import context_build

from ..codec import encode_json
from ..errors import SESSION_HEADER, GatewayError
from ..extras import extra_key, extras_for, extras_store
from ..history import merge_served
from ..locate import side_call_finish
from ..relay import UpstreamFault, read_whole, relay_events
from ..resent import Parsed
from ..served import client_copies_suffice
from ..services import GatewayResult, Turn, gateway_begin, wait_if_it_cannot_fit
from . import upstream
from .chat_map import Mapped
from .stream import EventRelay, error_event

logger = logging.getLogger(__name__)


def begin(*, user: Any, body: dict[str, Any], mapped: Mapped, system: str, session_id: str | None, agent: str) -> Turn:
    """gateway_begin on a request mapped to blocks (the session, the new messages stored), the
    new messages' extras stored beside them, and a wait for a running summary when the context
    cannot fit without it."""
    shaped: dict[str, Any] = {
        **{k: body[k] for k in ("model", "tools", "stream", "metadata", "prompt_cache_key") if k in body},
        "system": system,
        "messages": mapped.messages,
    }
    turn = gateway_begin(user=user, body=shaped, session_id=session_id, agent=agent)
    if turn.side_call is None:
        tail = len(mapped.messages) - turn.appended
        extras_store(session=turn.session, pairs=list(zip(mapped.messages[tail:], mapped.extras[tail:], strict=True)))
        wait_if_it_cannot_fit(turn.session)
    return turn


def served_wire(
    to_wire: Callable[[dict[str, Any], dict[str, Any] | None], list[dict[str, Any]]],
    *,
    session: Session,
    mapped: Mapped,
    served: list[dict[str, Any]] | None = None,
    resent: Parsed | None = None,
) -> list[dict[str, Any]]:
    """The served context in the client's wire format: its own copies of what it still holds (as it
    sent them), the summary and pruned messages converted by `to_wire` with their stored extras."""
    if served is None:
        if client_copies_suffice(session=session, client_messages=mapped.messages, resent=resent):
            if mapped.request is not None:
                return mapped.request
            return list(mapped.system) + [item for source in mapped.sources for item in source]
        served = context_build(session=session).messages
    merged = merge_served(served, mapped.messages)
    position = {id(m): i for i, m in enumerate(mapped.messages)}
    stored = [m for m in merged if id(m) not in position]
    extras = extras_for(session=session, messages=stored) if stored else {}
    out = list(mapped.system)
    for message in merged:
        index = position.get(id(message))
        out += mapped.sources[index] if index is not None else to_wire(message, extras.get(extra_key(message)))
    return out


def send(path: str, headers: dict[str, str], payload: dict[str, Any], verbatim: bytes | None = None) -> httpx.Response:
    """POST the payload (`verbatim`: its bytes as the client sent them, when it is the request itself)."""
    try:
        return upstream.send(
            path=path, headers=headers, body=verbatim if verbatim is not None else encode_json(payload)
        )
    except httpx.HTTPError as exc:
        # The URL is not logged: it may carry a proxy's credentials.
        logger.warning("OpenAI gateway: upstream unreachable (%s)", type(exc).__name__)
        raise GatewayError(
            502,
            "api_error",
            f"upstream OpenAI API unreachable ({type(exc).__name__}): check COMPACTOR_OPENAI_UPSTREAM_URL",
        ) from None


def read_all(response: httpx.Response) -> bytes:
    """The whole body; one that breaks or stalls after the headers is a 502/504 (gateway.relay)."""
    try:
        return read_whole(response, timeout=settings.GATEWAY_UPSTREAM_TIMEOUT)
    except UpstreamFault as fault:
        raise GatewayError(fault.status, "api_error", fault.message) from None


def whole(turn: Turn, response: httpx.Response, payload: bytes) -> GatewayResult:
    return GatewayResult(
        status=response.status_code,
        headers=upstream.response_headers(response),
        body=payload,
        session_id=str(turn.session.pk),
        extra_headers={SESSION_HEADER: str(turn.session.pk)},
    )


def streamed(
    turn: Turn, response: httpx.Response, chunks: Iterator[bytes], after: Callable[[], None] | None = None
) -> GatewayResult:
    return GatewayResult(
        status=200,
        headers=upstream.response_headers(response),
        chunks=chunks,
        session_id=str(turn.session.pk),
        extra_headers={SESSION_HEADER: str(turn.session.pk)},
        after=after,
    )


def relay(
    turn: Turn, response: httpx.Response, assembler: Any, finished: dict[str, Any], *, responses: bool
) -> Iterator[bytes]:
    """Events go to the client as they complete; a stream the upstream cut (or that stalled
    past the timeout) ends with an error event, so the client never takes it for a whole reply.
    A stream that ended properly leaves its completion in `finished["reply"]`, recorded when the
    server closes the response (gateway.services.record_when_finished)."""
    events = EventRelay(assembler.on_event)
    yield from relay_events(
        response,
        on_event=events.keep,
        complete=lambda: assembler.ended,
        error_event=lambda fault: error_event(fault.message, responses=responses),
        timeout=settings.GATEWAY_UPSTREAM_TIMEOUT,
        label=f"for session {turn.session.pk}",
        on_fault=lambda fault: upstream.stream_interrupted(path="/responses" if responses else "/chat/completions"),
    )
    completion = assembler.completion() if assembler.ended else None
    if completion is not None:
        finished["reply"] = completion


def _record_finished(finished: dict[str, Any], record: Callable[[dict[str, Any]], None]) -> None:
    if "reply" in finished:
        record(finished.pop("reply"))


def _record_json(answer: bytes, record: Callable[[dict[str, Any]], None]) -> None:
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return
    if isinstance(parsed, dict):
        record(parsed)


def meter_usage(usage: Any, *, prompt: str, completion: str, details: str) -> dict[str, int]:
    """OpenAI's usage in the Messages API's terms the meter reads: the prompt's cached part
    as cache reads, the rest as input (OpenAI's prompt figure includes the cached tokens)."""
    if not isinstance(usage, dict):
        return {}
    cached = (usage.get(details) or {}).get("cached_tokens") if isinstance(usage.get(details), dict) else 0
    try:
        prompt_tokens, cached, output = int(usage.get(prompt) or 0), int(cached or 0), int(usage.get(completion) or 0)
    except (TypeError, ValueError):
        return {}
    cached = min(max(0, cached), max(0, prompt_tokens))
    return {
        "input_tokens": max(0, prompt_tokens - cached),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": 0,
        "output_tokens": max(0, output),
    }


def exchange(
    turn: Turn,
    *,
    path: str,
    headers: dict[str, str],
    payload: dict[str, Any],
    retry: Callable[[int, str], dict[str, Any] | None],
    assembler: Callable[[], Any],
    record: Callable[[dict[str, Any]], None],
    responses: bool,
    verbatim: bytes | None = None,
) -> GatewayResult:
    """Send upstream; on an error, `retry(status, text)` may give a payload to try once more
    with (the overflow compaction's); then the answer whole (recorded) or relayed as it streams."""
    response = send(path, headers, payload, verbatim)
    if response.status_code != 200:
        error = read_all(response)
        again = None if turn.side_call else retry(response.status_code, error.decode("utf-8", "replace"))
        if again is None:
            if turn.side_call is not None:
                side_call_finish(turn.side_call, status=response.status_code, reply={})
            return whole(turn, response, error)
        response = send(path, headers, again)
    if response.status_code != 200 or not payload.get("stream"):
        answer = read_all(response)
        result = whole(turn, response, answer)
        if response.status_code == 200:
            result.after = lambda: _record_json(answer, record)
        return result
    finished: dict[str, Any] = {}
    chunks = relay(turn, response, assembler(), finished, responses=responses)
    return streamed(turn, response, chunks, after=lambda: _record_finished(finished, record))
