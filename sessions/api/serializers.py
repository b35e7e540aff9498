"""Small input/output serializers for the agents' API (one pair per operation).

Input serializers parse and check types; the services own the domain checks (content blocks,
tool ids, settings). Output serializers render what the services return, so the OpenAPI
schema describes the real responses.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from sessions import services

from .strict import RejectUnknownFieldsMixin

MAX_TOKENS = 500_000_000

# ---- shared output pieces -------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    """Every 4xx/5xx body of the API."""

    error = serializers.CharField(help_text="The first problem, as '<field path>: <problem>' when a field is at fault.")
    detail = serializers.JSONField(
        required=False,
        help_text="Field path → list of problems when fields are at fault (a 400); other details (e.g. the size "
        "limit) for some errors; absent when `error` says it all (a 404: 'session <id> not found').",
    )


class CalibrationOutSerializer(serializers.Serializer):
    fixed = serializers.IntegerField(help_text="Tokens the provider counts beyond our estimate (tool definitions...).")
    ratio = serializers.FloatField(help_text="reported ≈ fixed + ratio × estimate.")
    reports = serializers.IntegerField(help_text="Usage reports the fit is based on.")
    fitted = serializers.BooleanField(help_text="False while the ratio is not fitted yet (1.0).")


class ImplausibleOutSerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=["above_window", "below_served", "below_expected", "above_expected"],
        help_text="above_window: larger than the session's context window (or, for a model it does not know, "
        "than any model's), which no provider accepts (cache figures added twice?); "
        "below_served: under 0.9 × the tokens Compactor served for that call (cache figures dropped?); "
        "below_expected / above_expected: outside 0.8–1.5 × the meter's prediction, not confirmed by a next report.",
    )
    reason = serializers.CharField(help_text="The same in words, with the figures.")
    reported_tokens = serializers.IntegerField(help_text="input + cache read + cache write, as reported.")
    served_tokens = serializers.IntegerField(help_text="Our estimate of the context served for that call.")
    expected_tokens = serializers.IntegerField(
        allow_null=True, help_text="The meter's prediction for that call; null before any plausible report."
    )


class UsageOutSerializer(serializers.Serializer):
    tokens = serializers.IntegerField(
        help_text="Best figure (hybrid when the provider reported usage); meter and trigger use it."
    )
    estimated_tokens = serializers.IntegerField(
        help_text="Pure estimate: system + active summary + kept messages (after pruning)."
    )
    reported_tokens = serializers.IntegerField(
        allow_null=True, help_text="Last provider-reported prompt size (input + cache read + cache write)."
    )
    reported_at_seq = serializers.IntegerField(
        allow_null=True, help_text="Last seq the provider had seen when it reported."
    )
    trailing_tokens = serializers.IntegerField(
        help_text="With a report: estimated change since it (messages after reported_at_seq, system-prompt "
        "changes). Without one: the estimate."
    )
    calibration_offset = serializers.IntegerField(
        allow_null=True,
        help_text="Last calibrating report minus our estimate of the same context (tool definitions and "
        "other prompt parts only the provider sees). Added to the estimate after a compaction drops the report.",
    )
    calibration = CalibrationOutSerializer(
        allow_null=True, help_text="The session's calibration against provider reports; null before any report."
    )
    source = serializers.ChoiceField(
        choices=["estimate", "provider+estimate", "estimate+calibration"],
        help_text="provider+estimate: last plausible report + estimated change since; estimate+calibration: "
        "fixed + ratio × estimate (no report since the last compaction); estimate: no plausible report yet.",
    )
    tokenizer = serializers.CharField(
        help_text="Encoding used for this session: o200k_base for OpenAI's gpt-4o/4.1/5 and o-series models "
        "(read offline: tiktoken's cache or the bpe-openai package), else cl100k_base; chars/4 when no tokenizer "
        "is available."
    )
    exact = serializers.BooleanField(help_text="False when the chars/4 fallback is in use.")
    context_window = serializers.IntegerField()
    usage_ratio = serializers.FloatField(allow_null=True)
    trigger_tokens = serializers.IntegerField()
    auto_compact = serializers.BooleanField()
    implausible = ImplausibleOutSerializer(
        allow_null=True,
        help_text="The last usage report failed the plausibility check (stored, but neither calibrates nor moves "
        "the meter); null when it passed or none was made.",
    )


class CompactionJobSerializer(serializers.Serializer):
    """A compaction job enqueued by an append or a usage report."""

    id = serializers.UUIDField()
    status = serializers.CharField()
    reason = serializers.CharField()
    strategy_requested = serializers.CharField()
    created_at = serializers.DateTimeField()


# ---- sessions ---------------------------------------------------------------------------------


class SessionOutSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField()
    system_prompt = serializers.CharField()
    context_window = serializers.IntegerField(
        help_text="Effective window: the override, else the model registry's, else the default."
    )
    context_window_override = serializers.IntegerField(allow_null=True)
    compaction_settings = serializers.DictField(
        child=serializers.JSONField(), help_text="Per-session overrides of the global settings."
    )
    usage = serializers.SerializerMethodField()
    message_count = serializers.IntegerField()
    side_call_count = serializers.IntegerField(
        help_text="Calls the agent made beside this conversation (titles, topic checks): GET .../side-calls/."
    )
    one_off = serializers.BooleanField(
        help_text="A lone gateway call no conversation continued: listed only with ?one_off=true."
    )
    last_seq = serializers.IntegerField()
    total_message_tokens = serializers.IntegerField(help_text="All stored messages, compacted or not.")
    active_compaction = serializers.UUIDField(source="active_compaction_id", allow_null=True)
    parent = serializers.UUIDField(
        source="parent_id", allow_null=True, help_text="The session that started this one (a subagent's), or null."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField()

    @extend_schema_field(UsageOutSerializer)
    def get_usage(self, session) -> dict:
        return services.session_usage(session).as_dict()


class SideCallOutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    model = serializers.CharField()
    summary = serializers.CharField(help_text="The first words of the call's user message.")
    status = serializers.IntegerField(allow_null=True, help_text="The upstream's HTTP status; null while unanswered.")
    streamed = serializers.BooleanField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()


class SessionInSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    title = serializers.CharField(max_length=200, allow_blank=True, required=False)
    agent = serializers.CharField(max_length=100, allow_blank=True, required=False)
    model = serializers.CharField(max_length=100, allow_blank=True, required=False)
    system_prompt = serializers.CharField(allow_blank=True, required=False, trim_whitespace=False)
    context_window = serializers.IntegerField(
        min_value=1024,
        max_value=10_000_000,
        allow_null=True,
        required=False,
        help_text="Overrides the model registry's window; null goes back to the registry.",
    )
    compaction_settings = serializers.DictField(
        child=serializers.JSONField(allow_null=True),
        required=False,
        help_text="Overrides: reserve_tokens, keep_recent_tokens, auto_compact_ratio, auto_compact_token_limit, "
        "preserve_messages, auto_compact, summarizer_model, summary_max_tokens, compact_prompt, prune_tool_outputs, "
        "target_ratio, prune_min_relief. "
        "PATCH merges key by key; null removes a key.",
    )

    # Output-only fields of a session, and what to send instead. A GET body can be PATCHed back
    # as is when these are unchanged; a changed one is a 400 (it would otherwise be ignored).
    read_only_fields = {
        name: "maintained by Compactor; leave it out"
        for name in SessionOutSerializer().fields
        if name not in ("title", "agent", "model", "system_prompt", "context_window", "compaction_settings")
    } | {
        "context_window_override": "set context_window (null goes back to the model registry's window)",
        "id": "assigned by Compactor; leave it out",
        "created_at": "set by Compactor; leave it out",
    }

    def validate_compaction_settings(self, value: dict) -> dict:
        # Unknown keys are errors even when null; null for a known key means "remove".
        errors = services.compaction_settings_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value


# ---- messages ---------------------------------------------------------------------------------


PROVENANCE_HELP = (
    "Whose words the message carries: 'person' (typed by the user) or 'harness' (injected by the agent "
    "harness: skill text, command caveats, hook output, reminders, task templates); '' when not stated "
    "(then read by shape). A text block may state its own with a `provenance` key, e.g. "
    '{"type": "text", "text": "<system-reminder>…</system-reminder>", "provenance": "harness"}; '
    "the served context leaves that key out."
)


# A pattern, not an enum: the schema's enum post-processing would drop "" (not stated), one of
# its values, which allow_blank adds as its own alternative.
@extend_schema_field({"type": "string", "pattern": "^(person|harness)$"})
class ProvenanceField(serializers.CharField):
    """A message's provenance: "person", "harness" or "" (documentation: sessions.validation checks
    what is appended)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(allow_blank=True, help_text=PROVENANCE_HELP, **kwargs)


class MessageOutSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant"])
    content = serializers.JSONField(help_text="A string or a list of Anthropic content blocks, as sent.")
    token_count = serializers.IntegerField()
    provider_usage = serializers.JSONField(allow_null=True)
    provenance = ProvenanceField()
    created_at = serializers.DateTimeField()


_CREATED_AT = MessageOutSerializer().fields["created_at"]


def message_out(message) -> dict:
    """MessageOutSerializer's representation of one stored message, built directly: the
    append answers with it on every agent's every turn, and a serializer per request (its
    fields deep-copied) cost more than the rest of that answer. The fields are the
    serializer's, which documents them (tests/api/test_append_path.py holds the two equal)."""
    return {
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "token_count": message.token_count,
        "provider_usage": message.provider_usage,
        "provenance": message.provenance,
        "created_at": _CREATED_AT.to_representation(message.created_at),
    }


class MessageInSerializer(serializers.Serializer):
    """Documentation of one message; the service checks the blocks and names the bad field."""

    role = serializers.ChoiceField(choices=["user", "assistant"])
    content = serializers.JSONField(
        help_text="A non-empty string or a list of content blocks: text, thinking, redacted_thinking, "
        "tool_use (assistant only), tool_result (user only, answering an earlier tool_use), image, document."
    )
    usage = serializers.JSONField(required=False, help_text="Optional provider usage for this message, stored as is.")
    provenance = ProvenanceField(required=False)


