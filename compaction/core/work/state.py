"""The state of the work, as the reducers keep it: typed, small, serialisable.

Every line of a handoff is rendered from here, never from a sentence picked out of the
transcript. The assistant's words appear only as `Quote`s attached to a fact (the purpose of
an edit, the reason of a decision, the report that ended a turn), so a reader can tell what
was observed from what the agent said about it.

Each item records the message numbers (`seq`) it comes from: the summary names them, and the
exact text is one read away. The state is folded message by message, so the state of a longer
history is the state of its first part folded further: a later compaction continues the fold
of the previous one (stored as JSON on the compaction) instead of re-reading a summary's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Bumped whenever a field changes meaning: a stored state of another version is not merged
# (the next compaction reads the previous summary's text instead).
STATE_VERSION = 2  # 2: FileRecord.tool_edits (0 in a state of 1 would tell every edit as a shell command's)


@dataclass
class Quote:
    """Someone's words, where they were said."""

    seq: int
    text: str


@dataclass
class Person:
    """One message of the person (not the harness, not the agent)."""

    seq: int
    text: str
    # request | rule (a standing instruction or correction) | chatter (ok, thanks, continue)
    kind: str
    queued: bool = False  # typed while the agent was busy
    answer: Quote | None = None  # the agent's words that ended the turn this message started
    after: Quote | None = None  # the agent's words that ended the turn before it (what a reply answers)
    task: bool = False  # the task a harness's template wraps (its words are the task's, not typed)


@dataclass
class PeopleState:
    messages: list[Person] = field(default_factory=list)
    # What a harness hook demanded (a Stop hook refusing to let the agent stop until …).
    demands: list[Quote] = field(default_factory=list)
    injected: int = 0  # harness texts seen (skills, reminders, caveats): counted, never quoted
    handover: str = ""  # the command a task template says hands the work in (SWE-agent `submit`)
    refusals: list[Quote] = field(default_factory=list)  # calls the person refused (the tool's name)
    interruptions: list[int] = field(default_factory=list)  # where the person interrupted the agent
    # The harness's task template around the task (its lead-in, its instructions): the rules the
    # task comes with, the harness's words.
    template: list[Quote] = field(default_factory=list)
    # What a command the person typed brought with it (a skill body, a custom command's prompt,
    # the harness's expansion): the rules and steps the request comes with, the harness's words.
    expansions: list[Quote] = field(default_factory=list)


@dataclass
class Task:
    """A unit of work with a lifecycle: a tracker issue, a todo item, a plan step."""

    key: str  # "proj-gqc.4", "#12", "todo:Add tests"
    title: str
    source: str  # bd | gh | glab | jira | linear | todo | plan
    status: str  # open | in_progress | blocked | closed
    since: int  # seq of the latest status change
    opened: int = 0  # seq first seen
    closed: int | None = None
    parent: str = ""
    blocked_by: list[str] = field(default_factory=list)
    note: str = ""  # its description as the tracker showed it (up to parse.MAX_NOTE_CHARS)
    note_seq: int = 0  # where it was shown
    outputs: list[str] = field(default_factory=list)  # files its description lists as new
    touches: list[str] = field(default_factory=list)  # files its description lists to modify
    commits: list[str] = field(default_factory=list)
    started: int | None = None  # seq it went in progress
    reason: str = ""  # the reason the agent gave when it closed it (`bd close --reason`)
    filed: bool = False  # created by the agent in this history (a follow-up it filed, not a task it was given)
    begun: Quote | None = None  # the agent's words taking it on while the tracker showed it open


@dataclass
class TaskState:
    tasks: dict[str, Task] = field(default_factory=dict)
    todo_seq: int = 0  # when the todo list was last written


@dataclass
class FileRecord:
    """A file the agent created, changed, moved or deleted (or only read)."""

    path: str
    first: int  # seq of the first change (or read)
    last: int  # seq of the latest change (or read)
    edits: int = 0  # successful changes
    created: bool = False  # written whole in this history
    tool_edits: int = 0  # of `edits`, those made with an edit tool (not by a shell command)
    purposes: list[Quote] = field(default_factory=list)  # the agent's words before its edits
    added: list[Quote] = field(default_factory=list)  # names the edits introduced, where
    change: str = ""  # what the latest edit did, briefly
    changes: list[Quote] = field(default_factory=list)  # what each of the latest edits did
    state: str = "read"  # read | edited | deleted | moved
    moved_to: str = ""
    commits: list[str] = field(default_factory=list)
    dirty: bool = False  # changed since the last commit that took it
    reads: int = 0
    empty: bool = False  # created empty (an editor's `create`): its content is still to come
    edit_seqs: list[int] = field(default_factory=list)  # the latest changes' message numbers


