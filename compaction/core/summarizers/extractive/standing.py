"""Where things stand, and what is next: computed from the state as of the newest message.

These are the sentences a reader needs first. Every one is built from state (a task's
status, a commit, a file's uncommitted edits, a check's latest run); the agent's words appear
only quoted and labelled as the agent's.
"""

from __future__ import annotations

import re

from compaction.core.summarizers.extractive.asked import open_question
from compaction.core.summarizers.extractive.view import COMPACT, TERSE, View
from compaction.core.text_heuristics import SENTENCE_END_RE
from compaction.core.vocabulary import READ_FAILED_RE
from compaction.core.work.parse import EXCERPT_LEAD, one_line
from compaction.core.work.reducers.turn import cut_off
from compaction.core.work.state import Check, Commit, FileRecord, Person, Step, Streak, Task

REQUEST_CHARS = 1_500
REPLY_GIST_CHARS = 300
WORDS_CHARS = 280
MAX_LISTED = 6
MAX_NEXT = 6
MAX_STEPS_SEEN = 12  # turn.MAX_STEPS: fewer steps than that is the whole turn
# A word that can name what the person's rule is about (five letters or more: not "the", "use").
SUBJECT_WORD_RE = re.compile(r"[a-z][a-z0-9_]{4,}")
# A file name that starts with a number (a timestamp or a sequence number, as generated
# migrations are named): the name without it says which file it is.
DATED_NAME_RE = re.compile(r"^\d{3,}[_-]")
# What English adds to a word without changing what it names.
INFLECTIONS = frozenset({"s", "es", "d", "ed", "ing", "er", "ers", "ly"})
# Words too common to name what a rule is about.
SUBJECT_STOPWORDS = frozenset(
    "about after again always before being could doesn don't every first never other really should "
    "still their there these thing things think those using where which while would without make sure "
    "please maybe something because".split()
)


def code(text: str, limit: int = 100) -> str:
    """`text` as a code span, whole up to `limit` (a span holding a backtick is fenced by two),
    its spacing as written (an error line is quoted exactly)."""
    flat = " ".join(str(text).splitlines())
    flat = flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
    return f"`` {flat} ``" if "`" in flat else f"`{flat}`"


_SENTENCE_END_RE = re.compile(r"[.!?;](?=\s)")


def clipped(text: str, limit: int) -> str:
    """`text` on one line within `limit` characters: cut after its last whole sentence when
    that keeps at least half of it (a sentence cut mid-way reads as a different claim), else
    at a word."""
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        ends = [m.end() for m in _SENTENCE_END_RE.finditer(flat[: limit - 1])]
        if ends and ends[-1] >= limit // 2:
            flat = flat[: ends[-1]] + " …"
    return one_line(flat, limit)


# A report's opening that only announces it ("Now I have enough information to provide a
# comprehensive evaluation. Let me compile my findings:"): the report starts after it.
_ANNOUNCES_RE = re.compile(
    r"(?i)^\W*(?:(?:perfect|great|excellent|good|ok(?:ay)?|alright)[!.,]\s*)?(?:now,?\s+)?"
    r"(?:i (?:now )?have (?:enough|all the) (?:information|context|data)|let me (?:compile|summarize|write up|put together|present)|"
    r"here(?:'s| is) (?:my|the) (?:summary|evaluation|report|analysis))\b[^.!?:]*[.!?:]\s*"
)


def report_text(text: str) -> str:
    """The agent's report without the sentences that only announce it."""
    rest = text.strip()
    for _ in range(3):
        found = _ANNOUNCES_RE.match(rest)
        if found is None or not rest[found.end() :].strip():
            break
        rest = rest[found.end() :].lstrip(" -\n")
    return rest


def quoted(text: str, limit: int) -> str:
    return '"' + clipped(text, limit).replace('"', "'") + '"'


def asked_said(v: View) -> str:
    """The questions the agent's last reply put to the person, quoted within the budget ("" when none)."""
    asked = open_question(v)
    return quoted(" … ".join(clipped(q, v.chars(240)) for q in asked), v.chars(420)) if asked else ""


