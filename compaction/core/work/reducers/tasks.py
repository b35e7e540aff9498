"""Tasks with a lifecycle: tracker items (bd, gh, glab, jira, linear) and the agent's todo list."""

from __future__ import annotations

import re

from compaction.core.text_heuristics import sentences
from compaction.core.vocabulary import TRACKER_CMD_RE, tracker_changes
from compaction.core.work.events import Call, Narration
from compaction.core.work.parse import TrackerItem, close_reason, one_line, todos_of, tracker_items
from compaction.core.work.reducers.files import PURPOSE_RE
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Quote, Task, WorkState

TODO_STATUS = {"completed": "closed", "done": "closed", "cancelled": "closed", "in_progress": "in_progress"}
_CREATED_RE = re.compile(r"(?:Created issue|Created)\s*:?\s*([A-Za-z][\w-]*-[\w.]+)")
_TITLE_ARG_RE = re.compile(r"""(?:--title[= ]|create\s+)(?:"([^"]+)"|'([^']+)')""")
# "task 3" in the agent's words: the child `.3` of the epic being worked on (a tracker that
# numbers an epic's children, as bd's `proj-gqc.3`, is read by that number).
_TASK_NUMBER_RE = re.compile(r"(?i)\btask\s+#?(\d+)\b")


def set_status(task: Task, status: str, seq: int) -> None:
    if status == task.status:
        return
    task.status, task.since = status, seq
    if status == "closed":
        task.closed = seq
    elif status == "in_progress":
        task.started = task.started or seq
        task.closed = None
    else:
        task.closed = None


def _family(key: str) -> str:
    return key.split(".")[0]


def _shown(state: WorkState, tracker: str, item: TrackerItem, seq: int, result_seq: int) -> None:
    """What a tracker's output (the call at `seq`, its output in the message `result_seq`)
    shows of one item."""
    tasks = state.tasks.tasks
    task = tasks.get(item.key)
    if task is None:
        families = {_family(k) for k, t in tasks.items() if t.source != "todo"}
        if item.listed and _family(item.key) not in families:
            return  # a row of the backlog: not part of this work
        parent = _family(item.key) if _family(item.key) != item.key else ""
        task = tasks[item.key] = Task(item.key, item.title, tracker, item.status or "open", seq, seq, parent=parent)
        if task.status == "closed":
            task.closed = seq
    task.title = task.title or item.title
    if not task.note and item.note:
        task.note, task.note_seq = item.note, result_seq  # the message holding the text
    task.outputs = task.outputs or item.outputs
    task.touches = task.touches or item.touches
    if item.blocked_by is not None:
        task.blocked_by = item.blocked_by
    if item.status:
        set_status(task, item.status, seq)


def _tracker(state: WorkState, call: Call, outcome: Outcome, tracker: str) -> None:
    items = tracker_items(call.output)
    for item in items:
        _shown(state, tracker, item, call.seq, call.result_seq)
    # What `bd show` says an item blocks: each of those is blocked by it.
    for item in items:
        for key in item.blocks:
            blocked = state.tasks.tasks.get(key)
            if blocked is not None and item.key not in blocked.blocked_by:
                blocked.blocked_by = [*blocked.blocked_by, item.key]
    if not outcome.ok:
        return
    tasks = state.tasks.tasks
    for created in _CREATED_RE.findall(call.output[:2000]):
        if created in tasks and tasks[created].opened == call.seq:
            tasks[created].filed = True  # shown by the same call that created it
        if created not in tasks:
            title = _TITLE_ARG_RE.search(outcome.command)
            tasks[created] = Task(
                created,
                one_line((title.group(1) or title.group(2)) if title else "", 100),
                tracker,
                "open",
                call.seq,
                call.seq,
                filed=True,
            )
    reason = close_reason(outcome.command)
    for _tracker_name, key, status in tracker_changes(outcome.command):
        task = tasks.get(key)
        if task is None:
            task = tasks[key] = Task(key, "", tracker, "open", call.seq, call.seq)
        set_status(task, status, call.seq)
        if status == "closed" and reason:
            task.reason = reason


def _todos(state: WorkState, call: Call) -> None:
    items = todos_of(call.args)
    if items is None:
        return
    tasks = state.tasks.tasks
    old = {k: t for k, t in tasks.items() if t.source == "todo"}
    for key in old:
        del tasks[key]
    for status, text in items:
        key = "todo:" + text[:80]
        task = old.get(key) or Task(key, text, "todo", "open", call.seq, call.seq)
        set_status(task, TODO_STATUS.get(status, "open"), call.seq)
        if status == "cancelled":
            task.note = "cancelled"
        tasks[key] = task
    state.tasks.todo_seq = call.seq


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if outcome.ok is None:
        return
    if call.kind == "todo":
        _todos(state, call)
    elif call.kind == "shell":
        tracker = TRACKER_CMD_RE.search(outcome.command)
        if tracker:
            _tracker(state, call, outcome, tracker.group(1))


def _names(sentence: str, key: str) -> bool:
    """Whether `sentence` names the task `key` (not a longer id it begins: `proj-gqc.3`)."""
    at = sentence.find(key)
    while at >= 0:
        after = sentence[at + len(key) : at + len(key) + 2]
        if not (after[:1].isalnum() or after[:1] in "._-" and after[1:2].isalnum()):
            return True
        at = sentence.find(key, at + 1)
    return False


def on_narration(state: WorkState, event: Narration) -> None:
    """The agent's words announcing work on a tracker task the tracker still shows open ("Now
    implement proj-gqc.3", "Now implement Task 3" of the epic in progress): it took the task on,
    whatever its status says. Told only with the edits that followed (the summary checks)."""
    tasks = [t for t in state.tasks.tasks.values() if t.source != "todo"]
    working = {_family(t.key) for t in tasks if t.status == "in_progress"}
    if not working:
        return
    for sentence in sentences(event.text):
        said = sentence.replace("**", "").strip()
        if not PURPOSE_RE.search(said):
            continue
        numbers = _TASK_NUMBER_RE.findall(said)
        for task in tasks:
            if task.status not in ("open", "blocked") or task.started or task.begun is not None:
                continue
            numbered = _family(task.key) in working and any(task.key.endswith(f".{n}") for n in numbers)
            if numbered or _names(said, task.key):
                task.begun = Quote(event.seq, one_line(said, 200))
