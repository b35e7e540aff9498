"""The handoff, one function per section, each rendered from the work state.

Sections follow the summary format every summarizer writes (Goal, Constraints & Preferences,
Progress, Key Decisions, Next Steps, Critical Context), opened by "Where Things Stand". A
section with nothing to say is left out rather than filled with "(none)". Message numbers
(`#12`) say where a fact comes from, so the exact text can be read back.
"""

from __future__ import annotations

from collections.abc import Callable

from compaction.core.paths import outside_repository
from compaction.core.summarizers.extractive.asked import waiting, waits_for_answer
from compaction.core.summarizers.extractive.errors_said import printed_before, reading_before, unsettled_said
from compaction.core.summarizers.extractive.files_said import also_named, edited, times
from compaction.core.summarizers.extractive.remaining import next_steps, task_spec
from compaction.core.summarizers.extractive.rules_said import constraints, verdict
from compaction.core.summarizers.extractive.standing import (
    REQUEST_CHARS,
    block_of,
    built_by,
    check_said,
    clipped,
    code,
    created_in,
    expansion_of,
    listing,
    quoted,
    report_text,
    stated_checks,
    steps_since_request,
    task_work,
    where_things_stand,
    words_of,
)
from compaction.core.summarizers.extractive.view import COMPACT, FULL, MINIMAL, TERSE, TINY, View
from compaction.core.vocabulary import SHELL_UTILITIES, is_probe, names_key
from compaction.core.work.parse import one_line
from compaction.core.work.reducers.errors import AGAIN, PASSED_OVER
from compaction.core.work.state import Commit, ErrorRecord, FileRecord, Person, WorkState

Lines = list[str]


def _bullets(lines: Lines) -> Lines:
    return [f"- {line}" for line in lines]


# --- Goal, constraints ---------------------------------------------------------------------------


GOAL_CHARS = 4_000
TASK_CHARS = 2_400
EXPANSION_CHARS = 2_400


def goal(v: View) -> Lines:
    requests = v.requests
    if not requests:
        return ["Not stated in the messages summarized; the messages kept after this summary show the work."]
    first = requests[0]
    named = [t for t in v.tasks if t.source != "todo" and t.key in first.text and t.title]
    about = f" — {listing([f'{code(t.key)} is {quoted(t.title, 100)}' for t in named[:2]])}" if named else ""
    # The task in its own words, whole within the budget (its remaining items are in it).
    limit = v.chars(GOAL_CHARS)
    out = [f"{words_of(first.text, limit, first.seq)} ({v.cite(first.seq)}){about}"]
    template = v.state.people.template
    if first.task and template and template[0].seq == first.seq:
        # The task inside a harness's template: its lead-in says what kind of task it is.
        lead = one_line(template[0].text, 300).rstrip(":")
        out = [
            f"The task the harness's template gives ({v.cite(first.seq)}): {quoted(lead, 300)}; the task itself: {out[0]}"
        ]
    came = [e for e in v.state.people.expansions if e.seq == first.seq]
    if came and not out[0].startswith("The task the harness"):
        # A command's expansion is the request's instructions (its scope, its steps, its
        # approvals): the harness's words, carried with the request they came with.
        out[0] += "; the instructions the command brought with it (the harness's text, not the person's):" + "".join(
            expansion_of(e.text, v.chars(EXPANSION_CHARS), e.seq) for e in came[:1]
        )
    if len(requests) > 3 and first.answer is not None:
        out = [
            f"The session began with {quoted(first.text, 300)} ({v.cite(first.seq)}), answered at {v.cite(first.answer.seq)}{verdict(v, first)}; the person's later messages are under Done and The Person's Messages"
        ]
    if len(requests) > 1:
        # The first request is where the session began; the latest may have changed the task.
        if not out[0].startswith("The session began"):
            out[0] = "The session began with " + out[0]
        out.append(
            f"The latest request ({v.cite(requests[-1].seq)}), quoted under Where Things Stand, is what the agent worked on last."
        )
    return _bullets(out)


# --- Progress ----------------------------------------------------------------------------------