def words_of(text: str, limit: int, seq: int) -> str:
    """Someone's words quoted whole up to `limit`; cut, with how much was left out and where it
    is stored (a quote cut silently reads as the whole of what was said)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return quoted(flat, limit)
    shown = clipped(flat, limit).removesuffix("…").removesuffix(" …").rstrip()
    left = len(flat) - len(shown)
    return '"' + shown.replace('"', "'") + f' […]" ({left:,} more characters in #{seq})'


def block_of(text: str, limit: int, seq: int) -> str:
    """Someone's words whole up to `limit`, their lines kept (a description's list reads as a
    list), indented under the bullet that introduces them; cut at a line, with how much was left
    out and where it is stored."""
    lines = [line.rstrip() for line in str(text).strip().splitlines() if line.strip()]
    shown: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > limit:
            break
        shown.append(line)
        used += len(line) + 1
    left = sum(len(line) + 1 for line in lines[len(shown) :])
    if not shown:
        return "\n  " + words_of(text, limit, seq)
    more = f"\n  […] ({left:,} more characters in #{seq})" if left else ""
    return "".join(f"\n  {line}" for line in shown) + more


_HEADING_RE = re.compile(r"^#{1,4}\s+(\S.*)$")


def expansion_of(text: str, limit: int, seq: int) -> str:
    """What a command brought with it, its lines kept up to `limit`, cut at a line; the headings
    of what was cut are named (its later steps are known to exist), with how much was left out."""
    shown = block_of(text, limit, seq)
    if "[…] (" not in shown:
        return shown
    kept = {line.strip() for line in shown.splitlines()}
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    cut: list[str] = []
    fenced = False
    for line in lines:
        fenced ^= line.startswith("```")  # a heading inside a code block is an example's
        if not fenced and line not in kept and (m := _HEADING_RE.match(line)):
            cut.append(m.group(1).strip(" #*"))
    if cut:
        shown += f"\n  Its later sections, not quoted: {listing([quoted(h, 80) for h in cut], 8)}."
    return shown


def listing(items: list[str], limit: int = MAX_LISTED) -> str:
    shown = items[:limit]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    if len(shown) <= 1:
        return "".join(shown) + more
    return ", ".join(shown[:-1]) + (", " if more else " and ") + shown[-1] + more


def _shas(commits: list[Commit]) -> str:
    return listing([c.sha[:7] for c in commits], 8)


# --- tasks --------------------------------------------------------------------------------------


def _tracker_progress(v: View) -> list[str]:
    tasks = [t for t in v.tasks if t.source != "todo"]
    if not tasks:
        return []
    closed = [t for t in tasks if t.status == "closed"]
    out = []
    if closed:
        out.append(f"Closed: {listing([v.task_name(t, title=False) for t in closed], 8)}.")
    for task in v.current:
        if task.source != "todo":
            out.append(f"In progress: {v.task_name(task)}.")
    waiting = [t for t in v.open_tasks if t.source != "todo" and not v.follow_up(t)]
    filed = [t for t in v.open_tasks if t.source != "todo" and v.follow_up(t)]
    if filed:
        out.append(
            f"Filed by the agent in this history and still open (not started): {listing([v.task_name(t, limit=60) + f' ({v.cite(t.opened)})' for t in filed], 4)}."
        )
    epics = [t for t in waiting if t.status == "in_progress"]  # in progress while its children are
    begun = [t for t in waiting if v.begun(t)]
    waiting = [t for t in waiting if t not in epics and t not in begun]
    for task in begun:
        words = task.begun
        assert words is not None  # v.begun says so
        out.append(
            f"Begun though the tracker still shows it open: {v.task_name(task, limit=60)} — the agent at "
            f"{v.cite(words.seq)}: {quoted(words.text, 140)}; edits followed from {v.cite(v.begun(task))}."
        )
    if epics:
        out.append(f"Epic in progress: {listing([v.task_name(t, limit=60) for t in epics], 4)}.")
    if waiting:
        # Their status as the tracker last showed it ("still" would say no work on them began).
        out.append(f"Open: {listing([v.task_name(t, limit=60) for t in waiting], 8 if v.level <= TERSE else 4)}.")
    return out


def _todo_progress(v: View) -> list[str]:
    todos = [t for t in v.tasks if t.source == "todo"]
    if not todos:
        return []
    done = [t for t in todos if t.status == "closed"]
    now = [t for t in todos if t.status == "in_progress"]
    later = [t for t in todos if t.status == "open"]
    said = f"The agent's todo list ({v.cite(v.state.tasks.todo_seq)}): {len(done)} of {len(todos)} done"
    if now:
        said += f"; in progress: {listing([v.task_name(t, limit=100) for t in now], 4)}"
    if done and v.level <= COMPACT:
        said += f"; done: {listing([v.task_name(t, limit=60) for t in done], 12)}"
    if later:
        said += f"; pending: {listing([v.task_name(t, limit=100) for t in later], 12 if v.level <= TERSE else 3)}"
    return [said + "."]


# --- the working tree, checks, commits -----------------------------------------------------------


def _check_runs(v: View) -> list[Check]:
    """The checks worth re-running: each test and lint runner seen, the latest run of each."""
    useful = [c for c in v.checks if c.kind in ("test", "lint", "typecheck", "build")]
    return useful[-3:]


def check_said(v: View, check: Check, *, limit: int = 100, edits: bool = True, caveat: str = "full") -> str:
    """One check's latest run as the evidence shows it: the outcome by its exit status and the
    tool's verdict line, at its message, and what changed after it. The pipe that hid its exit
    status: said in full, named only ("short": the caller says once what that means), or not at
    all ("": the caller says it once for several runs)."""
    run = code(check.command, limit)
    at = v.cite(check.seq)
    if check.findings:
        said = f"{run} reported findings at {at}: {code(check.tally, 160)}"
    elif not check.ok:
        said = f"{run} failed at {at}" + (f": {code(check.failure, 200)}" if check.failure else "")
    elif check.piped:
        printed = f"printed {code(check.tally, 120)}" if check.tally else "printed no failure"
        pipe = {
            "full": f" (through `| {check.piped}`: its exit status unseen)",
            "short": f" (through `| {check.piped}`)",
        }
        said = f"{run} {printed} at {at}" + pipe.get(caveat, "")
    else:
        said = f"{run} passed at {at}" + (f", reporting {check.tally.rstrip('.')}" if check.tally else "")
    if check.suite and check.suite != check.command and check.suite_seq:
        said += f"; the whole suite ({code(check.suite, 60)}) last {'passed' if check.suite_ok else 'failed'} at {v.cite(check.suite_seq)}"
    if check.partial_seq and check.failed_seq:
        said += (
            f"; {code(check.failed_command, 80)} failed at {v.cite(check.failed_seq)}"
            f" and no later run covered it (the later pass ran other targets)"
        )
    note = v.edits_note(check.seq) if check.kind in CURRENT_KINDS and edits else ""
    return said + (f", {note}" if note else "")


# The checks whose result a later edit makes stale (a migration or a one-off run is history).
CURRENT_KINDS = ("test", "lint", "typecheck", "build")


def piped_said(runs: list[Check]) -> str:
    """The pipe that hid the exit status of several runs, said once: "`mix test` and `mix credo`
    ran through `| tail`: their exit status is unseen"."""
    piped = [c for c in runs if c.piped and not c.findings and c.ok]
    if not piped:
        return ""
    pipes = list(dict.fromkeys(c.piped for c in piped))
    through = " or ".join(f"`| {p}`" for p in pipes)
    if len(piped) == 1:
        return f"{code(piped[0].command, 60)} ran through {through}: its exit status is unseen"
    if len(piped) == len(runs):
        return f"all ran through {through}: their exit status is unseen"
    return f"{listing([code(c.command, 60) for c in piped])} ran through {through}: their exit status is unseen"


