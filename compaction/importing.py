"""Import another agent's transcript as a session: detect the format, load it, report what happened.

    transcript_import → read the file (compaction.core.transcripts.read_transcript, strict: a
                        file that is not a transcript is a TranscriptError naming the line)
                      → bulk: every message, every recorded usage report (each right after its
                        assistant message, as the agent reported it live) and the agent's own
                        compactions, in one transaction; or replay: message by message through
                        transcript_replay, so auto-compaction fires as it would have live
                      → a Claude Code session's subagents/*.jsonl as child sessions
                      → ImportReport: messages, tool calls, compactions, usage reports and
                        every line left out, by reason.

A replay runs its session's compactions itself (`run_inline`); while it does, the session is
marked `replaying` and the Celery task leaves that session's jobs alone
(compaction.services.compaction_run_unless_replaying), so a worker never races the replay for them.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import transaction

from compaction import services
from compaction.core.blocks import TOOL_RESULT, TOOL_USE
from compaction.core.transcripts import ImportedTranscript, TranscriptError, read_transcript
from compaction.core.transcripts.base import checkpoint, reading_budget
from compaction.models import Compaction, Reason, Status
from sessions import services as session_services
from sessions import validation
from sessions.models import Message, Session, ToolCall

logger = logging.getLogger(__name__)

BATCH = 500
AGENT_NAMES = {
    "claude-code": "Claude Code",
    "pi": "pi",
    "codex": "Codex",
    "swe-agent": "SWE-agent",
    "anthropic-messages": "Anthropic Messages",
    "openai-chat": "OpenAI chat",
}


class TranscriptImportError(Exception):  # noqa: N801 - not the builtin ImportError
    """The file cannot be imported: `problem` says why (line and reason when it is the file)."""

    def __init__(self, problem: str, *, field: str = "file"):
        super().__init__(problem)
        self.problem = problem
        self.field = field


class ImportOverBudget(TranscriptImportError):
    """The import ran past its time budget and was stopped; nothing was stored."""


def _budget_check(seconds: float | None) -> Callable[[], None]:
    """The check readers and the loader call as they go: raises once `seconds` have passed."""
    if not seconds:
        return lambda: None
    deadline = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() > deadline:
            raise ImportOverBudget(
                f"the import took longer than its budget of {seconds:g} s (COMPACTOR_IMPORT_TIME_BUDGET) and was "
                "stopped; nothing was stored. Split the file, or import it with manage.py import_transcript"
            )

    return check


@dataclass
class ImportReport:
    format: str
    session: Session
    path: str
    messages: int = 0
    tool_calls: int = 0
    compactions: int = 0
    usage_reports: int = 0
    queued_messages: int = 0
    replaced_characters: int = 0  # strings with U+0000 / lone surrogates made storable
    skipped: dict[str, int] = field(default_factory=dict)
    children: list[ImportReport] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # subagent logs left out: (file, why)
    # Image and document blocks not stored, as the provider refuses them: (message, block path, why).
    refused_blocks: list[tuple[int, str, str]] = field(default_factory=list)
    replay: services.ReplayResult | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "tool_calls": self.tool_calls,
            "compactions": self.compactions,
            "usage_reports": self.usage_reports,
            "queued_messages": self.queued_messages,
            "strings_with_unstorable_characters": self.replaced_characters,
            "skipped": self.skipped,
            "subagents": [
                {"session": str(child.session.pk), "file": Path(child.path).name, **child.as_dict()}
                for child in self.children
            ],
            "subagents_not_imported": [{"file": name, "problem": problem} for name, problem in self.unreadable],
            "blocks_not_stored": [
                {"message": number, "block": path, "problem": problem} for number, path, problem in self.refused_blocks
            ],
        }

    def lines(self) -> list[str]:
        """The command's closing report: counts, then every skip by reason (never silent)."""
        name = AGENT_NAMES.get(self.format, self.format)
        kind = "compaction(s) made by the service" if self.replay is not None else f"{name} compaction(s) recorded"
        out = [
            f"{self.messages} messages, {self.tool_calls} tool calls, {self.compactions} {kind}, "
            f"{self.usage_reports} usage reports, {self.queued_messages} queued user messages",
            "  skipped: " + (", ".join(f"{_reason(k)} {v:,}" for k, v in self.skipped.items()) or "nothing"),
        ]
        if self.replaced_characters:
            out.append(
                f"  {self.replaced_characters} strings held U+0000 or an unpaired surrogate (no database stores "
                "them): replaced by ␀ / U+FFFD"
            )
        for child in self.children:
            out.append(
                f"  subagent {Path(child.path).name} → session {child.session.pk}: {child.messages} messages, "
                f"{child.tool_calls} tool calls, {child.usage_reports} usage reports; skipped: "
                + (", ".join(f"{_reason(k)} {v:,}" for k, v in child.skipped.items()) or "nothing")
            )
        for name, problem in self.unreadable:
            out.append(f"  subagent {name} not imported: {problem}")
        for number, path, problem in self.refused_blocks:
            out.append(f"  message {number}: {path}: {problem} (not stored: the provider refuses it)")
        return out


