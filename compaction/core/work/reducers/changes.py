"""What changed between two moments: the edits and commands between a failure and a pass."""

from __future__ import annotations

from compaction.core.work.parse import one_line
from compaction.core.work.state import FileRecord, WorkState

MAX_FILES = 3
MAX_COMMANDS = 2


def _edit_told(rec: FileRecord, since: int, until: int) -> str:
    """A file's edit between two moments with what the agent said it was for, when it did."""
    name = f"`{rec.path.rsplit('/', 1)[-1]}`"
    said = next((q.text for q in reversed(rec.purposes) if since < q.seq < until), "")
    if said:
        return f'{name} ("{one_line(said, 120)}")'
    done = next((q.text for q in reversed(rec.changes) if since < q.seq < until), "")
    return f"{name} ({done})" if done else name


def changes_since(state: WorkState, since: int, until: int, *, detail: bool = False) -> str:
    """The files edited and the commands that changed something after `since` and before
    `until` (message numbers), briefly: "edits to `a.py`, `b.py`; ran `npm install x`"; with
    `detail`, each edit with the purpose the agent stated for it."""
    edited = sorted(
        (
            r
            for r in state.files.values()
            if since < r.last < until and r.edits and not r.change.startswith("changed by")
        ),
        key=lambda r: r.last,
    )
    commands = list(dict.fromkeys(q.text for q in state.recent if since < q.seq < until))
    said = []
    if edited:
        names = ", ".join(
            _edit_told(r, since, until) if detail else f"`{r.path.rsplit('/', 1)[-1]}`" for r in edited[-MAX_FILES:]
        )
        more = f" and {len(edited) - MAX_FILES} more" if len(edited) > MAX_FILES else ""
        said.append(f"edits to {names}{more}")
    if commands:
        said.append("ran " + ", ".join(f"`{one_line(c, 90)}`" for c in commands[-MAX_COMMANDS:]))
    return "; ".join(said)