def checks_said(v: View, runs: list[Check], *, edits_told: bool = False) -> str:
    """Several checks in one sentence: each outcome at its message, then the edits after the
    latest of them (every one of them ran before those), each caveat once (`edits_told`: the
    sentence before names those edits)."""
    said = [check_said(v, c, limit=60, edits=False, caveat="") for c in runs]
    lead = "all before" if len(runs) > 1 else "before"
    note = f"{lead} those edits" if edits_told else v.edits_note(max(c.seq for c in runs), lead=f"{lead} the edits of")
    sep = "; " if len(runs) > 1 else ", "
    piped = piped_said(runs)
    return "Checks: " + "; ".join(said) + (f"{sep}{note}" if note else "") + (f" ({piped})" if piped else "") + "."


def stated_checks(v: View) -> list[Check]:
    """The checks Where Things Stand states (so other sections need not state them again)."""
    if not v.git_seen:
        since = v.latest_request.seq if v.latest_request else 0
        changed = [
            r for r in v.changed_files if r.last >= since and r.edits and not (r.state == "deleted" and r.created)
        ]
        return [c for c in _check_runs(v) if c.seq >= since] if changed else []
    if not v.dirty:
        return []
    runs = _check_runs(v)
    stale = [c for c in runs if v.stale(c)]
    return stale or runs


