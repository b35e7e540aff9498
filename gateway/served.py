"""When what goes upstream is simply what the client sent.

Without an active compaction nothing is summarized or pruned, and the served context is the
stored history, which the client has just resent in full. gateway.history.merge_served then
hands back the client's own copy of every message, so reading and decoding the stored history
(the bulk of a call's cost at a few thousand messages) would only confirm it. Two stored shapes
are served differently from their copies and keep the full path: a message of whitespace-only
text (left out) and a reply cut off by max_tokens (its unanswered tool calls hidden).
"""

from __future__ import annotations

from typing import Any

from sessions.models import Message, Session
from sessions.services import STOP_MAX_TOKENS
from sessions.validation import without_blank_text

from .resent import Parsed

# The memo, kept with a request's parse, of how many of its leading messages hold no blank one.
BLANK_FREE = "blank_free"


def client_copies_suffice(*, session: Session, client_messages: list[Any], resent: Parsed | None = None) -> bool:
    """True when merge_served(context_build(...), client_messages) would be client_messages.
    `session` as the call read it; `resent`: the request's parse, whose previous request's
    messages are not looked at again."""
    if session.active_compaction_id is not None:
        return False
    if _holds_blank(client_messages, resent):
        return False
    cut_off = Message.objects.filter(session=session, role="assistant", provider_usage__stop_reason=STOP_MAX_TOKENS)
    return not cut_off.exists()


def _holds_blank(messages: list[Any], resent: Parsed | None) -> bool:
    start = 0
    previous = resent.previous_memo.get(BLANK_FREE) if resent is not None else None
    if previous is not None:
        before, clean = previous
        for mine, theirs in zip(messages[:clean], before, strict=False):
            if mine is not theirs:
                break
            start += 1
    for i in range(start, len(messages)):
        message = messages[i]
        if isinstance(message, dict) and without_blank_text(message.get("content")) is None:
            _remember(resent, messages, i)
            return True
    _remember(resent, messages, len(messages))
    return False


def _remember(resent: Parsed | None, messages: list[Any], clean: int) -> None:
    if resent is not None:
        resent.memo[BLANK_FREE] = (messages, clean)
