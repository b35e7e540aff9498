"""Background jobs: a command the harness started in the background has no outcome when its call
returns ("Command running in background with ID: x"), nor when a poll shows it still running.
Its outcome is what a later poll (TaskOutput, BashOutput) or the harness's notice shows once it
ended, its exit code and what it printed: told as that command's run, where the evidence is."""

from __future__ import annotations

from dataclasses import replace

from compaction.core.provenance import NOTIFICATION
from compaction.core.tool_vocabulary import STOP_TOOLS
from compaction.core.work.events import Call, Injected
from compaction.core.work.parse import JobReport, job_report, one_line
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Job, WorkState

MAX_JOBS = 20


def _job_of(state: WorkState, report: JobReport | None, args: object = None) -> Job | None:
    """The job a report is about: the one it names, else the one the poll's arguments name
    (`session_id`), else the only one running."""
    if report is None:
        return None
    if report.job:
        return state.jobs.get(report.job)
    named = [state.jobs[str(v)] for v in args.values() if str(v) in state.jobs] if isinstance(args, dict) else []
    if named:
        return named[0]
    return next(iter(state.jobs.values())) if len(state.jobs) == 1 else None


def _run(job: Job, report: JobReport, seq: int, result_seq: int, purpose: str = "") -> Call:
    """The job's command as the run the report shows ended: its exit code and output."""
    failed = (report.exit is not None and report.exit != 0) or report.status in ("failed", "killed", "error")
    return Call(
        seq=seq,
        result_seq=result_seq,
        name=job.name,
        kind="shell",
        args={"command": job.command},
        command=job.command,
        path=None,
        output=report.output,
        is_error=failed,
        rejected=False,
        purpose=purpose,
    )


def ended(state: WorkState, call: Call) -> Call | None:
    """A poll whose result shows a job of this history ended: that job's run (at the poll), which
    the reducers take in place of the poll. None for any other call."""
    if call.kind != "output":
        return None  # only a poll's result speaks of a job (a file read may hold <status> too)
    report = job_report(call.output) if state.jobs else None
    job = _job_of(state, report, call.args)
    if job is None or report is None or report.running:
        return None
    del state.jobs[job.id]
    return _run(job, report, call.seq, call.result_seq, call.purpose)


def noticed(state: WorkState, event: Injected) -> Call | None:
    """The harness's notice that a job ended (Claude Code's <task-notification>): the job's run at
    the notice, its exit code as the notice gives it."""
    report = job_report(event.text) if state.jobs and event.kind == NOTIFICATION else None
    job = _job_of(state, report)
    if job is None or report is None or report.running:
        return None
    del state.jobs[job.id]
    return _run(job, report, event.seq, event.seq)


def outcome(state: WorkState, call: Call, found: Outcome) -> Outcome:
    """A poll that shows a job still running has no outcome: it returned, the job has not."""
    if call.kind != "output" or not state.jobs:
        return found
    report = job_report(call.output)
    job = _job_of(state, report, call.args)
    if job is None or report is None or not report.running:
        return found
    waited = " (the poll's wait ran out)" if report.timed_out else ""
    return Outcome(
        None,
        unknown=f"showed `{one_line(job.command, 80)}` (started in the background at #{job.seq}) still running{waited}: no result yet",
    )


def on_call(state: WorkState, call: Call, found: Outcome) -> None:
    if found.job and found.command:
        state.jobs[found.job] = Job(found.job, call.seq, found.command, call.name, found.check)
        while len(state.jobs) > MAX_JOBS:
            del state.jobs[next(iter(state.jobs))]
        return
    if call.kind == "shell" or not state.jobs:
        return
    if call.name in STOP_TOOLS and isinstance(call.args, dict) and not call.is_error:
        for value in call.args.values():
            state.jobs.pop(str(value), None)  # stopped: it will print no outcome
        return
    if found.ok is not None or call.kind != "output":
        return
    report = job_report(call.output)
    job = _job_of(state, report, call.args)
    if job is not None and report is not None and report.running:
        state.jobs[job.id] = replace(job, polled=call.seq, timed_out=report.timed_out)
