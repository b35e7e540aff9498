"""Python client for a Compactor server: its REST API (sessions, messages, context, usage,
compactions, events) and the Anthropic-compatible gateway.

    from compactor_client import Compactor

    cx = Compactor("http://127.0.0.1:8000", api_key)        # or COMPACTOR_URL / COMPACTOR_API_KEY
    sid = cx.create_session(title="demo", model="claude-sonnet-4-5")["id"]
    cx.append(sid, [{"role": "user", "content": "hello"}])
    cx.context(sid)["messages"]
    cx.compact(sid, "focus on the parser", wait=30)
    cx.search("ALTER TABLE", sid)["hits"]          # the whole history, summarized messages too
    cx.read(sid, 40, 45)                           # messages 40..45 verbatim, tool pairs whole

    claude = cx.anthropic()            # anthropic.Anthropic through the gateway: nothing else to change
    claude.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=[...])

HTTP goes through httpx2, the client the anthropic SDK itself uses. No Django needed.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx

__all__ = ["Compactor", "CompactorError"]

DEFAULT_URL = "http://127.0.0.1:8000"
# The longest a server holds one compaction request (COMPACTOR_MAX_WAIT_SECONDS' default).
SERVER_MAX_WAIT = 30
IN_FLIGHT = ("queued", "running")
# Sessions an ambiguous short id lists.
MAX_MATCHES_SHOWN = 10


class CompactorError(Exception):
    """An error answer: `status`, the server's `error` text and the whole `body`."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        # Status 0: refused before any request (no key, unreachable server, a bad argument).
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.message = message
        self.body = body


