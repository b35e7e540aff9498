"""The provider's own word on its context window, when an overflow error states it."""

from __future__ import annotations

from compaction.core.overflow import MAX_SCAN_CHARS, stated_limit
from sessions.models import Session
from sessions.services import session_update

# The smallest window a session may be given (the REST API's bound for context_window).
MIN_WINDOW = 1024


def window_learn(*, session: Session, error_text: str) -> int | None:
    """A provider that states a limit below the window the session believes in is believed: the
    session's window becomes that limit, so its trigger (a share of the window) compacts before
    the next call overflows instead of after. The new window, or None when nothing changed."""
    limit = stated_limit(error_text[:MAX_SCAN_CHARS])
    if limit is None or limit < MIN_WINDOW or limit >= session.context_window:
        return None
    session_update(session=session, context_window=limit)
    return limit