def _reason(key: str) -> str:
    return key.removeprefix("skipped_").replace("_", " ")


def subagent_files(path: Path) -> list[Path]:
    """Claude Code keeps a session's subagent logs in `<session>/subagents/*.jsonl` beside it."""
    folder = path.with_suffix("") / "subagents"
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(value: Any, transcript: ImportedTranscript) -> Any:
    """`value` with what no database can store replaced: U+0000 (PostgreSQL's jsonb refuses it)
    by U+2400 ␀, an unpaired surrogate (not UTF-8) by U+FFFD. The API refuses such messages;
    an import keeps the message and counts the replacement instead of losing the file."""
    if isinstance(value, str):
        if not _UNSTORABLE.search(value):
            return value
        fixed = []
        for char in value:
            if char == "\x00":
                fixed.append("\u2400")
            elif "\ud800" <= char <= "\udfff":
                fixed.append("\ufffd")
            else:
                fixed.append(char)
        transcript.stats["unstorable_characters_replaced"] += 1
        return "".join(fixed)
    if isinstance(value, list):
        return [_storable(item, transcript) for item in value]
    if isinstance(value, dict):
        return {_storable(k, transcript): _storable(v, transcript) for k, v in value.items()}
    return value


def _block_errors(block: Any, role: str | None, *, inner: bool = False) -> bool:
    errors = validation.Errors()
    validation.check_block(block, "block", role, errors, inner=inner)
    return bool(errors)


def _as_text(block: Any, transcript: ImportedTranscript) -> dict[str, Any]:
    kind = block.get("type") if isinstance(block, dict) else None
    transcript.stats[f"blocks_kept_as_text_{kind or 'untyped'}"] += 1
    return {"type": "text", "text": f"[{kind or 'untyped'} block] {json.dumps(block, ensure_ascii=False)}"}


def _known_keys(block: dict[str, Any], transcript: ImportedTranscript) -> dict[str, Any]:
    allowed = validation.BLOCK_KEYS[block["type"]]
    for key in block.keys() - allowed:
        transcript.stats[f"skipped_block_field_{block['type']}.{key}"] += 1
    return {k: v for k, v in block.items() if k in allowed}


def _refused_media(block: Any) -> tuple[str, str] | None:
    """(field path under the block, problem) when the block is an image or document the provider
    refuses (sessions.validation.media_problem)."""
    if not isinstance(block, dict) or block.get("type") not in ("image", "document"):
        return None
    source = block.get("source")
    if not isinstance(source, dict) or not all(isinstance(v, str) and v for k, v in source.items() if k != "content"):
        return None
    required = validation.SOURCE_KEYS.get(source.get("type"), ((), ()))[0]  # type: ignore[arg-type]
    if any(key not in source for key in required):
        return None
    problem = validation.media_problem(block["type"], source)
    return (f"source.{problem[0]}", problem[1]) if problem else None


