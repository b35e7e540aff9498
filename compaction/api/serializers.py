"""Input and output serializers of the compaction API (small, one per operation)."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from compaction.core.config import MAX_PRESERVE_MESSAGES, MAX_WINDOW_TOKENS, validate_overrides
from compaction.models import Compaction, Event
from compaction.services import STRATEGIES, describe
from sessions.api.serializers import MAX_TOKENS, CalibrationOutSerializer, ContextOutSerializer
from sessions.api.strict import ListedChoiceField, RejectUnknownFieldsMixin


class StrictCharField(serializers.CharField):
    """A string, not a number coerced into one."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class SecondsField(serializers.FloatField):
    """A number of seconds: JSON true/false are not numbers (DRF's FloatField takes them as 1/0)."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            raise serializers.ValidationError("must be a number of seconds, not a boolean")
        return super().to_internal_value(data)


class StrictSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Unknown keys are a 400 naming them, not silently ignored (a typo must not be lost)."""


class CompactionRequestSerializer(StrictSerializer):
    instructions = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=10_000,
        default="",
        help_text="Focus for the summary, like `/compact focus on X`.",
    )
    keep_recent_tokens = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_WINDOW_TOKENS, help_text="Tokens kept verbatim."
    )
    preserve_messages = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_PRESERVE_MESSAGES,
        help_text="Keep the last N messages instead of a token budget.",
    )
    strategy = ListedChoiceField(
        choices=STRATEGIES,
        default="auto",
        help_text="auto: anthropic→extractive→truncate (without a key: extractive→truncate); prune: tool outputs only.",
    )
    force = serializers.BooleanField(
        default=False, help_text="Cut harder (keep about window/5), as overflow recovery does."
    )
    dry_run = serializers.BooleanField(default=False, help_text="Answer what would be summarized; change nothing.")
    wait = SecondsField(
        default=0,
        min_value=0,
        help_text="Seconds to wait for the job to finish (a number; default 0: answer at once). A longer wait "
        "than COMPACTOR_MAX_WAIT_SECONDS (default 30) waits that long and says so (`wait_capped` true); poll "
        "the job after. Each waiting request holds a web thread, so a web process lets at most "
        "COMPACTOR_MAX_WAITERS requests wait at once; beyond that the answer comes at once (202, "
        "`wait_skipped` true): poll the job instead.",
    )

    def validate_wait(self, value: float) -> float:
        # A long-poll waits what it may: the cap is read per request (the setting may change).
        self.wait_capped = value > settings.COMPACTION_MAX_WAIT_SECONDS
        return min(value, settings.COMPACTION_MAX_WAIT_SECONDS)

    def validate(self, attrs):
        attrs["wait_capped"] = getattr(self, "wait_capped", False)
        overrides = {k: attrs[k] for k in ("keep_recent_tokens", "preserve_messages") if k in attrs}
        errors = validate_overrides(overrides)
        if errors:
            raise serializers.ValidationError({key: [msg] for key, msg in errors.items()})
        attrs["overrides"] = overrides
        return attrs


class OverflowSerializer(StrictSerializer):
    error_text = StrictCharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=100_000,
        help_text="The provider's error message, verbatim.",
    )
    status_code = serializers.IntegerField(required=False, allow_null=True, min_value=100, max_value=599)
    input_tokens = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_TOKENS,
        help_text="Prompt tokens the provider reported (silent overflow).",
    )

    def validate(self, attrs):
        if not attrs.get("error_text") and attrs.get("status_code") is None and attrs.get("input_tokens") is None:
            raise serializers.ValidationError({"error_text": ["give error_text, status_code or input_tokens"]})
        return attrs


class EventQuerySerializer(serializers.Serializer):
    after = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**63 - 1,
        default=0,
        help_text="Return events with id > after (0 = from the start).",
    )
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=500, default=200, help_text="At most this many."
    )


class CompactionSerializer(serializers.ModelSerializer):
    summarized = serializers.SerializerMethodField()
    active = serializers.SerializerMethodField()
    message = serializers.SerializerMethodField()
    queued_seconds = serializers.SerializerMethodField(
        help_text="Seconds the job waited for a worker: from its creation to its first start (so far, while it "
        "has not started yet)."
    )
    detail = serializers.SerializerMethodField(
        help_text="The outcome's detail; while queued for long, a hint that no worker may be running."
    )
    session = serializers.UUIDField(source="session_id", read_only=True)
    based_on = serializers.UUIDField(source="based_on_id", read_only=True, allow_null=True)

    class Meta:
        model = Compaction
        fields = [
            "id",
            "session",
            "status",
            "reason",
            "strategy_requested",
            "strategy",
            "fallbacks",
            "based_on",
            "active",
            "instructions",
            "tokens_before",
            "tokens_after",
            "first_changed_seq",
            "cache_invalidated_tokens",
            "runway_tokens",
            "policy_reason",
            "policy_candidates",
            "messages_summarized",
            "summarized",
            "first_kept_seq",
            "prune_before_seq",
            "split_turn",
            "summary",
            "turn_prefix_summary",
            "summary_tokens",
            "read_files",
            "modified_files",
            "summarizer_model",
            "usage",
            "fidelity",
            "duration_ms",
            "attempts",
            "queued_seconds",
            "error",
            "detail",
            "message",
            "created_at",
            "started_at",
            "finished_at",
            "activated_at",
            "review_status",
            "review_notes",
            "reviewed_at",
        ]
        read_only_fields = fields

    def get_summarized(self, obj: Compaction) -> dict | None:
        if obj.first_summarized_seq is None:
            return None
        return {
            "first_seq": obj.first_summarized_seq,
            "last_seq": obj.last_summarized_seq,
            "messages": obj.messages_summarized,
        }

    def get_active(self, obj: Compaction) -> bool:
        active_id = self.context.get("active_compaction_id")
        if active_id is None and "active_compaction_id" not in self.context:
            active_id = obj.session.active_compaction_id
        return active_id == obj.pk

    def get_message(self, obj: Compaction) -> str:
        return describe(obj)

    def get_queued_seconds(self, obj: Compaction) -> int | None:
        return obj.queued_seconds()

    def get_detail(self, obj: Compaction) -> str:
        return obj.queued_hint() or obj.detail


