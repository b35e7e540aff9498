"""What changed between two moments: the edits and commands between a failure and a pass."""

from __future__ import annotations

from compaction.core.work.parse import one_line
from compaction.core.work.state import FileRecord, WorkState

MAX_FILES = 3
MAX_COMMANDS = 2
# A fix's commands are told briefly: what ran, not its whole script (the message number is cited).
CITED_COMMAND_CHARS = 50


def _edit_told(rec: FileRecord, since: int, until: int) -> str:
    """A file's edit between two moments with what the agent said it was for, when it did."""
    name = f"`{rec.path.rsplit('/', 1)[-1]}`"
    said = next((q.text for q in reversed(rec.purposes) if since < q.seq < until), "")
    if said:
        return f'{name} ("{one_line(said, 120)}")'
    done = next((q.text for q in reversed(rec.changes) if since < q.seq < until), "")
    return f"{name} ({done})" if done else name


def _edits_between(rec: FileRecord, since: int, until: int) -> list[int]:
    """The message numbers of a file's changes after `since` and before `until` (a file changed
    in between and again later was changed in between too)."""
    seqs = [s for s in rec.edit_seqs if since < s < until]
    return seqs or ([rec.last] if since < rec.last < until else [])


def changes_since(state: WorkState, since: int, until: int, *, detail: bool = False, cite: bool = False) -> str:
    """The files edited and the commands that changed something after `since` and before
    `until` (message numbers), briefly: "edits to `a.py`, `b.py`; ran `npm install x`"; with
    `detail`, each edit with the purpose the agent stated for it; with `cite`, the edits' message
    numbers ("edits to `a.py` and 2 more (#12–#30)"): every file changed in between is named or
    counted, none credited alone."""
    between = {
        r.path: seqs
        for r in state.files.values()
        if r.edits and not r.change.startswith("changed by") and (seqs := _edits_between(r, since, until))
    }
    edited = sorted((state.files[p] for p in between), key=lambda r: between[r.path][-1])
    commands = list(dict.fromkeys(q.text for q in state.recent if since < q.seq < until))
    said = []
    if edited:
        names = ", ".join(
            _edit_told(r, since, until) if detail else f"`{r.path.rsplit('/', 1)[-1]}`" for r in edited[-MAX_FILES:]
        )
        more = f" and {len(edited) - MAX_FILES} more" if len(edited) > MAX_FILES else ""
        seqs = sorted(s for found in between.values() for s in found)
        at = (f" (#{seqs[0]})" if seqs[0] == seqs[-1] else f" (#{seqs[0]}–#{seqs[-1]})") if cite else ""
        said.append(f"edits to {names}{more}{at}")
    if commands:
        limit = CITED_COMMAND_CHARS if cite else 90
        said.append("ran " + ", ".join(f"`{one_line(c, limit)}`" for c in commands[-MAX_COMMANDS:]))
    return "; ".join(said)