class MessageBatchInSerializer(serializers.Serializer):
    messages = MessageInSerializer(many=True, help_text="Appended all or nothing, in order.")


class AppendOutSerializer(serializers.Serializer):
    messages = MessageOutSerializer(many=True)
    usage = UsageOutSerializer()
    compaction = CompactionJobSerializer(
        allow_null=True, help_text="Auto-compaction job enqueued by this append, or null."
    )


# ---- context ----------------------------------------------------------------------------------


class ContextMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["user", "assistant"])
    content = serializers.JSONField()


class ActiveCompactionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    reason = serializers.CharField()
    strategy = serializers.CharField()
    summary_tokens = serializers.IntegerField()
    first_kept_seq = serializers.IntegerField(allow_null=True)
    prune_before_seq = serializers.IntegerField(allow_null=True)
    messages_summarized = serializers.IntegerField()
    tokens_before = serializers.IntegerField(allow_null=True)
    tokens_after = serializers.IntegerField(allow_null=True)
    activated_at = serializers.DateTimeField(allow_null=True)


class ContextBreakdownSerializer(serializers.Serializer):
    system = serializers.IntegerField()
    summary = serializers.IntegerField()
    messages = serializers.IntegerField()
    pruned_tool_results_saved = serializers.IntegerField()


class ContextOutSerializer(serializers.Serializer):
    system = serializers.CharField()
    messages = ContextMessageSerializer(
        many=True, help_text="Send as is: the active summary (a user message), then the kept messages."
    )
    seqs = serializers.ListField(
        child=serializers.IntegerField(allow_null=True), help_text="seq of each served message; null for the summary."
    )
    tokens = serializers.IntegerField(help_text="Same figure as usage.tokens.")
    estimated_tokens = serializers.IntegerField(help_text="Estimate of exactly what is served here.")
    breakdown = ContextBreakdownSerializer()
    context_window = serializers.IntegerField()
    usage_ratio = serializers.FloatField(allow_null=True)
    trigger_tokens = serializers.IntegerField()
    active_compaction = ActiveCompactionSerializer(allow_null=True)
    usage = UsageOutSerializer()


# ---- usage reports ----------------------------------------------------------------------------


class UsageInSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    # Bounded so that the sum still fits the database's integer columns.
    input_tokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS)
    output_tokens = serializers.IntegerField(min_value=0, max_value=MAX_TOKENS, required=False, default=0)
    cache_read_input_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_TOKENS, required=False, allow_null=True, default=0
    )
    cache_creation_input_tokens = serializers.IntegerField(
        min_value=0, max_value=MAX_TOKENS, required=False, allow_null=True, default=0
    )
    stop_reason = serializers.CharField(max_length=64, required=False, allow_null=True, allow_blank=True, default=None)
    model = serializers.CharField(max_length=100, required=False, allow_blank=True, allow_null=True, default=None)
    message_seq = serializers.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        required=False,
        allow_null=True,
        default=None,
        help_text="The assistant reply this usage belongs to; default: the newest message if it is an assistant reply.",
    )

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        for name in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            values[name] = values.get(name) or 0
        return values


class UsageReportOutSerializer(serializers.Serializer):
    usage = UsageOutSerializer()
    message_seq = serializers.IntegerField(
        allow_null=True, help_text="The assistant message the report was attached to."
    )
    dropped_tool_use_ids = serializers.ListField(
        child=serializers.CharField(), help_text="stop_reason max_tokens: truncated tool_use blocks no longer served."
    )
    compaction = CompactionJobSerializer(allow_null=True)


