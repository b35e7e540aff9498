"""What the sections read: the work state with what is derived from it once (the project root
for short paths, the current and open tasks, uncommitted files, stale checks, focus)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from compaction.core.paths import SCRATCH_DIR_RE
from compaction.core.work import work_root
from compaction.core.work.parse import one_line
from compaction.core.work.reducers.checks import is_open_failure
from compaction.core.work.reducers.decisions import taken_out
from compaction.core.work.state import Check, Commit, Decision, ErrorRecord, FileRecord, Person, Streak, Task, WorkState

# Detail levels: the renderer starts at FULL and compresses old finished work, level by level,
# until the summary fits its budget. The person's words and the commits are never dropped.
FULL, COMPACT, TERSE, MINIMAL, TINY = 0, 1, 2, 3, 4
# A command that failed this many times in a row, still failing at the end, is the blocker.
MIN_BLOCKER_RUNS = 2
_HOME_RE = re.compile(r"^(?:/Users|/home)/[^/]+/")
_WORD_RE = re.compile(r"[A-Za-z0-9_][\w./:-]{2,}")
FOCUS_STOPWORDS = frozenset(
    "focus focusing keep keeping only mostly mainly about please the and with what that this from into "
    "compact compaction summary summarize work working part parts things stuff every all these those "
    "which each when where they them their there have been were will would should could must make sure "
    "also just like want need created contains kept detail details".split()
)
# Focus words that select a kind of item rather than naming one.
FOCUS_KINDS = {
    "commit": "commits",
    "commits": "commits",
    "hash": "commits",
    "hashes": "commits",
    "push": "commits",
    "pushed": "commits",
    "uncommitted": "uncommitted",
    "dirty": "uncommitted",
    "failing": "failures",
    "failure": "failures",
    "failures": "failures",
    "failed": "failures",
    "error": "errors",
    "errors": "errors",
    "test": "checks",
    "tests": "checks",
    "check": "checks",
    "checks": "checks",
    "lint": "checks",
    "build": "checks",
    "decision": "decisions",
    "decisions": "decisions",
    "why": "decisions",
    "file": "files",
    "files": "files",
    "user": "people",
    "instructions": "people",
    "requests": "people",
    "task": "tasks",
    "tasks": "tasks",
    "issue": "tasks",
    "issues": "tasks",
    "todo": "tasks",
}


# What a line about a kind of item says, for putting the focused lines first.
KIND_LINE_RE = {
    "commits": re.compile(r"(?i)\bcommit|`[0-9a-f]{7,40}`"),
    "uncommitted": re.compile(r"(?i)\buncommitted\b"),
    "failures": re.compile(r"(?i)\bfail"),
    "errors": re.compile(r"(?i)\berror|\bfail"),
    "checks": re.compile(r"(?i)\b(check|test|lint|passed|failed)"),
    "decisions": re.compile(r"(?i)\breason|\bplan\b|\bdecid"),
    "files": re.compile(r"`[^`]+\.[A-Za-z0-9]{1,6}`"),
    "tasks": re.compile(r"(?i)\b(closed|in progress|open)\b"),
    "people": re.compile(r"(?i)\bperson\b"),
}


@dataclass
class Focus:
    """What the compaction's focus instructions select: words that name items, kinds of item."""

    text: str = ""
    words: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, instructions: str | None) -> Focus:
        text = (instructions or "").strip()
        words = {w.lower().strip(".:") for w in _WORD_RE.findall(text)} - FOCUS_STOPWORDS
        kinds = {FOCUS_KINDS[w] for w in words if w in FOCUS_KINDS}
        return cls(text, {w for w in words if w not in FOCUS_KINDS and len(w) > 3}, kinds)

    def __bool__(self) -> bool:
        return bool(self.text)

    def selects(self, line: str) -> bool:
        """Whether a rendered line is about what the focus asks for (a word it names, or an item
        of a kind it asks for)."""
        return self.names(line) or any(KIND_LINE_RE[k].search(line) for k in self.kinds if k in KIND_LINE_RE)

    def names(self, *texts: str) -> bool:
        """Whether the focus names something in `texts` (a word or identifier of its own)."""
        if not self.words:
            return False
        hay = " ".join(texts).lower()
        return any(w in hay for w in self.words)


