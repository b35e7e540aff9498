"""Checks: test, build, lint and type-check runs — the latest result, a failure and its fix."""

from __future__ import annotations

import os
import re

from compaction.core.text_heuristics import chain_parts, check_scope, command_signature, run_covers
from compaction.core.vocabulary import PIPE_FILTER_RE, PIPEFAIL_RE, check_kind, check_runner
from compaction.core.work.events import Call
from compaction.core.work.reducers.changes import changes_since
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Check, WorkState


def check_key(command: str, cwd: str = "") -> str:
    """Which check a command runs, by its runner as the vocabulary names it ("mix test",
    "pytest", "npm run lint"), not its targets or flags. A script it names by a relative path is
    resolved against the shell's directory `cwd` when known: `node assets/build.js` from the
    project and `cd assets && node build.js` are one build."""
    parts = [p for p in chain_parts(command) if check_kind(p)] or chain_parts(command)
    part = parts[-1] if parts else command
    runner = check_runner(part)
    if not runner:
        scope, _targets = check_scope(part)
        runner = " ".join(scope or command_signature(part)) or part
    if not cwd.startswith("/"):
        return runner
    return " ".join(
        os.path.normpath(os.path.join(cwd, word)) if _RELATIVE_SCRIPT_RE.match(word) else word
        for word in runner.split()
    )


# A word naming a file by a relative path (`assets/build.js`, `build.js`, `./run.sh`).
_RELATIVE_SCRIPT_RE = re.compile(r"^(?![/~-])[\w.-]*(?:/[\w.-]+)*\.\w{1,5}$|^\.{1,2}/\S+$")


def run_dir(command: str, cwd: str = "") -> str:
    """The directory a command line ran its program in: the last `cd x` it chained before it,
    resolved against the shell's directory `cwd` when that is known; `cwd` when it changed into
    none."""
    dirs = [part.split(None, 1)[1].strip("'\"") for part in chain_parts(command) if part.startswith("cd ")]
    where = dirs[-1] if dirs else ""
    if cwd.startswith("/") and not where.startswith(("/", "~")):
        where = os.path.join(cwd, where) if where else cwd
    return os.path.normpath(where) if where else ""


def piped_through(command: str) -> str:
    """The filter a check's output was piped into (`mix credo | tail -20` → "tail"), whose exit
    status the shell reports instead of the check's; "" when none (or `set -o pipefail`)."""
    if PIPEFAIL_RE.search(command):
        return ""
    for line in command.splitlines():
        for part in chain_parts(line):
            if check_kind(part.split("|", 1)[0]):
                found = PIPE_FILTER_RE.search(part)
                return found.group(1) if found else ""
    return ""


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if call.kind != "shell" or outcome.ok is None or not outcome.check:
        return
    key = check_key(outcome.command, state.git.cwd)
    check = state.checks.get(key)
    if check is None:
        check = state.checks[key] = Check(key, outcome.command, outcome.check, bool(outcome.ok), call.seq, runs=0)
    check.runs += 1
    check.command, check.seq, check.tally, check.ok = outcome.command, call.seq, outcome.tally, bool(outcome.ok)
    check.piped = piped_through(call.command or "") if not call.is_error else ""
    check.findings = outcome.findings
    _runner, targets = check_scope(
        next((p for p in reversed(chain_parts(outcome.command)) if check_kind(p)), outcome.command)
    )
    if not targets:
        check.suite, check.suite_seq, check.suite_ok = outcome.command, call.seq, bool(outcome.ok)
        if outcome.ok and not outcome.findings:
            check.passes[run_dir(outcome.command, state.git.cwd)] = (call.seq, outcome.command, check.piped)
    if not outcome.ok:
        if check.failed_seq is None or check.fixed_seq is not None:
            check.failed_seq, check.fixed_seq, check.fix = call.seq, None, ""
            check.failed_command = outcome.command
            check.partial_command, check.partial_seq = "", None
        check.failure = outcome.error or outcome.tally
        check.last_failed_seq = call.seq
    elif check.failed_seq is not None and check.fixed_seq is None:
        if pass_covers(outcome.command, check.failed_command, key):
            check.fixed_seq = call.seq
            # What fixed it changed after the last failing run (what came before failed too).
            check.fix = changes_since(state, check.last_failed_seq or check.failed_seq, call.seq)
            check.partial_command, check.partial_seq = "", None
        else:
            # The same check passed on other targets: the failure is no longer known to stand,
            # nor known to be fixed; the summary says what the passing run covered.
            check.partial_command, check.partial_seq = outcome.command, call.seq


def pass_covers(success: str, failure: str, key: str) -> bool:
    """Whether a pass settles a failure of the same check: it ran as much, or both ran the one
    script the key names (resolved: `cd assets && node build.js` after `node assets/build.js`)."""
    return run_covers(success, failure) or any(word.startswith("/") for word in key.split())


def is_open_failure(check: Check) -> bool:
    """Failing as far as the history shows: a failure no later run of the same check followed
    (a pass on other targets leaves it unknown, not open)."""
    return check.failed_seq is not None and check.fixed_seq is None and check.partial_seq is None
