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


def client_copies_suffice(*, session: Session, client_messages: list[Any]) -> bool:
    """True when merge_served(context_build(...), client_messages) would be client_messages."""
    active = Session.objects.filter(pk=session.pk).values_list("active_compaction_id", flat=True).first()
    if active is not None:
        return False
    if any(isinstance(m, dict) and without_blank_text(m.get("content")) is None for m in client_messages):
        return False
    cut_off = Message.objects.filter(session=session, role="assistant", provider_usage__stop_reason=STOP_MAX_TOKENS)
    return not cut_off.exists()
