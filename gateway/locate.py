"""Which session a gateway call belongs to, inside the call's transaction.

In order: the `x-compactor-session` header; the client's own conversation id (one indexed
lookup of every session that carries it); the stored history the request continues (one
indexed lookup by prefix digests, gateway.history); else a new session. A call beside a known
conversation (another system prompt, a single user message, no continuation) is a side call
of that conversation's session, never a session of its own; a subagent's first call (its own
system prompt, one user message, its tools) is its own session under the conversation's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import F

from sessions.models import Message, Session, SideCall
from sessions.services import session_create, session_update

from .errors import SESSION_HEADER, GatewayError, validation_message
from .history import chain_digests, first_user_text
from .identity import single_user_message, system_text
from .models import Conversation

# Digests per IN (...) query: far below SQLite's variable limit.
LOOKUP_CHUNK = 500
FIRST_LOOKUP = 8
SUMMARY_CHARS = 200


@dataclass
class Located:
    session: Session
    conversation: Conversation
    matched: int  # how many of the request's messages the session already holds
    created: bool = False
    side_call: SideCall | None = None


def stored_digests(session: Session) -> list[str]:
    """Digests of a session's stored history: only for a session the gateway has not seen yet."""
    rows = Message.objects.filter(session=session).order_by("seq").values_list("role", "content")
    return chain_digests({"role": role, "content": content} for role, content in rows.iterator())


def matched_count(session: Session, conversation: Conversation | None, digests: list[str]) -> int:
    """How many of the request's messages the session already holds; raises if it diverges."""
    if conversation is not None:
        n = conversation.message_count
        if n == 0 or (n <= len(digests) and digests[n - 1] == conversation.head_digest):
            return n
    stored = stored_digests(session)
    if not stored:
        return 0
    n = len(stored)
    if n <= len(digests) and digests[n - 1] == stored[-1]:
        return n
    raise GatewayError(
        400,
        "invalid_request_error",
        f"messages do not continue the history of session {session.pk} ({n} stored messages); "
        f"drop the {SESSION_HEADER} header to start a new session",
    )


def find_conversation(*, user, digests: list[str], lock: bool = False) -> Conversation | None:
    """The owner's conversation whose head is the longest prefix of the request (indexed lookup),
    its session loaded with it. With `lock`, the conversations read are locked as they are read
    (inside the caller's transaction): what is found is current, and stays so until it commits."""
    # From the newest messages back: a continued conversation's head is near the end (the
    # request resends the stored history, the last reply and one new message), so the first
    # chunk with a hit holds the longest match. The first chunk is small: binding hundreds of
    # parameters costs milliseconds, and it usually answers alone.
    end = len(digests)
    for size in _chunk_sizes(end):
        start = max(0, end - size)
        chunk, end = digests[start:end], end - size
        by_digest = {d: start + i + 1 for i, d in enumerate(chunk)}  # digest → messages it covers
        best: Conversation | None = None
        rows = Conversation.objects.filter(owner=user, head_digest__in=chunk).select_related("session")
        if lock:
            rows = rows.select_for_update(of=("self",))
        for conv in rows.order_by("-updated_at"):
            if by_digest.get(conv.head_digest) != conv.message_count:
                continue
            if best is None or conv.message_count > best.message_count:
                best = conv
        if best is not None:
            return best
    return None


def _chunk_sizes(total: int) -> Iterator[int]:
    yield FIRST_LOOKUP
    for _ in range(FIRST_LOOKUP, total, LOOKUP_CHUNK):
        yield LOOKUP_CHUNK


def _continues(conversation: Conversation, digests: list[str]) -> bool:
    n = conversation.message_count
    return n <= len(digests) and (n == 0 or digests[n - 1] == conversation.head_digest)


def locate(
    *, user, body: dict[str, Any], digests: list[str], session_id: str | None, client_id: str | None, agent: str
) -> Located:
    """The session (locked) and how much of the request it holds; see the module docstring."""
    if session_id:
        session = Session.objects.select_for_update().filter(pk=session_id, owner=user).first()
        if session is None:
            raise GatewayError(404, "not_found_error", f"{SESSION_HEADER}: no session {session_id} for this key")
        conversation = Conversation.objects.select_for_update().filter(session=session).first()
        matched = matched_count(session, conversation, digests)
        if conversation is None:
            conversation = Conversation(session=session, owner=user, head_digest="", message_count=0)
        return Located(session, conversation, matched)
    if client_id:
        found = _by_client_id(user=user, body=body, digests=digests, client_id=client_id, agent=agent)
        if found is not None:
            return found
    found = _by_history(user=user, digests=digests)
    if found is not None:
        if client_id and not found.conversation.client_session:
            found.conversation.client_session = client_id
        return found
    return _new_session(user=user, body=body, client_id=client_id, agent=agent, parent=None)


def _by_history(*, user, digests: list[str]) -> Located | None:
    conversation = find_conversation(user=user, digests=digests, lock=True)
    if conversation is None:
        return None  # none, or the one it continued moved on meanwhile: this request starts its own
    session = conversation.session
    if session.one_off and len(digests) > 1:
        Session.objects.filter(pk=session.pk).update(one_off=False)
        session.one_off = False
    return Located(session, conversation, conversation.message_count)


