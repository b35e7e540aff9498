"""What remains, for Next Steps: the task's own items (files it lists, tests it asks for), the
checks owed for the latest edits, the commit, close and push in the agent's order, a refused edit
to redo, a run owed again, and what the agent filed for later (not a step)."""

from __future__ import annotations

import re

from compaction.core.summarizers.extractive.standing import (
    _SENTENCE_END_RE,
    CURRENT_KINDS,
    DATED_NAME_RE,
    MAX_NEXT,
    MAX_STEPS_SEEN,
    _check_runs,
    _shas,
    asked_said,
    clipped,
    code,
    listing,
    quoted,
    step_told,
    tail_quoted,
)
from compaction.core.summarizers.extractive.view import TERSE, View
from compaction.core.text_heuristics import PARAGRAPH_BREAK_RE
from compaction.core.vocabulary import check_kind, check_runner, is_probe
from compaction.core.work.parse import one_line
from compaction.core.work.reducers.turn import cut_off
from compaction.core.work.state import Check, Task

_ASKED_COMMIT_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bcommit\b(?! message)")
_ASKED_PUSH_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bpush\b")

# --- next steps ----------------------------------------------------------------------------------


_SPEC_DONE_RE = re.compile(r"(?im)^\s*(?:#+\s*)?(definition of done|acceptance criteria|done when|acceptance)\s*:?\s*$")
_BULLET_RE = re.compile(r"(?m)^\s*(?:[-*]|\d+[.)])\s+(.+?)\s*$")
_IGNORED_RE = re.compile(r"ignored by one of your \.gitignore files:?\s*(\S+)")
_HEADING_LINES_RE = re.compile(r"(?m)^\s*#+\s+[^\n]*\n?")  # a markdown heading's whole line
_ASKS_TESTS_RE = re.compile(r"(?i)\btests?\b")  # a definition of done's item that asks for tests
_TEST_FILE_RE = re.compile(r"(?i)test")  # in a file's name: a test file (test_a.py, a_test.go, a.test.ts)
_COMMAND_SPAN_RE = re.compile(r"`([^`\n]+)`")  # a code span of a description: a command it names


def task_spec(note: str) -> tuple[str, list[str]]:
    """(the first paragraph, the items of its definition of done) of a task's description."""
    prose = _HEADING_LINES_RE.sub("", note).strip()  # markdown headings are no sentences
    paragraphs = [p for p in PARAGRAPH_BREAK_RE.split(prose) if p.strip()]
    intro = one_line(paragraphs[0], 400) if paragraphs else ""
    heading = _SPEC_DONE_RE.search(note)
    if heading is None:
        return intro, []
    block = PARAGRAPH_BREAK_RE.split(note[heading.end() :].strip(), maxsplit=1)[0]
    return intro, [one_line(item, 160).rstrip(".") for item in _BULLET_RE.findall(block)][:6]


def _to_do(v: View, task: Task) -> list[str]:
    """Files the task says to create or change that this work has not touched, and the tests
    its definition of done asks for when no test file changed since it started."""
    since = task.started or task.opened
    touched = {p for p, r in v.state.files.items() if r.edits and r.last >= since}
    made = set(v.state.files)
    steps = []
    # A generated file's name carries the moment it was made (a migration's timestamp): the
    # task's name for it matches the rest.
    stems = {_undated(m) for m in made}
    missing = [o for o in task.outputs if not any(m.endswith(o) for m in made) and _undated(o) not in stems]
    if missing:
        steps.append("create " + listing([code(m, 80) for m in missing], 8) + " (the task lists them as new)")
    untouched = [t for t in task.touches if not any(p.endswith(t) for p in touched)]
    intro, done = task_spec(task.note)
    asks = [d for d in done if _ASKS_TESTS_RE.search(d)]
    if asks and not any(_TEST_FILE_RE.search(p.rsplit("/", 1)[-1]) for p in touched):
        where = [t for t in untouched if _TEST_FILE_RE.search(t.rsplit("/", 1)[-1])]
        untouched = [t for t in untouched if t not in where]
        into = f" in {listing([code(t, 80) for t in where], 8)}" if where else ""
        steps.append(f"write the tests it asks for{into} ({quoted(asks[0], 140)})")
    if untouched:
        steps.insert(
            len(steps) - (1 if asks else 0),
            "change " + listing([code(m, 80) for m in untouched], 8) + " (the task lists them)",
        )
    return steps


def _undated(path: str) -> str:
    """A file's name without a leading number (`20260211203856_add_refs.exs` → `add_refs.exs`)."""
    return DATED_NAME_RE.sub("", path.rsplit("/", 1)[-1])