class Compactor:
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 90.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("COMPACTOR_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key or os.environ.get("COMPACTOR_API_KEY") or ""
        if not self.api_key:
            raise CompactorError(0, "no API key: pass api_key or set COMPACTOR_API_KEY")
        self._http = httpx.Client(
            base_url=f"{self.base_url}/api/v1",
            headers={"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Compactor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing
    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CompactorError(0, f"cannot reach {self.base_url}: {exc}") from None
        if response.status_code == 204:
            return None
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if response.status_code >= 400:
            message = body.get("error") if isinstance(body, dict) else None
            raise CompactorError(response.status_code, str(message or body or response.reason_phrase), body)
        return body

    # -- sessions
    def sessions(
        self, *, search: str | None = None, agent: str | None = None, model: str | None = None
    ) -> Iterator[dict]:
        """Every session of the key's owner, most recently active first (follows the pages)."""
        params = {k: v for k, v in {"search": search, "agent": agent, "model": model}.items() if v}
        page = 1
        while True:
            body = self._request("GET", "/sessions/", params={**params, "page": page})
            yield from body["results"]
            if not body.get("next"):
                return
            page += 1

    def session(self, session_id: str) -> dict:
        return self._request("GET", f"/sessions/{session_id}/")

    def resolve_session(self, ref: str) -> str:
        """The full id of the key owner's session `ref` names: a full id, or a unique start of one
        (at least 8 hex digits, as the dashboard shows it). Several matches: an error listing them."""
        ref = ref.strip()
        try:
            return str(uuid.UUID(ref))
        except ValueError:
            pass
        body = self._request("GET", "/sessions/", params={"id_prefix": ref, "page_size": MAX_MATCHES_SHOWN})
        matches = body["results"]
        if not matches:
            raise CompactorError(404, f"session {ref} not found")
        if len(matches) > 1:
            shown = ", ".join(f"{m['id']} ({m['title'] or 'untitled'})" for m in matches)
            more = f" and {body['count'] - len(matches)} more" if body.get("count", 0) > len(matches) else ""
            raise CompactorError(409, f"session id {ref} is ambiguous: it starts {shown}{more}; give more of it")
        return matches[0]["id"]

    def create_session(self, **fields: Any) -> dict:
        """title, agent, model, system_prompt, context_window, compaction_settings."""
        return self._request("POST", "/sessions/", json=fields)

    def update_session(self, session_id: str, **fields: Any) -> dict:
        return self._request("PATCH", f"/sessions/{session_id}/", json=fields)

    def delete_session(self, session_id: str) -> None:
        self._request("DELETE", f"/sessions/{session_id}/")

    # -- messages, context, usage
    def messages(self, session_id: str, *, limit: int = 500) -> Iterator[dict]:
        """The full stored history in seq order (follows the cursor)."""
        url: str | None = f"/sessions/{session_id}/messages/?limit={limit}"
        while url:
            body = self._request("GET", url)
            yield from body["results"]
            url = body.get("next")

    def read(self, session_id: str, from_seq: int, to_seq: int | None = None, *, limit: int = 500) -> list[dict]:
        """Messages `from_seq`..`to_seq` exactly as stored (both included), widened by the server
        so every tool call comes with its result and every result with its call."""
        params: dict[str, Any] = {"from_seq": from_seq, "limit": limit}
        if to_seq is not None:
            params["to_seq"] = to_seq
        body = self._request("GET", f"/sessions/{session_id}/messages/", params=params)
        messages = list(body["results"])
        while body.get("next"):
            body = self._request("GET", body["next"])
            messages.extend(body["results"])
        return messages

    def search(self, query: str, session_id: str | None = None, *, limit: int = 20) -> dict:
        """Search the stored history (summarized and pruned messages included): one session's, or
        every session of the key's owner when `session_id` is None. Answers {query, session, hits}."""
        path = f"/sessions/{session_id}/search/" if session_id else "/search/"
        return self._request("GET", path, params={"q": query, "limit": limit})

    def append(self, session_id: str, messages: list[dict]) -> dict:
        """Append messages all or nothing; answers the stored rows, the usage and any auto job."""
        return self._request("POST", f"/sessions/{session_id}/messages/", json={"messages": messages})

    def context(self, session_id: str) -> dict:
        """What to send to the model: system, messages (summary + kept), token figures."""
        return self._request("GET", f"/sessions/{session_id}/context/")

    def report_usage(self, session_id: str, **usage: Any) -> dict:
        """input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens, stop_reason, model."""
        return self._request("POST", f"/sessions/{session_id}/usage/", json=usage)

    def report_overflow(self, session_id: str, error_text: str, *, status_code: int | None = None) -> dict:
        return self._request(
            "POST", f"/sessions/{session_id}/overflow/", json={"error_text": error_text, "status_code": status_code}
        )

    # -- compactions
    def compact(
        self,
        session_id: str,
        instructions: str = "",
        *,
        wait: float = 0,
        dry_run: bool = False,
        force: bool = False,
        strategy: str = "auto",
        keep_recent_tokens: int | None = None,
        poll: float = 1.0,
    ) -> dict:
        """Compact now (like /compact FOCUS). With `wait` seconds, returns the finished job if it
        finishes in time: the server holds one request at most SERVER_MAX_WAIT seconds, so a
        longer wait follows the job by polling it."""
        body: dict[str, Any] = {
            "instructions": instructions,
            "wait": min(wait, SERVER_MAX_WAIT),
            "dry_run": dry_run,
            "force": force,
            "strategy": strategy,
        }
        if keep_recent_tokens is not None:
            body["keep_recent_tokens"] = keep_recent_tokens
        deadline = time.monotonic() + wait
        result = self._request("POST", f"/sessions/{session_id}/compactions/", json=body)
        while result.get("status") in IN_FLIGHT and time.monotonic() < deadline:
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
            result = self.compaction(session_id, result["id"])
        return result

    def compactions(self, session_id: str) -> list[dict]:
        """The session's compactions, newest first (first page)."""
        return self._request("GET", f"/sessions/{session_id}/compactions/")["results"]

    def compaction(self, session_id: str, compaction_id: str) -> dict:
        return self._request("GET", f"/sessions/{session_id}/compactions/{compaction_id}/")

    def undo(self, session_id: str) -> dict:
        """Undo the active compaction: the one before it (or the full history) is served again."""
        active = self.session(session_id).get("active_compaction")
        if not active:
            raise CompactorError(409, f"session {session_id} has no active compaction to undo")
        return self._request("POST", f"/sessions/{session_id}/compactions/{active}/revert/")

    # -- events
    def events(self, session_id: str, *, after: int = 0, limit: int = 200) -> dict:
        return self._request("GET", f"/sessions/{session_id}/events/", params={"after": after, "limit": limit})

    def follow_events(self, session_id: str, *, after: int = 0, poll: float = 1.0) -> Iterator[dict]:
        """Events as they happen (polls the events endpoint; stop by breaking out)."""
        while True:
            page = self.events(session_id, after=after)
            yield from page["events"]
            after = page["last_id"]
            if not page["events"]:
                time.sleep(poll)

    # -- import
    def import_transcript(
        self, path: str | Path, *, title: str | None = None, format: str | None = None, replay: bool = False
    ) -> dict:
        """Upload a transcript (Claude Code, pi, Codex, SWE-agent, Anthropic or OpenAI JSON; the server
        detects the format unless `format` is given). Answers {session, messages, format, report}."""
        path = Path(path)
        if not path.is_file():
            raise CompactorError(0, f"{path}: no such file")
        fields = {"replay": "true" if replay else "false"}
        if title:
            fields["title"] = title
        if format:
            fields["format"] = format
        with path.open("rb") as handle:
            return self._request("POST", "/imports/", data=fields, files={"file": (path.name, handle)})

    # -- the gateway
    def anthropic(self, *, session_id: str | None = None, **kwargs: Any):
        """An `anthropic.Anthropic` client whose calls go through Compactor's gateway: messages are
        stored, compacted and served without any other change to the calling code."""
        return wrap_anthropic(self.base_url, self.api_key, session_id=session_id, **kwargs)


def wrap_anthropic(base_url: str, api_key: str, *, session_id: str | None = None, **kwargs: Any):
    import anthropic  # lazy: the SDK takes seconds to import (3.0 s measured); only this helper uses it

    headers = dict(kwargs.pop("default_headers", None) or {})
    if session_id:
        headers["x-compactor-session"] = str(session_id)
    return anthropic.Anthropic(
        base_url=f"{base_url.rstrip('/')}/anthropic", api_key=api_key, default_headers=headers or None, **kwargs
    )
