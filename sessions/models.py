from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey, BaseAPIKeyManager

from compaction.core import registry
from compaction.core.calibration import Calibration
from sessions.choices import TextChoices


class Session(models.Model):
    """One agent conversation. Its messages are append-only; compactions are overlays."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agent_sessions")
    title = models.CharField(max_length=200, blank=True)
    agent = models.CharField(
        max_length=100, blank=True, help_text="The agent pushing this conversation, e.g. claude-code."
    )
    model = models.CharField(
        max_length=100, blank=True, help_text="Model the agent talks to; sets the default context window."
    )
    system_prompt = models.TextField(blank=True)
    system_prompt_tokens = models.PositiveIntegerField(default=0)
    context_window_override = models.PositiveIntegerField(
        null=True, blank=True, help_text="Overrides the model registry's context window."
    )
    # Per-session overrides of settings.COMPACTOR; the API validates keys and bounds against
    # compaction.core.config.OVERRIDABLE before they are stored, so a typo is a 400.
    compaction_settings = models.JSONField(default=dict, blank=True)

    active_compaction = models.ForeignKey(
        "compaction.Compaction", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A subagent's conversation (e.g. Claude Code's subagents/*.jsonl) hangs off the session
    # that started it; deleting the parent keeps the child as a session of its own.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children", db_index=True
    )
    # Set while `import_transcript --replay` appends to this session and runs its compactions
    # itself: the Celery task leaves the session's jobs to the replay (no race with a worker).
    replaying = models.BooleanField(default=False)
    # A single call the gateway could not tie to any conversation (one message, no client
    # conversation id, no stored history it continues): kept out of the session lists unless
    # asked for, until a later call continues it.
    one_off = models.BooleanField(default=False)
    # Calls made beside the conversation on the client's behalf (Claude Code's title and
    # topic checks): answered and recorded as SideCall rows, never as messages.
    side_call_count = models.PositiveIntegerField(default=0)

    # Append bookkeeping. `last_seq` is bumped under a row lock, which is what keeps seq
    # gap-free and unique when many clients append at once.
    last_seq = models.PositiveIntegerField(default=0)
    # The tool-pair state after the message at `turn_state["seq"]` (sessions.turns.TurnState's
    # stored form): the append checks a new message's order against it instead of reading the
    # latest messages back. Null, or written at another seq than last_seq, means "read them".
    turn_state = models.JSONField(null=True, blank=True, editable=False)
    message_count = models.PositiveIntegerField(default=0)
    total_message_tokens = models.PositiveBigIntegerField(default=0)

    # Cached usage of the served context (system + active summary + kept messages, after
    # pruning), maintained incrementally on append and recomputed on (de)activation.
    context_tokens = models.PositiveIntegerField(default=0)

    # Last provider-reported usage (calibration). `reported_at_seq` is the last seq the
    # provider had seen when it reported; messages after it are added as estimates.
    reported_input_tokens = models.PositiveIntegerField(null=True, blank=True)
    reported_at_seq = models.PositiveIntegerField(null=True, blank=True)
    last_usage = models.JSONField(null=True, blank=True)
    # Running estimate of what changed since that report (messages appended after it, as
    # served, plus any system-prompt change), so usage never sums the history on append.
    tokens_since_report = models.IntegerField(default=0)
    # Provider's figure minus our estimate of the same context at the last calibrating report:
    # what Compactor cannot see (tool definitions, the agent's own system prompt) plus tokenizer
    # drift. Kept across compactions so the figure after one is on the provider's scale.
    calibration_offset = models.IntegerField(null=True, blank=True)
    # Affine calibration, reported ≈ fixed + ratio × estimate (compaction.core.calibration):
    # {"model": str, "pairs": [[estimate_at_report, reported], ...] (last 20 non-stale
    # reports), "fixed": int, "ratio": float, "fitted": bool}. Only written on a usage report.
    calibration = models.JSONField(null=True, blank=True)

    # The meter's figure (sessions.services.session_usage().tokens) and where it stands,
    # stored by every write that changes it, so the dashboard list sorts by usage and filters
    # by level in SQL instead of computing every session's config and usage in Python. A change
    # of the global defaults (settings.COMPACTOR) reaches a session at its next write, or at
    # once with `manage.py refresh_session_usage`.
    usage_tokens = models.PositiveIntegerField(default=0)
    usage_percent = models.FloatField(default=0.0, help_text="usage_tokens / context window × 100")
    usage_level = models.CharField(max_length=8, default="ok", help_text="ok / near / over the trigger")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_activity_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # In the trash since (DELETE only moves a session here): hidden from the API and the lists
    # until restored, purged with its messages after settings.TRASH_RETENTION_DAYS (sessions.trash).
    deleted_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-last_activity_at"]
        indexes = [
            models.Index(fields=["owner", "-last_activity_at"]),
            models.Index(fields=["owner", "-usage_percent"], name="session_owner_usage"),
            models.Index(fields=["owner", "usage_level", "-last_activity_at"], name="session_owner_level"),
        ]

    def __str__(self) -> str:
        return self.title or f"Session {str(self.id)[:8]}"

    @property
    def model_info(self) -> registry.ModelInfo:
        return registry.lookup(self.model)

    @property
    def context_window(self) -> int:
        if self.context_window_override:
            return self.context_window_override
        info = self.model_info
        if info.known:
            return info.context_window
        return settings.COMPACTOR["DEFAULT_CONTEXT_WINDOW"]

    @property
    def calibration_fit(self) -> Calibration | None:
        """The fit the meter applies to its estimate (fixed + ratio × estimate); None before any report."""
        return Calibration.from_state(self.calibration, self.calibration_offset)

    @property
    def is_calibrated(self) -> bool:
        return self.calibration is not None or self.calibration_offset is not None

    def calibration_reset(self) -> list[str]:
        """Forget the calibration (another model counts with another tokenizer and hidden
        prompt); returns the fields to save."""
        self.calibration = None
        self.calibration_offset = None
        return ["calibration", "calibration_offset"]

    def calibration_model_matches(self, model_key: str | None) -> bool:
        """Was the calibration measured on this model (registry name)? True when either is unknown."""
        calibrated_on = (self.calibration or {}).get("model")
        return not calibrated_on or not model_key or calibrated_on == model_key

    def known_context_window(self, model: str | None = None) -> int | None:
        """The window when it is known (set on the session, or its model's, else `model`'s); None
        when `context_window` is only the default guess for a model nobody named or Compactor
        does not know. A usage report above a known window is not plausible."""
        if self.context_window_override:
            return self.context_window_override
        info = registry.lookup(self.model or model)
        return info.context_window if info.known else None


class Role(TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Provenance(TextChoices):
    """Whose words a message carries (compaction.core.provenance); blank when nobody said."""

    PERSON = "person", "Person"
    HARNESS = "harness", "Harness"


class Message(models.Model):
    """One message, exactly as the agent sent it. Never rewritten or deleted by compaction."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    # A string or a list of Anthropic content blocks, stored as sent.
    content = models.JSONField()
    token_count = models.PositiveIntegerField()
    # Denormalised from content for the cut point and validation.
    tool_use_ids = models.JSONField(default=list, blank=True)
    tool_result_ids = models.JSONField(default=list, blank=True)
    provider_usage = models.JSONField(null=True, blank=True)
    # Typed by the person or injected by the agent harness; "" = not stated (read by shape).
    # A text block may state its own in the content (`provenance` key), served without it.
    provenance = models.CharField(max_length=16, choices=Provenance.choices, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique_per_session")]
        indexes = [
            # The gateway asks on every call whether a session holds a reply cut off by
            # max_tokens (served without its unanswered tool calls): a probe, not a history scan.
            models.Index(
                fields=["session"],
                condition=models.Q(role="assistant", provider_usage__stop_reason="max_tokens"),
                name="message_cut_off_reply",
            )
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}"


class ToolCall(models.Model):
    """Index of tool_use ids per session: O(1) checks for duplicate ids and orphan results."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tool_calls")
    tool_use_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True)
    use_seq = models.PositiveIntegerField()
    result_seq = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "tool_use_id"], name="tool_use_id_unique_per_session")
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.tool_use_id}"


class ApiKeyManager(BaseAPIKeyManager):
    def get_usable_keys(self) -> models.QuerySet:
        return super().get_usable_keys().select_related("owner")


class ApiKey(AbstractAPIKey):
    """An agent's credential. Only a hash is stored; the prefix is shown to identify it."""

    objects = ApiKeyManager()

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API key"
        verbose_name_plural = "API keys"


class UsageSample(models.Model):
    """One point of a session's usage history: a provider report or a compaction.

    The chart draws these (what the provider really reported, its real peak, and each
    compaction's before → after) with our estimate between them; the meter itself never reads
    them. One row per usage report (API, gateway, import, replay) and two per compaction
    (before at its snapshot, after at activation), so a long session's history is as long as
    its reports, and the chart reads it bucketed in SQL (sessions.dashboard.queries).
    """

    class Kind(TextChoices):
        REPORT = "report", "Usage report"
        COMPACTION = "compaction", "Compaction"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="usage_samples")
    # The last message the figure describes: a report's call saw the messages up to this seq.
    seq = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # The provider's prompt size (input + cache read + cache write); None for a compaction.
    reported_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The meter's figure for the context up to `seq` (the scale of sessions.services.session_usage,
    # the figure the trigger compares): a plausible report's own figure, a flagged one's
    # prediction; a compaction's tokens_before (at its snapshot) and tokens_after (at activation).
    tokens = models.PositiveIntegerField()
    # Our estimate (uncalibrated) of the context served for that call / at that point.
    # None for a compaction's "before" row (its snapshot's estimate is not kept).
    estimated_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The report failed the plausibility check (sessions.services.usage_report): not calibrated on.
    flagged = models.BooleanField(default=False)
    compaction = models.ForeignKey(
        "compaction.Compaction", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )

    class Meta:
        ordering = ["session", "seq", "id"]
        indexes = [models.Index(fields=["session", "seq"], name="usage_sample_session_seq")]

    def __str__(self) -> str:
        figure = self.reported_tokens if self.reported_tokens is not None else self.tokens
        return f"{self.get_kind_display()} at #{self.seq}: {figure:,}"


