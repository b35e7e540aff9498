"""Checks: test, build, lint and type-check runs — the latest result, a failure and its fix."""

from __future__ import annotations

from compaction.core.text_heuristics import chain_parts, check_scope, command_signature, run_covers
from compaction.core.work.events import Call
from compaction.core.work.reducers.changes import changes_since
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Check, WorkState
from compaction.core.work.vocabulary import check_kind, check_runner


def check_key(command: str) -> str:
    """Which check a command runs, by its runner as the vocabulary names it ("mix test",
    "pytest", "npm run lint"), not its targets or flags."""
    parts = [p for p in chain_parts(command) if check_kind(p)] or chain_parts(command)
    part = parts[-1] if parts else command
    runner = check_runner(part)
    if runner:
        return runner
    scope, _targets = check_scope(part)
    return " ".join(scope or command_signature(part)) or part


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if call.kind != "shell" or outcome.ok is None or not outcome.check:
        return
    key = check_key(outcome.command)
    check = state.checks.get(key)
    if check is None:
        check = state.checks[key] = Check(key, outcome.command, outcome.check, bool(outcome.ok), call.seq, runs=0)
    check.runs += 1
    check.command, check.seq, check.tally, check.ok = outcome.command, call.seq, outcome.tally, bool(outcome.ok)
    _runner, targets = check_scope(
        next((p for p in reversed(chain_parts(outcome.command)) if check_kind(p)), outcome.command)
    )
    if not targets:
        check.suite = outcome.command
    if not outcome.ok:
        if check.failed_seq is None or check.fixed_seq is not None:
            check.failed_seq, check.fixed_seq, check.fix = call.seq, None, ""
            check.failed_command = outcome.command
        check.failure = outcome.error or outcome.tally
    elif check.failed_seq is not None and check.fixed_seq is None and run_covers(outcome.command, check.failed_command):
        check.fixed_seq = call.seq
        check.fix = changes_since(state, check.failed_seq, call.seq)


def is_open_failure(check: Check) -> bool:
    return check.failed_seq is not None and check.fixed_seq is None
