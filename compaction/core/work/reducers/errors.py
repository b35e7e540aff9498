"""Errors: the exact line, open until a later run of the same thing succeeds, and what fixed it.

Only failures make errors: a passing run's warnings are not errors, and a refused tool call
(the person said no) is not a failure of the work.
"""

from __future__ import annotations

import re

from compaction.core.text_heuristics import (
    FENCED_BLOCK_RE,
    command_error_lines,
    command_signature,
    run_covers,
    sentences,
    strip_ansi,
    strip_error_tags,
)
from compaction.core.vocabulary import EXIT_CODE_RE, PIPE_FILTER_RE, PIPEFAIL_RE, READ_FAILED_RE
from compaction.core.work.events import Call, Narration
from compaction.core.work.parse import one_line
from compaction.core.work.reducers import decisions
from compaction.core.work.reducers.changes import changes_since
from compaction.core.work.reducers.checks import check_key, pass_covers
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import ErrorRecord, Quote, Streak, WorkState

MAX_LINES_PER_FAILURE = 2
MAX_ERROR_CHARS = 300
MAX_ERRORS = 60
MAX_TRIED = 5
MAX_STREAKS = 20
# What the agent says about a failure that explains it: a cause, a constraint, a missing piece.
DIAGNOSIS_RE = re.compile(
    r"(?i)\b(because|since|due to|the (?:issue|problem|cause|bug|reason|error) (?:is|was)|turns out|doesn'?t (?:support|exist|work|have|handle)|"
    r"does not|isn'?t|is not|aren'?t|can'?t|cannot|missing|requires?|not supported|not found|needs? to|expects?|"
    r"conflicts?|mismatch|undefined|wrong|instead of)\b"
)
BARE_TALLY_RE = re.compile(r"(?i)^\W*\d+ (?:tests?|examples?|failures?|failed|errors?|passed)\b[\w\s,;()./]*$")
_INTERJECTION_RE = re.compile(r"(?i)^(?:i see|right|ah|oh|hmm+|ok(?:ay)?|got it|good|great)\b[\s,.!:;—–-]*")


def error_key(call: Call, outcome: Outcome, cwd: str = "") -> str:
    """What settles an error: a later run of the same check or command, or of the same tool on
    the same file."""
    if outcome.check:
        return "check:" + check_key(outcome.command, cwd)
    if outcome.command:
        return "cmd:" + " ".join(command_signature(outcome.command))
    return f"{call.name}:{call.path or ''}"


def _source(call: Call, outcome: Outcome) -> str:
    """The command as run (the renderer quotes it), or "<tool> of <path>"."""
    if outcome.command:
        return outcome.command
    return f"{call.name} of {call.path}" if call.path else call.name


def _lines(call: Call, outcome: Outcome) -> list[str]:
    if outcome.probe:
        return [outcome.error.strip()[:MAX_ERROR_CHARS]]
    if outcome.command:
        lines = command_error_lines(call.name, call.command, call.output, is_error=True)
        lines = [outcome.error] + [line for line in lines if line != outcome.error] if outcome.error else lines
    else:
        first = next((ln.strip() for ln in strip_error_tags(call.output).splitlines() if ln.strip()), "")
        lines = [outcome.error or first]
    # "1 failure" alone says less than the error line beside it (the check keeps the tally).
    told = [line for line in lines if line and not BARE_TALLY_RE.match(line)] or [line for line in lines if line]
    # Exact, as printed (spacing included): an error line is never paraphrased.
    return [line.strip()[:MAX_ERROR_CHARS] for line in told][:MAX_LINES_PER_FAILURE]


def _settles(error: ErrorRecord, key: str, command: str) -> bool:
    if error.status != "open" or error.key != key:
        return False
    if key.startswith("check:"):
        # A check is fixed only by a run of its own targets or more.
        return pass_covers(command, error.source, key.removeprefix("check:"))
    return True


def _resolve(state: WorkState, call: Call, outcome: Outcome, key: str) -> None:
    check = state.checks.get(key.removeprefix("check:")) if key.startswith("check:") else None
    for error in state.errors:
        if not _settles(error, key, outcome.command):
            continue
        error.status, error.resolved_seq = "resolved", call.result_seq
        if check is not None and check.fixed_seq == call.seq and check.fix:
            error.resolution = f"{check.fix}; then `{one_line(outcome.command, 100)}` passed"
        else:
            changed = changes_since(state, error.seq, call.seq)
            again = (
                f"`{one_line(outcome.command, 100)}` succeeded"
                if outcome.command
                else f"the next {call.name} succeeded"
            )
            error.resolution = f"after {changed}, {again}" if changed else again


def _note_attempt(state: WorkState, call: Call, key: str) -> None:
    """What the agent changed between an error and its next attempt at the same thing."""
    for error in state.errors:
        if error.key == key and not error.then and error.seq < call.seq and error.status == "open":
            error.then = changes_since(state, error.seq, call.seq, detail=True)


def _streak(state: WorkState, call: Call, outcome: Outcome, key: str, lines: list[str]) -> None:
    """One more failing run of `key`: a command that keeps failing is the blocker."""
    streak = state.streaks.pop(key, None) or Streak(key, call.seq, call.seq)
    streak.runs += 1
    streak.last = call.seq
    tried = one_line(outcome.command or _source(call, outcome), 160)
    if tried not in streak.commands:
        streak.commands = [*streak.commands, tried][-MAX_TRIED:]
    streak.lines = lines
    state.streaks[key] = streak  # the latest failing last
    while len(state.streaks) > MAX_STREAKS:
        del state.streaks[next(iter(state.streaks))]