def _commit_step(v: View) -> str:
    """ "commit", with `git add -f` for uncommitted files under a path git ignores (learned from
    an earlier `git add` that failed on it)."""
    ignored = [m.group(1).rstrip("/") for e in v.state.errors if (m := _IGNORED_RE.search(e.line))]
    forced = [r for r in v.dirty if any(f"/{d}/" in f"/{v.rel(r.path)}" for d in ignored)]
    if not forced:
        return "commit"
    return f"commit (add {listing([v.path(r.path) for r in forced], 3)} with `git add -f`: git ignores that directory)"


def _closes_before_commit(v: View) -> bool:
    """Whether this agent closed its tasks before committing them (its habit so far)."""
    commits = {c.sha: c.seq for c in v.state.git.commits}
    before = [t.closed < commits[t.commits[0]] for t in v.tasks if t.closed and t.commits and t.commits[0] in commits]
    return bool(before) and sum(before) * 2 > len(before)


def done_checks(task: Task) -> list[str]:
    """The checks a task's definition of done names (`mix test test/x_test.exs` passes), as
    written: what must pass before it is closed."""
    _intro, done = task_spec(task.note)
    spans = [span.strip() for item in done for span in _COMMAND_SPAN_RE.findall(item)]
    return list(dict.fromkeys(s for s in spans if check_kind(s) in CURRENT_KINDS))


def _arguments(command: str, runner: str) -> list[str]:
    """The words after `runner` in `command` up to its first pipe, chain or redirect, less
    options: the paths a check was given."""
    rest = command.split(runner, 1)[1] if runner in command else ""
    for end in ("|", "&&", ";", ">"):
        rest = rest.split(end, 1)[0]
    return [w for w in rest.split() if not w.startswith("-")]


def _covers(run: str, named: str) -> bool:
    """Whether a run of a check covers the check a task names: the same runner given every path
    the task names, or given none (a runner with no paths runs all of them)."""
    runner = check_runner(named)
    if not runner or check_runner(run) != runner:
        return named in run
    given = _arguments(run, runner)
    return not given or all(a in given for a in _arguments(named, runner))


def _passed_since(v: View, command: str) -> bool:
    """Whether a run that covers `command` (as the task names it) passed after the latest edits."""
    return any(c.ok and not v.stale(c) and _covers(c.command, command) for c in v.checks)


def _finish(v: View, task: Task | None) -> list[str]:
    """What remains of the work in progress: what the task says to make, checks owed for the
    latest edits (the ones the task's definition of done names, as it names them), the commit
    and the tracker's close (in the order the agent has kept), the push the earlier commits had."""
    steps = _to_do(v, task) if task is not None else []
    stale = [c for c in _check_runs(v) if v.stale(c) or not c.ok]
    named = [c for c in done_checks(task) if not _passed_since(v, c)] if task is not None else []
    if named:
        # The task says which checks judge it: those, as it words them; a failing run stays owed.
        failing = [
            code(c.suite or c.command, 60) for c in stale if not c.ok and not any(_covers(c.command, n) for n in named)
        ]
        steps.append(
            f"run {listing([code(n, 80) for n in named] + failing)} (its done-when names {'them' if len(named) > 1 else 'it'})"
        )
    elif stale or (v.dirty and not v.checks and v.state.git.commits):
        steps.append(
            "run " + listing([code(c.suite or c.command, 60) for c in stale]) if stale else "check the changes"
        )
    elif task is not None and task.started and not _check_runs(v):
        # Edits made for the task that no test, lint or build has run after.
        edits = v.edits_note(task.started, lead="the edits of")
        if edits:
            steps.append(f"check {edits}, which no test, lint or build run came after")
    wrap = []
    if v.dirty or (task is not None and not task.commits and v.state.git.commits):
        wrap.append(_commit_step(v))
    if task is not None and task.source not in ("todo", "plan"):
        wrap.append(f"close {code(task.key)}")
    steps += list(reversed(wrap)) if _closes_before_commit(v) and len(wrap) == 2 else wrap
    if (v.dirty or task is not None) and v.state.git.pushes and v.state.git.commits:
        steps.append("push (the earlier commits were pushed)")
    return steps