# ---- context breakdown ------------------------------------------------------------------------


class BreakdownSegmentSerializer(serializers.Serializer):
    key = serializers.ChoiceField(choices=["system", "fixed", "summary", "messages", "free", "reserve"])
    label = serializers.CharField()
    tokens = serializers.IntegerField(help_text="On the meter's (provider's) scale.")
    estimated_tokens = serializers.IntegerField(
        allow_null=True, help_text="Compactor's own count of this part; null for parts it does not count."
    )
    percent = serializers.FloatField(help_text="Share of the window (of `tokens` when past the window).")
    inferred = serializers.BooleanField(help_text="Derived from provider usage reports rather than counted.")
    note = serializers.CharField(help_text="Where the figure comes from.")


class BreakdownPrunedSerializer(serializers.Serializer):
    prune_before_seq = serializers.IntegerField(
        allow_null=True, help_text="The prune boundary; null when only the kept plan trims the kept messages."
    )
    tool_results_pruned = serializers.IntegerField(
        allow_null=True, help_text="Known for a prune-only compaction and for a kept plan."
    )
    kept_trimmed = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Kept tool results the compaction serves lean, by rule: same (a pointer to an earlier copy), "
        "superseded (a file read made out of date), long (a search or listing), old (older output); {} when none.",
    )
    saved_tokens = serializers.IntegerField(help_text="Not in the context: stored − served, on the meter's scale.")
    saved_estimated_tokens = serializers.IntegerField(help_text="The same in Compactor's own count.")


class BreakdownReportSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField(help_text="input + cache read + cache write.")
    input_tokens = serializers.IntegerField()
    cache_read_input_tokens = serializers.IntegerField()
    cache_creation_input_tokens = serializers.IntegerField()
    reported_at = serializers.DateTimeField(allow_null=True)
    message_seq = serializers.IntegerField(allow_null=True)
    current = serializers.BooleanField(
        help_text="The meter is this report + the estimate of what came after; false once a compaction "
        "changed what is served."
    )
    calibrated = serializers.BooleanField(help_text="False for a report of a call made before the active compaction.")


class ContextBreakdownOutSerializer(serializers.Serializer):
    tokens = serializers.IntegerField(source="breakdown.used_tokens", help_text="The meter: usage.tokens.")
    estimated_tokens = serializers.IntegerField(
        source="breakdown.estimated_tokens", help_text="Compactor's own count of system + summary + kept messages."
    )
    calibrated_estimate_tokens = serializers.IntegerField(
        allow_null=True, help_text="fixed + ratio × estimated_tokens: the estimate on the provider's scale."
    )
    context_window = serializers.IntegerField(source="breakdown.context_window")
    trigger_tokens = serializers.IntegerField(source="breakdown.trigger_tokens")
    auto_compact = serializers.BooleanField()
    tokens_left_before_compact = serializers.IntegerField(
        source="breakdown.tokens_left_before_compact", help_text="trigger − tokens; negative past the trigger."
    )
    percent_left_before_compact = serializers.FloatField(
        source="breakdown.percent_left_before_compact", help_text="tokens_left_before_compact / window × 100."
    )
    over_window_tokens = serializers.IntegerField(source="breakdown.over_window_tokens")
    scale = serializers.FloatField(
        source="breakdown.scale", help_text="Provider tokens per Compactor token applied to the counted parts."
    )
    calibration_reports = serializers.IntegerField(source="reports")
    segments = BreakdownSegmentSerializer(
        many=True,
        help_text="system, fixed, summary, messages add up to `tokens`; with free and reserve to the window.",
    )
    pruned = serializers.SerializerMethodField()
    last_report = BreakdownReportSerializer(allow_null=True)
    source = serializers.CharField(source="usage.source")
    warning = serializers.CharField(help_text="A plausibility warning about the last usage report, or empty.")

    @extend_schema_field(BreakdownPrunedSerializer(allow_null=True))
    def get_pruned(self, sb) -> dict | None:
        pruned = sb.breakdown.pruned
        if pruned is None:
            return None
        return {
            "prune_before_seq": sb.prune_before_seq,
            "tool_results_pruned": sb.tool_results_pruned,
            "kept_trimmed": sb.kept_trimmed,
            "saved_tokens": pruned.saved_tokens,
            "saved_estimated_tokens": pruned.saved_estimated_tokens,
        }
