"""python manage.py import_transcript PATH [--user U] [--replay] [--window N] [--trigger N] [--model M] [--title T]

Without --replay the transcript is loaded in bulk, and a compaction the agent made itself
(Claude Code's compact_boundary) is recorded as an `import` compaction with its own summary.
With --replay it is appended message by message through the services the API uses, with the
recorded usage reported after each assistant message until the service has compacted once
(see shared/data/transcripts/README.md), so auto-compaction fires as it would have live.

--trigger N sets the session's auto_compact_token_limit: auto-compaction fires when usage
crosses N. Without it the trigger is the default, window − reserve_tokens (183,616 on a 200k
window), which sits above where Claude Code compacted (its preTokens ≈ 167k): replaying one of
its sessions then may never compact. Pass --trigger 167000 to compact where Claude Code did.
The replay's last line names the trigger and the peak usage, so a replay that never compacted
says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from compaction import services
from compaction.models import Compaction, Status
from sessions import services as session_services

BATCH = 500


class Command(BaseCommand):
    help = "Import a Claude Code session JSONL as a session (bulk, or --replay through the live services)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="Claude Code session .jsonl")
        parser.add_argument("--user", default=None, help="Owner's username (default: the first superuser).")
        parser.add_argument("--replay", action="store_true", help="Append message by message; auto-compaction fires.")
        parser.add_argument("--window", type=int, default=None, help="Context window (default: the model's).")
        parser.add_argument("--model", default=None, help="Model (default: the transcript's).")
        parser.add_argument("--title", default=None, help="Session title (default: the transcript's).")
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
        from compaction.core.transcripts.claude_code import read_claude_code

        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"PATH: no such file: {path}")
        owner = self._owner(options["user"])
        try:
            transcript = read_claude_code(path)
        except (OSError, ValueError) as exc:
            raise CommandError(f"PATH: cannot read {path} as a Claude Code session: {exc}") from exc
        # Original index → index after cleaning, so Claude Code's boundary still lands right.
        cleaned: list[dict[str, Any]] = []
        self.index_map: dict[int, int] = {}
        for index, message in enumerate(transcript.messages):
            kept = services.transcript_messages_for_api([message])
            if kept:
                self.index_map[index] = len(cleaned)
                cleaned.extend(kept)
        transcript.messages = cleaned
        if not transcript.messages:
            raise CommandError(f"PATH: {path} holds no conversation messages")

        settings: dict[str, Any] = {}
        if options["trigger"]:
            settings["auto_compact_token_limit"] = options["trigger"]
        if not options["replay"]:
            # A bulk load must not queue an auto compaction half-way through; restored below.
            settings["auto_compact"] = False
        try:
            session = session_services.session_create(
                owner=owner,
                title=options["title"] or transcript.title or path.stem,
                agent="claude-code",
                model=options["model"] or transcript.model or "",
                context_window=options["window"],
                compaction_settings=settings,
            )
        except ValidationError as exc:
            raise CommandError(f"invalid option: {exc}") from exc

        if options["replay"]:
            self._replay(session, transcript, run_async=options["run_async"], verbosity=int(options["verbosity"]))
        else:
            self._bulk(session, transcript)

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

    def _bulk(self, session, transcript) -> None:
        messages = [{"role": m["role"], "content": m["content"]} for m in transcript.messages]
        seqs: list[int] = []
        try:
            for start in range(0, len(messages), BATCH):
                result = session_services.messages_append(session=session, messages=messages[start : start + BATCH])
                seqs.extend(row.seq for row in result.messages)
        except ValidationError as exc:
            raise CommandError(f"transcript rejected at message {start + 1}..: {exc}") from exc
        # Recorded usage per assistant message: reported before each recorded compaction and at
        # the end, so the meter and the compactions' tokens_before/after are on the provider's
        # scale (the calibration offset), like a live session's, not our bare estimate.
        reports = [
            (seq, message["usage"])
            for seq, message in zip(seqs, transcript.messages, strict=True)
            if message["role"] == "assistant" and services._reported_prompt_tokens(message.get("usage")) is not None
        ]
        reported: set[int] = set()

        def report_last_before(limit_seq: int | None) -> None:
            last = [(seq, usage) for seq, usage in reports if limit_seq is None or seq < limit_seq]
            if last and last[-1][0] not in reported:
                seq, usage = last[-1]
                services.usage_report_recorded(session=session, usage=usage, message_seq=seq)
                reported.add(seq)

        imported = 0
        for compaction in transcript.compactions:
            original = compaction.get("before_message_index")
            index = next(
                (self.index_map[i] for i in sorted(self.index_map) if original is not None and i >= original), None
            )
            if index is None or index >= len(seqs) or not compaction.get("summary"):
                continue
            report_last_before(seqs[index])
            services.compaction_record_import(
                session=session,
                summary=compaction["summary"],
                first_kept_seq=seqs[index],
                tokens_before=compaction.get("pre_tokens"),
                detail=f"Claude Code {compaction.get('trigger') or 'auto'} compaction (preTokens {compaction.get('pre_tokens')})",
            )
            imported += 1
        report_last_before(None)
        session_services.session_update(session=session, compaction_settings={"auto_compact": None})
        session.refresh_from_db()
        usage = session_services.session_usage(session)
        self.stdout.write(
            f"Imported {len(seqs)} messages into session {session.pk} ({session.title}); "
            f"{imported} Claude Code compaction(s) recorded; context {usage['tokens']:,} tokens "
            f"of {usage['context_window']:,}"
        )

    def _replay(self, session, transcript, *, run_async: bool, verbosity: int) -> None:
        def on_step(step: services.ReplayStep) -> None:
            if step.reported_tokens is not None and verbosity >= 2:
                self.stdout.write(f"  #{step.seq} reported {step.reported_tokens:,} → usage {step.usage_tokens:,}")

        try:
            result = services.transcript_replay(
                session=session,
                messages=[
                    {"role": m["role"], "content": m["content"], "usage": m.get("usage")} for m in transcript.messages
                ],
                # Inline by default: a replay shows its compactions without a worker running.
                run_inline=not run_async,
                on_step=on_step,
            )
        except ValidationError as exc:
            raise CommandError(f"transcript rejected: {exc}") from exc
        session.refresh_from_db()
        usage = session_services.session_usage(session)
        for job in result.compactions:
            self.stdout.write(f"  {services.describe(job)} (reason {job.reason}, strategy {job.strategy})")
        failed = Compaction.objects.filter(session=session, status=Status.FAILED).count()
        trigger = usage["trigger_tokens"]
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
                f"{trigger:,} (window {usage['context_window']:,}); pass --trigger N to compact earlier, "
                f"e.g. --trigger 167000 where Claude Code compacts on a 200k window"
            )
        self.stdout.write(
            f"Replayed {result.steps} messages into session {session.pk} ({session.title}); "
            f"{result.reports} usage reports; {len(result.compactions)} compaction(s), {where}; "
            f"{failed} failed; {peak}; trigger {trigger:,}; context now {usage['tokens']:,} tokens"
        )
