"""Where things stand, and what is next: computed from the state as of the newest message.

These are the sentences a reader needs first. Every one is built from state (a task's
status, a commit, a file's uncommitted edits, a check's latest run); the agent's words appear
only quoted and labelled as the agent's.
"""

from __future__ import annotations

import re

from compaction.core.summarizers.extractive.view import COMPACT, TERSE, View
from compaction.core.text_heuristics import PARAGRAPH_BREAK_RE, SENTENCE_END_RE
from compaction.core.work.parse import one_line
from compaction.core.work.state import Check, Commit, FileRecord, Person, Step, Streak, Task

REQUEST_CHARS = 1_500
REPLY_GIST_CHARS = 300
WORDS_CHARS = 280
MAX_LISTED = 6
MAX_NEXT = 6
_ASKED_COMMIT_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bcommit\b(?! message)")
_ASKED_PUSH_RE = re.compile(r"(?i)(?<!n't )(?<!not )(?<!never )\bpush\b")


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
    waiting = [t for t in v.open_tasks if t.source != "todo"]
    if waiting:
        out.append(f"Still open: {listing([v.task_name(t, limit=60) for t in waiting], 8 if v.level <= TERSE else 4)}.")
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
        return [f"`git status` at {v.cite(status)} showed nothing uncommitted, after the last commit and edit"]
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
                f"{v.path(path)} ({'new, ' if rec is not None and rec.created else ''}{'; '.join(dict.fromkeys(said))})"
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
    runs = [s for s in steps if s.kind in ("check", "run") and s.ok is not None]
    said = []
    if edits:
        said.append("edited " + listing([v.path(p) for p in edits], 4))
    if runs:
        last = runs[-1]
        if last.kind == "run" and last.ok:
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
    if not said:
        return ""
    return "Since the request: " + "; ".join(said)