def _commit_line(v: View, commit: Commit, *, brief: bool) -> str:
    pushed = f", pushed to `{commit.pushed_to}`" if commit.pushed_to else ", not pushed"
    head = f"Committed {code(commit.sha[:7])} {quoted(commit.subject, 120)} ({v.cite(commit.seq)}){pushed}"
    if brief:
        return head
    tasks = [v.state.tasks.tasks[k] for k in commit.tasks if k in v.state.tasks.tasks]
    closed = [t for t in tasks if t.status == "closed"]
    # Which task a commit belongs to is said only as the evidence shows it: its message names
    # the task, or the task was closed between the previous commit and this one (no more).
    named = [t for t in closed if names_key(f"{commit.subject}\n{commit.body}", t.key)]
    before = [t for t in closed if t not in named and t.closed and t.closed <= commit.seq]
    if named:
        head += f"; its message names {listing([v.task_name(t, limit=70) for t in named], 4)}"
        head += f" (closed at {v.cite(*(t.closed for t in named))})" if all(t.closed for t in named) else ""
    if before:
        head += f"; closed since the previous commit: {listing([v.task_name(t, limit=70) for t in before], 4)} ({v.cite(*(t.closed for t in before))})"
    # What was built, in the agent's own record of it: the commit message's body, else the
    # reason it gave when it closed the task.
    told = commit.body or next((t.reason for t in closed if t.reason), "")
    if told:
        head += f"; {'its message' if commit.body else 'the closing note'}: {quoted(told, v.chars(450))}"
    built = built_by(v, commit)
    if built and v.level <= COMPACT:
        head += f"; definitions its changes add: {listing(built, 4)}"
    files = [v.path(p) for p in commit.files]
    if files and not commit.body:  # its message says what it did; Files says which files it holds
        head += f"; files: {listing(files, 5)}"
    if commit.checks:
        head += "; checks before it: " + listing(commit.checks[-2:])
    return head


def _request_line(v: View, person: Person) -> str:
    said = f"{quoted(person.text, 160)} ({v.cite(person.seq)})"
    if person.answer is None:
        return said
    line = f"{said} — the agent's report ({v.cite(person.answer.seq)}): {quoted(report_text(person.answer.text), v.chars(300))}"
    # The person's answer to that report is its verdict (accepted, corrected, undone): quoted.
    reply = next(
        (
            p
            for p in v.state.people.messages
            if p.after is not None and p.after.seq == person.answer.seq and p is not person
        ),
        None,
    )
    if reply is not None:
        line += f"; the person's reply ({v.cite(reply.seq)}): {quoted(reply.text, v.chars(200))}"
    return line


def done(v: View) -> Lines:
    commits = [c for c in v.state.git.commits if c.subject]
    out = []
    keep_full = 3 if v.level >= COMPACT else len(commits)
    for index, commit in enumerate(commits):
        brief = index < len(commits) - keep_full or v.level >= TINY
        if v.focus and ("commits" in v.focus.kinds or v.focus.names(commit.subject, commit.sha)):
            out.append(f"Committed {code(commit.sha[:7])} {quoted(commit.subject, 100)} — in full under Focus")
            continue
        out.append(_commit_line(v, commit, brief=brief or bool(v.focus)))
    committed = {k for c in commits for k in c.tasks}
    loose = [t for t in v.tasks if t.status == "closed" and t.key not in committed]
    if loose:
        out.append("Closed: " + listing([v.task_name(t, limit=70) for t in loose], 8) + " (no commit names them)")
        out += [
            f"{code(t.key)} closing note: {quoted(t.reason, v.chars(300))}"
            for t in loose
            if t.reason and v.level < TINY
        ][-3:]
    if not commits:
        answered = [p for p in v.requests if p.answer is not None and not waits_for_answer(v, p)]
        shown = answered if v.level <= COMPACT else answered[-4:] if v.level < TINY else answered[-1:]
        out += [_request_line(v, p) for p in shown]
    return _bullets(out)


def in_progress(v: View) -> Lines:
    out = waiting(v)  # a reply that asks the person is no finish
    turn = v.state.turn
    if not v.current and not turn.ended and turn.submitted is None and v.latest_request is not None and not v.tasks:
        request = v.latest_request
        if request.answer is not None:
            out.append(
                f"The latest request ({v.cite(request.seq)}): the agent reported it done at {v.cite(request.answer.seq)}, and the work went on after that report"
            )
        else:
            handover = v.state.people.handover
            out.append(
                f"The task ({v.cite(request.seq)}): not handed in yet (no `{handover}` has run)"
                if handover
                else f"The latest request ({v.cite(request.seq)}), not yet reported done"
            )
    work, shared = task_work(v)
    for task in v.current:
        line = f"{v.task_name(task)}, in progress"
        intro, done = task_spec(task.note)
        if task.note and v.level <= COMPACT:
            # The task in its own words, whole within the budget: its remaining items are in it.
            line += (
                f". Its description ({v.cite(task.note_seq)}):{block_of(task.note, v.chars(TASK_CHARS), task.note_seq)}"
            )
        else:
            if intro and v.level <= TERSE:
                line += f". The task: {clipped(intro, v.chars(400)).rstrip('.')}"
            if done and v.level <= MINIMAL:
                line += ". Done when: " + "; ".join(done)
        out.append(line)
        if task.key in work:
            out.append(work[task.key])
    if shared:
        out.append(shared)
    if v.focus and v.dirty:
        out.append(f"{len(v.dirty)} files changed since their last commit (listed under Where Things Stand)")
    # Files the task's "done so far" already describes are not described again.
    told = {r.path for t in v.current for r in v.changed_files if r.edits and r.last >= (t.started or t.since)}
    for rec in v.dirty if not v.focus else []:
        if rec.path not in told:
            out.append(f"Uncommitted: {_file_line(v, rec, brief=v.level >= TERSE)}")
    steps = steps_since_request(v) if not v.current else ""
    if steps and not turn.ended and turn.submitted is None:  # handed in: nothing is in progress
        out.append(steps)
    return _bullets(out)


