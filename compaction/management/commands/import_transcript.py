"""python manage.py import_transcript PATH [--format F] [--user U] [--replay] [--window N] [--trigger N] [--model M] [--title T]

Detects the format — Claude Code JSONL (main, sidechain and subagent logs), pi JSONL, Codex CLI
rollout JSONL, SWE-agent .traj, Anthropic Messages JSON (a list of messages or a request body), OpenAI chat JSON — or
takes it from --format. A file that is not a transcript is an error naming the line and why.

Without --replay the transcript is loaded in bulk: every message, every usage report the agent
recorded (each right after its assistant message), and the agent's own compactions (Claude
Code's compact_boundary, pi's compaction lines, Codex's compacted lines) recorded as `import` compactions with their own
summaries. A Claude Code session's `<session>/subagents/*.jsonl` become child sessions.
With --replay it is appended message by message through the services the API uses, with the
recorded usage reported after each assistant message until the service has compacted once
(see shared/data/transcripts/README.md), so auto-compaction fires as it would have live. The
replay runs the session's compactions itself; Celery workers leave that session alone until
it ends (--async hands them to the workers instead).

--trigger N sets the session's auto_compact_token_limit: auto-compaction fires when usage
crosses N. Without it the trigger is the default, window − reserve_tokens (183,616 on a 200k
window), which sits above where Claude Code compacted (its preTokens ≈ 167k): replaying one of
its sessions then may never compact. Pass --trigger 167000 to compact where Claude Code did.
The replay's last line names the trigger and the peak usage, so a replay that never compacted
says why.

The command ends with a report: messages, tool calls, compactions, usage reports, queued user
messages, and every line or block left out, by reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from compaction import importing, services
from compaction.core.transcripts import FORMATS
from compaction.models import Compaction, Status
from sessions import services as session_services


class Command(BaseCommand):
    help = "Import an agent transcript (Claude Code, pi, Codex, SWE-agent, Anthropic or OpenAI chat JSON) as a session."

    def add_arguments(self, parser):
        parser.add_argument("path", help="Transcript file (.jsonl, .traj, .json)")
        parser.add_argument(
            "--format", choices=FORMATS, default=None, help="Skip detection and read the file as this format."
        )
        parser.add_argument("--user", default=None, help="Owner's username (default: the first superuser).")
        parser.add_argument("--replay", action="store_true", help="Append message by message; auto-compaction fires.")
        parser.add_argument("--window", type=int, default=None, help="Context window (default: the model's).")
        parser.add_argument("--model", default=None, help="Model (default: the transcript's).")
        parser.add_argument("--title", default=None, help="Session title (default: the transcript's).")
        parser.add_argument(
            "--no-subagents", dest="subagents", action="store_false", help="Do not import subagents/*.jsonl."
        )
        parser.add_argument(
            "--trigger",
            type=int,
            default=None,
            help=(
                "auto_compact_token_limit for the session: auto-compaction fires when usage crosses it. "
                "Default: window − reserve_tokens (183,616 on a 200k window); Claude Code compacts near "
                "167,000, so pass --trigger 167000 to replay one of its sessions the way it compacted."
            ),
        )
        parser.add_argument(
            "--async",
            dest="run_async",
            action="store_true",
            help="Leave compactions to the Celery workers instead of running them in this process.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"PATH: no such file: {path}")
        owner = self._owner(options["user"])
        verbosity = int(options["verbosity"])

        def on_step(step: services.ReplayStep) -> None:
            if step.reported_tokens is not None and verbosity >= 2:
                self.stdout.write(f"  #{step.seq} reported {step.reported_tokens:,} → usage {step.usage_tokens:,}")

        try:
            report = importing.transcript_import(
                owner=owner,
                path=path,
                format=options["format"],
                title=options["title"],
                model=options["model"],
                window=options["window"],
                trigger=options["trigger"],
                replay=options["replay"],
                run_inline=not options["run_async"],
                subagents=options["subagents"],
                on_step=on_step,
            )
        except importing.TranscriptImportError as exc:
            where = "PATH" if exc.field == "file" else exc.field
            raise CommandError(f"{where}: {path.name}: {exc.problem}") from exc
        session = report.session
        usage = session_services.session_usage(session)
        name = importing.AGENT_NAMES.get(report.format, report.format)
        if report.replay is not None:
            # The replay's summary line stays last: it says why a replay did not compact.
            for line in report.lines():
                self.stdout.write(line)
            self._replay_lines(report, usage)
            return
        self.stdout.write(
            f"Imported {report.messages} messages ({name}) into session {session.pk} ({session.title}); "
            f"context {usage.tokens:,} tokens of {usage.context_window:,}"
        )
        for line in report.lines():
            self.stdout.write(line)

    def _owner(self, username: str | None):
        users = get_user_model().objects
        if username:
            user = users.filter(username=username).first()
            if user is None:
                raise CommandError(f"--user: no user named {username!r}")
            return user
        user = users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("--user: no superuser exists; pass --user USERNAME")
        return user

    def _replay_lines(self, report: importing.ImportReport, usage: session_services.Usage) -> None:
        session, result = report.session, report.replay
        assert result is not None
        for job in result.compactions:
            self.stdout.write(f"  {services.describe(job)} (reason {job.reason}, strategy {job.strategy})")
        failed = Compaction.objects.filter(session=session, status=Status.FAILED).count()
        trigger = usage.trigger_tokens
        where = (
            f"first at message {result.first_compaction_index + 1} (usage {result.usage_before_first:,})"
            if result.first_compaction_index is not None
            else "none"
        )
        peak = (
            f"peak usage {result.peak_usage:,} tokens at message {result.peak_index + 1}"
            if result.peak_index is not None
            else "no usage"
        )
        if not result.compactions and result.peak_usage <= trigger:
            self.stdout.write(
                f"  No auto-compaction: usage peaked at {result.peak_usage:,} tokens, never above the trigger "
                f"{trigger:,} (window {usage.context_window:,}); pass --trigger N to compact earlier, "
                f"e.g. --trigger 167000 where Claude Code compacts on a 200k window"
            )
        self.stdout.write(
            f"Replayed {result.steps} messages into session {session.pk} ({session.title}); "
            f"{result.reports} usage reports; {len(result.compactions)} compaction(s), {where}; "
            f"{failed} failed; {peak}; trigger {trigger:,}; context now {usage.tokens:,} tokens"
        )
