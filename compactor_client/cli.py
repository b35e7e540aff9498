"""`compactor`: the command line for a Compactor server.

    compactor sessions [--search TEXT]        compactor compact SID [FOCUS...] [--wait S] [--dry-run]
    compactor show SID                        compactor undo SID
    compactor context SID                     compactor import PATH [--title T] [--format F]
    compactor tail SID [--after N] [--once]   compactor search [SID] QUERY...
    compactor read SID FROM[-TO]              compactor mcp   (an MCP server on stdio, for agents)

SID is a session id or a unique start of one (at least 8 hex digits, as the dashboard shows it).
Reads COMPACTOR_URL (default http://127.0.0.1:8000) and COMPACTOR_API_KEY (--url/--key override);
`--json` prints the server's JSON instead of text, for every command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from . import Compactor, CompactorError
from .render import hits_text, messages_text


def _out(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(text)


def _tokens(usage: dict[str, Any]) -> str:
    return f"{usage['tokens']:,} / {usage['context_window']:,} tokens (trigger {usage['trigger_tokens']:,})"


def _preview(content: Any, width: int = 100) -> str:
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                parts.append(block.get("text", ""))
            elif kind == "tool_use":
                parts.append(f"[tool_use {block.get('name')} {json.dumps(block.get('input'))}]")
            elif kind == "tool_result":
                inner = block.get("content")
                parts.append(f"[tool_result {_preview(inner, width) if inner else ''}]")
            else:
                parts.append(f"[{kind}]")
        text = " ".join(parts)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_sessions(cx: Compactor, args: argparse.Namespace) -> None:
    sessions = list(cx.sessions(search=args.search))
    lines = [f"{'ID':36}  {'MSGS':>5}  {'USAGE':>16}  TITLE"]
    for s in sessions:
        usage = s["usage"]
        lines.append(
            f"{s['id']:36}  {s['message_count']:>5}  {usage['tokens']:>7,}/{usage['context_window']:<8,}  {s['title']}"
        )
    _out(args, sessions, "\n".join(lines) if sessions else "No sessions.")


def cmd_show(cx: Compactor, args: argparse.Namespace) -> None:
    session = cx.session(args.session)
    compactions = cx.compactions(args.session)
    lines = [
        f"{session['title'] or '(untitled)'}  [{session['id']}]",
        f"agent {session['agent'] or '-'}  model {session['model'] or '-'}  messages {session['message_count']}",
        f"context {_tokens(session['usage'])}",
        f"active compaction {session['active_compaction'] or 'none'}",
    ]
    for job in compactions[:10]:
        lines.append(f"  {job['created_at'][:19]}  {job['status']:<9} {job['reason']:<9} {job['message']}")
    _out(args, {**session, "compactions": compactions}, "\n".join(lines))


def cmd_context(cx: Compactor, args: argparse.Namespace) -> None:
    context = cx.context(args.session)
    lines = [
        f"context {_tokens(context['usage'])}",
        f"system: {_preview(context['system'])}" if context["system"] else "",
    ]
    for seq, message in zip(context["seqs"], context["messages"], strict=False):
        label = "summary" if seq is None else f"#{seq}"
        lines.append(f"{label:>8} {message['role']:<9} {_preview(message['content'])}")
    _out(args, context, "\n".join(line for line in lines if line))


def cmd_compact(cx: Compactor, args: argparse.Namespace) -> None:
    result = cx.compact(
        args.session,
        " ".join(args.focus),
        wait=args.wait,
        dry_run=args.dry_run,
        force=args.force,
        strategy=args.strategy,
    )
    if args.dry_run:
        text = (
            f"Would compact: {result.get('reason', '')}"
            if result.get("would_compact")
            else f"Nothing to compact: {result.get('reason', '')}"
        )
    elif result.get("compacted") is False:
        text = f"Not compacted: {result['reason']}"
    else:
        text = result["message"]
        if result["status"] in ("queued", "running"):
            text += f"\n(still {result['status']}: follow it with `compactor tail {args.session}`)"
    _out(args, result, text)
    if not args.dry_run and result.get("status") == "failed":
        raise SystemExit(1)


def cmd_undo(cx: Compactor, args: argparse.Namespace) -> None:
    result = cx.undo(args.session)
    _out(args, result, result["message"])


def cmd_import(cx: Compactor, args: argparse.Namespace) -> None:
    result = cx.import_transcript(args.path, title=args.title, format=args.format)
    session = result["session"]
    report = result.get("report") or {}
    # What the file held that was not imported, by kind: an import never drops lines silently.
    skipped = ", ".join(
        f"{k.removeprefix('skipped_').replace('_', ' ')} {v:,}" for k, v in report.get("skipped", {}).items()
    )
    _out(
        args,
        result,
        f"Imported {result['messages']} messages ({result['format']}) into {session['id']} "
        f"({_tokens(session['usage'])})\n"
        f"  {report.get('tool_calls', 0)} tool calls, {report.get('compactions', 0)} compaction(s) recorded, "
        f"{report.get('usage_reports', 0)} usage reports; skipped: {skipped or 'nothing'}",
    )


def cmd_tail(cx: Compactor, args: argparse.Namespace) -> None:
    after = args.after
    if args.once:
        page = cx.events(args.session, after=after)
        events = page["events"]
    else:
        events = cx.follow_events(args.session, after=after, poll=args.poll)
    try:
        for event in events:
            if args.json:
                print(json.dumps(event, ensure_ascii=False), flush=True)
            else:
                print(f"{event['created_at'][:19]}  {event['kind']:<22} {event['message']}", flush=True)
    except KeyboardInterrupt:
        pass


_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}")
_RANGE_RE = re.compile(r"(\d+)(?:-(\d+))?")


def cmd_search(cx: Compactor, args: argparse.Namespace) -> None:
    words = list(args.terms)
    # A first argument that is a session id names the session; without one, every session.
    session_id = words.pop(0) if len(words) > 1 and _UUID_RE.fullmatch(words[0]) else None
    result = cx.search(" ".join(words), session_id, limit=args.limit)
    session = cx.session(session_id) if session_id else None
    _out(args, result, hits_text(result, session=session))


def cmd_read(cx: Compactor, args: argparse.Namespace) -> None:
    match = _RANGE_RE.fullmatch(args.range)
    if not match:
        raise CompactorError(0, f"{args.range!r}: give a message number or a range, e.g. 40 or 40-45")
    start = int(match.group(1))
    end = int(match.group(2)) if match.group(2) else start
    messages = cx.read(args.session, start, end)
    _out(args, messages, messages_text(messages) if messages else f"No messages from #{start} to #{end}.")


def cmd_mcp(cx: Compactor, args: argparse.Namespace) -> None:
    from .mcp_server import serve  # optional dependency (the mcp SDK): only this command needs it

    serve(cx)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="compactor", description="Command line for a Compactor server.")
    p.add_argument("--url", help="server URL (default: $COMPACTOR_URL or http://127.0.0.1:8000)")
    p.add_argument("--key", help="API key (default: $COMPACTOR_API_KEY)")
    p.add_argument("--json", action="store_true", help="print the server's JSON")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, func, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text)
        sp.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the server's JSON")
        sp.set_defaults(func=func)
        return sp

    add("sessions", cmd_sessions, "list your sessions").add_argument("--search", help="title contains")
    add("show", cmd_show, "a session, its usage and compactions").add_argument("session")
    add("context", cmd_context, "the context served to the model").add_argument("session")
    sp = add("compact", cmd_compact, "compact now, like /compact FOCUS")
    sp.add_argument("session")
    sp.add_argument("focus", nargs="*", help="what the summary should focus on")
    sp.add_argument("--wait", type=float, default=60, help="seconds to wait for the summary (0 = don't)")
    sp.add_argument("--dry-run", action="store_true", help="say what would be summarized, change nothing")
    sp.add_argument("--force", action="store_true", help="cut harder, as overflow recovery does")
    sp.add_argument("--strategy", default="auto", help="auto, anthropic, extractive, truncate or prune")
    add("undo", cmd_undo, "undo the active compaction").add_argument("session")
    sp = add("import", cmd_import, "upload a Claude Code / pi / Codex / SWE-agent / Anthropic / OpenAI transcript")
    sp.add_argument("path")
    sp.add_argument("--title")
    sp.add_argument(
        "--format", help="skip detection: claude-code, pi, codex, swe-agent, anthropic-messages, openai-chat"
    )
    sp = add("tail", cmd_tail, "follow the session's events (compactions, overflows, undo)")
    sp.add_argument("session")
    sp.add_argument("--after", type=int, default=0, help="only events after this id")
    sp.add_argument("--once", action="store_true", help="print what is there and exit")
    sp.add_argument("--poll", type=float, default=1.0, help="seconds between polls")
    sp = add("search", cmd_search, "search the stored history, summarized messages included")
    sp.usage = "compactor search [--limit N] [--json] [SESSION] QUERY..."
    sp.add_argument(
        "terms", nargs="+", metavar="QUERY", help="a session id first (else every session), then what to find"
    )
    sp.add_argument("--limit", type=int, default=20, help="hits to show (1-100)")
    sp = add("read", cmd_read, "print messages verbatim (tool calls with their results)")
    sp.add_argument("session")
    sp.add_argument("range", metavar="FROM[-TO]", help="a message number or a range, e.g. 40-45")
    add("mcp", cmd_mcp, "serve search_history / read_messages / list_sessions to an agent over MCP (stdio)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        with Compactor(args.url, args.key) as cx:
            if getattr(args, "session", None):
                args.session = cx.resolve_session(args.session)  # a short id, as the dashboard shows it
            args.func(cx, args)
    except CompactorError as exc:
        if args.json and exc.body is not None:
            print(json.dumps(exc.body, indent=2, ensure_ascii=False), file=sys.stderr)
        print(f"compactor: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader stopped early (`compactor read … | head`): end quietly, as Unix tools do;
        # stdout now points at /dev/null so the interpreter's last flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
