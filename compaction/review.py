"""Human review of summaries (the Django admin's workflow). Admin actions call these; no logic there.

- review_set: approve / reject / needs changes, with reviewer, time and notes.
- summary_edit: a reviewer's corrected summary. The text it replaces is kept as a
  SummaryVersion; the edit is either made active at once or stored as a draft version.
- summary_version_activate: make a stored version the compaction's summary (the current
  text is kept as a version in turn), e.g. to go back to the original.
- compaction_undo: stop serving a summary (e.g. a rejected one that is still active).
- compaction_rerun: ask the engine for a new compaction with another strategy or prompt.

Whenever the served text of the session's active compaction changes, the cached usage is
recomputed (sessions.services.session_recompute_usage), so meter and trigger stay right.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from compaction import services as compaction_services
from compaction.core.config import validate_overrides
from compaction.core.prompts import validate_custom_prompt
from compaction.core.tokens import count_text
from compaction.models import Compaction, ReviewStatus, Status, SummaryVersion
from sessions import services as session_services
from sessions.models import Session

MAX_NOTE = 200


class ReviewError(ValueError):
    """The request cannot be applied; `field` names the input at fault."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def review_set(
    *, compaction: Compaction, status: str, reviewer, notes: str | None = None, now: datetime | None = None
) -> Compaction:
    allowed = [v for v in ReviewStatus.values if v != ReviewStatus.NOT_APPLICABLE]
    if status not in allowed:
        # not_applicable is set by the engine on jobs without a summary, never by a reviewer.
        raise ReviewError(f"unknown review status {status!r}; allowed: {', '.join(allowed)}", field="status")
    if compaction.status != Status.SUCCEEDED:
        raise ReviewError(
            f"only a succeeded compaction has a summary to review; this one is {compaction.status}", field="compaction"
        )
    compaction.review_status = status
    compaction.reviewed_by = reviewer
    compaction.reviewed_at = now or timezone.now()
    fields = ["review_status", "reviewed_by", "reviewed_at"]
    if notes is not None:
        compaction.review_notes = notes
        fields.append("review_notes")
    compaction.save(update_fields=fields)
    return compaction


def review_bulk_set(*, compactions, status: str, reviewer, now: datetime | None = None) -> tuple[int, list[str]]:
    """Apply one review status to many; returns (updated count, problems of the skipped ones)."""
    updated, problems = 0, []
    for compaction in compactions:
        try:
            review_set(compaction=compaction, status=status, reviewer=reviewer, now=now)
            updated += 1
        except ReviewError as exc:
            problems.append(f"{compaction.pk}: {exc}")
    return updated, problems


def _replace_summary(*, compaction: Compaction, text: str, keep_note: str, user) -> None:
    SummaryVersion.objects.create(
        compaction=compaction, summary=compaction.summary, created_by=user, note=keep_note[:MAX_NOTE]
    )
    compaction.summary = text
    compaction.summary_tokens = count_text(text) + count_text(compaction.turn_prefix_summary)
    compaction.summary_message_tokens, compaction.summary_tokenizer = session_services.summary_message_count(
        session=compaction.session, summary=text, turn_prefix_summary=compaction.turn_prefix_summary
    )
    compaction.save(update_fields=["summary", "summary_tokens", "summary_message_tokens", "summary_tokenizer"])


def _recompute_if_active(compaction: Compaction) -> None:
    session = Session.objects.get(pk=compaction.session_id)
    if session.active_compaction_id == compaction.pk:
        session_services.session_recompute_usage(session=session)