@dataclass
class View:
    state: WorkState
    focus: Focus = field(default_factory=Focus)
    level: int = FULL
    cut: int = 0  # the first message kept verbatim after the summary (0: none)

    @cached_property
    def root(self) -> str:
        return work_root(self.state) or self.state.git.cwd

    def rel(self, path: str) -> str:
        if self.root and path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return _HOME_RE.sub("~/", path)

    def path(self, path: str) -> str:
        """A file as the summary names it: relative to the project, in a code span, whole."""
        return "`" + self.rel(path).replace("`", "'") + "`"

    def chars(self, full: int) -> int:
        """A quote's length at this level: `full` at FULL, a third of it at TINY."""
        return max(60, int(full * (1.0, 0.85, 0.65, 0.5, 0.35)[self.level]))

    @property
    def latest(self) -> int:
        return self.state.through

    # --- people -----------------------------------------------------------------------------

    @cached_property
    def requests(self) -> list[Person]:
        return [p for p in self.state.people.messages if p.kind != "chatter"]

    @cached_property
    def latest_request(self) -> Person | None:
        return self.requests[-1] if self.requests else None

    @cached_property
    def decisions(self) -> list[Decision]:
        """The decisions that held: a diagnosis the next run disproved is history (under Errors
        and Fixes), and so is a choice of code the later edits took out again."""
        return [
            d
            for d in self.state.decisions
            if d.held is not False and taken_out(self.state, f"{d.reason}\n{d.choice}", d.seq) is None
        ]

    @cached_property
    def rules(self) -> list[Person]:
        return [p for p in self.state.people.messages if p.kind == "rule"]

    # --- tasks --------------------------------------------------------------------------------

    @cached_property
    def tasks(self) -> list[Task]:
        # In the order they were first seen (a todo list's own order), ties in the tracker's order.
        return sorted(self.state.tasks.tasks.values(), key=lambda t: t.opened)

    @cached_property
    def current(self) -> list[Task]:
        """Tasks being worked on. An epic is not: a tracker shows it in progress while any of
        its children is, and it is closed after them."""
        return [t for t in self.tasks if t.status == "in_progress" and t.key not in self.parents]

    @cached_property
    def parents(self) -> set[str]:
        """Epics: tasks named as another's parent, or whose id another's extends (bd's
        `proj-0p7` of `proj-0p7.1`, when no `bd show` said so)."""
        keys = {t.key for t in self.tasks}
        extended = {t.key.rsplit(".", 1)[0] for t in self.tasks if "." in t.key and t.source == "bd"}
        return {t.parent for t in self.tasks if t.parent} | (extended & keys)

    @cached_property
    def open_tasks(self) -> list[Task]:
        """Open tasks in the order they can be done: children before the epic they belong to."""
        waiting = [
            t
            for t in self.tasks
            if t.status in ("open", "blocked") or (t.status == "in_progress" and t.key in self.parents)
        ]
        return sorted(waiting, key=lambda t: t.key in self.parents)

    def follow_up(self, task: Task) -> bool:
        """A task the agent filed itself in this history while working on others (one was
        started or closed before), not started, that no request of the person since names:
        work for later, not the task it was given (filing tasks as asked is the work itself)."""
        if not task.filed or task.started or task.status not in ("open", "blocked"):
            return False
        began = min(
            (t.started or t.closed or 0 for t in self.tasks if t is not task and (t.started or t.closed)), default=0
        )
        if not began or began > task.opened:
            return False
        return not any(p.seq > task.opened and task.key in p.text for p in self.requests)

    def begun(self, task: Task) -> int:
        """The first edit after the agent's words took on `task` while the tracker still shows it
        open (its work began there), or 0."""
        if task.begun is None or task.status not in ("open", "blocked"):
            return 0
        after = [s for r in self.changed_files if r.edits for s in r.edit_seqs if s > task.begun.seq]
        return min(after, default=0)

    def working_at(self, seq: int, todo: bool) -> list[Task]:
        """The tasks in progress at message `seq` (the agent's todo list's, or the tracker's):
        from the message that set each in progress to the one that closed or reopened it. An
        edit belongs to a task only when it was the one in progress then."""
        out = []
        for task in self.tasks:
            # A task the tracker first showed already in progress: from where it showed it.
            start = task.started or (task.since if task.status == "in_progress" else None)
            if start is None or (task.source == "todo") != todo or task.key in self.parents:
                continue
            end = task.closed or (task.since if task.status != "in_progress" else None)
            if start <= seq and (end is None or seq < end):
                out.append(task)
        return out

    def task_name(self, task: Task, *, title: bool = True, limit: int = 90) -> str:
        if task.source == "todo":
            return f'"{one_line(task.title, limit)}"'
        return f"`{task.key}`" + (f' "{one_line(task.title, limit)}"' if title and task.title else "")

    # --- files and git ----------------------------------------------------------------------

    @cached_property
    def changed_files(self) -> list[FileRecord]:
        """Files created, edited, moved or deleted — not scratch files outside the project."""
        recs = [
            r
            for r in self.state.files.values()
            if (r.state != "read" or r.edits) and (self.inside(r.path) or not SCRATCH_DIR_RE.match(r.path))
        ]
        return sorted(recs, key=lambda r: r.last)

    def inside(self, path: str) -> bool:
        """Whether `path` is in the project (relative paths are)."""
        return not self.root or not path.startswith("/") or path.startswith(self.root + "/")

    @cached_property
    def git_seen(self) -> bool:
        """Whether git showed anything in this history (else nothing is known of commits)."""
        git = self.state.git
        return bool(git.commits or git.tree is not None or git.branch or git.pushes)

    @cached_property
    def dirty(self) -> list[FileRecord]:
        """Changed since their last commit, in the project (a plan in ~/.claude is no change to
        commit); nothing when git never ran (then whether a change is committed is unknown)."""
        if not self.git_seen:
            return []
        return [r for r in self.changed_files if r.dirty and self.inside(r.path)]

    @cached_property
    def tree_extra(self) -> list[tuple[str, str]]:
        """Changes git showed that no edit of this history explains (untracked files, edits
        made before it), still standing."""
        tree = self.state.git.tree or {}
        files = self.state.files
        told = {r.path for r in self.dirty}
        # Every entry git listed that the edits do not tell: a file only read here, or changed
        # before this history, is git's word too (a status listing "modified" is not untracked).
        return [
            (p, s)
            for p, s in tree.items()
            if p not in told and (p not in files or s != "untracked" or not files[p].commits)
        ]

    @cached_property
    def last_commit(self) -> Commit | None:
        commits = [c for c in self.state.git.commits if c.subject]
        return commits[-1] if commits else None

    @cached_property
    def unpushed(self) -> list[Commit]:
        commits = self.state.git.commits
        if not any(c.pushed_to for c in commits):
            return []
        return [c for c in commits if not c.pushed_to]

    @cached_property
    def last_edit(self) -> int:
        return max((r.last for r in self.changed_files if r.edits), default=0)

    # --- checks and errors --------------------------------------------------------------------

    @cached_property
    def checks(self) -> list[Check]:
        return sorted(self.state.checks.values(), key=lambda c: c.seq)

    @cached_property
    def failing(self) -> list[Check]:
        """Checks failing now: failed in the current request's turn, or the latest check run.
        A failure of an earlier turn that was never re-run is history (see Checks)."""
        latest = self.checks[-1] if self.checks else None
        since = self.state.turn.request
        return [
            c
            for c in self.checks
            if (is_open_failure(c) or not c.ok) and ((c.failed_seq or c.seq) >= since or c is latest)
        ]

    def edits_after(self, seq: int) -> list[tuple[FileRecord, list[int]]]:
        """The project's files changed after message `seq`, each with the changes' numbers."""
        out = []
        for rec in self.changed_files:
            if not self.inside(rec.path) or rec.last <= seq:
                continue
            seqs = [s for s in rec.edit_seqs if s > seq] or [rec.last]
            out.append((rec, seqs))
        return out

    def edits_note(self, seq: int, *, lead: str = "before the edits of", only: set[str] | None = None) -> str:
        """ "before the edits of `a.py` and `b.py` (#118–#131)": what changed after a run at
        `seq` (of the paths `only` names, when given), so its result is not read as covering
        them; "" when nothing did."""
        after = [(rec, seqs) for rec, seqs in self.edits_after(seq) if only is None or rec.path in only]
        if not after:
            return ""
        names = [self.path(rec.path) for rec, _seqs in after]
        seqs = [s for _rec, found in after for s in found]
        if self.level >= TERSE and len(names) > 1:
            return f"{lead} {len(names)} files ({self.cite(min(seqs), max(seqs))})"
        shown = names[:3]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        listed = (", ".join(shown[:-1]) + " and " + shown[-1]) if len(shown) > 1 and not more else ", ".join(shown)
        return f"{lead} {listed}{more} ({self.cite(min(seqs), max(seqs))})"

    def stale(self, check: Check) -> bool:
        """Edits were made after the check last ran: its result does not cover them."""
        return any(r.last > check.seq for r in self.dirty) or (not self.dirty and self.last_edit > check.seq)

    @cached_property
    def blockers(self) -> list[Streak]:
        """Commands still failing at the end after repeated attempts in the current request's
        turn: no run of the same command or check passed after them."""
        since = self.state.turn.request
        # Edits after the last failing run are an attempt not yet run: failing, not stuck.
        return [
            s
            for s in self.state.streaks.values()
            if s.runs >= MIN_BLOCKER_RUNS and s.last >= since and not self.edits_after(s.last)
        ]

    @staticmethod
    def streak_name(streak: Streak) -> str:
        """What failed, as run: the one command line, or the check's name when its runs were
        several different command lines (`npm run build` run with `| grep x`, then with `-w y`)."""
        if len(streak.commands) == 1:
            return streak.commands[0]
        return streak.key.partition(":")[2] or (streak.commands[-1] if streak.commands else streak.key)

    def blocks(self, check: Check) -> bool:
        """Whether a failing check is told as a blocker already."""
        return any(s.key == f"check:{check.key}" for s in self.blockers)

    @cached_property
    def open_errors(self) -> list[ErrorRecord]:
        return [e for e in self.state.errors if e.status == "open"]

    def live(self, error: ErrorRecord) -> bool:
        """An open error nothing has moved past: no edit, check or command succeeded after it."""
        if error.status != "open":
            return False
        steps = self.state.turn.steps
        if not steps or error.seq < steps[0].seq:
            return False
        return not any(
            s.seq > error.seq and s.ok and s.kind in ("edit", "check", "run", "git", "tracker") for s in steps
        )

    def cite(self, *seqs: int | None) -> str:
        """ "#12" or "#12–#40": the message numbers a fact comes from."""
        known = sorted({s for s in seqs if s})
        if not known:
            return ""
        return f"#{known[0]}" if len(known) == 1 else f"#{known[0]}–#{known[-1]}"