def _owed_by_request(v: View) -> list[str]:
    request = v.latest_request
    if request is None:
        return []
    owed = []
    commits = v.state.git.commits
    commits_after = [c for c in commits if c.seq > request.seq]
    # Owed only while there is something to do: "did you push?" after everything was pushed and
    # the tree is clean asks for an answer, not a push.
    if _ASKED_COMMIT_RE.search(request.text) and not commits_after and (v.dirty or not v.git_seen):
        owed.append("commit (the latest request asks for it)")
    pushed_after = any((c.pushed_seq or 0) > request.seq for c in commits)
    if _ASKED_PUSH_RE.search(request.text) and not pushed_after and not (commits and all(c.pushed_to for c in commits)):
        owed.append("push (the latest request asks for it)")
    return owed


def whole_sentences(text: str, limit: int) -> str:
    """`text` on one line within `limit`, ending at a sentence's end (never mid-sentence): the
    sentences that fit, else its first sentence cut at a word."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(flat[:limit])]
    return flat[: ends[-1]] if ends else one_line(flat, limit)


def _task_brief(v: View, task: Task) -> str:
    """A task not started yet, in its description's own words: its first paragraph in whole
    sentences, the files it lists as new and to change, its definition of done, and the message
    holding the whole description."""
    if not task.note or v.level > TERSE:
        return ""
    intro, done = task_spec(task.note)
    parts = [whole_sentences(intro, v.chars(500))] if intro else []
    if task.outputs:
        parts.append("new files it lists: " + listing([code(p, 80) for p in task.outputs], 8))
    if task.touches:
        parts.append("files it lists to change: " + listing([code(p, 80) for p in task.touches], 8))
    if done:
        parts.append("done when: " + "; ".join(done))
    whole = f" (its whole description: {v.cite(task.note_seq)})" if task.note_seq else ""
    return ": " + ". ".join(p[0].upper() + p[1:].rstrip(".") for p in parts) + "." + whole if parts else ""


def next_steps(v: View) -> list[str]:
    out: list[str] = []
    turn = v.state.turn
    request = v.latest_request
    if request is not None and turn.request == request.seq and turn.calls == 0 and not turn.ended:
        out.append(f"Answer the person's latest message ({v.cite(request.seq)}): {quoted(request.text, 200)}")
    for streak in v.blockers:
        out.append(
            f"Get past the failing {code(v.streak_name(streak), 80)} "
            f"(failed in each of its last {streak.runs} runs, {v.cite(streak.first, streak.last)}; the command lines tried are under Where Things Stand)."
        )
    out += [_failing_step(v, check) for check in v.failing if not v.blocks(check)]
    out += _collect_steps(v)
    for task in v.current:
        steps = _finish(v, task)
        out.append(f"Finish {v.task_name(task, limit=70)}" + (": " + ", then ".join(steps) + "." if steps else "."))
    if not v.current:
        steps = _finish(v, None) if v.dirty else []
        if steps:
            out.append("Finish the uncommitted work: " + ", then ".join(steps) + ".")
    if v.unpushed and not v.dirty:
        out.append(f"Push {_shas(v.unpushed)} (the earlier commits were pushed).")
    out += [s[0].upper() + s[1:] + "." for s in _owed_by_request(v) if not any(s.split()[0] in o for o in out)]
    # Open tracker items are next only when this work has been taking them on (one was started
    # or closed here); a session that only created or listed them leaves them to whoever asks.
    working = any(t.started or t.closed for t in v.tasks if t.source != "todo")
    given = [t for t in v.open_tasks if not v.follow_up(t)]
    if given and not working:
        names = [v.task_name(t, limit=80) for t in given if t.key not in v.parents and t.source != "todo"]
        if names:
            out.append(
                f"Open in the tracker, none started in this history (not asked to be implemented so far): {listing(names, 6)}."
            )
    out += _open_in_order(v, [t for t in given if working or t.source == "todo"][:4], bool(out))
    if turn.submitted is None and not (turn.ended and turn.report is not None):
        out += _owed_since_edits(v)
    if v.state.people.handover and turn.submitted is None:
        if not out and not turn.ended:
            out.append(_continue(v, "the task"))
        out.append(
            f"When the task is done, hand it in with `{v.state.people.handover}` (the task's instructions say so)."
        )
    if not out:
        out.append(_finished(v))
    return _with_follow_ups(v, out)[:MAX_NEXT]


def _open_in_order(v: View, tasks: list[Task], after_others: bool) -> list[str]:
    """The other open tasks, each with what the tracker showed blocks it: a todo list's in its
    own order; a tracker's in no order (the history does not set one), the first that nothing
    open blocks in its own words."""
    out: list[str] = []
    tasks = [t for t in tasks if t.key not in v.parents]  # an epic is closed with its children
    blocked = {
        t.key: [
            b
            for b in t.blocked_by
            if b in v.state.tasks.tasks and v.state.tasks.tasks[b].status != "closed" and b not in v.parents
        ]
        for t in tasks
    }
    tracked = [t for t in tasks if t.source != "todo"]
    ready = next((t for t in tracked if not blocked[t.key]), tracked[0] if tracked else None)
    for task in tasks:
        blockers = listing([code(b) for b in blocked[task.key]], 3)
        after = f" (blocked by {blockers})" if blockers else ""
        # The task in its own words: what it asks, the files it names, when it is done (a
        # description cut mid-sentence loses its remaining items); the others by intro.
        about = _task_brief(v, task) if task is ready else ""
        if not about:
            intro, _done = task_spec(task.note)
            about = f": {clipped(intro, v.chars(300))}" if intro else ""
        if task.source == "todo":
            lead = "Then" if after_others or out else "Next on the todo list:"  # not "Then" after nothing
        elif v.begun(task) and task.begun is not None:
            # Its work began by the agent's words, the tracker still showing it open.
            out.append(
                f"Continue {v.task_name(task, limit=80)}, begun at {v.cite(task.begun.seq)} (the tracker still "
                f"shows it open{', blocked by ' + blockers if blockers else ''}){about}"
            )
            continue
        else:
            lead = "Also open:" if after_others or out else "Open in the tracker:"
        out.append(f"{lead} {v.task_name(task, limit=80)}{after}{about}")
    return out


def _collect_steps(v: View) -> list[str]:
    """A check started in the background and not seen to end: its result is still to be read
    (nothing is known of it before that)."""
    return [
        f"Collect the result of {code(job.command, 80)}, started in the background at {v.cite(job.seq)} (ID `{job.id}`)"
        + (f", still running at the poll of {v.cite(job.polled)}" if job.polled else "")
        + ", or run it again: its outcome is not known."
        for job in v.state.jobs.values()
        if job.check
    ]


def _failing_step(v: View, check: Check) -> str:
    failure = f" ({code(check.failure, 160)})" if check.failure else ""
    after = v.edits_note(check.seq, lead="and the edits of")
    if after:
        # A fix was tried after the failure: whether it worked is what a run will say.
        run = code(check.failed_command or check.command, 80)  # as it failed (a filtered run shows less)
        return f"Run {run} again: it failed at {v.cite(check.seq)}{failure}, {after} came after it."
    return f"Fix the failing {code(check.failed_command or check.command, 80)}{failure}."


def _with_follow_ups(v: View, out: list[str]) -> list[str]:
    """The steps, then what the agent filed for later: the person's to schedule, no next step."""
    filed = [t for t in v.open_tasks if v.follow_up(t) and t.source != "todo"]
    if not filed:
        return out
    return [
        *out[: MAX_NEXT - 1],
        f"Not a step unless the person asks: the follow-up{'s' if len(filed) > 1 else ''} the agent filed, "
        f"{listing([v.task_name(t, limit=80) + f' ({v.cite(t.opened)})' for t in filed], 4)}.",
    ]


