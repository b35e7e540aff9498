"""The reducers: one per domain, each folding events into its part of the state.

`apply` hands every event to the domains it concerns, in a fixed order: a call first changes
files, then git (a commit takes the files just changed), tasks, checks (a pass after a failure
looks at the files changed in between), errors (settled by the check), decisions, then the
turn. A reducer may read other domains; it writes its own, except where one fact belongs to
two (a commit marks the files it took as committed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compaction.core.text_heuristics import (
    DIAGNOSTIC_LINE_RE,
    chain_links,
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
from compaction.core.work.parse import BACKGROUND_RE, counted, one_line, run_outcome
from compaction.core.work.reducers import background, checks, decisions, errors, files, git, people, tasks, turn
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


CallReducer = Callable[[WorkState, Call, Outcome], None]
CALL_REDUCERS: tuple[CallReducer, ...] = (
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
        kind = check_kind(command)
        job = BACKGROUND_RE.search(call.output[:1000]) if not call.is_error else None
        if job:
            # The harness started it in the background: it runs on, with no outcome yet.
            why = f"was started in the background (ID `{job.group(1)}`): no result seen"
            return Outcome(None, command=command, check=kind, probe=probe, unknown=why, job=job.group(1))
        count = counted(call.command, call.output) if kind and not call.is_error else ""
        if count:
            # A pipeline ending in `wc -l` prints a count and exits with the counter's status.
            return Outcome(None, command=command, check=kind, probe=probe, unknown=f"printed {count}")
        ok, tally, error = run_outcome(call.output, call.is_error)
        if probe:
            # A grep without matches "fails" with status 1: an answer. Only a real error line
            # ("No such file or directory") makes a look a failure.
            real = command_error_lines(call.name, call.command, call.output, is_error=True) if call.is_error else []
            ok, error = not real, real[0] if real else ""
        if not ok and NOTHING_TO_COMMIT_RE.search(call.output) and GIT_COMMIT_RE.search(command):
            ok, error = True, ""
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


def chain_runs(call: Call, outcome: Outcome) -> list[tuple[Call, Outcome]]:
    """The checks an `a && b` chain ran before its last command, each as a run of its own: a
    later command of the chain ran only if they exited 0, so they passed when the chain's own
    exit status (0) or the last check's tally shows that it got that far. A check whose status
    a pipe hid (`a | tail && b`) or that printed findings is left out: its outcome is not shown."""
    if call.command is None or not outcome.check or outcome.ok is None:
        return []
    lines = call.command.strip().splitlines()
    links = chain_links(lines[0]) if len(lines) == 1 else []
    if len(links) < 2 or any(sep != "&&" for sep, _part in links[1:]):
        return []
    reached = bool(outcome.ok) or bool(outcome.tally and check_kind(links[-1][1]) == "test")
    if not reached:
        return []
    # The chain's last check is the run the call itself is (checks.check_key): the ones before it.
    last = max((i for i, (_sep, part) in enumerate(links) if check_kind(part)), default=0)
    runs = []
    for _sep, part in links[:last]:
        kind = check_kind(part)
        if not kind or "|" in part or (kind == "test" and not outcome.ok):
            continue
        if kind in ("lint", "typecheck") and findings_of(call.output):
            continue
        runs.append(
            (
                replace(call, command=part, output="", is_error=False),
                Outcome(True, command=clean_command(part), check=kind, probe=is_probe(part)),
            )
        )
    return runs


def _take(state: WorkState, event: Call, reducers: tuple[CallReducer, ...] = CALL_REDUCERS) -> None:
    outcome = background.outcome(state, event, outcome_of(event))
    state.calls += 1
    if outcome.command:
        git.follow_cd(state, outcome.command)  # paths in the command are relative to it
    for part, shown in chain_runs(event, outcome):
        checks.on_call(state, part, shown)
        errors.on_call(state, part, shown)
    for reducer in reducers:
        reducer(state, event, outcome)
    background.on_call(state, event, outcome)


def apply(state: WorkState, event: Event) -> None:
    if isinstance(event, Call):
        # A poll that shows a background job ended is that job's run.
        _take(state, background.ended(state, event) or event)
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
        run = background.noticed(state, event)
        if run is not None:
            # The harness's notice that a job ended: its run, not a call of the turn.
            _take(state, run, tuple(r for r in CALL_REDUCERS if r is not turn.on_call))