def outside_said(v: View) -> str:
    """When a clean `git status` followed edits no commit of this history took: that the latest
    commit is not known from here (a hook or a tool may have committed them)."""
    git = v.state.git
    last = v.last_commit
    if not git.outside_seq or (last is not None and last.seq > git.outside_seq):
        return ""
    recs = [v.state.files[p] for p in git.outside_files if p in v.state.files]
    seqs = [s for r in recs for s in (r.edit_seqs or [r.last]) if s < git.outside_seq]
    names = listing([v.path(r.path) for r in recs], 4)
    return (
        f", though no commit of this history took the edits of {names} ({v.cite(min(seqs, default=0), max(seqs, default=0))}):"
        " something else committed them (a hook, a tool), git ignores them, or they were undone — the latest commit is"
        " not known from this history (`git log` would show it)"
    )


def _no_git_sentence(v: View) -> list[str]:
    """Without git in the history: what the latest request's turn changed, and its checks."""
    since = v.latest_request.seq if v.latest_request else 0
    # A file written and removed again in this history (a reproduction script) left nothing.
    changed = [r for r in v.changed_files if r.last >= since and r.edits and not (r.state == "deleted" and r.created)]
    if not changed:
        return []
    said = [
        f"Changed since the latest request: {listing([v.path(r.path) for r in changed])} "
        + (
            "(git printed no commit or `git status` in this history)."
            if any(c.startswith("git ") for c in v.state.commands)
            else "(no git command ran in this history)."
        )
    ]
    runs = [c for c in _check_runs(v) if c.seq >= since]
    if runs:
        said.append(checks_said(v, runs).replace("Checks: ", "Checks since: ", 1))
    return said


def tree_said(v: View) -> list[str]:
    """The working tree as the evidence shows it: what git's own `git status` printed after the
    last commit and edit, else what was edited after the last commit with no `git status` since
    (a claim about the edits, never git's word)."""
    git = v.state.git
    last = v.last_commit
    status = git.tree_seq if git.tree is not None else 0
    after = f"after {code(last.sha[:7])} ({v.cite(last.seq)})" if last is not None else "in this history"
    seen = [r for r in v.dirty if status > r.last]
    unseen = [r for r in v.dirty if status <= r.last]
    extra = [f"{v.path(p)} ({s})" for p, s in v.tree_extra] if status >= (last.seq if last else 0) else []
    out = []
    if seen or extra:
        names = [v.path(r.path) for r in seen] + extra
        out.append(f"`git status` at {v.cite(status)} shows uncommitted: {listing(names, 12)}")
    if unseen:
        seqs = _unseen_seqs(v, unseen)
        names = [v.path(r.path) for r in unseen]
        since = f"the last `git status` was at {v.cite(status)}" if status else "no `git status` ran"
        out.append(f"Edited {after}, {since}: {listing(names, 12)} ({v.cite(min(seqs), max(seqs))})")
    if out:
        return out
    if status and status >= max(last.seq if last else 0, v.last_edit):
        return [
            f"`git status` at {v.cite(status)} showed nothing uncommitted, after the last commit and edit"
            + outside_said(v)
        ]
    if last is not None:
        told = f"the last `git status` was at {v.cite(status)}" if status else "no `git status` ran"
        return [f"No file was edited {after}; {told}, so the tree is known only from the edits"]
    return []


def _unseen_seqs(v: View, unseen: list[FileRecord]) -> list[int]:
    """The messages of the edits made after the last commit to files no `git status` has shown since."""
    last = v.last_commit
    return [s for r in unseen for s in (r.edit_seqs or [r.last]) if s > (last.seq if last else 0)] or [
        r.last for r in unseen
    ]


def _edits_told(v: View, runs: list[Check]) -> bool:
    """Whether the edits after these runs are exactly the ones the working-tree sentence names
    (files edited after the last commit, no `git status` since), all made after every run."""
    status = v.state.git.tree_seq if v.state.git.tree is not None else 0
    unseen = [r for r in v.dirty if status <= r.last]
    if not unseen or not runs:
        return False
    latest = max(c.seq for c in runs)
    after = {rec.path for rec, _seqs in v.edits_after(latest)}
    return after == {r.path for r in unseen} and latest < min(_unseen_seqs(v, unseen))


def _tree_sentence(v: View) -> list[str]:
    if not v.git_seen:
        return _no_git_sentence(v)
    dirty = v.dirty
    said = [line + "." for line in tree_said(v)]
    runs = stated_checks(v)
    if runs:
        said.append(checks_said(v, runs, edits_told=_edits_told(v, runs)))
    elif dirty:
        said.append("No test or build was run in this history.")
    return said