def blocked(v: View) -> Lines:
    # The blocker is told whole under Where Things Stand: named here, not repeated.
    out = [
        f"{code(v.streak_name(s), 100)} failed in each of its last {s.runs} runs ({v.cite(s.first, s.last)}): its error and the command lines tried are under Where Things Stand"
        for s in v.blockers
    ]
    blocking = {s.key for s in v.blockers}
    for check in [c for c in v.failing if not v.blocks(c) and not v.edits_after(c.seq)]:
        out.append(
            f"{code(check.failed_command or check.command, 80)} fails since {v.cite(check.failed_seq or check.seq)}: {code(check.failure, 240)}"
        )
    # A command that fails blocks; an edit a tool refused is an attempt (the file is unchanged).
    for error in [e for e in v.open_errors if v.live(e) and e.key.startswith("cmd:") and e.key not in blocking][-3:]:
        out.append(f"{code(error.line, 240)} from {_error_source(v, error)} ({v.cite(error.seq)}), not resolved yet")
    return _bullets(out)


# --- Decisions, next steps ----------------------------------------------------------------------


def decisions(v: View) -> Lines:
    out = []
    limit = 12 if v.level <= COMPACT else 6 if v.level < TINY else 3
    for d in v.decisions[-limit:]:
        if d.by == "plan":
            points = f": {one_line(d.reason, 500 if v.level <= COMPACT else 250)}" if d.reason else ""
            out.append(f"Plan approved by the person ({v.cite(d.seq)}): {quoted(d.choice, 140)}{points}")
            continue
        about = f"{v.path(d.about)} ({v.cite(d.seq)})" if d.about else v.cite(d.seq)
        # The choice first, then why: the shape of a decision as an engineer states it.
        chose = d.choice and not (
            v.focus and "decisions" not in v.focus.kinds and not v.focus.names(d.reason, d.choice, d.about)
        )
        if chose:
            out.append(f"{about}: {quoted(d.choice, 200)} — the agent's reason: {quoted(d.reason, 300)}")
        else:
            out.append(f"{about} — the agent's reason: {quoted(d.reason, 300)}")
    # What failures taught (the agent's reading, what it changed) is under Errors and Fixes.
    return _bullets(out)


def next_section(v: View) -> Lines:
    return [f"{i}. {step}" for i, step in enumerate(next_steps(v), start=1)]


# --- Critical context -------------------------------------------------------------------------


def repository(v: View) -> Lines:
    git = v.state.git
    commits = [c for c in git.commits if c.subject]
    project = (
        [f"Paths in this summary are relative to `{v.root}` (the directory the work's files share)"] if v.root else []
    )
    if not commits and git.tree is None and not git.branch:
        return _bullets(project)
    out = project
    if v.focus and not v.focus.kinds & {"commits", "uncommitted"}:
        # The commits are in Done, the uncommitted files under Where Things Stand.
        pushed = (
            "all pushed"
            if commits and all(c.pushed_to for c in commits)
            else f"{len(v.unpushed)} not pushed"
            if v.unpushed
            else ""
        )
        said = f"Branch `{git.branch}`; " if git.branch else ""
        return _bullets(
            project
            + [
                said
                + f"{len(commits)} commits"
                + (f" ({pushed})" if pushed else "")
                + f"; {len(v.dirty)} files uncommitted"
            ]
        )
    if git.branch:
        out.append(f"Branch `{git.branch}`")
    if commits:
        last = commits[-1]
        pushed = f"pushed to `{last.pushed_to}`" if last.pushed_to else "not pushed"
        after = git.outside_seq > last.seq
        lead = "Latest commit made by a command of this history" if after else "Latest commit"
        out.append(f"{lead} {code(last.sha[:7])} {quoted(last.subject, 100)} ({v.cite(last.seq)}, {pushed})")
    # The commits, whether pushed, and the working tree are stated under Where Things Stand
    # (from git's evidence): not again here.
    if git.stash:
        out.append(f"Stashed: {len(git.stash)} stash entr{'y' if len(git.stash) == 1 else 'ies'}")
    if git.cwd and v.root and git.cwd != v.root and git.cwd.startswith(v.root + "/"):
        out.append(
            f"The shell was left in {v.path(git.cwd)} (a `cd` in a command); paths in commands are relative to it"
        )
    routine = _routine(v)
    if routine:
        out.append(routine)
    return _bullets(out)