@dataclass
class Commit:
    sha: str
    subject: str
    seq: int
    branch: str = ""
    files: list[str] = field(default_factory=list)
    pushed_to: str = ""
    pushed_seq: int | None = None
    tasks: list[str] = field(default_factory=list)  # tasks in progress or closed around it
    checks: list[str] = field(default_factory=list)  # the checks that passed since the previous commit
    body: str = ""  # what its message's body says it did (parse.commit_body)
    created: list[str] = field(default_factory=list)  # the files git printed "create mode" for


@dataclass
class GitState:
    branch: str = ""
    commits: list[Commit] = field(default_factory=list)
    # path -> staged | modified | deleted | untracked, from the latest `git status` (or
    # `git diff --stat`), less what commits took since; None while git never showed the tree.
    tree: dict[str, str] | None = None
    tree_seq: int = 0
    stash: list[list[str]] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)  # `git add`-ed since the last commit ("*": all)
    cwd: str = ""
    # Directories the history states the shell works in: each absolute `cd` target, git's
    # toplevel, a harness's "Shell cwd was reset to" (the project is one of them, not deeper).
    dirs: list[str] = field(default_factory=list)
    pushes: int = 0
    # How the latest task was wrapped up: the checks, tracker and git commands from the last
    # check before the latest commit, through its push.
    routine: list[str] = field(default_factory=list)
    # A `git status` that showed clean files this history changed and no commit of it took: a
    # commit made outside its commands (a hook, a tool). Where, and the files.
    outside_seq: int = 0
    # Directories git's own output showed to be a repository's root (where the paths it printed
    # resolve): a file under one is the project's even in scratch space (/tmp/x/src/a.py).
    roots: list[str] = field(default_factory=list)
    outside_files: list[str] = field(default_factory=list)


@dataclass
class Check:
    """A test, build, lint or type-check command, by what it checks."""

    key: str  # the command's signature ("mix test", "pytest tests/api")
    command: str  # the latest run, as typed (cleaned)
    kind: str  # test | build | lint | typecheck | migrate | run
    ok: bool
    seq: int
    tally: str = ""  # "65 tests, 0 failures"
    runs: int = 1
    failed_seq: int | None = None  # the first failure of the latest failing streak
    failed_command: str = ""  # the run that failed (a pass fixes it only if it covers as much)
    failure: str = ""  # its error line
    fixed_seq: int | None = None  # the pass that ended that streak
    last_failed_seq: int | None = None  # the streak's latest failure: what changed after it fixed it
    fix: str = ""  # what changed between the failure and the pass
    suite: str = ""  # the widest run seen (the runner with no targets), to re-run everything
    suite_seq: int = 0  # when it last ran
    suite_ok: bool = True  # and how
    # A pipe after the runner (`| tail -20`): the exit status seen is the filter's, so "passed"
    # rests on the printed verdict only. The filter's name, or "".
    piped: str = ""
    findings: bool = False  # a lint or type check that reported findings (warnings, suggestions)
    # A later pass of the same check that did not run what the failure ran (other files).
    partial_command: str = ""
    partial_seq: int | None = None
    # The latest clean pass over the whole project per directory it ran in (`run_dir`): its
    # message number, the command as run and the filter it was piped into ("" for none).
    passes: dict[str, tuple[int, str, str]] = field(default_factory=dict)


@dataclass
class ErrorRecord:
    seq: int
    line: str  # the exact error line
    source: str  # the command, or "Edit of x.py"
    key: str  # what settles it: the command's signature or "tool:path"
    # open | resolved | again (a later run failed with it again: a record of its own) | absent (a read
    # found no such file: a finding, not to fix)
    status: str = "open"
    resolved_seq: int | None = None
    resolution: str = ""
    diagnosis: Quote | None = None  # what the agent said about it before the next attempt
    count: int = 1  # the same command line printed it again, nothing tried in between
    exit: int | None = None  # the command's exit code, when the output says
    then: str = ""  # what the agent changed before the next attempt
    tried: int = 0  # the message number of that next attempt (0: none yet)
    where: str = ""  # the directory a check or command ran in (`run_dir`), when it changed into one


@dataclass
class Streak:
    """Runs of one command (or check) failing one after another, with no pass between: what was
    tried, and the latest run's error lines. A pass of the same command ends it."""

    key: str  # as ErrorRecord.key
    first: int  # seq of the first failing run
    last: int  # seq of the latest
    runs: int = 0
    commands: list[str] = field(default_factory=list)  # the distinct commands tried, as run
    lines: list[str] = field(default_factory=list)  # the latest run's error lines