def _failure_sentence(v: View) -> list[str]:
    out = [f"Blocked: {blocker_said(v, s)}." for s in v.blockers]
    for check in [c for c in v.failing if not v.blocks(c)]:
        failure = f": {code(check.failure, 200)}" if check.failure else ""
        out.append(
            f"Failing: {code(check.failed_command or check.command, 80)} since {v.cite(check.failed_seq or check.seq)}{failure}."
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


def _step_told(v: View, step: Step) -> str:
    kind, _sep, rest = step.what.partition(" ")
    if step.kind in ("edit", "read", "search") and rest.startswith("/"):
        return f"{ {'edit': 'an edit of', 'read': 'a read of', 'search': 'a search in'}[step.kind] } {v.path(rest)}"
    return step.what


def _stopped(v: View) -> list[str]:
    turn = v.state.turn
    out = []
    if turn.submitted is not None:
        out.append(f"The agent handed the work in with `{turn.submitted.text}` at {v.cite(turn.submitted.seq)}.")
    elif turn.ended and turn.report is not None:
        out.append(
            f"The agent ended its turn at {v.cite(turn.report.seq)}, reporting: {quoted(report_text(turn.report.text), v.chars(WORDS_CHARS))}"
        )
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
            went = (
                "went through"
                if last.ok
                else "failed"
                if last.ok is False
                else "was refused by the person"
                if last.detail == "refused"
                else "has no result yet"
            )
            out.append(
                f"The agent was mid-turn: its last call ({_step_told(v, last)}) {went}; "
                f"its words before it: {quoted(turn.said.text, v.chars(WORDS_CHARS))}"
            )
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
    out += _commit_sentence(v) + _tree_sentence(v) + _failure_sentence(v) + _stopped(v)
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


# --- next steps ----------------------------------------------------------------------------------


_SPEC_DONE_RE = re.compile(r"(?im)^\s*(?:#+\s*)?(definition of done|acceptance criteria|done when|acceptance)\s*:?\s*$")
_BULLET_RE = re.compile(r"(?m)^\s*(?:[-*]|\d+[.)])\s+(.+?)\s*$")
_IGNORED_RE = re.compile(r"ignored by one of your \.gitignore files:?\s*(\S+)")
_HEADING_LINES_RE = re.compile(r"(?m)^\s*#+\s+[^\n]*\n?")  # a markdown heading's whole line
_ASKS_TESTS_RE = re.compile(r"(?i)\btests?\b")  # a definition of done's item that asks for tests
_TEST_FILE_RE = re.compile(r"(?i)test")  # in a file's name: a test file (test_a.py, a_test.go, a.test.ts)


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
    missing = [o for o in task.outputs if not any(m.endswith(o) for m in made)]
    if missing:
        steps.append("create " + listing([code(m, 80) for m in missing], 3) + " (the task lists them as new)")
    untouched = [t for t in task.touches if not any(p.endswith(t) for p in touched)]
    intro, done = task_spec(task.note)
    asks = [d for d in done if _ASKS_TESTS_RE.search(d)]
    if asks and not any(_TEST_FILE_RE.search(p.rsplit("/", 1)[-1]) for p in touched):
        where = [t for t in untouched if _TEST_FILE_RE.search(t.rsplit("/", 1)[-1])]
        untouched = [t for t in untouched if t not in where]
        into = f" in {listing([code(t, 80) for t in where], 2)}" if where else ""
        steps.append(f"write the tests it asks for{into} ({quoted(asks[0], 140)})")
    if untouched:
        steps.insert(
            len(steps) - (1 if asks else 0),
            "change " + listing([code(m, 80) for m in untouched], 3) + " (the task lists them)",
        )
    return steps


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


def _finish(v: View, task: Task | None) -> list[str]:
    """What remains of the work in progress: what the task says to make, checks owed for the
    latest edits, the commit and the tracker's close (in the order the agent has kept), the
    push the earlier commits had."""
    steps = _to_do(v, task) if task is not None else []
    stale = [c for c in _check_runs(v) if v.stale(c) or not c.ok]
    if stale or (v.dirty and not v.checks and v.state.git.commits):
        steps.append(
            "run " + listing([code(c.suite or c.command, 60) for c in stale]) if stale else "check the changes"
        )
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
            f"Get past the failing {code(streak.commands[-1] if streak.commands else streak.key, 80)} "
            f"(failed {streak.runs} times, {v.cite(streak.first, streak.last)}; what was tried is under Blocked)."
        )
    for check in [c for c in v.failing if not v.blocks(c)]:
        failure = f" ({code(check.failure, 160)})" if check.failure else ""
        out.append(f"Fix the failing {code(check.failed_command or check.command, 80)}{failure}.")
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
    if v.open_tasks and not working:
        names = [v.task_name(t, limit=80) for t in v.open_tasks if t.key not in v.parents and t.source != "todo"]
        if names:
            out.append(
                f"Open in the tracker, none started in this history (not asked to be implemented so far): {listing(names, 6)}."
            )
    briefed = False
    for task in [t for t in v.open_tasks if working or t.source == "todo"][:4]:
        if task.key in v.parents:
            continue  # an epic is closed when its children are, by whoever closes them
        blocked = [
            b
            for b in task.blocked_by
            if b in v.state.tasks.tasks and v.state.tasks.tasks[b].status != "closed" and b not in v.parents
        ]
        after = f" (after {listing([code(b) for b in blocked], 3)})" if blocked else ""
        # The next task in its own words: what it asks, the files it names, when it is done (a
        # description cut mid-sentence loses its remaining items); the tasks after it by intro.
        about = _task_brief(v, task) if not briefed and task.source != "todo" else ""
        briefed = briefed or bool(about)
        if not about:
            intro, _done = task_spec(task.note)
            about = f": {clipped(intro, v.chars(300))}" if intro else ""
        lead = "Then" if out else "Next open in the tracker:"  # not "Then" after nothing
        out.append(f"{lead} {v.task_name(task, limit=80)}{after}{about}")
    if v.state.people.handover and turn.submitted is None:
        out.append(
            f"When the task is done, hand it in with `{v.state.people.handover}` (the task's instructions say so)."
        )
    if not out:
        out.append(_finished(v))
    return out[:MAX_NEXT]


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
        return "Nothing further: the work was handed in."
    if turn.ended and turn.report is not None:
        if _raises_trouble(turn.report.text):
            # A report that ends on a problem or a question is not a finish.
            return (
                f"The agent's last report ({v.cite(turn.report.seq)}) left this open: "
                f"{quoted(turn.report.text[-400:], v.chars(300))} — settle it before going on (if it asked the person, wait for the answer)."
            )
        return f"The work appears finished (the agent reported at {v.cite(turn.report.seq)}): wait for the person's next request."
    return "Continue the latest request from where the agent stopped (see Where Things Stand)."
