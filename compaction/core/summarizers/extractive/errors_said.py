"""What the history shows after a failure: the earlier runs that printed the same line and the
agent's reading of them, a later run of the same check (again, through a filter, or with other
arguments) and a later clean pass of a check of its kind (split out of standing.py)."""

from __future__ import annotations

from compaction.core.summarizers.extractive.standing import code
from compaction.core.summarizers.extractive.view import TERSE, View
from compaction.core.text_heuristics import run_covers
from compaction.core.work.reducers.errors import AGAIN
from compaction.core.work.state import Check, ErrorRecord, Quote


def superseded_by(v: View, error: ErrorRecord) -> tuple[Check, tuple[int, str, str]] | None:
    """The latest clean pass, after a failed check, of a check of its kind (a type check after a
    type check) over the whole project in the directory the failure ran in: the project's own
    verdict after it. The check and its pass (message number, command, filter)."""
    own = v.state.checks.get(error.key.removeprefix("check:")) if error.key.startswith("check:") else None
    if own is None:
        return None
    found = [
        (c, c.passes[error.where])
        for c in v.checks
        if c.kind == own.kind and error.where in c.passes and c.passes[error.where][0] > error.seq
    ]
    return max(found, key=lambda pair: pair[1][0], default=None)


def printed_before(v: View, error: ErrorRecord) -> str:
    """The earlier runs of the same command line that printed this very line, each followed by an
    attempt that did not get past it: "; the same error before it at #13, #15" ("" for none)."""
    before = [
        e.seq
        for e in v.state.errors
        if e.status == AGAIN
        and (e.key, e.source, e.line) == (error.key, error.source, error.line)
        and e.seq < error.seq
    ]
    return f"; the same error before it at {', '.join(v.cite(s) for s in before)}" if before else ""


def reading_before(v: View, error: ErrorRecord) -> Quote | None:
    """The agent's reading of the latest earlier run that printed this very line (told beside
    "the same error before it at #N": the attempt it led to is that run's, and it failed)."""
    return next(
        (
            e.diagnosis
            for e in reversed(v.state.errors)
            if e.status == AGAIN and e.diagnosis and (e.key, e.source, e.line) == (error.key, error.source, error.line)
        ),
        None,
    )


def unsettled_said(v: View, error: ErrorRecord) -> str:
    """What the history shows after a failure no run settled: the same command line run again
    only through a filter (its other errors unseen), a later run of the check with other
    arguments (another run, not this one again), or none; then a later pass of a check of the
    same kind over the whole project in the same directory, when there is one."""
    later = v.state.checks.get(error.key.removeprefix("check:")) if error.key.startswith("check:") else None
    said = " — not run again after it"
    if later is not None and later.seq > error.seq:
        same = run_covers(later.command, error.source) and run_covers(error.source, later.command)
        if not same:
            said = f" — not run again with these arguments (a later {code(later.key, 40)} run, {v.cite(later.seq)}, had others)"
        else:
            said = f" — run again ({v.cite(later.seq)})"
            said += f" only through `{later.piped}`: its other errors unseen" if later.piped else ""
    found = superseded_by(v, error)
    if found is not None:
        check, (seq, _command, piped) = found
        # Where it ran, as run: "the whole project" would read as more than that directory.
        where = f"in {v.path(error.where)}" if error.where else "in the same directory"
        verdict = f"printed no failure at {v.cite(seq)}" if piped else f"passed at {v.cite(seq)}"
        if v.level >= TERSE:
            return said + f"; later {code(check.key, 40)} {where} {verdict}"
        piped_said = f" (through `| {piped}`)" if piped else ""
        said += f"; a later {check.kind}, {code(check.key, 40)} with no file arguments {where}, {verdict}{piped_said}"
    return said
