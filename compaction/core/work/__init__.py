"""A model of the work in a conversation: events → reducers → typed state.

    state = fold(messages)                # the whole history
    state = fold(later, previous_state)   # a later compaction continues the earlier fold

The state is what a handoff is rendered from (compaction.core.summarizers.extractive), what
the LLM summarizer's output is checked against, and what is stored on a compaction (JSON,
versioned) for the next one to continue. Pure Python: no Django, no clock, no network.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from compaction.core.paths import agents_own, project_root
from compaction.core.types import FileOps, Msg
from compaction.core.work.events import events_of
from compaction.core.work.reducers import apply
from compaction.core.work.serialize import from_json, to_json
from compaction.core.work.state import STATE_VERSION, WorkState


def fold(messages: Iterable[Msg], state: WorkState | None = None) -> WorkState:
    """`state` (a new one when None) with `messages` folded in; a message at or before
    `state.through` was folded already and is skipped. `state` is not modified: the result is
    a copy."""
    state = copy.deepcopy(state) if state is not None else WorkState()
    for msg in messages:
        if state.folded and msg.seq <= state.through:
            continue
        state.folded += 1
        for event in events_of(msg, state.turn.pending):
            apply(state, event)
        state.through = msg.seq
    return state


def work_root(state: WorkState) -> str:
    """The project's directory (paths.project_root): from the files the work changed and saw,
    the directories the shell was told to be in, and the paths the tasks name relative to it."""
    changed = [p for p, rec in state.files.items() if rec.edits or rec.state != "read"]
    named = [p for task in state.tasks.tasks.values() for p in (*task.outputs, *task.touches)]
    return project_root(changed, list(state.files), state.git.dirs, named)


def file_ops(state: WorkState) -> FileOps:
    """The files the work changed (created, edited, moved, deleted) and those it only read, in
    the order they were last touched: the summary's <modified-files> and <read-files>."""
    records = sorted(state.files.values(), key=lambda r: r.last)
    # A file written in this history and deleted again (a reproduction script) changed nothing;
    # a file of the agent's own deleted (~/.pi/agent/themes/x.json) is no change of the project.
    own = {r.path for r in records if agents_own(r.path)}
    gone = {
        r.path for r in records if r.state == "deleted" and (r.created or r.empty or r.path in own) and not r.commits
    }
    changed = [r.path for r in records if (r.edits or r.state != "read") and r.path not in gone]
    return FileOps(read=[r.path for r in records if r.state == "read" and not r.edits], modified=changed)


def work_start(state: WorkState) -> int | None:
    """Where the work in progress began: the seq at which the task now in progress (an epic is
    not: its children are worked on) went in progress, the earliest if several are; None when
    no task is in progress. The policy keeps the messages from there verbatim."""
    tasks = state.tasks.tasks.values()
    parents = {t.parent for t in tasks if t.parent}
    starts = [t.started or t.since for t in tasks if t.status == "in_progress" and t.key not in parents]
    return min(starts) if starts else None


__all__ = ["STATE_VERSION", "WorkState", "file_ops", "fold", "from_json", "to_json", "work_root", "work_start"]