def _found_missing(state: WorkState, call: Call, outcome: Outcome, key: str, lines: list[str]) -> bool:
    """A read that found no file tells that the file does not exist: a finding, no error to fix."""
    if call.kind != "read" or outcome.command or not READ_FAILED_RE.search(call.output[:300]):
        return False
    state.errors.append(ErrorRecord(call.result_seq, lines[0], _source(call, outcome), key, status="absent"))
    del state.errors[:-MAX_ERRORS]
    return True


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if outcome.ok is None or (outcome.probe and outcome.ok):
        return
    key = error_key(call, outcome, state.git.cwd)
    _note_attempt(state, call, key)
    if not outcome.probe:
        decisions.on_run(state, key, bool(outcome.ok), call.seq)
    if outcome.ok:
        state.streaks.pop(key, None)
        _resolve(state, call, outcome, key)
        return
    lines = _lines(call, outcome)
    if _found_missing(state, call, outcome, key, lines):
        return
    if not outcome.probe:
        _streak(state, call, outcome, key, lines)
    if outcome.command:
        printed = _shapes(call.output)
        # A run that fails differently did not print the errors of the run before it; one that
        # prints an error again (its numbers changed: a line, a time) did not get past it.
        for error in state.errors:
            if error.key != key or error.seq >= call.seq:
                continue
            shape = _shape(error.line) if _distinct(error.line) else ""
            again = (
                error.line in lines
                or error.line in call.output
                or (bool(shape) and (shape in printed or any(shape == _shape(line) for line in lines)))
            )
            if error.status == "open" and not again and _shows_all_of(outcome.command, error.source):
                error.status, error.resolved_seq = "resolved", call.result_seq
                error.resolution = PASSED_OVER
            elif error.resolution == PASSED_OVER and again:
                error.status, error.resolution = "open", ""
                error.resolved_seq = None
    for line in lines:
        # The same line again; an earlier run's line with other numbers is the same error too
        # (two lines of one run that differ only in numbers are two errors).
        same = next(
            (
                e
                for e in state.errors
                if e.status == "open"
                and e.key == key
                and (
                    e.line == line or (e.seq != call.result_seq and _distinct(line) and _shape(e.line) == _shape(line))
                )
            ),
            None,
        )
        if same is not None:
            same.count += 1
            same.seq = call.result_seq
            continue
        code = EXIT_CODE_RE.search(call.output[:2000]) if outcome.command else None
        state.errors.append(
            ErrorRecord(call.result_seq, line, _source(call, outcome), key, exit=int(code.group(1)) if code else None)
        )
    del state.errors[:-MAX_ERRORS]


PASSED_OVER = "the next run got past it (failed otherwise)"
# What varies between two printings of one error: numbers (a line, a time, an address), spacing.
_VARYING_RE = re.compile(r"\d+|\s+")
# What is not a letter: what is left says how much a line says besides its numbers.
NON_LETTER_RE = re.compile(r"[^A-Za-z]")
SHAPE_CHARS = 160
MIN_SHAPE_LETTERS = 20


def _shape(line: str) -> str:
    """An error line with its numbers and spacing blurred, cut to its start: the same error
    printed again after an edit moved it (`a.ex:45` → `a.ex:47`) or a time changed."""
    return _VARYING_RE.sub(" ", strip_ansi(line).removesuffix("…")).strip()[:SHAPE_CHARS].strip()


def _shows_all_of(command: str, earlier: str) -> bool:
    """Whether a run's output can show that an earlier run's error is gone: it ran the same or
    more (other targets, or a filter such as `| grep x` or `| tail`, hide what it did not print)."""
    if PIPE_FILTER_RE.search(command) and not PIPEFAIL_RE.search(command):
        return False
    return command.strip() == earlier.strip() or run_covers(command, earlier)


def _distinct(line: str) -> bool:
    """Whether a line says enough besides its numbers to be told apart by its words (a tally,
    "58 tests, 1 failure", is its numbers)."""
    return len(NON_LETTER_RE.sub("", line)) >= MIN_SHAPE_LETTERS and not BARE_TALLY_RE.match(line.strip())


def _shapes(output: str) -> str:
    """A run's whole output blurred as `_shape` blurs a line (for finding a line in it)."""
    return _VARYING_RE.sub(" ", strip_ansi(output))


def diagnosis_of(text: str) -> str:
    """The sentence of the agent's words that explains a failure, or "": its prose, never a line
    of the code it fenced (an edit's body)."""
    for sentence in sentences(FENCED_BLOCK_RE.sub("", text)):
        if DIAGNOSIS_RE.search(sentence) and 15 <= len(sentence) <= 400 and not sentence.rstrip().endswith("?"):
            return one_line(_INTERJECTION_RE.sub("", sentence).strip(), 300)
    return ""


def on_narration(state: WorkState, event: Narration) -> None:
    """The agent's reading of the failure it just met (labelled as the agent's when shown)."""
    steps = state.turn.steps
    if not state.errors or not steps or steps[-1].ok is not False:
        return
    error = state.errors[-1]
    if error.status == "open" and error.diagnosis is None and error.seq >= steps[-1].seq:
        said = diagnosis_of(event.text)
        if said:
            error.diagnosis = Quote(event.seq, said)
