"""The gateway's work for one Messages API call, through the public session and compaction services.

gateway_call:
  1. find the session (header, or the one whose history the request continues, or a new one)
     and append the new tail of the client's messages (validated as the REST API validates);
  2. build the served context (summary + kept + tail), waiting for a running summary only
     when the context would not fit the window without it;
  3. send the client's request upstream with only its messages replaced;
  4. on a context overflow: emergency compaction, one retry; other errors go back as they are;
  5. pass the response back (streamed as it arrives, or whole), then append the reply and
     record its usage as a usage report — auto-compaction then runs in the workers.

The auto-compaction decision follows each write (the new messages, the reply, the usage report)
after its commit, outside the row locks, from that write's own figure: the moment and the figure
the REST API's append and usage report decide from, so an agent on either path is compacted on
the same turn.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from compaction.models import IN_FLIGHT, Compaction
from compaction.services import compaction_maybe_auto_safely, compaction_overflow, usage_report_then_compact
from sessions.models import Message, Session, SideCall
from sessions.selectors import context_build
from sessions.services import MAX_BATCH, AppendResult, messages_append, session_usage

from . import upstream
from .anthropic_map import for_store, restore, to_stored
from .codec import encode_json
from .digests import request_digests
from .errors import SESSION_HEADER, GatewayError, error_body  # noqa: F401 - the views import them from here
from .errors import validation_message as _validation_message
from .extras import extra_key, extras_for, extras_store
from .history import (
    chain_digests,
    merge_served,
    message_fingerprint,
    strip_transport,
    with_provenance,
)
from .identity import client_conversation_id
from .locate import find_conversation as _find_conversation
from .locate import locate, side_call_finish
from .locate import matched_count as _matched_count
from .models import Conversation
from .relay import UpstreamFault, read_whole, relay_events
from .resent import Parsed
from .served import client_copies_suffice
from .sse import StreamAssembler, encode_event
from .window import window_learn

logger = logging.getLogger(__name__)

SUMMARY_POLL_SECONDS = 0.25
# What a call changes on a conversation it continues.
CONVERSATION_MOVES = ("head_digest", "message_count", "client_session", "updated_at")


@dataclass
class Turn:
    session: Session
    conversation: Conversation
    messages: list[dict[str, Any]]  # the client's, as sent
    appended: int = 0
    created: bool = False
    # The session's newest seq once the request's messages are stored: the reply comes next.
    last_seq: int = 0
    # Set for a call beside the conversation: forwarded as it came, recorded here, not stored.
    side_call: SideCall | None = None


@dataclass
class GatewayResult:
    """What goes back to the client: a whole body, or chunks to stream as they arrive.

    `after`: the bookkeeping of the answer (storing the reply, its usage), run when the server
    closes the response, once the client has every byte of it (a stream's last event and the end
    of its body included): the client does not wait for the database, and its next call finds the
    reply stored or stores the copy it resends (_store_reply)."""

    status: int
    headers: dict[str, str]
    body: bytes | None = None
    chunks: Iterator[bytes] | None = None
    session_id: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    after: Callable[[], None] | None = None


# --- 1. which session, and what is new -------------------------------------------------------


def gateway_begin(
    *,
    user,
    body: dict[str, Any],
    session_id: str | None,
    agent: str = "",
) -> Turn:
    """Find or create the session and append the request's new messages, all or nothing.
    A side call appends nothing: it is recorded beside the session it belongs to."""
    messages = body["messages"]
    digests = request_digests(user.pk, messages)
    client_id = None if session_id else client_conversation_id(body)
    with transaction.atomic():
        found = locate(user=user, body=body, digests=digests, session_id=session_id, client_id=client_id, agent=agent)
        session, conversation, matched = found.session, found.conversation, found.matched
        if found.side_call is not None:
            return Turn(session=session, conversation=conversation, messages=messages, side_call=found.side_call)
        tail, extras = _storable(messages[matched:])
        appended: AppendResult | None = None
        for start in range(0, len(tail), MAX_BATCH):
            try:
                appended = messages_append(session=session, messages=tail[start : start + MAX_BATCH])
            except ValidationError as exc:
                raise GatewayError(400, "invalid_request_error", _validation_message(exc, matched + start)) from None
        extras_store(session=session, pairs=extras)
        conversation.head_digest = digests[-1]
        conversation.message_count = len(messages)
        conversation.save(update_fields=CONVERSATION_MOVES if conversation.pk else None)
    if appended is not None:
        # Appends only add to the meter: the last batch's figure decides for the whole tail.
        # (`session`, read in the transaction, has the append's counters: messages_append set them.)
        compaction_maybe_auto_safely(session=appended.session, usage=appended.usage)
    return Turn(
        session=session,
        conversation=conversation,
        messages=messages,
        appended=len(tail),
        created=found.created,
        last_seq=session.last_seq,
    )


def _storable(messages: list[Any]) -> tuple[list[Any], list[tuple[dict[str, Any], dict[str, Any]]]]:
    """The client's messages as the store holds them (gateway.anthropic_map: a role, block or
    field it does not model is mapped, never refused), and (stored, extras) for those mapped."""
    tail, extras = [], []
    for message in messages:
        stored, extra = for_store(strip_transport(message))
        if extra:
            extras.append((stored, extra))
        tail.append(with_provenance(stored))
    return tail, extras


# --- 2. the served context -------------------------------------------------------------------


def wait_if_it_cannot_fit(session: Session) -> None:
    """Auto-compaction runs in the workers; a call waits for it only when the context is over
    the window (the provider would refuse it), and at most GATEWAY_SUMMARY_WAIT seconds."""
    usage = session_usage(session)
    if usage.tokens <= usage.context_window:
        return
    in_flight = Compaction.objects.filter(session_id=session.pk, status__in=IN_FLIGHT)
    if not in_flight.exists():
        return
    deadline = time.monotonic() + settings.GATEWAY_SUMMARY_WAIT
    while time.monotonic() < deadline:
        time.sleep(SUMMARY_POLL_SECONDS)
        if not in_flight.exists():
            break
    session.refresh_from_db()


def upstream_messages(
    *, session: Session, client_messages: list[dict[str, Any]], resent: Parsed | None = None
) -> list[dict[str, Any]]:
    if client_copies_suffice(session=session, client_messages=client_messages, resent=resent):
        return client_messages
    return served_as_sent(session, context_build(session=session).messages, client_messages)


def served_as_sent(session: Session, served: list[dict[str, Any]], client: list[Any]) -> list[dict[str, Any]]:
    """merge_served in the client's terms: the served context (stored blocks) with the client's
    own copy of each message it still holds, as it sent it, and each message served from the
    store with what its mapping left out put back (a mid-conversation system message in the
    kept part goes as it came)."""
    mapped = [to_stored(m)[0] for m in client]
    merged = merge_served(served, mapped)
    position = {id(m): i for i, m in enumerate(mapped)}
    stored = [m for m in merged if id(m) not in position]
    extras = extras_for(session=session, messages=stored) if stored else {}
    return [
        client[position[id(m)]] if id(m) in position else restore(m, extras.get(extra_key(m)) if extras else None)
        for m in merged
    ]


# --- 3-5. upstream, overflow, the reply -----------------------------------------------------


def _encode(body: dict[str, Any], messages: list[dict[str, Any]]) -> bytes:
    return encode_json({**body, "messages": messages})


def _send(path: str, query: str, headers: dict[str, str], payload: bytes) -> httpx.Response:
    try:
        return upstream.send(path=path, query=query, headers=headers, body=payload)
    except httpx.TimeoutException as exc:
        # Connected (or not) but no answer within the timeout: a gateway timeout, not a bad gateway.
        logger.warning("Gateway: upstream timed out before answering (%s)", type(exc).__name__)
        raise GatewayError(
            504, "overloaded_error", f"upstream Messages API did not answer in time ({type(exc).__name__}); retry"
        ) from None
    except httpx.HTTPError as exc:
        # The URL is not logged: it may carry a proxy's credentials.
        logger.warning("Gateway: upstream unreachable (%s)", type(exc).__name__)
        raise GatewayError(
            502,
            "api_error",
            f"upstream Messages API unreachable ({type(exc).__name__}): check COMPACTOR_UPSTREAM_URL",
        ) from None


def _read(response: httpx.Response, *, whole_json: bool = False) -> bytes:
    """The upstream's whole body; a body that breaks or stalls after the headers (or, for a
    success, is not the complete JSON document) is a 502/504 in the Messages API's shape."""
    try:
        payload = read_whole(response, timeout=settings.GATEWAY_UPSTREAM_TIMEOUT)
    except UpstreamFault as fault:
        raise GatewayError(fault.status, fault.error_type, fault.message) from None
    if whole_json:
        try:
            json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError):
            # Closed early without a length: the bytes are a fragment of the answer.
            logger.warning("Gateway: upstream answered 200 with a body that is not whole JSON")
            raise GatewayError(502, "api_error", "upstream answer was cut short (not complete JSON); retry") from None
    return payload


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _resent_copy(turn: Turn, message: dict[str, Any]) -> int | None:
    """The seq of the copy of this reply that the client's next call already stored, if it did."""
    row = Message.objects.filter(session=turn.session, seq=turn.last_seq + 1).values_list("role", "content").first()
    stored = to_stored(message)[0]
    if row is None or message_fingerprint({"role": row[0], "content": row[1]}) != message_fingerprint(stored):
        return None
    return turn.last_seq + 1


