from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from sessions.choices import TextChoices


class Reason(TextChoices):
    MANUAL = "manual", "Manual"
    THRESHOLD = "threshold", "Auto (threshold)"
    OVERFLOW = "overflow", "Overflow"
    IMPORT = "import", "Import"


class Status(TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    SKIPPED = "skipped", "Nothing to compact"
    FAILED = "failed", "Failed"


class ReviewStatus(TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    NEEDS_CHANGES = "needs_changes", "Needs changes"
    # A job that ended without a summary (nothing to compact, failed): nothing to review, so it
    # stays out of the Pending queue. Set by the engine, never chosen by a reviewer.
    NOT_APPLICABLE = "not_applicable", "No summary to review"


IN_FLIGHT = (Status.QUEUED, Status.RUNNING)
# A job normally leaves the queue within a second or two; still queued after this long, the
# likeliest cause is that no Celery worker is running, and the API and dashboard say so.
QUEUED_HINT_AFTER_SECONDS = 15


class Compaction(models.Model):
    """One compaction job and, once it succeeded, the overlay it defines.

    The overlay is `summary` + `first_kept_seq` (+ `prune_before_seq` for the pruning tier,
    + `kept_plan` for how the kept messages are served): the served context is the summary,
    then every message from `first_kept_seq` on.
    Messages themselves are never touched, so undo is reactivating `based_on`.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="compactions")
    reason = models.CharField(max_length=16, choices=Reason.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    # The active compaction when this job was requested; activation succeeds only if it is
    # still the active one (no lost update when two jobs race).
    based_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    # What was asked: strategy ("auto", "anthropic", "extractive", "truncate", "prune"),
    # instructions (focus), budgets, force.
    strategy_requested = models.CharField(max_length=32, default="auto")
    params = models.JSONField(default=dict, blank=True)
    instructions = models.TextField(blank=True)

    # What happened.
    strategy = models.CharField(max_length=32, blank=True, help_text="Summarizer that produced the summary.")
    fallbacks = models.JSONField(
        default=list, blank=True, help_text="[{strategy, reason}] for each summarizer that was skipped or failed."
    )
    first_summarized_seq = models.PositiveIntegerField(null=True, blank=True)
    last_summarized_seq = models.PositiveIntegerField(null=True, blank=True)
    first_kept_seq = models.PositiveIntegerField(null=True, blank=True)
    prune_before_seq = models.PositiveIntegerField(null=True, blank=True)
    # How the kept messages are served (compaction.core.kept.KeptPlan.as_json): which tool
    # results are served as pointers or trimmed, decided once with the summary so the served
    # prefix stays byte-identical until the next compaction. {} = every kept message verbatim.
    kept_plan = models.JSONField(
        default=dict, blank=True, help_text="Kept tool results served as pointers or trimmed (seq → edits)."
    )
    split_turn = models.BooleanField(default=False)
    summary = models.TextField(blank=True)
    turn_prefix_summary = models.TextField(blank=True)
    summary_tokens = models.PositiveIntegerField(default=0)
    # The summary as served (render_summary_message: preamble, summary, turn-prefix part),
    # counted once when it is written, with `summary_tokenizer`: the served context reads it
    # instead of re-tokenizing (or caching per process) the summary on every request.
    summary_message_tokens = models.PositiveIntegerField(null=True, blank=True)
    summary_tokenizer = models.CharField(max_length=32, blank=True)
    read_files = models.JSONField(default=list, blank=True)
    modified_files = models.JSONField(default=list, blank=True)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    # compaction.core.policy: what this compaction cost the provider's prompt cache and bought.
    first_changed_seq = models.PositiveIntegerField(
        null=True, blank=True, help_text="First message served differently: the cached prompt stops matching here."
    )
    cache_invalidated_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Prompt tokens after the first change, billed again as cache writes."
    )
    runway_tokens = models.IntegerField(
        null=True, blank=True, help_text="Trigger − tokens_after: new tokens before the trigger is crossed again."
    )
    policy_reason = models.CharField(max_length=300, blank=True, help_text="Why the policy chose this candidate.")
    policy_candidates = models.JSONField(default=list, blank=True, help_text="Every candidate the policy weighed.")
    messages_summarized = models.PositiveIntegerField(default=0)
    summarizer_model = models.CharField(max_length=100, blank=True)
    usage = models.JSONField(default=dict, blank=True, help_text="Summarizer usage: input/output tokens, cost, calls.")
    fidelity = models.JSONField(
        default=dict, blank=True, help_text="Which ledger items of the source the summary kept."
    )

    error = models.TextField(blank=True)
    detail = models.CharField(max_length=300, blank=True, help_text="Why nothing was compacted, or a short outcome.")
    attempts = models.PositiveSmallIntegerField(default=0)
    # The last seq of the history this job saw (its snapshot): the loop guard counts what was
    # appended after it, and a usage report for a call before it is stale.
    snapshot_seq = models.PositiveIntegerField(null=True, blank=True)
    # The compaction a reviewer re-ran with another strategy or prompt (compaction.review).
    rerun_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # The first claim by a worker. started_at is the current attempt's (a re-queued job gets a
    # new one), so the wait for a worker is measured to this instead.
    first_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(
        null=True, blank=True, help_text="A RUNNING job past this is re-queued by the sweeper."
    )
    # The Celery worker (name@host) whose attempt is running: once that worker has restarted (its
    # heartbeat started after the claim) the attempt is dead and re-queued at once, not at its deadline.
    worker = models.CharField(max_length=255, blank=True, default="")
    activated_at = models.DateTimeField(null=True, blank=True)
    # When the job's message was last handed to the broker (request, retry, sweeper). The
    # sweeper re-sends a QUEUED job only when this is older than its stale period, so a job
    # whose message is lost is re-sent once per period, not on every sweep.
    enqueued_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    # Review (Django admin).
    review_status = models.CharField(
        max_length=16, choices=ReviewStatus.choices, default=ReviewStatus.PENDING, db_index=True
    )
    review_notes = models.TextField(blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["session", "-created_at"])]
        constraints = [
            # One compaction in flight per session, enforced by the database.
            models.UniqueConstraint(
                fields=["session"],
                condition=models.Q(status__in=["queued", "running"]),
                name="one_compaction_in_flight_per_session",
            )
        ]

    def __str__(self) -> str:
        if self.tokens_before is not None and self.tokens_after is not None:
            return f"{self.get_reason_display()} {self.tokens_before:,} → {self.tokens_after:,}"
        return f"{self.get_reason_display()} ({self.get_status_display()})"

    @property
    def in_flight(self) -> bool:
        return self.status in IN_FLIGHT

    def queued_seconds(self, now=None) -> int | None:
        """How long the job waited for a worker: from its creation to its first start (so far,
        while it has never started). Not to a later attempt's start: a job re-queued after
        its worker died had already waited once, and its first run is not waiting."""
        if self.created_at is None:
            return None
        end = self.first_started_at or self.started_at
        if end is None:
            if self.status != Status.QUEUED:
                return None  # never started (e.g. retired by an overflow compaction while queued)
            end = now or timezone.now()
        return max(0, int((end - self.created_at).total_seconds()))

    def queued_hint(self, now=None, *, after: float = QUEUED_HINT_AFTER_SECONDS) -> str:
        """Why a job may be stuck in the queue, once it has waited `after` seconds."""
        if self.status != Status.QUEUED or self.created_at is None:
            return ""
        # A job re-queued after a run waits again from its hand-back (enqueued_at).
        since = self.created_at if self.first_started_at is None else (self.enqueued_at or self.created_at)
        waited = max(0, int(((now or timezone.now()) - since).total_seconds()))
        if waited < after:
            return ""
        return (
            f"Still queued after {waited} s — is a Celery worker running? (`make run` starts one; see {worker_log()})"
        )


def worker_log() -> str:
    """Where `make run` writes the worker's log (under COMPACTOR_VAR_DIR), as short as it can be said."""
    path = settings.VAR_DIR / "worker.log"
    try:
        return str(path.relative_to(settings.BASE_DIR))
    except ValueError:
        return str(path)


class WorkStateRecord(models.Model):
    """The state of the work (compaction.core.work) a summary was rendered from, folded through
    the compaction's last summarized message. The next compaction continues the fold from here
    instead of re-reading the summary's text, so nothing handed over is lost.

    A table of its own: the compaction row is read on every served context, this only by the
    next compaction (tens of kilobytes of JSON a row).
    """

    compaction = models.OneToOneField(
        Compaction, on_delete=models.CASCADE, primary_key=True, related_name="work_state_record"
    )
    version = models.PositiveSmallIntegerField()
    data = models.JSONField()

    def __str__(self) -> str:
        return f"Work state of {self.compaction_id} (v{self.version})"


class SummaryVersion(models.Model):
    """A previous text of a compaction's summary, kept when a reviewer edits it."""

    compaction = models.ForeignKey(Compaction, on_delete=models.CASCADE, related_name="versions")
    summary = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Version of {self.compaction_id} at {self.created_at:%Y-%m-%d %H:%M}"


class EventKind(TextChoices):
    COMPACTION_QUEUED = "compaction_queued", "Compaction queued"
    COMPACTION_STARTED = "compaction_started", "Compaction started"
    COMPACTION_FINISHED = "compaction_finished", "Compaction finished"
    COMPACTION_SKIPPED = "compaction_skipped", "Nothing to compact"
    COMPACTION_FAILED = "compaction_failed", "Compaction failed"
    COMPACTION_REVERTED = "compaction_reverted", "Compaction undone"
    OVERFLOW = "overflow", "Provider overflow"


class Event(models.Model):
    """Session event stream, read with `GET .../events/?after=<id>`."""

    session = models.ForeignKey("agent_sessions.Session", on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    compaction = models.ForeignKey(Compaction, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    message = models.CharField(max_length=500)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "id"])]

    def __str__(self) -> str:
        return self.message