@dataclass
class Decision:
    """A choice with its reason: the person's, a plan they approved, or the agent's (quoted,
    attached to the change that carried it out)."""

    seq: int
    choice: str
    reason: str = ""
    by: str = "agent"  # agent | user | plan
    about: str = ""  # the file, task or command it shaped
    # A choice made to get past a failure rests on the agent's diagnosis: it holds only if the
    # next run of the failing command passed. The failure's key, and what that run showed.
    after_failure: str = ""
    held: bool | None = None


@dataclass
class NameEdit:
    """An edit's effect on one code name: occurrences added (> 0) or taken out (< 0)."""

    seq: int
    delta: int
    request: int = 0  # the person's message the turn of that edit answered


@dataclass
class NameTrace:
    """A code name a rule of the person's or a decision named (`toolText`, `message_id`), and
    what the later edits did to it: a rule or decision whose name the work put in and then took
    out again did not hold."""

    edits: list[NameEdit] = field(default_factory=list)
    # path -> occurrences this history's edits put there and did not take out again
    held: dict[str, int] = field(default_factory=dict)
    kept: int = 0  # the latest edit of a source file whose new text still has it (moved, changed, put in)
    # path -> whether the latest edit there that showed its definition (`"x": …`, `x = …`,
    # `def x`) left it defined: a name still defined somewhere is not gone
    defined: dict[str, bool] = field(default_factory=dict)


@dataclass
class Step:
    """One call since the latest request, briefly."""

    seq: int
    kind: str  # edit | run | check | read | search | git | tracker | todo | other
    what: str  # "edit lib/x.ex", "`mix test`"
    ok: bool | None = None  # None: no result yet
    detail: str = ""  # a tally, an error line, what an edit added


@dataclass
class Job:
    """A command the harness started in the background: it has no outcome until a poll
    (TaskOutput, BashOutput) or the harness's notice shows it ended."""

    id: str
    seq: int  # the call that started it
    command: str  # as run (cleaned)
    name: str  # the tool that ran it
    check: str = ""  # test | lint | … when it is a check
    polled: int = 0  # the latest poll that showed it still running
    timed_out: bool = False  # that poll's wait ran out


@dataclass
class PendingCall:
    """A call whose result has not arrived yet (it may arrive after a compaction boundary)."""

    seq: int
    name: str
    args: Any
    purpose: str = ""
    alone: bool = True  # the only call of its message (its words are about it)


@dataclass
class TurnState:
    request: int = 0  # seq of the person's latest request
    calls: int = 0  # calls made since it
    steps: list[Step] = field(default_factory=list)  # the latest of those calls
    pending: dict[str, PendingCall] = field(default_factory=dict)
    said: Quote | None = None  # the agent's latest words
    report: Quote | None = None  # the words that ended the agent's latest turn
    ended: bool = False  # the latest turn ended with the agent's words, nothing pending
    interrupted: int | None = None  # seq the person interrupted the agent
    submitted: Quote | None = None  # a hand-over call (submit, attempt_completion)
    submit_output: str = ""  # what that call's result said (its first lines)
    plan: list[Quote] = field(default_factory=list)  # steps the agent announced, not yet seen done


@dataclass
class WorkState:
    version: int = STATE_VERSION
    through: int = 0  # the last seq folded in
    people: PeopleState = field(default_factory=PeopleState)
    tasks: TaskState = field(default_factory=TaskState)
    files: dict[str, FileRecord] = field(default_factory=dict)
    git: GitState = field(default_factory=GitState)
    checks: dict[str, Check] = field(default_factory=dict)
    errors: list[ErrorRecord] = field(default_factory=list)
    streaks: dict[str, Streak] = field(default_factory=dict)  # failing runs not yet followed by a pass
    decisions: list[Decision] = field(default_factory=list)
    names: dict[str, NameTrace] = field(default_factory=dict)  # code names rules and decisions named
    turn: TurnState = field(default_factory=TurnState)
    # (seq, command) of the latest commands that changed something, for "what fixed it".
    recent: list[Quote] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # each program + subcommand run, once
    open_file: str = ""  # the file an editor has open (SWE-agent's `edit` changes it)
    # Paths a file tool said do not exist, with that call's message: no call of it read them.
    absent: dict[str, int] = field(default_factory=dict)
    # Commands started in the background whose end no poll or notice has shown yet, by job id.
    jobs: dict[str, Job] = field(default_factory=dict)
    calls: int = 0
    folded: int = 0  # how many messages were folded in (stored as "messages" before)