def _store_reply(turn: Turn, message: dict[str, Any]) -> int | None:
    """Append the reply; its seq (None if it could not be stored).

    A reply is stored after its last byte went out, and a client may send its next call as soon
    as it has the answer: that call then stored the history as the client kept it, the reply
    right after this call's messages (or an edited copy of it, or none). That history is the
    client's: appending the reply again would serve it twice, or after messages that do not
    follow it. The usage then hangs on the client's copy when it is the reply, else on no message.
    """
    conversation = turn.conversation
    try:
        with transaction.atomic():
            locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
            if locked.head_digest != conversation.head_digest:  # the next call came first
                return _resent_copy(turn, message)
            stored, extra = for_store(message)
            appended = messages_append(session=turn.session, messages=[stored])
            extras_store(session=turn.session, pairs=[(stored, extra)])
            locked.head_digest = chain_digests([message], start=locked.head_digest)[-1]
            locked.message_count += 1
            locked.save(update_fields=["head_digest", "message_count", "updated_at"])
    except ValidationError as exc:
        # The client resends it with its next call, where a problem is answered as a 400.
        logger.warning("Gateway: reply for session %s not stored: %s", turn.session.pk, _validation_message(exc, 0))
        return None
    compaction_maybe_auto_safely(session=appended.session, usage=appended.usage)
    return appended.messages[-1].seq