def _routine(v: View) -> str:
    """How the agent wrapped up its latest task: the checks, tracker and git commands it ran."""
    steps = v.state.git.routine
    last = v.last_commit
    if last is None or any(
        s.seq > last.seq and s.kind in ("check", "git", "tracker", "edit")
        for s in v.state.turn.steps
        if s.kind != "git" or "push" not in s.what
    ):
        return ""  # work went on after the commit that ended it: the routine is not where things are
    return "How the agent wrapped up its latest task: " + ", then ".join(steps) if len(steps) >= 2 else ""


def _error_source(v: View, error: ErrorRecord) -> str:
    if error.key.startswith(("cmd:", "check:")):
        return code(error.source, 90)
    name, _sep, path = error.key.partition(":")
    return f"{name} of {v.path(path)}" if path else name


def _error_group(v: View, group: list[ErrorRecord], *, recent: bool = True) -> str:
    """One failing run: its error lines, the agent's reading, what it changed next, the outcome
    (what changed next only for recent runs, past FULL)."""
    first, last = group[0], group[-1]
    lines = "; ".join(code(e.line, 220 if v.level <= COMPACT else 140) for e in group[: 2 if v.level < MINIMAL else 1])
    exit = f" with exit code {first.exit}" if first.exit else ""
    again = f" ({first.count}×)" if first.count > 1 else ""
    said = f"{_error_source(v, first)} failed{exit}{again} ({v.cite(first.seq)}{printed_before(v, first)}): {lines}"
    if first.status == "absent":  # what a read found: the file is not there (no error to fix)
        return f"{v.path(first.key.partition(':')[2])} does not exist: the read at {v.cite(first.seq)} answered {lines}"
    diagnosis = next((e.diagnosis for e in group if e.diagnosis), None) or reading_before(v, first)
    if diagnosis is not None and v.level <= TERSE:
        said += f" — the agent's reading: {quoted(diagnosis.text, 200)}"
    told = last.then and (v.level == FULL or (recent and v.level <= TERSE))
    if told:
        said += f" — then {last.then}"
    if last.status == AGAIN:
        # A later run failed with it again (told on its own): what was tried did not get past it.
        later = next((e for e in v.state.errors if e.seq == last.resolved_seq and e.key == last.key), None)
        other = f", from {_error_source(v, later)}" if later is not None and later.source != last.source else ""
        return said + f" — the same error again at {v.cite(last.resolved_seq)}{other}"
    if last.status == "resolved":
        if last.resolution == PASSED_OVER:
            return said + f" — the next run ({v.cite(last.resolved_seq)}) got past it (failed otherwise)"
        # "then X — fixed" only when the run after X is the one that passed; else all that changed.
        shown = told and last.tried == last.resolved_seq
        return said + f" — fixed ({v.cite(last.resolved_seq)})" + ("" if shown else f": {last.resolution}")
    if v.live(last):
        return said + " — still open"
    # Not run again: whether it still fails is unknown; what changed since is what is known.
    note = v.edits_note(last.seq, lead="edits since:") if v.level < TERSE else ""
    return said + unsettled_said(v, last) + (f"; {note}" if note else "")


def _error_runs(v: View) -> list[list[ErrorRecord]]:
    """Errors grouped by the failing run that printed them and what became of them."""
    runs: list[list[ErrorRecord]] = []
    for error in v.state.errors:
        fate = (error.seq, error.key, error.status, error.resolved_seq)
        if runs and (runs[-1][0].seq, runs[-1][0].key, runs[-1][0].status, runs[-1][0].resolved_seq) == fate:
            runs[-1].append(error)
        else:
            runs.append([error])
    return runs