def _fit_block(
    block: Any, role: str, transcript: ImportedTranscript, *, inner: bool = False, where: tuple[int, str] = (0, "")
) -> dict[str, Any]:
    """A block the service's validation accepts, keeping what it says: a block of a type the
    service does not store (web search results, tool references, …) becomes a text block
    holding it as JSON; a tool_use / tool_result keeps its type (its pair depends on it) and
    loses only fields the Messages API does not define (counted). An image or document the
    provider refuses is not stored: a text block says so, and the report lists it (`where`:
    the message number and the block's path)."""
    if not _block_errors(block, None if inner else role, inner=inner):
        return block
    refused = _refused_media(block)
    if refused is not None:
        path = f"{where[1]}.{refused[0]}"
        transcript.refused_blocks.append((where[0], path, refused[1]))
        transcript.stats[f"skipped_{block['type']}_blocks_the_provider_refuses"] += 1
        return {"type": "text", "text": f"[{block['type']} not stored: {path}: {refused[1]}]"}
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == TOOL_RESULT and not inner:
        fixed = _known_keys(block, transcript)
        if isinstance(fixed.get("content"), list):
            fixed["content"] = [
                _fit_block(b, role, transcript, inner=True, where=(where[0], f"{where[1]}.content[{index}]"))
                for index, b in enumerate(fixed["content"])
            ]
        if "is_error" in fixed:
            fixed["is_error"] = bool(fixed["is_error"])
        return fixed
    if kind == TOOL_USE and not inner:
        fixed = _known_keys(block, transcript)
        if not isinstance(fixed.get("input"), dict):
            fixed["input"] = {"value": fixed.get("input")}
        return fixed
    if kind in validation.BLOCK_KEYS:
        fixed = _known_keys(block, transcript)
        if not _block_errors(fixed, None if inner else role, inner=inner):
            return fixed
    return _as_text(block, transcript)


def _make_acceptable(transcript: ImportedTranscript) -> None:
    """Every message in a shape messages_append stores: one odd block must not cost the file."""
    for number, message in enumerate(transcript.messages, start=1):
        if isinstance(message["content"], list):
            message["content"] = [
                _fit_block(b, message["role"], transcript, where=(number, f"content[{index}]"))
                for index, b in enumerate(message["content"])
            ]
    for subagent in transcript.subagents:
        _make_acceptable(subagent)


def _make_storable(transcript: ImportedTranscript) -> None:
    transcript.messages = _storable(transcript.messages, transcript)
    transcript.compactions = _storable(transcript.compactions, transcript)
    transcript.system_prompt = _storable(transcript.system_prompt, transcript)
    transcript.title = _storable(transcript.title, transcript)
    for subagent in transcript.subagents:
        _make_storable(subagent)


