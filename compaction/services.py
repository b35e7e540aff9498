"""Compaction services (Django glue around compaction.core). The engine lands in issue 3."""

from __future__ import annotations


def compaction_maybe_auto(*, session, now=None):
    """Enqueue an auto compaction when the session's usage crossed its trigger. Returns the job or None."""
    return None
