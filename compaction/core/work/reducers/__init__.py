"""The reducers: one per domain, each folding events into its part of the state.

`apply` hands every event to the domains it concerns, in a fixed order: a call first changes
files, then git (a commit takes the files just changed), tasks, checks (a pass after a failure
looks at the files changed in between), errors (settled by the check), decisions, then the
turn. A reducer may read other domains; it writes its own, except where one fact belongs to
two (a commit marks the files it took as committed).
"""

from __future__ import annotations

from compaction.core.text_heuristics import (
    DIAGNOSTIC_LINE_RE,
    clean_command,
    command_error_lines,
    error_lines_of,
    strip_ansi,
)
from compaction.core.transcripts.base import MISSING_RESULT_TEXT
from compaction.core.vocabulary import (
    EDIT_REFUSED_RE,
    FINDINGS_RE,
    GIT_COMMIT_RE,
    NOTHING_TO_COMMIT_RE,
    READ_FAILED_RE,
    check_kind,
    is_probe,
)
from compaction.core.work.events import Call, Event, Injected, Narration, Said, TurnEnded
from compaction.core.work.parse import one_line, run_outcome
from compaction.core.work.reducers import checks, decisions, errors, files, git, people, tasks, turn
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import WorkState

# A checker's verdict is among its last lines.
VERDICT_LINES = 40


def printed_errors(output: str) -> list[str]:
    """The error lines a run printed: lines saying "error" and diagnostics (`a.ts(3,1): …`)."""
    text = strip_ansi(output)
    said = error_lines_of(text, is_error=False)
    located = [line.strip()[:300] for line in text.splitlines() if DIAGNOSTIC_LINE_RE.match(line.strip())]
    return said + [line for line in located if line not in said]


def findings_of(output: str) -> str:
    """The verdict line of a lint or type check that found something, or ""."""
    tail = "\n".join(strip_ansi(output).strip().splitlines()[-VERDICT_LINES:])
    found = [m.group(0).strip() for m in FINDINGS_RE.finditer(tail)]
    return one_line(found[-1], 200) if found else ""


CALL_REDUCERS = (
    people.on_call,
    files.on_call,
    git.on_call,
    tasks.on_call,
    checks.on_call,
    errors.on_call,
    decisions.on_call,
    turn.on_call,
)


def outcome_of(call: Call) -> Outcome:
    """How a call went, read once for every reducer."""
    if call.rejected or call.output.strip() == MISSING_RESULT_TEXT:
        return Outcome(None)  # refused, or no result recorded: it said nothing
    if call.command is not None:
        command = clean_command(call.command)
        probe = is_probe(command)
        ok, tally, error = run_outcome(call.output, call.is_error)
        if probe:
            # A grep without matches "fails" with status 1: an answer. Only a real error line
            # ("No such file or directory") makes a look a failure.
            real = command_error_lines(call.name, call.command, call.output, is_error=True) if call.is_error else []
            ok, error = not real, real[0] if real else ""
        if not ok and NOTHING_TO_COMMIT_RE.search(call.output) and GIT_COMMIT_RE.search(command):
            ok, error = True, ""
        kind = check_kind(command)
        if kind and ok and not call.is_error and checks.piped_through(call.command):
            # The exit status seen is the filter's: the check's verdict is what it printed.
            printed = printed_errors(call.output)
            if printed:
                return Outcome(False, tally if kind else "", printed[0], command, kind, probe)
        found = findings_of(call.output) if kind in ("lint", "typecheck") and ok else ""
        if found:
            # Warnings and suggestions are findings, not a pass (a pipe may have hidden the status).
            return Outcome(False, found, found, command, kind, probe, findings=True)
        # Only a check's tally counts ("create mode 100644 test/x" is no test count).
        return Outcome(ok, tally if kind else "", error, command, kind, probe)
    if call.kind == "read" and READ_FAILED_RE.search(call.output[:300]):
        return Outcome(False, error=call.output.strip().splitlines()[0][:240])
    if call.kind == "edit" and not call.is_error and EDIT_REFUSED_RE.search(call.output[:1000]):
        return Outcome(
            False, error=call.output.strip().splitlines()[0][:240] if call.output.strip() else "", refused=True
        )
    return Outcome(not call.is_error)


def apply(state: WorkState, event: Event) -> None:
    if isinstance(event, Call):
        outcome = outcome_of(event)
        state.calls += 1
        if outcome.command:
            git.follow_cd(state, outcome.command)  # paths in the command are relative to it
        for reducer in CALL_REDUCERS:
            reducer(state, event, outcome)
    elif isinstance(event, Said):
        people.on_said(state, event)
        turn.on_said(state, event)
    elif isinstance(event, Narration):
        turn.on_narration(state, event)
        errors.on_narration(state, event)
        tasks.on_narration(state, event)
    elif isinstance(event, TurnEnded):
        turn.on_turn_ended(state, event)
    elif isinstance(event, Injected):
        people.on_injected(state, event)
        turn.on_injected(state, event)
