"""Compaction services (Django glue around compaction.core), one module per concern:

- `common`: strategies, CompactionError, events, the broker hand-off, `describe`
- `jobs`: request, the auto-compaction decision (and "append / usage report, then maybe
  compact"), run, the sweeper
- `planning`: snapshot, prune or cut + summarize, the dry run (no writes)
- `activation`: write a job's outcome and activate it atomically; undo
- `overflow`: compact at once when the provider reported a context overflow
- `importing`: record another agent's compaction; replay a recorded transcript

Dependencies point one way: sessions.services (message store, served context, meter) is
below this package and never imports it; the API, dashboard, admin and tasks are above.
Every public name is importable from `compaction.services`.
"""

from __future__ import annotations

from compaction.models import IN_FLIGHT

from .activation import compaction_revert
from .common import (
    REQUEUE_QUEUED_AFTER,
    STRATEGIES,
    CompactionError,
    _deadline_seconds,
    describe,
)
from .importing import (
    ReplayResult,
    ReplayStep,
    _reported_prompt_tokens,
    compaction_record_import,
    transcript_messages_for_api,
    transcript_replay,
    usage_report_recorded,
)
from .jobs import (
    LOOP_GUARD_MIN_NEW_TOKENS,
    LOOP_GUARD_TRIGGER_SHARE,
    compaction_maybe_auto,
    compaction_request,
    compaction_run,
    compaction_sweep_stuck,
    loop_guard_new_tokens,
    messages_append_then_compact,
    usage_report_then_compact,
)
from .overflow import compaction_overflow
from .planning import (
    KEEP_FLOOR_TOKENS,
    SUMMARY_BASE_TOKENS,
    SUMMARY_SHARE,
    TARGET_AFTER_SHARE,
    build_summarizer_chain,
    compaction_dry_run,
)

__all__ = [
    "IN_FLIGHT",
    "REQUEUE_QUEUED_AFTER",
    "KEEP_FLOOR_TOKENS",
    "LOOP_GUARD_MIN_NEW_TOKENS",
    "LOOP_GUARD_TRIGGER_SHARE",
    "STRATEGIES",
    "SUMMARY_BASE_TOKENS",
    "SUMMARY_SHARE",
    "TARGET_AFTER_SHARE",
    "CompactionError",
    "ReplayResult",
    "ReplayStep",
    "_deadline_seconds",
    "_reported_prompt_tokens",
    "build_summarizer_chain",
    "compaction_dry_run",
    "compaction_maybe_auto",
    "compaction_overflow",
    "compaction_record_import",
    "compaction_request",
    "compaction_revert",
    "compaction_run",
    "compaction_sweep_stuck",
    "describe",
    "loop_guard_new_tokens",
    "messages_append_then_compact",
    "transcript_messages_for_api",
    "transcript_replay",
    "usage_report_recorded",
    "usage_report_then_compact",
]