class CompactionRequestedSerializer(CompactionSerializer):
    """The answer to a compaction request: the job, and how the request met it."""

    already_in_flight = serializers.BooleanField(
        read_only=True, help_text="True when a job was already queued or running: this is that job."
    )
    wait_skipped = serializers.BooleanField(
        read_only=True,
        help_text="True when `wait` was not honoured: the web process had COMPACTOR_MAX_WAITERS waiting "
        "requests already. Poll the job instead.",
    )
    wait_capped = serializers.BooleanField(
        read_only=True,
        help_text="True when `wait` asked for more than COMPACTOR_MAX_WAIT_SECONDS: the request waited that long "
        "at most. Poll the job for the rest.",
    )

    class Meta(CompactionSerializer.Meta):
        fields = [*CompactionSerializer.Meta.fields, "already_in_flight", "wait_skipped", "wait_capped"]
        read_only_fields = fields


class EventSerializer(serializers.ModelSerializer):
    compaction = serializers.UUIDField(source="compaction_id", read_only=True, allow_null=True)

    class Meta:
        model = Event
        fields = ["id", "kind", "message", "data", "compaction", "created_at"]
        read_only_fields = fields


class DryRunSerializer(serializers.Serializer):
    """Shape of a dry run answer (for the schema)."""

    dry_run = serializers.BooleanField()
    would_compact = serializers.BooleanField()
    reason = serializers.CharField()
    tokens_before = serializers.IntegerField(help_text="Usage now, as the meter and the trigger see it.")
    trigger_tokens = serializers.IntegerField()
    context_window = serializers.IntegerField()
    messages_in_context = serializers.IntegerField()
    based_on = serializers.UUIDField(allow_null=True)
    calibration_offset = serializers.IntegerField(
        help_text="Tokens only the provider counts (tool definitions, the agent's own system prompt, tokenizer "
        "drift), from the last usage report; in tokens_before and estimated_tokens_after alike."
    )
    calibration = CalibrationOutSerializer(
        allow_null=True, required=False, help_text="The session's calibration (as in the session's usage)."
    )
    strategy = serializers.CharField(required=False)
    first_summarized_seq = serializers.IntegerField(required=False)
    last_summarized_seq = serializers.IntegerField(required=False)
    first_kept_seq = serializers.IntegerField(required=False)
    split_turn = serializers.BooleanField(required=False)
    messages_summarized = serializers.IntegerField(required=False)
    tokens_summarized = serializers.IntegerField(
        required=False, help_text="What the summarizer reads: the summarized messages as stored."
    )
    messages_kept = serializers.IntegerField(required=False)
    tokens_kept = serializers.IntegerField(
        required=False, help_text="What stays in context: the kept messages as served (prune overlay applied)."
    )
    estimated_summary_tokens = serializers.IntegerField(required=False)
    prune_before_seq = serializers.IntegerField(required=False)
    tool_results_pruned = serializers.IntegerField(required=False)
    policy = serializers.CharField(
        required=False, help_text="The candidate the policy chose: prune, summarize or prune+summarize."
    )
    policy_reason = serializers.CharField(required=False, help_text="Why the policy chose it.")
    policy_candidates = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Every candidate weighed, with its estimates."
    )
    first_changed_seq = serializers.IntegerField(
        required=False, allow_null=True, help_text="First message served differently: the cached prompt stops here."
    )
    estimated_cache_invalidated_tokens = serializers.IntegerField(
        required=False, help_text="Prompt tokens after the first change: billed again as cache writes."
    )
    estimated_runway_tokens = serializers.IntegerField(
        required=False, help_text="Trigger − estimated_tokens_after: new tokens before the next compaction."
    )
    estimated_tokens_after = serializers.IntegerField(
        required=False,
        help_text="On the scale of tokens_before: system prompt + summary (estimated) + kept messages as served "
        "+ calibration_offset; what the compaction's tokens_after will show.",
    )


class NotCompactedSerializer(serializers.Serializer):
    compacted = serializers.BooleanField()
    reason = serializers.CharField()
    job = CompactionRequestedSerializer()


class OverflowResultSerializer(serializers.Serializer):
    overflow = serializers.BooleanField()
    reason = serializers.CharField()
    compacted = serializers.BooleanField(required=False)
    provider = serializers.CharField(required=False, allow_null=True)
    pattern = serializers.CharField(
        required=False, allow_null=True, help_text="Which known overflow pattern matched the error."
    )
    compaction = CompactionSerializer(required=False, allow_null=True)
    context = ContextOutSerializer(required=False, help_text="The new context (as GET .../context/ serves it).")