def _jobs_sentence(v: View) -> list[str]:
    """Commands started in the background whose end no poll or notice showed: no outcome, only
    that they were started (and a poll that found them still running)."""
    out = []
    for job in v.state.jobs.values():
        polled = (
            f"; the poll at {v.cite(job.polled)} showed it still running{' when its wait ran out' if job.timed_out else ''}"
            if job.polled
            else ""
        )
        out.append(
            f"Started in the background at {v.cite(job.seq)} (ID `{job.id}`), its end not seen: {code(job.command, 100)}{polled}."
        )
    return out


def _commit_sentence(v: View) -> list[str]:
    commits = [c for c in v.state.git.commits if c.subject]
    if not commits:
        return []
    pushed = [c for c in commits if c.pushed_to]
    where = f" on `{v.state.git.branch}`" if v.state.git.branch else ""
    said = f"Commits{where}: {_shas(commits)}"
    if pushed and len(pushed) == len(commits):
        said += f" — all pushed (to `{pushed[-1].pushed_to}`)"
    elif pushed:
        said += f" — not pushed: {_shas(v.unpushed)}"
    elif v.state.git.pushes == 0:
        said += " — none pushed in this history"
    return [said + "."]


def created_in(commit: Commit, path: str) -> bool:
    """Whether git printed "create mode" for `path` when it made `commit` (its paths are the
    repository's; the state's may be absolute)."""
    return any(path == made or path.endswith("/" + made) for made in commit.created)


def built_by(v: View, commit: Commit) -> list[str]:
    """What a commit's changes defined, from the code itself, a file at a time: what the files
    written whole define, the definitions edits added (not their sizes: the commit holds them)."""
    before = max((c.seq for c in v.state.git.commits if c.seq < commit.seq), default=0)
    out = []
    for path in commit.files:
        rec = v.state.files.get(path)
        said = []
        for q in rec.changes if rec is not None else []:
            # A file rewritten whole defines what it held before too: only a new file's count.
            new = "defining `" in q.text and rec is not None and rec.created
            if before < q.seq <= commit.seq and (q.text.startswith("adds `def") or new):
                what = q.text.partition("defining ")[2] or q.text.removeprefix("adds ")
                said.append(what.rpartition(" (")[0] if what.endswith(")") else what)
        if said:
            out.append(
                f"{v.path(path)} ({'new, ' if created_in(commit, path) else ''}{'; '.join(dict.fromkeys(said))})"
            )
    return out


def blocker_said(v: View, streak: Streak) -> str:
    """A command that keeps failing: how often, its error lines as printed (not a progress
    banner), and what was tried, so it is not tried again unchanged."""
    command = streak.commands[-1] if streak.commands else streak.key.partition(":")[2]
    name = streak.key.partition(":")[2] or command
    said = f"{code(name, 100)} failed in each of its last {streak.runs} runs ({v.cite(streak.first, streak.last)}), still failing at the end"
    if streak.lines:
        shown = streak.lines[:2] if v.level <= COMPACT else streak.lines[:1]
        said += ": " + "; ".join(code(line, 220 if v.level <= COMPACT else 140) for line in shown)
    said += f". The commands run: {listing([code(c, 100) for c in streak.commands], 4)}"
    return said


def steps_since_request(v: View) -> str:
    """What the turn of the latest request has done: the files it edited, the last run and how it went."""
    turn = v.state.turn
    steps = turn.steps
    if not steps:
        return ""
    edits = list(dict.fromkeys(s.what.split(" ", 1)[1] for s in steps if s.kind == "edit" and s.ok and " " in s.what))
    runs = [s for s in steps if s.kind in ("check", "run") and (s.ok is not None or _no_outcome(s))]
    said = []
    if edits:
        said.append("edited " + listing([v.path(p) for p in edits], 4))
    if runs:
        last = runs[-1]
        if last.ok is None:
            said.append(f"last ran {last.what} ({v.cite(last.seq)}), which {last.detail}")
        elif last.kind == "run" and last.ok:
            # A command that is no check: it ran; what it printed says how, not "passed".
            printed = (
                f", which printed {code(last.detail.removeprefix('printed: '), 200)}"
                if last.detail.startswith("printed: ")
                else ""
            )
            said.append(f"last ran {last.what} ({v.cite(last.seq)}){printed}")
        else:
            said.append(
                f"last ran {last.what} ({'passed' if last.ok else 'failed'}{': ' + last.detail if last.detail else ''}, {v.cite(last.seq)})"
            )
    later = [s for s in steps if s.kind in ("git", "tracker") and s.ok is not None and runs and s.seq > runs[-1].seq]
    if later:
        # The last command run is not that check: what ran after it, so "last ran" is not misread.
        then = later[-1]
        said[-1] += f", then {then.what} ({'failed, ' if then.ok is False else ''}{v.cite(then.seq)})"
    if not said:
        return ""
    return "Since the request: " + "; ".join(said)


