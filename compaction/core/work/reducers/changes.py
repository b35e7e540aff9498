"""What changed between two moments: the edits and commands between a failure and a pass."""

from __future__ import annotations

from compaction.core.work.parse import one_line
from compaction.core.work.state import WorkState

MAX_FILES = 3
MAX_COMMANDS = 2


def changes_since(state: WorkState, since: int, until: int) -> str:
    """The files edited and the commands that changed something after `since` and before
    `until` (message numbers), briefly: "edits to `a.py`, `b.py`; ran `npm install x`"."""
    edited = sorted((rec for rec in state.files.values() if since < rec.last < until and rec.edits), key=lambda r: r.last)
    commands = list(dict.fromkeys(q.text for q in state.recent if since < q.seq < until))
    said = []
    if edited:
        names = ", ".join(f"`{rec.path.rsplit('/', 1)[-1]}`" for rec in edited[-MAX_FILES:])
        more = f" and {len(edited) - MAX_FILES} more" if len(edited) > MAX_FILES else ""
        said.append(f"edits to {names}{more}")
    if commands:
        said.append("ran " + ", ".join(f"`{one_line(c, 90)}`" for c in commands[-MAX_COMMANDS:]))
    return "; ".join(said)