def _incidental(v: View, group: list[ErrorRecord]) -> bool:
    """A file or helper tool, or a look around (grep, ls, cat), that failed and was retried or
    passed over (a read too large, a search with no match): no error of the work."""
    looked = group[0].key.startswith("cmd:") and is_probe(group[0].source.strip("`"))
    tool = not group[0].key.startswith(("cmd:", "check:"))
    if group[-1].status == "absent":  # a project's file found missing is a finding until the work wrote it
        path = group[0].key.partition(":")[2]
        return (
            outside_repository(path) or not v.inside(path) or any(r.path == path and r.edits for r in v.changed_files)
        )
    return (tool or looked) and not (group[-1].status == "open" and v.live(group[-1]))


def errors(v: View) -> Lines:
    groups = [g for g in _error_runs(v) if not _incidental(v, g)]
    if v.focus:
        wanted = v.focus.kinds & {"errors", "failures", "checks"}
        chosen = [g for g in groups if wanted or v.focus.names(*(e.line for e in g), g[0].source)]
        rest = [g for g in groups if g not in chosen]
        out = [_error_group(v, g) for g in chosen]
        if rest:
            resolved = sum(1 for g in rest if g[-1].status == "resolved")
            out.append(
                f"{len(rest)} other failure{'s' if len(rest) != 1 else ''} ({resolved} fixed): "
                + listing([_error_source(v, g[0]) + f" ({v.cite(g[0].seq)})" for g in rest], 6)
            )
        return _bullets(out)
    if v.level >= MINIMAL:
        # Open errors stay; of the fixed ones, the newest few.
        fixed = [g for g in groups if g[-1].status != "open"][-(4 if v.level < TINY else 2) :]
        still = [g for g in groups if g[-1].status == "open"][-(8 if v.level < TINY else 4) :]
        groups = [g for g in groups if any(g is f for f in [*still, *fixed])]
    return _bullets([_error_group(v, g, recent=i >= len(groups) - 3) for i, g in enumerate(groups)])


def _file_state(v: View, rec: FileRecord) -> str:
    """What happened to a file, as a clause: "was edited twice and is committed in `a1b2c3d`"."""
    if rec.state == "deleted":
        if (rec.created or rec.empty) and not rec.commits:
            return "was written, then deleted again (nothing left to commit)"
        committed = (
            f" and the deletion is committed in {code(rec.commits[-1][:7])}" if rec.commits and not rec.dirty else ""
        )
        return "was deleted" + committed + (", not committed yet" if rec.dirty and v.git_seen else "")
    if rec.state == "moved":
        return f"was moved to {v.path(rec.moved_to)}"
    made = (
        "was created empty (its content not written yet)"
        if rec.empty and rec.edits <= 1
        else "was written"
        if rec.created
        else f"was {edited(v, rec)}"
    )
    if rec.created and rec.edits > 1:
        made += f", then {edited(v, rec, more=True)}"
    if not v.git_seen:
        return made
    commits = f"committed in {listing([code(c[:7]) for c in rec.commits], 3)}" if rec.commits else ""
    if rec.dirty:
        return (
            f"{made}; {commits}, it has changed again since and is not committed"
            if commits
            else f"{made} and is not committed"
        )
    return f"{made} and is {commits}" if commits else made


def _committed_at(v: View, rec: FileRecord) -> int:
    """The message of the latest commit that took the file (0: none)."""
    shas = set(rec.commits[-1:])
    return max((c.seq for c in v.state.git.commits if c.sha in shas), default=0)


def _told_by_commit(v: View, rec: FileRecord) -> bool:
    shas = set(rec.commits[-1:])
    return any(c.body for c in v.state.git.commits if c.sha in shas)


def _as_written(rec: FileRecord, change: str) -> str:
    """A whole-file write of a file the line already says "was written": its size, not "written" again."""
    return change.removeprefix("written, ") if rec.created else change


