"""Compaction services (Django glue around compaction.core), one module per concern:

- `common`: strategies, CompactionError, events, the hand-off to the broker, `describe`
- `jobs`: request, the auto-compaction decision (and "append / usage report, then maybe
  compact"), run, the Celery task's body, the sweeper
- `planning`: snapshot the session, let compaction.core.policy choose, produce the outcome
  (summarizer chain), the dry run (no writes)
- `activation`: write a job's outcome and activate it atomically; undo
- `overflow`: compact at once when the provider reported a context overflow
- `importing`: record another agent's compaction; replay a recorded transcript

Dependencies point one way (docs/architecture.md): the message store (sessions.services) is
below this package and never imports it; the API, dashboard, admin, gateway and Celery tasks
are above it. Tasks are enqueued by name, so nothing here imports compaction.tasks. Every name
callers need is importable from `compaction.services`; the modules' other public names are for
the package's own modules (and tests that replace them where they live).
"""

from __future__ import annotations

from .activation import compaction_revert
from .common import STRATEGIES, CompactionError, describe, requeue_queued_after, skip_reason
from .jobs import (
    HandBackPending,
    compaction_maybe_auto,
    compaction_maybe_auto_safely,
    compaction_recover_orphans,
    compaction_request,
    compaction_run,
    compaction_run_unless_replaying,
    compaction_sweep_stuck,
    messages_append_then_compact,
    usage_report_then_compact,
)
from .overflow import compaction_overflow
from .planning import compaction_dry_run
from .replay import (
    ReplayResult,
    ReplayStep,
    compaction_record_import,
    reported_prompt_tokens,
    transcript_messages_for_api,
    transcript_replay,
    usage_report_recorded,
)

__all__ = [
    "HandBackPending",
    "STRATEGIES",
    "CompactionError",
    "ReplayResult",
    "ReplayStep",
    "compaction_dry_run",
    "requeue_queued_after",
    "compaction_maybe_auto",
    "compaction_maybe_auto_safely",
    "compaction_overflow",
    "compaction_record_import",
    "compaction_recover_orphans",
    "compaction_request",
    "compaction_revert",
    "compaction_run",
    "compaction_run_unless_replaying",
    "compaction_sweep_stuck",
    "describe",
    "skip_reason",
    "messages_append_then_compact",
    "reported_prompt_tokens",
    "transcript_messages_for_api",
    "transcript_replay",
    "usage_report_recorded",
    "usage_report_then_compact",
]
