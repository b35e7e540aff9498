"""The client's own name for a conversation, when its requests carry one. Pure Python.

Claude Code puts `metadata.user_id` on every call: `user_<hash>_account_<uuid>_session_<uuid>`
(newer releases: a JSON object with `session_id`). The session uuid is the same for the main
conversation, its subagents and the small calls beside it (titles, topic checks, command
checks), and a new one after /clear. Codex sends its conversation id as `prompt_cache_key`.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SESSION_RE = re.compile(r"_session_([0-9a-fA-F-]{8,64})\s*$")
MAX_ID = 100


def client_conversation_id(body: dict[str, Any]) -> str | None:
    """'claude-code:<uuid>' / 'prompt-cache:<key>', or None when the request names no conversation."""
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        user_id = metadata.get("user_id")
        if isinstance(user_id, str) and user_id:
            found = _SESSION_RE.search(user_id)
            if found:
                return f"claude-code:{found.group(1).lower()}"
            session_id = _json_session(user_id)
            if session_id:
                return f"claude-code:{session_id}"
    key = body.get("prompt_cache_key")
    if isinstance(key, str) and key.strip():
        return f"prompt-cache:{key.strip()}"[:MAX_ID]
    return None


def _json_session(user_id: str) -> str | None:
    if not user_id.startswith("{"):
        return None
    try:
        parsed = json.loads(user_id)
    except json.JSONDecodeError:
        return None
    value = parsed.get("session_id") if isinstance(parsed, dict) else None
    return value.strip().lower()[:64] if isinstance(value, str) and value.strip() else None


def system_text(system: Any) -> str:
    """The Messages API's `system` (a string or text blocks) as one text."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(
            b["text"]
            for b in system
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def single_user_message(messages: list[Any]) -> bool:
    return len(messages) == 1 and isinstance(messages[0], dict) and messages[0].get("role") == "user"