def gateway_record_reply(*, turn: Turn, reply: dict[str, Any]) -> None:
    """Append the assistant reply (as the client received it) and record the call's usage."""
    session = turn.session
    content = reply.get("content")
    message_seq = None
    if isinstance(content, list) and content:
        message_seq = _store_reply(turn, {"role": "assistant", "content": content})
    usage = reply.get("usage") or {}
    if isinstance(usage, dict) and usage:
        try:
            usage_report_then_compact(
                session=session,
                input_tokens=_int(usage.get("input_tokens")),
                output_tokens=_int(usage.get("output_tokens")),
                cache_read_input_tokens=_int(usage.get("cache_read_input_tokens")),
                cache_creation_input_tokens=_int(usage.get("cache_creation_input_tokens")),
                stop_reason=reply.get("stop_reason") if isinstance(reply.get("stop_reason"), str) else None,
                model=str(reply.get("model") or "")[:100] or None,
                message_seq=message_seq,
            )
        except ValidationError as exc:
            logger.warning("Gateway: usage for session %s not recorded: %s", session.pk, _validation_message(exc, 0))


def overflow_context(turn: Turn, status: int, text: str) -> list[dict[str, Any]] | None:
    """Emergency compaction for an upstream's context-overflow answer (any API's): the served
    context to retry once with, in stored blocks, or None when it was no overflow or nothing
    could be compacted. The window the error states is learned either way."""
    window_learn(session=turn.session, error_text=text)
    result = compaction_overflow(session=turn.session, error_text=text, status_code=status)
    if not result.get("overflow") or not result.get("compacted"):
        return None
    logger.info("Gateway: session %s compacted after an upstream overflow; retrying once", turn.session.pk)
    return result["context"]["messages"]


def sse_error_event(fault: UpstreamFault) -> bytes:
    """An error event as the Messages API sends one mid-stream (SDKs raise on it)."""
    return encode_event(error_body(fault.error_type, fault.message), "error")


def _stream(turn: Turn, response: httpx.Response, finished: dict[str, Any]) -> Iterator[bytes]:
    """Pass SSE events through as they arrive; once the last one went out, the reply assembled
    from them is left in `finished["reply"]`, stored when the server closes the response
    (GatewayResult.after): after the end of the body, so the client is not kept waiting for it.

    A stream that breaks, stalls or stops early ends with an error event and stores nothing:
    the client resends its request, and only a finished reply becomes an assistant turn.
    """
    assembler = StreamAssembler()
    yield from relay_events(
        response,
        on_event=assembler.on_event,
        complete=lambda: assembler.finished or assembler.error is not None,
        error_event=sse_error_event,
        timeout=settings.GATEWAY_UPSTREAM_TIMEOUT,
        label=f"for session {turn.session.pk}",
        on_fault=lambda fault: upstream.stream_interrupted(path="/v1/messages"),
    )
    if assembler.assistant_message() is not None:  # else interrupted or an error event: the client resends
        finished["reply"] = assembler.response_message() or {}