def _file_line(v: View, rec: FileRecord, *, brief: bool = False) -> str:
    line = f"{v.path(rec.path)} {_file_state(v, rec)}"
    if brief or rec.state == "deleted":
        return line  # what a deleted file's edits added is gone with it
    # An uncommitted file is described by what changed since its last commit; a committed one
    # by what the agent said its edits were for, briefly.
    since = _committed_at(v, rec) if rec.dirty else 0
    purposes = [q for q in rec.purposes if q.seq > since]
    limit = 140 if rec.dirty else 110
    if purposes and rec.dirty and len(purposes) > 1:
        line += "; the agent's stated purposes: " + "; ".join(quoted(q.text, limit) for q in purposes)
    elif purposes:
        line += f"; the agent's stated purpose: {quoted(purposes[-1].text, limit)}"
    whole = next((q.text for q in rec.changes if q.text.startswith("written")), "")
    if whole and not rec.created:
        later = f", then edited {times(rec.edits - 1)} more" if rec.edits > 1 and rec.change != whole else ""
        line += "; it was rewritten whole" + whole.removeprefix("written") + later
    elif whole and not purposes:
        line += f"; {_as_written(rec, whole)}"
    elif rec.change and "`" in rec.change and (not purposes or v.level == FULL):
        line += f"; {_as_written(rec, rec.change)}"
    elif not purposes and (rec.change or rec.dirty):
        names = [q.text for q in rec.added if q.seq > since][-2:]
        line += (
            f"; {rec.change}" if rec.change else ("; it adds " + listing([code(n, 50) for n in names]) if names else "")
        )
    return line


def _by_commit(v: View, recs: list[FileRecord]) -> list[str]:
    """One line per commit: the files it holds that have not changed since ("new": written whole)."""
    held: dict[str, list[str]] = {}
    for rec in sorted(recs, key=lambda r: r.first):
        # "(new)": git printed "create mode" for it when it made the commit that holds it.
        new = any(c.sha == rec.commits[-1] and created_in(c, rec.path) for c in v.state.git.commits)
        held.setdefault(rec.commits[-1], []).append(v.path(rec.path) + (" (new)" if new else ""))
    order = [c.sha for c in reversed(v.state.git.commits) if c.sha in held]
    out = []
    for sha in order:
        paths = held[sha][: 12 if v.level <= COMPACT else 6]
        more = len(held[sha]) - len(paths)
        # A few files a line, in a sentence: a long list of paths is skimmed over.
        for start in range(0, len(paths), 4):
            chunk = paths[start : start + 4]
            last = more and start + 4 >= len(paths)
            part = ", ".join(chunk) + f" and {more} more" if last else listing(chunk)
            lead = f"Committed in {code(sha[:7])} and unchanged since then" if start == 0 else "Also in it"
            out.append(f"{lead}: {part}")
    return out


MIN_DELETED_GROUP = 3


def files(v: View) -> Lines:
    # Uncommitted files are described in full under In Progress (where git ran: else no change is
    # known to be committed or not, and every file is described here).
    described = {r.path for r in v.dirty}
    recs = [r for r in v.changed_files if r.path not in described or v.focus]
    chosen = sorted(recs, key=lambda r: (not v.focus.names(r.path), not r.dirty, -r.last))
    if v.focus:
        wanted = [
            r
            for r in chosen
            if v.focus.names(r.path, *(q.text for q in r.purposes))
            or (r.dirty and v.focus.kinds & {"uncommitted", "files"})
        ]
        others = [r for r in chosen if r not in wanted]
        out = [_file_line(v, r) for r in wanted]
        return _bullets(out + also_named(v, others, 12))
    # Files whose commit's message (under Done) says what was built: named by commit.
    told = [r for r in chosen if not r.dirty and r.state == "edited" and r.commits and _told_by_commit(v, r)]
    chosen = [r for r in chosen if r not in told]
    out = _by_commit(v, told)
    rest: list[FileRecord] = []
    if v.level >= TERSE:
        keep = 8 if v.level < TINY else 0
        full = [r for r in chosen if r.dirty] + [r for r in chosen if not r.dirty][:keep]
        rest = [r for r in chosen if r not in full]
        chosen = full
    # At COMPACT only the files of the latest commit keep their purpose; older ones are named.
    latest = set(v.last_commit.files) if v.last_commit is not None else set()
    brief = {r.path for r in chosen if v.level >= TERSE or (v.level == COMPACT and r.path not in latest)}
    # Files deleted in one sweep (a port that removes the old sources) are named on one line.
    gone = [r for r in chosen if r.state == "deleted" and not (r.created or r.empty)]
    if len(gone) >= MIN_DELETED_GROUP:
        chosen = [r for r in chosen if r not in gone]
        shas = {r.commits[-1] if r.commits and not r.dirty else "" for r in gone}  # "": not committed
        (sha,) = shas if len(shas) == 1 else ("",)
        committed = f"; the deletions are committed in {code(sha[:7])}" if sha else ""
        swept = [v.path(r.path) for r in sorted(gone, key=lambda r: r.last)]  # in the order they went
        out.append(f"Deleted ({len(gone)}): {listing(swept, 20)}{committed}")
    out += [_file_line(v, r, brief=r.path in brief and not r.dirty) for r in chosen]
    out += also_named(v, rest, 30)
    # The files only read are listed in the summary's <read-files> tag.
    return _bullets(out)