def _owed_since_edits(v: View) -> list[str]:
    """What the latest edits leave owed in the turn under way: an edit the tool refused (the file
    is as it was) and not redone, and a run of a script this work wrote, or of a check where git
    did not run, that came before later edits (its outcome does not cover them)."""
    steps = v.state.turn.steps
    out = []
    refused = [s for s in steps if s.kind == "edit" and s.ok is False and s.detail != "refused"]
    if refused:
        last = refused[-1]
        redone = any(s.seq > last.seq and s.kind == "edit" and s.ok and s.what == last.what for s in steps)
        if not redone:
            why = f": {code(last.detail, 160)}" if last.detail else ""
            out.append(
                f"Redo {step_told(v, last).replace('an edit of', 'the edit of', 1)}: the tool refused it at {v.cite(last.seq)} and the file is as it was{why}."
            )
    runs = [
        s
        for s in steps
        if s.kind in ("run", "check")
        and s.ok is not None
        and s.what.startswith("`")
        and not is_probe(s.what.strip("`"))
    ]
    edited = [s for s in steps if s.kind == "edit" and s.ok]
    if not runs:
        if edited and v.state.people.handover and len(steps) < MAX_STEPS_SEEN:
            # The whole turn is in view and nothing ran after its edits.
            note = v.edits_note(edited[0].seq - 1, lead="the edits of")
            if note:
                out.append(f"Run what the edits change: no command ran after {note}.")
        return out
    last_run = runs[-1]
    changed = [r for r in v.changed_files if r.edits and r.state != "deleted"]
    words = {w.strip("`'\"").rsplit("/", 1)[-1] for w in last_run.what.split()}
    named = {r.path for r in changed if r.path.rsplit("/", 1)[-1] in words and "." in r.path.rsplit("/", 1)[-1]}
    current = last_run.kind == "check" and check_kind(last_run.what.strip("`")) in CURRENT_KINDS
    # A failing check's run owed again is told with its failure (Next Steps' failing step).
    if not named and not (current and not v.git_seen and not v.failing):
        return out
    # A check (a suite, a linter, a build) covers any file; a script's run, the script it names
    # and the project's code it may import, not another script this history wrote beside it.
    only = {r.path for r in changed if r.path in named or not r.created} if last_run.kind == "run" else None
    note = v.edits_note(last_run.seq, lead="before the edits of", only=only)
    if note and any(s.seq > last_run.seq and s.kind == "edit" and s.ok for s in steps):
        out.append(f"Run {last_run.what} again: its last run ({v.cite(last_run.seq)}) was {note}.")
    return out


