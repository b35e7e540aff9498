"""The message store's writes: sessions, appends, usage reports, the meter, the served context.

- `config`: a session's resolved compaction settings, their validation, its tokenizer.
- `sessions`: create, change, delete a session.
- `append`: append messages (the hot path: row lock, gap-free seq, tool-pair checks).
- `usage`: provider usage reports, which calibrate the meter.
- `meter`: the one usage figure (`session_usage`) and its stored columns.
- `served` / `context`: how messages are served, the served context and its recount.

Reads of the served context for callers outside the store are in `sessions.selectors`
(`context_build`). Callers import from this package; its modules share public names only.
"""

from __future__ import annotations

from .append import MAX_BATCH, AppendResult, messages_append
from .config import compaction_settings_errors, session_config, session_tokenizer
from .context import (
    ServedContext,
    ServedMessage,
    context_messages,
    context_messages_both,
    overlay_kept_plan,
    served_context,
    served_summary_tokens,
    session_recompute_usage,
    summary_message_count,
)
from .meter import Usage, session_meter_refresh, session_usage, usage_sample_record
from .served import STOP_MAX_TOKENS, TRUNCATED_NOTE, served_content, truncated_content
from .sessions import session_create, session_delete, session_update
from .usage import UsageReportResult, usage_report

__all__ = [
    "MAX_BATCH",
    "STOP_MAX_TOKENS",
    "TRUNCATED_NOTE",
    "AppendResult",
    "ServedContext",
    "ServedMessage",
    "Usage",
    "UsageReportResult",
    "compaction_settings_errors",
    "context_messages",
    "context_messages_both",
    "messages_append",
    "overlay_kept_plan",
    "served_content",
    "served_context",
    "served_summary_tokens",
    "session_config",
    "session_create",
    "session_delete",
    "session_meter_refresh",
    "session_recompute_usage",
    "session_tokenizer",
    "session_update",
    "session_usage",
    "summary_message_count",
    "truncated_content",
    "usage_report",
    "usage_sample_record",
]