def _by_client_id(*, user, body: dict[str, Any], digests: list[str], client_id: str, agent: str) -> Located | None:
    """Every live session carrying the client's conversation id, in one indexed lookup: the one
    the request continues, or the conversation's root for a side call; None when the id is new."""
    conversations = _client_conversations(user=user, client_id=client_id)
    if not conversations:
        # Claude Code sends a turn's side calls alongside it: the first calls of a new id wait
        # for each other (the owner's row lock), so the second sees the session the first made.
        type(user).objects.select_for_update().filter(pk=user.pk).first()
        conversations = _client_conversations(user=user, client_id=client_id)
    live = [c for c in conversations if c.message_count and _continues(c, digests)]
    if live:
        best = max(live, key=lambda c: c.message_count)
        return Located(best.session, best, best.message_count)
    # The conversation's own session: the fullest one no other hangs off.
    roots = [c for c in conversations if c.session.parent_id is None] or conversations
    root = max(roots, key=lambda c: c.message_count) if roots else None
    if _is_side_call(body, root):
        if root is None:  # the conversation's first call is a side call: its session starts empty
            root = _new_session(user=user, body=body, client_id=client_id, agent=agent, parent=None).conversation
            Session.objects.filter(pk=root.session_id).update(one_off=True)
        return _side_call(root, body)
    empty = next((c for c in conversations if c.message_count == 0), None)
    if empty is not None:
        _first_turn(empty.session, body, agent)
        return Located(empty.session, empty, 0)
    if root is None:
        return None
    # The conversation's id, but none of its histories: a subagent, or a history the person
    # rewound. Its own session, hung off the conversation's.
    return _by_history(user=user, digests=digests) or _new_session(
        user=user, body=body, client_id=client_id, agent=agent, parent=root.session
    )


def _client_conversations(*, user, client_id: str) -> list[Conversation]:
    return list(
        Conversation.objects.select_for_update()
        .filter(owner=user, client_session=client_id, session__deleted_at__isnull=True)
        .select_related("session")
        .order_by("pk")
    )


def _is_side_call(body: dict[str, Any], root: Conversation | None) -> bool:
    """A small call beside the conversation: one user message and no tools (an agent's main loop
    and its subagents send their tools; Claude Code's title, topic and command checks do not),
    with a system prompt other than the conversation's."""
    if not single_user_message(body["messages"]) or body.get("tools"):
        return False
    if root is None or root.message_count == 0:
        return True  # before the conversation's first turn there is no system prompt to compare with
    return system_text(body.get("system")) != root.session.system_prompt


def _side_call(root: Conversation, body: dict[str, Any]) -> Located:
    if root.pk is None:
        root.save()
    call = SideCall.objects.create(
        session=root.session,
        model=str(body.get("model") or "")[:100],
        summary=first_user_text(body["messages"], SUMMARY_CHARS),
        streamed=bool(body.get("stream")),
    )
    Session.objects.filter(pk=root.session_id).update(side_call_count=F("side_call_count") + 1)
    return Located(root.session, root, root.message_count, side_call=call)


def _first_turn(session: Session, body: dict[str, Any], agent: str) -> None:
    """A session a side call opened takes its title, model and system prompt from the first turn."""
    try:
        session_update(
            session=session,
            title=first_user_text(body["messages"]),
            model=str(body.get("model") or "")[:100],
            system_prompt=system_text(body.get("system")),
            agent=agent[:100] or session.agent,
        )
    except ValidationError as exc:
        raise GatewayError(400, "invalid_request_error", validation_message(exc, 0)) from None
    Session.objects.filter(pk=session.pk).update(one_off=False)
    session.one_off = False


def _new_session(*, user, body: dict[str, Any], client_id: str | None, agent: str, parent: Session | None) -> Located:
    messages = body["messages"]
    try:
        session = session_create(
            owner=user,
            title=first_user_text(messages),
            agent=agent[:100],
            model=str(body.get("model") or "")[:100],
            system_prompt=system_text(body.get("system")),
        )
    except ValidationError as exc:
        raise GatewayError(400, "invalid_request_error", validation_message(exc, 0)) from None
    # Without the client's conversation id a lone message may be anything (a probe, a one-shot
    # question, an agent's side call): kept out of the lists until a second turn continues it.
    one_off = client_id is None and single_user_message(messages)
    if parent is not None or one_off:
        Session.objects.filter(pk=session.pk).update(parent=parent, one_off=one_off)
        session.parent, session.one_off = parent, one_off
    conversation = Conversation(
        session=session, owner=user, head_digest="", message_count=0, client_session=client_id or ""
    )
    return Located(session, conversation, 0, created=True)


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def side_call_finish(call: SideCall, *, status: int, reply: dict[str, Any]) -> None:
    """The side call's answer: its status and the usage the provider reported (Messages API
    names; the OpenAI routes hand theirs over in these terms)."""
    usage = usage if isinstance(usage := reply.get("usage"), dict) else {}
    call.status = status
    call.input_tokens = _count(usage.get("input_tokens"))
    call.output_tokens = _count(usage.get("output_tokens"))
    call.cache_read_input_tokens = _count(usage.get("cache_read_input_tokens"))
    call.cache_creation_input_tokens = _count(usage.get("cache_creation_input_tokens"))
    if reply.get("model") and not call.model:
        call.model = str(reply["model"])[:100]
    call.save(
        update_fields=[
            "status",
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "model",
        ]
    )