def checks(v: View) -> Lines:
    if v.focus and not v.focus.kinds & {"checks", "failures"} and not v.failing and v.checks:
        return _bullets(
            [
                "Run: "
                + listing(
                    [f"{code(c.command, 60)} ({'passed' if c.ok else 'failed'} {v.cite(c.seq)})" for c in v.checks], 8
                )
            ]
        )
    # The runs Where Things Stand states are not stated again; a pipe that hid the exit status
    # of several runs is said once, after them.
    stated = set(map(id, stated_checks(v)))
    runs = [c for c in v.checks if id(c) not in stated]
    once = len([c for c in runs if c.piped and c.ok and not c.findings]) > 1
    out = [check_said(v, check, caveat="short" if once else "full") for check in runs]
    if once:
        out.append("A run through a pipe is told by what it printed: its exit status is unseen")
    return _bullets(out)


# At TINY a long session's person messages are quoted for the newest this many; the rest cited.
MAX_QUOTED_AT_TINY = 20


def people(v: View) -> Lines:
    messages = [p for p in v.state.people.messages if p.kind != "chatter" or len(p.text) > 12]
    requests = v.requests
    # Quoted whole under Goal (the first request) or Where Things Stand (the latest): not again.
    whole = set()
    if requests and len(" ".join(requests[0].text.split())) <= v.chars(GOAL_CHARS):
        whole.add(id(requests[0]))
    if len(requests) > 1 and len(" ".join(requests[-1].text.split())) <= v.chars(REQUEST_CHARS):
        whole.add(id(requests[-1]))
    if all(id(p) in whole for p in messages):
        return []
    limit = {FULL: 400, COMPACT: 240, TERSE: 140, MINIMAL: 90}.get(v.level, 60)
    out = []
    if v.level >= TINY and len(messages) > MAX_QUOTED_AT_TINY:
        # A long session at the smallest size: the older messages by number (stored whole).
        older, messages = messages[:-MAX_QUOTED_AT_TINY], messages[-MAX_QUOTED_AT_TINY:]
        # A message of several texts (a person's lines sent together) is one message, cited once.
        seqs = list(dict.fromkeys(p.seq for p in older))
        out.append(
            f"{len(seqs)} earlier messages, stored whole: "
            + ", ".join(v.cite(seq) for seq in seqs[-60:])
            + (" and earlier" if len(seqs) > 60 else "")
        )
    for index, p in enumerate(messages):
        recent = index >= len(messages) - 3
        how = " (typed while the agent worked)" if p.queued else ""
        out.append(f"{v.cite(p.seq)} {words_of(p.text, v.chars(400) if recent else limit, p.seq)}{how}")
    return _bullets(out)


def other(v: View) -> Lines:
    out = []
    # A tool call that failed and was retried or passed over (a read too large, a missing
    # skill) is not handed over: it changed nothing the next agent needs.
    tools = _tools_used(v)
    if tools and v.level <= MINIMAL:
        # Some, not all: the shell's own programs (`ls`, `grep`, `sed`) and the harness's tools are left out.
        out.append(f"Programs run in the shell include: {tools}")
    refused = v.state.people.refusals
    if refused:
        out += [
            f"The person refused a call ({v.cite(q.seq)}), which did not run: {quoted(q.text, 160)}"
            for q in refused[-4:]
        ]
    if v.state.people.interruptions:
        out.append(
            "The person interrupted the agent at " + listing([v.cite(s) for s in v.state.people.interruptions], 5)
        )
    return _bullets(out)


def _tools_used(v: View) -> str:
    """The programs the agent ran, each with its subcommands (not its flags): how this project is
    worked on."""
    by_program: dict[str, list[str]] = {}
    for head in v.state.commands:
        program, _sep, sub = head.partition(" ")
        if program in SHELL_UTILITIES:
            continue
        subs = by_program.setdefault(program, [])
        if sub and not sub.startswith("-") and sub not in subs:
            subs.append(sub)
    return ", ".join(f"`{p}` ({' '.join(s[:8])})" if s else f"`{p}`" for p, s in by_program.items())