# A final report that is about trouble: errors, a failure, something missing, a question.
_TROUBLE_RE = re.compile(
    r"(?i)(?<!\bno )(?<!\b0 )(?<!\bzero )(?<!\bwithout )(?<!\bfixed )(?<!\bfixed the )"
    r"\b(?:errors?|fail(?:s|ed|ing|ure|ures)?|broken|mismatch(?:es)?|not working|doesn'?t work|"
    r"never (?:committed|pushed)|reverted?)\b"
)


def _raises_trouble(text: str) -> bool:
    tail = text.strip()[-300:]
    return tail.endswith("?") or bool(_TROUBLE_RE.search(tail))


def _finished(v: View) -> str:
    turn = v.state.turn
    if turn.submitted is not None:
        said = turn.submit_output.strip()
        bare = said.strip("'\" \n")
        if not said or (len(bare) <= 200 and "\n" not in bare and bare in turn.submitted.text):
            # A result that is empty or only repeats what was handed in says nothing of its
            # acceptance: what was submitted is told, not that the work is done.
            echo = f"its result only repeats it ({quoted(said, 120)})" if said else "its result is empty"
            return (
                f"Handed in {code(turn.submitted.text)} ({v.cite(turn.submitted.seq)}); {echo}, which shows no "
                "acceptance: check that it was accepted before treating the task as done."
            )
        return "Nothing further: the work was handed in."
    if turn.ended and turn.report is not None:
        if cut_off(turn.report.text):
            # A reply cut mid-sentence is neither a finish nor a report to act on.
            return (
                f"The agent's last message ({v.cite(turn.report.seq)}) ends mid-sentence ({tail_quoted(turn.report.text, 160)}): "
                "take up the work from what it was saying (see Where Things Stand), or ask the person."
            )
        asked = asked_said(v)
        if asked:
            # A reply that asks the person leaves the request open: the answer comes first.
            return f"Wait for the person's answer to the agent's question ({v.cite(turn.report.seq)}): {asked}"
        if _raises_trouble(turn.report.text):
            # A report that ends on a problem or a question is not a finish.
            return (
                f"The agent's last report ({v.cite(turn.report.seq)}) left this open: "
                f"{quoted(turn.report.text[-400:], v.chars(300))} — settle it before going on (if it asked the person, wait for the answer)."
            )
        return f"The work appears finished (the agent reported at {v.cite(turn.report.seq)}): wait for the person's next request."
    return _continue(v, "the latest request")


def _continue(v: View, what: str) -> str:
    """Go on from where the agent stopped: when its last call returned, from that result (the
    history holds it; running the call again would only repeat it)."""
    turn = v.state.turn
    last = turn.steps[-1] if turn.steps else None
    alone = last is not None and sum(1 for s in turn.steps if s.seq == last.seq) == 1
    if (
        last is None
        or last.ok is None
        or not alone
        or not last.what.startswith("`")
        or (turn.said is not None and turn.said.seq > last.seq)
    ):
        return f"Continue {what} from where the agent stopped (see Where Things Stand)."
    # A command that returned: what it printed is in the history, the next step starts from it.
    printed = last.detail.removeprefix("printed: ") if last.detail.startswith("printed: ") else ""
    result = (
        f"printed {code(printed, 200)}"
        if printed
        else f"{'failed' if last.ok is False else 'went through'}{': ' + code(last.detail, 160) if last.detail else ''}"
    )
    return f"Continue {what} from the result of {last.what} ({v.cite(last.seq)}), which {result} (no need to run it again)."