class SideCall(models.Model):
    """A call an agent made beside its conversation (another system prompt, one user message,
    not a continuation): forwarded as it came and recorded here with its usage, so it neither
    becomes a session of its own nor enters the conversation's messages or meter."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="side_calls")
    created_at = models.DateTimeField(auto_now_add=True)
    model = models.CharField(max_length=100, blank=True)
    # The first words of the call's user message and of its system prompt's own instruction,
    # so a person can tell a title request from a command check.
    summary = models.CharField(max_length=200, blank=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The upstream's HTTP status.")
    streamed = models.BooleanField(default=False)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_read_input_tokens = models.PositiveIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["session", "-created_at", "-id"]
        indexes = [models.Index(fields=["session", "-created_at"], name="side_call_session_created")]

    def __str__(self) -> str:
        return f"Side call {self.summary[:40] or self.model}"


# How long a retry with the same Idempotency-Key gets the first answer (then the key is free).
IDEMPOTENCY_TTL = timedelta(hours=24)


class IdempotentRequest(models.Model):
    """A writing API request sent with an `Idempotency-Key`, and the answer it got.

    A retry with the same key (per owner) and the same body within the retention period gets
    this answer again instead of writing twice; the same key with another body is refused.
    The row is written in the request's own transaction, so it exists only if the write does.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=500)
    request_digest = models.CharField(max_length=64, help_text="sha256 of the method, path and body.")
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(null=True, blank=True)
    location = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="idempotent_request_owner_key")]

    def __str__(self) -> str:
        return f"{self.method} {self.path} [{self.key[:40]}]"
