"""`compactor mcp`: an MCP server (stdio) that lets an agent find and read back what a compaction
summarized away. It talks to the Compactor REST API like the rest of the client.

Tools: `search_history(query, session?, limit?)`, `read_messages(session?, from_seq, to_seq?)`,
`list_sessions(query?)`. Without a session, a tool uses $COMPACTOR_SESSION, else the key owner's
most recently active session; every answer names the session it used.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import Compactor, CompactorError
from .render import hits_text, messages_text, session_label

ALL_SESSIONS = "all"
MAX_HITS = 50
# What one read_messages answer holds at most: an agent's context is the scarce thing here.
READ_MAX_CHARS = 40_000
READ_MAX_MESSAGES = 200

INSTRUCTIONS = (
    "Compactor keeps the full history of your conversations, including everything a compaction "
    "summarized away. search_history finds messages by words, quoted phrases or identifiers (file "
    "paths, issue ids, commit hashes) and answers message numbers with snippets; read_messages gives "
    "those messages back verbatim. Use them when the summary mentions something whose details you need."
)


class Recall:
    """The tools' work, on a Compactor client; kept apart from the MCP wiring so it reads plainly."""

    def __init__(self, cx: Compactor, default_session: str | None = None) -> None:
        self.cx = cx
        self.default_session = default_session or None

    def _session(self, session: str | None) -> dict[str, Any]:
        chosen = (session or "").strip() or self.default_session
        if chosen:
            try:
                return self.cx.session(chosen)
            except CompactorError as exc:
                if exc.status != 404:
                    raise
                origin = "the session argument" if (session or "").strip() else "$COMPACTOR_SESSION"
                raise CompactorError(404, f"no session {chosen} for this key (from {origin})") from None
        return self._latest_conversation()

    def _latest_conversation(self) -> dict[str, Any]:
        # A subagent's session (an import's summarizer call, a Task agent) is often written after its
        # parent and so looks more recent; the agent asking means its own conversation, the top one.
        latest = None
        for s in self.cx.sessions():
            if not s.get("parent"):
                return s
            latest = latest or s
        if latest is None:
            raise CompactorError(404, "this key's owner has no sessions yet")
        return latest

    def search_history(self, query: str, session: str | None = None, limit: int = 10) -> str:
        limit = max(1, min(int(limit), MAX_HITS))
        if (session or "").strip().lower() == ALL_SESSIONS:
            return hits_text(self.cx.search(query, limit=limit))
        found = self._session(session)
        return hits_text(self.cx.search(query, found["id"], limit=limit), session=found)

    def read_messages(self, from_seq: int, to_seq: int | None = None, session: str | None = None) -> str:
        found = self._session(session)
        if to_seq is None:
            to_seq = from_seq
        to_seq = min(to_seq, from_seq + READ_MAX_MESSAGES - 1)
        messages = self.cx.read(found["id"], from_seq, to_seq)
        if not messages:
            return (
                f"{session_label(found)}: no messages from #{from_seq} to #{to_seq} (it has {found['message_count']})."
            )
        head = f"{session_label(found)}: messages #{messages[0]['seq']} to #{messages[-1]['seq']}, verbatim"
        return f"{head}\n{messages_text(messages, max_chars=READ_MAX_CHARS)}"

    def list_sessions(self, query: str | None = None) -> str:
        sessions = list(self.cx.sessions(search=query or None))[:50]
        if not sessions:
            return "No sessions" + (f" with {query!r} in the title." if query else ".")
        # A title filter may leave the default out: then it is looked up, never the first match.
        current = self.default_session or self._latest_conversation()["id"]
        lines = ["Sessions, most recently active first (* = the default for the other tools):"]
        for s in sessions:
            mark = "*" if s["id"] == current else " "
            active = s.get("active_compaction")
            note = ", compacted" if active else ""
            lines.append(
                f"{mark} {s['id']}  {s['message_count']} messages{note}, last active {s['last_activity_at'][:19]}"
                f"  {s['title'] or '(untitled)'}"
            )
        return "\n".join(lines)


def build_server(recall: Recall) -> MCPServer:
    server = MCPServer("compactor", instructions=INSTRUCTIONS)

    @server.tool()
    def search_history(query: str, session: str | None = None, limit: int = 10) -> str:
        """Search the full stored history of a conversation, including what compaction summarized away.

        query: words (match word starts), "quoted phrases", or identifiers such as src/app.py, an issue id
        or a commit hash (exact substring); every part must match.
        session: a session id, or "all" for every session; default: $COMPACTOR_SESSION, else the most
        recently active session.
        limit: hits to return (1-50, default 10).
        Answers one line per hit: #message-number, role, block kind, whether it is still in the context,
        and a snippet with the match marked «like this». Read a hit in full with read_messages.
        """
        return _answer(lambda: recall.search_history(query, session, limit))

    @server.tool()
    def read_messages(from_seq: int, to_seq: int | None = None, session: str | None = None) -> str:
        """Read messages back verbatim, by message number (as search_history gives them).

        from_seq, to_seq: the first and last message numbers (to_seq defaults to from_seq); a tool call
        and its result always come together. session: as in search_history (default: the current one).
        """
        return _answer(lambda: recall.read_messages(from_seq, to_seq, session))

    @server.tool()
    def list_sessions(query: str | None = None) -> str:
        """List your sessions (id, message count, last activity, title), most recent first.

        query: only sessions whose title contains it.
        """
        return _answer(lambda: recall.list_sessions(query))

    return server


def _answer(work) -> str:
    """The tool's text; a Compactor error becomes a tool error the agent can read."""
    try:
        return work()
    except CompactorError as exc:
        if not exc.status:  # nothing was asked of the server (no key, unreachable)
            raise ToolError(f"Compactor: {exc.message}") from None
        raise ToolError(f"Compactor answered {exc.status}: {exc.message}") from None


def serve(cx: Compactor) -> None:
    """Run the server on stdin/stdout until the client closes it."""
    # The SDK logs at INFO to stderr, and httpx's INFO line is each request's URL: the search terms.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    build_server(Recall(cx, os.environ.get("COMPACTOR_SESSION"))).run("stdio")
