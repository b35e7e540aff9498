"""How the handoff tells what happened to files: how often a file was edited (a count a reader
can check) and the files it only names, changed ones apart from deleted ones."""

from __future__ import annotations

from compaction.core.summarizers.extractive.standing import listing
from compaction.core.summarizers.extractive.view import View
from compaction.core.work.state import FileRecord


def times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def edited(v: View, rec: FileRecord, *, more: bool = False) -> str:
    """How often a file was edited, as a count a reader can check: the edit tool's calls are
    counted; what shell commands did (`sed -i`, a script) is told by where (#a–#b)."""
    n, tool = rec.edits - more, rec.tool_edits - more  # a file written whole: the write was the tool's
    seqs = rec.edit_seqs[-n:] if n <= len(rec.edit_seqs) else [rec.first, rec.last]
    where = v.cite(seqs[0], seqs[-1])
    if tool == n:
        return f"edited {times(n)}{' more' if more else ''}" + (f" ({where})" if n > 1 else "")
    if not tool:
        return f"changed by shell commands ({where})" if n > 1 else f"changed by a shell command ({where})"
    return f"edited {where}, {times(tool)} with the edit tool and also by shell commands"


def also_named(v: View, recs: list[FileRecord], limit: int) -> list[str]:
    """The files named only: the changed ones, then the deleted ones (a deleted file is gone,
    not changed)."""
    out = []
    for label, group in (
        ("Also changed", [r for r in recs if r.state != "deleted"]),
        ("Also deleted", [r for r in recs if r.state == "deleted"]),
    ):
        if group:
            out.append(f"{label} ({len(group)}): " + listing([v.path(r.path) for r in group], limit))
    return out