@dataclass
class _Cleaned:
    """The transcript's messages as an agent would send them, with what is aligned with them."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    reported: list[int | None] = field(default_factory=list)  # the provider's context size
    times: list[datetime | None] = field(default_factory=list)  # when the agent logged it
    index_map: dict[int, int] = field(default_factory=dict)  # original index → index here


def _cleaned(transcript: ImportedTranscript) -> _Cleaned:
    """Messages as an agent would send them, their reported context sizes and times, and original
    index → index after cleaning (so an agent's own compaction still lands before the right message)."""
    out = _Cleaned()
    for index, message in enumerate(transcript.messages):
        kept = services.transcript_messages_for_api([message])
        if kept:
            out.index_map[index] = len(out.messages)
            out.messages.extend(kept)
            out.reported.extend([transcript.reported_context_tokens[index]] * len(kept))
            logged = transcript.times[index] if index < len(transcript.times) else None
            out.times.extend([_parsed_time(logged)] * len(kept))
    return out


def _parsed_time(text: str | None) -> datetime | None:
    """A log line's ISO 8601 time (UTC when it names no zone), or None when there is none."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _keep_logged_times(session: Session, rows: list[Message], times: list[datetime | None]) -> None:
    """The imported messages dated when the agent logged them, and the session from its first to
    its last (an import of last month's session is not shown as started today)."""
    dated = [(row, at) for row, at in zip(rows, times, strict=True) if at is not None]
    if not dated:
        return
    for row, at in dated:
        row.created_at = at
    Message.objects.bulk_update([row for row, _ in dated], ["created_at"], batch_size=BATCH)
    first, last = min(at for _, at in dated), max(at for _, at in dated)
    Session.objects.filter(pk=session.pk).update(created_at=first, last_activity_at=last)


def _compaction_positions(transcript: ImportedTranscript, index_map: dict[int, int]) -> dict[int, list[dict]]:
    """Cleaned message index → the agent's compactions that take effect right before it."""
    positions: dict[int, list[dict]] = {}
    ordered = sorted(index_map)
    for compaction in transcript.compactions:
        original = compaction.get("before_message_index")
        index = next((index_map[i] for i in ordered if original is not None and i >= original), None)
        if index is not None and compaction.get("summary"):
            positions.setdefault(index, []).append(compaction)
    return positions


def _load_bulk(session: Session, transcript: ImportedTranscript) -> None:
    """Append every message; report each recorded usage right after its assistant message (the
    meter and calibration then hold every report, as if the agent had run live); record the
    agent's own compactions where they happened. Runs inside the caller's transaction."""
    cleaned = _cleaned(transcript)
    messages, reported = cleaned.messages, cleaned.reported
    compactions = _compaction_positions(transcript, cleaned.index_map)
    name = AGENT_NAMES.get(transcript.source, transcript.source)
    batch: list[dict[str, Any]] = []
    rows: list[Message] = []
    seqs: list[int] = []

    def flush() -> None:
        checkpoint()
        if batch:
            try:
                result = session_services.messages_append(session=session, messages=[dict(m) for m in batch])
            except ValidationError as exc:
                raise TranscriptImportError(
                    f"message {len(seqs) + 1}..{len(seqs) + len(batch)} rejected: {exc}"
                ) from exc
            rows.extend(result.messages)
            seqs.extend(row.seq for row in result.messages)
            batch.clear()

    for index, message in enumerate(messages):
        for compaction in compactions.get(index, ()):
            flush()
            services.compaction_record_import(
                session=session,
                summary=compaction["summary"],
                first_kept_seq=(seqs[-1] if seqs else 0) + 1,
                tokens_before=compaction.get("pre_tokens"),
                detail=f"{name} {compaction.get('trigger') or 'auto'} compaction (tokens before: "
                f"{compaction.get('pre_tokens')})",
            )
        batch.append({"role": message["role"], "content": message["content"], **_provenance(message)})
        if message["role"] == "assistant" and reported[index] is not None:
            flush()
            services.usage_report_recorded(session=session, usage=message["usage"], message_seq=seqs[-1])
        elif len(batch) >= BATCH:
            flush()
    flush()
    _keep_logged_times(session, rows, cleaned.times)


def _provenance(message: dict[str, Any]) -> dict[str, str]:
    """The reader's provenance for a message, as the append takes it (none when it has none)."""
    provenance = message.get("provenance")
    return {"provenance": provenance} if provenance else {}


def _counts(report: ImportReport, transcript: ImportedTranscript) -> None:
    """Fill the report from what was stored, not from what was meant to be."""
    session = report.session
    report.messages = Message.objects.filter(session=session).count()
    report.tool_calls = ToolCall.objects.filter(session=session).count()
    report.usage_reports = Message.objects.filter(session=session, provider_usage__isnull=False).count()
    jobs = Compaction.objects.filter(session=session, status=Status.SUCCEEDED)
    report.compactions = (jobs.exclude(reason=Reason.IMPORT) if report.replay is not None else jobs).count()
    report.queued_messages = transcript.stats.get("queued_messages_imported", 0)
    report.replaced_characters = transcript.stats.get("unstorable_characters_replaced", 0)
    report.skipped = transcript.skipped
    report.refused_blocks = list(transcript.refused_blocks)


def _create_session(
    *,
    owner,
    transcript: ImportedTranscript,
    path: Path,
    title: str | None,
    model: str | None,
    window: int | None,
    settings: dict[str, Any],
    parent: Session | None,
) -> Session:
    try:
        session = session_services.session_create(
            owner=owner,
            title=(title or transcript.title or path.stem)[:200],
            agent=transcript.source,
            model=(model or transcript.model or "")[:100],
            system_prompt=transcript.system_prompt,
            context_window=window,
            compaction_settings=settings,
        )
    except ValidationError as exc:
        raise TranscriptImportError(f"invalid option: {exc}", field="options") from exc
    if parent is not None:
        Session.objects.filter(pk=session.pk).update(parent=parent)
        session.parent = parent
    return session


def _read(path: Path, format: str | None) -> ImportedTranscript:
    try:
        transcript = read_transcript(path, format=format)
        _make_storable(transcript)
        _make_acceptable(transcript)
        return transcript
    except TranscriptError as exc:
        raise TranscriptImportError(str(exc)) from exc
    except OSError as exc:
        raise TranscriptImportError(f"cannot read {path.name}: {exc.strerror or exc}") from exc


def _read_subagents(
    path: Path, name: str, transcript: ImportedTranscript, *, subagents: bool
) -> tuple[list[tuple[str, ImportedTranscript]], list[tuple[str, str]]]:
    """(label, transcript) of every subagent to import — sidechains logged inside the file
    (older Claude Code), then subagents/*.jsonl — and the logs left out, with why."""
    children: list[tuple[str, ImportedTranscript]] = [
        (f"{name} (sidechain {number})", child) for number, child in enumerate(transcript.subagents, start=1)
    ]
    unreadable: list[tuple[str, str]] = []
    if subagents and transcript.source == "claude-code":
        for child in subagent_files(path):
            try:
                children.append((child.name, _read(child, "claude-code")))
            except TranscriptImportError as exc:
                # A bad subagent log does not cost the session: it is left out, and said so.
                unreadable.append((child.name, exc.problem))
    return children, unreadable


def _import_bulk(
    report: ImportReport, transcript: ImportedTranscript, children: list[tuple[str, ImportedTranscript]], **options
) -> ImportReport:
    """Load everything in the caller's transaction, then switch auto-compaction back to the
    session's default (it was off while loading: no job half-way through)."""
    session = report.session
    _load_bulk(session, transcript)
    session_services.session_update(session=session, compaction_settings={"auto_compact": None})
    _counts(report, transcript)
    report.children = _import_children(parent=session, children=children, **options)
    return report


def _import_replay(
    report: ImportReport,
    transcript: ImportedTranscript,
    children: list[tuple[str, ImportedTranscript]],
    *,
    run_inline: bool,
    on_step: Callable[[services.ReplayStep], None] | None,
    **options,
) -> ImportReport:
    """Replay the conversation message by message; a replay that fails half-way deletes the session."""
    session = report.session
    if run_inline:
        Session.objects.filter(pk=session.pk).update(replaying=True)
    try:
        messages = _cleaned(transcript).messages  # replayed now, as live: its times are the replay's
        recorded = [
            {
                "role": m["role"],
                "content": m["content"],
                "usage": m.get("usage") if m["role"] == "assistant" else None,
                **_provenance(m),  # whose words: kept in a replay as in a bulk load
            }
            for m in messages
        ]
        report.replay = services.transcript_replay(
            session=session, messages=recorded, run_inline=run_inline, on_step=on_step
        )
        with transaction.atomic():
            report.children = _import_children(parent=session, children=children, **options)
    except ValidationError as exc:
        session.delete()
        raise TranscriptImportError(f"transcript rejected: {exc}") from exc
    except BaseException:
        session.delete()
        raise
    finally:
        Session.objects.filter(pk=session.pk).update(replaying=False)
    _counts(report, transcript)
    return report


def transcript_import(
    *,
    owner,
    path: str | Path,
    format: str | None = None,
    title: str | None = None,
    model: str | None = None,
    window: int | None = None,
    trigger: int | None = None,
    replay: bool = False,
    run_inline: bool = True,
    subagents: bool = True,
    source_name: str | None = None,
    on_step: Callable[[services.ReplayStep], None] | None = None,
    time_budget: float | None = None,
) -> ImportReport:
    """Import the transcript at `path` as a new session of `owner` (see the module doc).

    `time_budget` (seconds): past it, reading or loading stops with ImportOverBudget (an
    upload's request must not hold a core for minutes); None for no limit (the command).

    Raises TranscriptImportError naming the problem, and then nothing is stored: a bulk import is one
    transaction; a replay that fails half-way deletes the session it created. `source_name`:
    the file's own name when `path` is a temporary copy (an upload), for the default title.
    """
    with reading_budget(_budget_check(time_budget)):
        return _transcript_import(
            owner=owner, path=Path(path), format=format, title=title, model=model, window=window,
            trigger=trigger, replay=replay, run_inline=run_inline, subagents=subagents,
            source_name=source_name, on_step=on_step,
        )  # fmt: skip


def _transcript_import(
    *,
    owner,
    path: Path,
    format: str | None,
    title: str | None,
    model: str | None,
    window: int | None,
    trigger: int | None,
    replay: bool,
    run_inline: bool,
    subagents: bool,
    source_name: str | None,
    on_step: Callable[[services.ReplayStep], None] | None,
) -> ImportReport:
    transcript = _read(path, format)
    if source_name and not transcript.title:
        transcript.title = Path(source_name).stem
    children, unreadable = _read_subagents(path, source_name or path.name, transcript, subagents=subagents)
    settings: dict[str, Any] = {}
    if trigger:
        settings["auto_compact_token_limit"] = trigger
    if not replay:
        # A bulk load must not queue an auto compaction half-way through; restored by _import_bulk.
        settings["auto_compact"] = False
    create = partial(
        _create_session, owner=owner, transcript=transcript, path=path, title=title, model=model, window=window
    )
    options = {"owner": owner, "window": window}
    if replay:
        session = create(settings=settings, parent=None)
        report = ImportReport(format=transcript.source, session=session, path=str(path), unreadable=unreadable)
        _import_replay(report, transcript, children, run_inline=run_inline, on_step=on_step, **options)
    else:
        with transaction.atomic():
            session = create(settings=settings, parent=None)
            report = ImportReport(format=transcript.source, session=session, path=str(path), unreadable=unreadable)
            _import_bulk(report, transcript, children, **options)
    session.refresh_from_db()
    return report


def _import_children(
    *, owner, parent: Session, children: list[tuple[str, ImportedTranscript]], window: int | None
) -> list[ImportReport]:
    reports = []
    for label, child in children:
        session = _create_session(
            owner=owner,
            transcript=child,
            path=Path(label),
            title=None,
            model=None,
            window=window,
            settings={"auto_compact": False},
            parent=parent,
        )
        report = ImportReport(format=child.source, session=session, path=label)
        _load_bulk(session, child)
        session_services.session_update(session=session, compaction_settings={"auto_compact": None})
        _counts(report, child)
        reports.append(report)
    return reports


def transcript_import_upload(
    *, owner, upload, format: str | None = None, title: str | None = None, replay: bool = False
) -> ImportReport:
    """An uploaded file (the API's and the dashboard's Import) → transcript_import.

    Over HTTP a replay leaves compactions to the workers: a request never waits on a summarizer
    (the command's --replay runs them itself). An upload is one file, so no subagents.
    """
    with tempfile.TemporaryDirectory(prefix="compactor-import-") as folder:
        path = Path(folder) / "upload"
        with open(path, "wb") as handle:
            for chunk in upload.chunks():
                handle.write(chunk)
        return transcript_import(
            owner=owner,
            path=path,
            format=format,
            title=title,
            replay=replay,
            run_inline=False,
            subagents=False,
            source_name=upload.name,
            time_budget=django_settings.IMPORT_TIME_BUDGET,
        )