def focus(v: View) -> Lines:
    """Everything the focus instructions select, in full, gathered in one place."""
    f = v.focus
    out = [f"Asked to focus on: {quoted(f.text, 300)}"]
    kinds = f.kinds
    if "commits" in kinds:
        out += [_commit_line(v, c, brief=False) for c in v.state.git.commits if c.subject]
    if "uncommitted" in kinds or "files" in kinds:
        out += [f"Uncommitted: {_file_line(v, r)}" for r in v.dirty] or ["Nothing is uncommitted."]
    if kinds & {"failures", "errors", "checks"}:
        out += [
            f"{code(c.command, 80)}: last {'passed' if c.ok else 'failed'} ({v.cite(c.seq)}){' — ' + c.tally if c.tally else ''}"
            for c in v.checks
        ]
        out += [_error_group(v, [e]) for e in v.state.errors if e.status == "open" or "errors" in kinds][-8:]
    if "decisions" in kinds:
        out += decisions(v)
    if "tasks" in kinds:
        out += [f"{v.task_name(t)}: {t.status.replace('_', ' ')} ({v.cite(t.since)})" for t in v.tasks]
    out += [
        _file_line(v, r)
        for r in v.changed_files
        if f.names(r.path, *(q.text for q in r.added), *(q.text for q in r.purposes))
    ]
    out += [
        _commit_line(v, c, brief=False)
        for c in v.state.git.commits
        if c.subject and f.names(c.subject, c.sha) and "commits" not in kinds
    ]
    out += [
        f"{v.task_name(t)}: {t.status.replace('_', ' ')}"
        for t in v.tasks
        if f.names(t.key, t.title) and "tasks" not in kinds
    ]
    out += [_error_group(v, [e]) for e in v.state.errors if f.names(e.line, e.source)][-6:]
    out += [f"The person ({v.cite(p.seq)}): {quoted(p.text, 300)}" for p in v.state.people.messages if f.names(p.text)]
    if len(out) == 1:
        out.append("Nothing in the history matches it beyond what the other sections say.")
    return [line if line.startswith("- ") else f"- {line}" for line in dict.fromkeys(out)]


SECTIONS: tuple[tuple[str, Callable[[View], Lines]], ...] = (
    ("## Where Things Stand", lambda v: _bullets(where_things_stand(v))),
    ("## Focus", focus),
    ("## Goal", goal),
    ("## Constraints & Preferences", constraints),
    ("### Done", done),
    ("### In Progress", in_progress),
    ("### Blocked", blocked),
    ("## Key Decisions", decisions),
    ("## Next Steps", next_section),
    ("### Repository State", repository),
    ("### Errors and Fixes", errors),
    ("### Checks", checks),
    ("### Files", files),
    ("### The Person's Messages", people),
    ("### Other", other),
)
PARENTS = {"### Done": "## Progress", "### In Progress": "## Progress", "### Blocked": "## Progress"}
PARENTS.update(
    {
        h: "## Critical Context"
        for h in (
            "### Repository State",
            "### Errors and Fixes",
            "### Checks",
            "### Files",
            "### The Person's Messages",
            "### Other",
        )
    }
)
# Headings every extractive summary has (the chain checks them).
REQUIRED_HEADINGS = ("## Where Things Stand", "## Goal", "## Next Steps")


def render(v: View) -> str:
    out: list[str] = []
    parents_done: set[str] = set()
    for heading, section in SECTIONS:
        if heading == "## Focus" and not v.focus:
            continue
        lines = section(v)
        if not lines and heading not in REQUIRED_HEADINGS:
            continue
        if v.focus and heading not in ("## Focus", "## Next Steps"):
            # What the focus selects comes first in every section.
            lines = sorted(lines, key=lambda line: not v.focus.selects(line))
        parent = PARENTS.get(heading)
        if parent and parent not in parents_done:
            out += [parent, ""]
            parents_done.add(parent)
        out += [heading, *lines, ""]
    return "\n".join(out).strip() + "\n"


def where_lines(state: WorkState) -> Lines:
    """ "Where Things Stand" of `state`, as bullet lines (for a summary that lacks it)."""
    return _bullets(where_things_stand(View(state, level=COMPACT)))


def facts(state: WorkState) -> str:
    """The state as facts a summary written by a model must agree with: where things stand,
    what is next, the repository, and the person's own words (only these are the user's)."""
    v = View(state, level=COMPACT)
    parts = ["Where things stand:", *_bullets(where_things_stand(v)), "", "Next steps:", *next_section(v)]
    repo = repository(v)
    if repo:
        parts += ["", "Repository:", *repo]
    said = [f"- {v.cite(p.seq)} {quoted(p.text, 400)}" for p in state.people.messages if p.kind != "chatter"]
    if said:
        parts += [
            "",
            "The person's messages (only these are the user's words; skill documents, reminders and hook output in user turns are the harness's):",
            *said,
        ]
    return "\n".join(parts)