def _no_outcome(step: Step) -> bool:
    """A run with no outcome to tell, and what it showed instead (started in the background, a count)."""
    return step.ok is None and step.detail not in ("", "refused")


def _failure_sentence(v: View) -> list[str]:
    out = [f"Blocked: {blocker_said(v, s)}." for s in v.blockers]
    for check in [c for c in v.failing if not v.blocks(c)]:
        failure = f": {code(check.failure, 200)}" if check.failure else ""
        if failure and check.failed_command and check.command != check.failed_command:
            # The line is the latest failing run's: named with its own command line, not the first's.
            failure = (
                f"; its latest run, {code(check.command, 80)} ({v.cite(check.seq)}), printed {code(check.failure, 200)}"
            )
        # Edits after its last run are an attempt not yet run: failing as far as the history shows.
        note = v.edits_note(check.seq, lead="; not run again since the edits of")
        out.append(
            f"Failing: {code(check.failed_command or check.command, 80)} since {v.cite(check.failed_seq or check.seq)}{failure}{note}."
        )
    blocking = {s.key for s in v.blockers}
    fresh = [e for e in v.open_errors if v.live(e) and not e.key.startswith("check:") and e.key not in blocking]
    if fresh and not v.failing and not v.blockers:
        error = fresh[-1]
        if error.key.startswith("cmd:"):
            out.append(
                f"Last error, not resolved yet ({v.cite(error.seq)}): {code(error.line, 200)} from {code(error.source, 80)}."
            )
        else:
            out.append(
                f"The last {code(error.source, 80)} was refused or failed ({v.cite(error.seq)}): {code(error.line, 200)}; nothing was changed by it."
            )
    return out


def step_told(v: View, step: Step) -> str:
    kind, _sep, rest = step.what.partition(" ")
    if step.kind in ("edit", "read", "search") and kind == step.kind and rest:
        return f"{ {'edit': 'an edit of', 'read': 'a read of', 'search': 'a search in'}[step.kind] } {v.path(rest)}"
    return step.what


def _went(step: Step) -> str:
    """How a call went, as its result shows: an empty search found nothing, a run that printed an
    error printed it."""
    if step.ok and step.detail in ("found nothing", "printed nothing"):
        return step.detail
    if step.ok and step.detail.startswith("printed: "):
        return f"ran, printing {code(step.detail.removeprefix('printed: '), 160)}"
    if step.ok:
        return "went through"
    if step.ok is False and step.kind == "read" and READ_FAILED_RE.search(step.detail[:300]):
        return "found no such file"  # what the read learned, not an error to fix
    if step.ok is False:
        return "failed"
    if _no_outcome(step):
        return step.detail
    return "was refused by the person" if step.detail == "refused" else "has no result yet"