def summary_edit(
    *, compaction: Compaction, summary: str, editor, note: str = "", activate: bool = True
) -> SummaryVersion | None:
    """Store a reviewer's edit. activate=True: it becomes the served summary and the previous
    text is kept as a version (returns None). activate=False: the edit is kept as a draft
    version and the served summary is unchanged (returns that version)."""
    text = (summary or "").strip()
    if not text:
        raise ReviewError("the edited summary is empty", field="summary")
    with transaction.atomic():
        # Lock: two reviewers saving at once must not lose either text.
        locked = Compaction.objects.select_for_update().get(pk=compaction.pk)
        if locked.status != Status.SUCCEEDED:
            raise ReviewError("only a succeeded compaction's summary can be edited", field="compaction")
        if text == locked.summary.strip():
            raise ReviewError("the edited summary is identical to the current one", field="summary")
        who = editor.get_username() if editor is not None else "someone"
        if not activate:
            return SummaryVersion.objects.create(
                compaction=locked, summary=text, created_by=editor, note=(note or f"draft edit by {who}")[:MAX_NOTE]
            )
        _replace_summary(
            compaction=locked,
            text=text,
            keep_note=f"replaced by an edit from {who}" + (f": {note}" if note else ""),
            user=editor,
        )
        _recompute_if_active(locked)
    compaction.refresh_from_db()
    return None


def summary_version_activate(*, version: SummaryVersion, user) -> Compaction:
    """Serve a stored version's text; the text it replaces becomes a version itself."""
    with transaction.atomic():
        locked = Compaction.objects.select_for_update().get(pk=version.compaction_id)
        if locked.status != Status.SUCCEEDED:
            raise ReviewError("only a succeeded compaction's summary can be changed", field="compaction")
        if version.summary.strip() == locked.summary.strip():
            raise ReviewError("this version is already the served summary", field="version")
        who = user.get_username() if user is not None else "someone"
        _replace_summary(
            compaction=locked,
            text=version.summary,
            keep_note=f"replaced by version {version.pk} ({who})",
            user=user,
        )
        _recompute_if_active(locked)
    return locked


def compaction_undo(*, compaction: Compaction, user) -> Compaction | None:
    """Stop serving this (active) compaction's summary: the one it was based on is served again.
    Returns the compaction active afterwards (None = the full history)."""
    try:
        return compaction_services.compaction_revert(compaction=compaction, user=user)
    except compaction_services.CompactionError as exc:
        raise ReviewError(str(exc), field="compaction") from None


def compaction_rerun(
    *, compaction: Compaction, user, strategy: str = "auto", instructions: str | None = None, prompt: str | None = None
) -> Compaction:
    """Queue a new compaction of the session with another strategy and/or prompt.

    If the compaction under review is the active one it is undone first, so the new job
    summarizes the same history instead of merging the rejected summary into a new one.
    """
    if strategy not in compaction_services.STRATEGIES:
        raise ReviewError(
            f"unknown strategy {strategy!r}; allowed: {', '.join(compaction_services.STRATEGIES)}", field="strategy"
        )
    overrides: dict[str, Any] = {}
    if prompt and prompt.strip():
        problems = validate_custom_prompt(prompt)
        if problems:
            raise ReviewError("; ".join(problems), field="prompt")
        overrides["compact_prompt"] = prompt
    for key, problem in validate_overrides(overrides).items():
        raise ReviewError(problem, field=key)
    session = Session.objects.get(pk=compaction.session_id)
    with transaction.atomic():
        if session.active_compaction_id == compaction.pk:
            try:
                compaction_services.compaction_revert(compaction=compaction, user=user)
            except compaction_services.CompactionError as exc:
                raise ReviewError(str(exc), field="compaction") from None
        job = compaction_services.compaction_request(
            session=session,
            reason="manual",
            requested_by=user,
            strategy=strategy,
            instructions=compaction.instructions if instructions is None else instructions,
            overrides=overrides,
        )
        if not getattr(job, "created", True):
            # Raising inside the block rolls the undo back: nothing changes.
            raise ReviewError(f"a compaction is already in flight for this session ({job.pk})", field="compaction")
        # Link the new job to the compaction it re-runs (admin list, review page, dashboard).
        # Same transaction as the insert: the worker never sees the job without the link.
        job.rerun_of = compaction
        Compaction.objects.filter(pk=job.pk).update(rerun_of=compaction)
    return job


def rerun_of(compaction: Compaction) -> str | None:
    """The id of the compaction this one re-ran (compaction_rerun), if any."""
    return str(compaction.rerun_of_id) if compaction.rerun_of_id else None
