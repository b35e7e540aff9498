"""How one call went, as every reducer reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool | None  # None: refused, it did not run
    tally: str = ""  # a check's tally ("65 tests, 0 failures")
    error: str = ""  # the first error line of a failure
    command: str = ""  # a shell call's command, cleaned ("" for other tools)
    check: str = ""  # test | lint | typecheck | build | migrate, for a command that checks
    probe: bool = False  # a command that only looks (grep, ls, git status)
    refused: bool = False  # an edit the tool refused to apply
    findings: bool = False  # a lint or type check that reported findings (not a pass)
    # Why a run that did run has no outcome (ok is None): what it showed instead, as a verb
    # phrase ("was started in the background (ID `x`): no result seen", "printed 11 (a count of …)").
    unknown: str = ""
    job: str = ""  # the background job a call started (its id)