def _stopped(v: View) -> list[str]:
    turn = v.state.turn
    out = []
    if turn.submitted is not None:
        out.append(f"The agent handed the work in with `{turn.submitted.text}` at {v.cite(turn.submitted.seq)}.")
    elif turn.ended and turn.report is not None and cut_off(turn.report.text):
        # A reply that stops mid-sentence reports nothing: its last words, where they stop.
        out.append(
            f"The agent's last message ({v.cite(turn.report.seq)}) ends mid-sentence, with no call after it: {tail_quoted(turn.report.text, v.chars(WORDS_CHARS))}"
        )
    elif turn.ended and turn.report is not None:
        out.append(
            f"The agent ended its turn at {v.cite(turn.report.seq)}, reporting: {quoted(report_text(turn.report.text), v.chars(WORDS_CHARS))}"
        )
        if asked_said(v):  # a reply that asks the person: the request waits for the answer
            out.append(f"The request is open, waiting for the person's answer to: {asked_said(v)}")
    elif (
        turn.request
        and not turn.steps
        and turn.request > max([turn.said.seq if turn.said else 0, *(c.seq for c in turn.pending.values())])
    ):
        # The history ends with the person's request: the agent's words before it belong to the
        # turn before (quoted with the request when it is a reply), not to work on it.
        out.append(f"The agent has not answered the latest request ({v.cite(turn.request)}) yet.")
    elif turn.pending:
        waiting = max(turn.pending.values(), key=lambda c: c.seq)
        out.append(f"The agent was waiting for the result of a {waiting.name} call ({v.cite(waiting.seq)}).")
    elif turn.said is not None:
        last = turn.steps[-1] if turn.steps else None
        if last is not None and last.seq >= turn.said.seq:
            together = [s for s in turn.steps if s.seq == last.seq]
            if len(together) > 1:
                # Calls made in parallel by one message: each with how it went, none "the last".
                calls = listing([f"{step_told(v, s)} {_went(s)}" for s in together], 4)
                said = f"The agent was mid-turn: its last message ({v.cite(last.seq)}) made {len(together)} calls at once: {calls}"
            else:
                said = f"The agent was mid-turn: its last call ({step_told(v, last)}) {_went(last)}"
            out.append(said + _words_with(v, last.seq, len(together) > 1))
        else:
            out.append(
                f"The agent was mid-turn; its latest words ({v.cite(turn.said.seq)}): {quoted(turn.said.text, v.chars(WORDS_CHARS))}"
            )
    if turn.interrupted and turn.interrupted >= max((s.seq for s in turn.steps), default=0):
        out.append(f"The person interrupted the agent at {v.cite(turn.interrupted)}.")
    demands = [d for d in v.state.people.demands if d.seq >= (v.latest_request.seq if v.latest_request else 0)]
    if demands:
        demand = demands[-1]
        said = f"The harness's hook demanded ({v.cite(demand.seq)}): {quoted(demand.text, 240)}"
        if turn.ended and turn.report is not None and turn.report.seq > demand.seq:
            # The hook runs when the agent stops: a stop after the demand drew no new one.
            said += f"; the agent's turn ended after it ({v.cite(turn.report.seq)}) without a new demand"
        out.append(said)
    return out


def _words_with(v: View, seq: int, several: bool) -> str:
    """The agent's words in the message that made its last calls; words of an earlier message
    are told as such (and not at all when they came before the latest request: another task's)."""
    said = v.state.turn.said
    if said is None:
        return ""
    if said.seq == seq:
        return f"; its words before {'them' if several else 'it'}: {quoted(said.text, v.chars(WORDS_CHARS))}"
    if said.seq < v.state.turn.request:
        return f"; {'those calls' if several else 'that call'} came without words"
    return (
        f"; {'those calls' if several else 'that call'} came without words; its last words, "
        f"at {v.cite(said.seq)}: {quoted(said.text, v.chars(WORDS_CHARS))}"
    )


def tail_quoted(text: str, limit: int) -> str:
    """The end of `text` quoted within `limit` (where it stops is what matters), from a sentence
    start when one is near."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return quoted(flat, limit)
    tail = flat[-(limit - 2) :]
    starts = [m.end() for m in _SENTENCE_END_RE.finditer(tail)]
    tail = tail[starts[0] :].lstrip() if starts and starts[0] <= len(tail) // 2 else tail.split(" ", 1)[-1]
    return '"… ' + tail.replace('"', "'") + '"'


# A short request that answers or points back ("yeah, do it all", "minor, this is a big change",
# "fix that") means nothing without the agent's words before it; "delete the custom theme" does.
REPLY_CHARS = 60
_REPLY_RE = re.compile(
    r"(?i)^\W*(?:y|yes|yeah|yep|yup|ok|okay|sure|go|go ahead|please|sounds good|no|nope|nah|agreed|correct|exactly)\b"
    r"|\b(?:it|that|this|these|those|them|both)\b"
)


def _replying_to(v: View, request: Person) -> str:
    if request.after is None or len(request.text) > REPLY_CHARS or not _REPLY_RE.search(request.text):
        return ""
    return f", in reply to the agent's {v.cite(request.after.seq)}: {_gist(request.after.text, max(160, v.chars(REPLY_GIST_CHARS)))}"


def _gist(text: str, limit: int) -> str:
    """The agent's words as a quote within `limit`: their beginning and, when they end on a
    question (what a reply answers: its last line, ending in "?"), that question whole."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    question = SENTENCE_END_RE.split(lines[-1])[-1] if lines and lines[-1].endswith("?") else ""
    flat = " ".join(text.split())
    if len(flat) <= limit or not question or len(question) > limit // 2 or len(lines) == 1:
        return quoted(flat, limit)
    head = " ".join(" ".join(lines[:-1]).split())
    return quoted(f"{clipped(head, limit - len(question) - 3).removesuffix(' …')} … {question}", limit)


