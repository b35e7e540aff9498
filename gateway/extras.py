"""Where a message's extras are kept: what the store's blocks do not hold of an OpenAI-format
message (gateway.openai.chat_map) or of a Messages API one (gateway.anthropic_map). Beside the
session, keyed by the stored message's fingerprint, read back in one query for the messages
served from the store."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sessions.models import Session

from .history import message_fingerprint
from .models import MessageExtra


def extra_key(message: dict[str, Any]) -> str:
    canon = json.dumps(message_fingerprint(message), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def extras_store(*, session: Session, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Keep the extras of these (message, extras) pairs; a message already known keeps its own."""
    rows = {extra_key(m): e for m, e in pairs if e}
    if not rows:
        return
    # One INSERT that skips the keys already stored (the unique constraint on session and key):
    # a look-up of them first cost a second statement, twice on every Codex call.
    MessageExtra.objects.bulk_create(
        [MessageExtra(session=session, key=k, data=e) for k, e in rows.items()], ignore_conflicts=True
    )


def extras_for(*, session: Session, messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if not MessageExtra.objects.filter(session=session).exists():
        return {}  # most sessions have none: no fingerprint of the served messages is computed
    keys = {extra_key(m) for m in messages}
    if not keys:
        return {}
    return dict(MessageExtra.objects.filter(session=session, key__in=list(keys)).values_list("key", "data"))