def record_when_finished(turn: Turn, finished: dict[str, Any]) -> Callable[[], None]:
    """The bookkeeping of a streamed answer, for GatewayResult.after: the reply `finished` holds
    once its stream ended properly (nothing when it did not, or the client went away before)."""

    def after() -> None:
        if "reply" in finished:
            _record_safely(turn, finished.pop("reply"))

    return after


def _record_answer(turn: Turn, payload: bytes) -> None:
    try:
        reply = json.loads(payload)
    except json.JSONDecodeError:
        return
    if isinstance(reply, dict):
        _record_safely(turn, reply)


def _record_safely(turn: Turn, reply: dict[str, Any]) -> None:
    try:
        if turn.side_call is not None:
            side_call_finish(turn.side_call, status=200, reply=reply)
            return
        gateway_record_reply(turn=turn, reply=reply)
    except Exception:  # noqa: BLE001 - the client gets its answer; its next call appends what is missing
        logger.exception("Gateway: recording the reply for session %s failed", turn.session.pk)


def gateway_call(
    *,
    user,
    body: dict[str, Any],
    session_id: str | None,
    headers: dict[str, str],
    query: str = "",
    agent: str = "",
    raw: bytes | None = None,
    resent: Parsed | None = None,
) -> GatewayResult:
    """One POST /v1/messages through Compactor (see the module docstring). `raw`: the request's
    bytes, sent upstream as they came when its messages go unchanged (no re-encoding); `resent`:
    the request's parse (gateway.resent)."""
    turn = gateway_begin(user=user, body=body, session_id=session_id, agent=agent)
    if turn.side_call is None:
        wait_if_it_cannot_fit(turn.session)
        messages = upstream_messages(session=turn.session, client_messages=turn.messages, resent=resent)
    else:
        messages = turn.messages  # a side call goes as it came
    stream = bool(body.get("stream"))
    session_header = {SESSION_HEADER: str(turn.session.pk)}

    unchanged = raw is not None and messages is body["messages"]
    response = _send("/v1/messages", query, headers, raw if raw is not None and unchanged else _encode(body, messages))
    if response.status_code != 200:
        text = _read(response).decode("utf-8", "replace")
        served = None if turn.side_call else overflow_context(turn, response.status_code, text)
        if served is not None:
            merged = served_as_sent(turn.session, served, turn.messages)
            response = _send("/v1/messages", query, headers, _encode(body, merged))
    if response.status_code != 200 or not stream:
        payload = _read(response, whole_json=response.status_code == 200)
        result = GatewayResult(
            status=response.status_code,
            headers=upstream.response_headers(response),
            body=payload,
            session_id=str(turn.session.pk),
            extra_headers=session_header,
        )
        if response.status_code != 200 and turn.side_call is not None:
            side_call_finish(turn.side_call, status=response.status_code, reply={})
        if response.status_code == 200:
            result.after = lambda: _record_answer(turn, payload)
        return result
    finished: dict[str, Any] = {}
    return GatewayResult(
        status=200,
        headers=upstream.response_headers(response),
        chunks=_stream(turn, response, finished),
        session_id=str(turn.session.pk),
        extra_headers=session_header,
        after=record_when_finished(turn, finished),
    )


def gateway_count_tokens(
    *, user, body: dict[str, Any], session_id: str | None, headers: dict[str, str], query: str = ""
) -> GatewayResult:
    """POST /v1/messages/count_tokens: counts what the gateway would send (served context + the
    not yet stored tail) when the request continues a session; stores and creates nothing."""
    messages = body["messages"]
    digests = chain_digests(messages)
    session: Session | None = None
    matched = 0
    if session_id:
        session = Session.objects.filter(pk=session_id, owner=user).first()
        if session is None:
            raise GatewayError(404, "not_found_error", f"{SESSION_HEADER}: no session {session_id} for this key")
        conversation = Conversation.objects.filter(session=session).first()
        matched = _matched_count(session, conversation, digests)
    else:
        conversation = _find_conversation(user=user, digests=digests)
        if conversation is not None:
            session = conversation.session
            matched = conversation.message_count
    if session is not None:
        tail = [to_stored(strip_transport(m))[0] for m in messages[matched:]]
        messages = served_as_sent(session, context_build(session=session).messages + tail, messages)
    response = _send("/v1/messages/count_tokens", query, headers, _encode(body, messages))
    payload = _read(response, whole_json=response.status_code == 200)
    return GatewayResult(
        status=response.status_code,
        headers=upstream.response_headers(response),
        body=payload,
        session_id=str(session.pk) if session else None,
        extra_headers={SESSION_HEADER: str(session.pk)} if session else {},
    )