def where_things_stand(v: View) -> list[str]:
    request = v.latest_request
    out = []
    if request is not None and len(v.requests) > 1:
        # A single request is the goal, quoted right below.
        how = ", typed while the agent worked" if request.queued else ""
        out.append(
            f"The person's latest request ({v.cite(request.seq)}{how}): {words_of(request.text, v.chars(REQUEST_CHARS), request.seq)}"
            + _replying_to(v, request)
        )
    out += _tracker_progress(v) + _todo_progress(v)
    out += _commit_sentence(v) + _tree_sentence(v) + _jobs_sentence(v) + _failure_sentence(v) + _stopped(v)
    # The blocker first: what the next agent must get past before anything else.
    out.sort(key=lambda line: not line.startswith("Blocked: "))
    if not out:
        calls = v.state.turn.calls
        out.append(
            f"The agent has made {calls} call{'s' if calls != 1 else ''} on the request below; nothing else is recorded yet."
            if calls
            else "Nothing has been done yet on the request below."
        )
    return out


# --- the work on the tasks in progress ----------------------------------------------------------


def _file_edits(v: View, recs: list[tuple[FileRecord, set[int]]]) -> str:
    """Each file's edits of `recs` (the edits' message numbers): what the agent said they were
    for, or the code they added."""
    told = []
    for rec, seqs in recs:
        said = {q.seq: f"the agent: {quoted(q.text, 120)}" for q in rec.purposes if q.seq in seqs}
        done = {
            q.seq: q.text
            for q in rec.changes
            if q.seq in seqs and (q.seq not in said or ("`" in q.text and not q.text.startswith(EXCERPT_LEAD)))
        }
        # What the code says first (a definition, a short line); the agent's words where its code
        # says little or only shows some of its lines.
        what = [done.get(seq) or said[seq] for seq in sorted(set(said) | set(done))][-4:]
        told.append(v.path(rec.path) + (f": {'; '.join(what)}" if what else ""))
    hidden = len(told) - 6
    more = f" · and {hidden} more file{'s' if hidden > 1 else ''}" if hidden > 0 else ""
    return " · ".join(told[-6:]) + more


def task_work(v: View) -> tuple[dict[str, str], str]:
    """What the work on the tasks in progress has done so far: for each task, the edits made
    while it was the only one of its kind (tracker or todo list) in progress; and once, the
    edits made while two or more were, which the history does not tie to one of them."""
    current = {t.key for t in v.current}
    mine: dict[str, list[tuple[FileRecord, set[int]]]] = {}
    shared: list[tuple[FileRecord, set[int]]] = []
    together: dict[str, Task] = {}
    for rec in v.changed_files:
        if not rec.edits:
            continue
        by_task: dict[str, set[int]] = {}
        unowned: set[int] = set()
        for seq in rec.edit_seqs:
            for todo in (False, True):
                working = v.working_at(seq, todo)
                if len(working) == 1 and working[0].key in current:
                    by_task.setdefault(working[0].key, set()).add(seq)
                elif len(working) > 1 and any(t.key in current for t in working):
                    unowned.add(seq)
                    together.update({t.key: t for t in working})
        for key, seqs in by_task.items():
            mine.setdefault(key, []).append((rec, seqs))
        if unowned:
            shared.append((rec, unowned))
    lines = {key: "Done so far — " + _file_edits(v, recs) for key, recs in mine.items()}
    if not shared:
        return lines, ""
    tasks = sorted(together.values(), key=lambda t: t.started or 0)
    first = min(min(seqs) for _rec, seqs in shared)
    names = listing([v.task_name(t, title=False) for t in tasks], 4)
    last = max(max(seqs) for _rec, seqs in shared)
    # A task the agent's words took on meanwhile, the tracker still showing it open.
    began = [t for t in v.open_tasks if v.begun(t) and t.begun is not None and t.begun.seq < last]
    also = "".join(
        f"; the agent took on {v.task_name(t, title=False)} at {v.cite(t.begun.seq)}" for t in began if t.begun
    )
    return lines, (
        f"Edits made while {names} were in progress at once (from {v.cite(first)}{also}); no status change "
        f"ties them to one of them — {_file_edits(v, shared)}"
    )
