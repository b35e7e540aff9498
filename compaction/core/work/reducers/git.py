"""Git: commits (what they took, pushed or not), the branch, the working tree as git showed it."""

from __future__ import annotations

import os
import re

from compaction.core.text_heuristics import commits_in_output, pushes_in_output
from compaction.core.vocabulary import (
    CLEAN_TREE_RE,
    CREATE_MODE_RE,
    GIT_ADD_RE,
    GIT_BRANCH_RE,
    GIT_RESTORE_RE,
    GIT_STASH_RE,
    GIT_STATUS_RE,
    GIT_SWITCH_RE,
    names_key,
)
from compaction.core.work.events import Call
from compaction.core.work.parse import commit_body, git_tree, one_line
from compaction.core.work.reducers.outcome import Outcome
from compaction.core.work.state import Commit, WorkState

_CD_RE = re.compile(r"^\s*cd\s+(\"[^\"]+\"|'[^']+'|[^\s;&|]+)\s*(?:&&|;|$)")
_ON_BRANCH_RE = re.compile(r"^On branch (\S+)", re.M)
_ALL_RE = re.compile(r"\bgit\s+commit\s+(?:[^;&|\n]*\s)?-(?:a\w*|-all)\b")
_DOT_PREFIX_RE = re.compile(r"^(?:\.\.?/)+")  # ./ and ../ before a path git printed
# Where the shell is, as a tool prints it: git's toplevel, Claude Code's reset of the shell
# to the session's directory after a `cd` left it.
_TOPLEVEL_RE = re.compile(r"\bgit\s+rev-parse\s+(?:[^;&|\n]*\s)?--show-toplevel\b")
_CWD_RESET_RE = re.compile(r"^Shell cwd was reset to (/\S+)", re.M)
MAX_DIRS = 8


def resolve(state: WorkState, shown: str, from_root: bool = False) -> str:
    """A path as git printed it (relative to the shell's directory, or to the repository root),
    as the path the file tools used for the same file, when one is known."""
    shown = shown.strip("\"'")
    bare = _DOT_PREFIX_RE.sub("", shown)
    cwd = state.git.cwd
    if not from_root and cwd and not shown.startswith("/"):
        joined = os.path.normpath(os.path.join(cwd, shown))
        if joined in state.files:
            return joined
    known = next((p for p in state.files if p == bare or p.endswith("/" + bare)), None)
    if known:
        return known
    if not from_root and cwd and not shown.startswith("/"):
        return os.path.normpath(os.path.join(cwd, shown))
    return bare or shown


def follow_cd(state: WorkState, command: str) -> None:
    """The directory a leading `cd` moves the shell to: relative paths in the command and
    in git's output are relative to it."""
    match = _CD_RE.match(command)
    if not match:
        return
    target = os.path.expanduser(match.group(1).strip("\"'"))
    if target.startswith("/"):
        state.git.cwd = os.path.normpath(target)
        add_dir(state, state.git.cwd)
    elif state.git.cwd:
        state.git.cwd = os.path.normpath(os.path.join(state.git.cwd, target))


def _added(state: WorkState, command: str) -> list[str] | bool:
    """What a command `git add`-ed: paths, or True for everything (`-A`, `.`, `commit -a`)."""
    taken: list[str] = []
    for match in GIT_ADD_RE.finditer(command):
        words = [w.strip("\"'") for w in match.group(1).split()]
        if any(w in ("-A", "--all", ".", ":/", "-u", "--update") for w in words):
            return True
        taken += [resolve(state, w) for w in words if not w.startswith("-")]
    return True if _ALL_RE.search(command) else taken


def _under(path: str, targets: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


def _commit_tasks(state: WorkState, subject: str) -> list[str]:
    """The tasks a commit belongs to: those its subject names and those closed since the
    previous commit, else those in progress."""
    tasks = state.tasks.tasks
    previous = max((c.seq for c in state.git.commits), default=0)
    named = [key for key in tasks if names_key(subject, key)]
    closed = [key for key, task in tasks.items() if task.closed and task.closed > previous and key not in named]
    if named or closed:
        return named + closed
    return [key for key, task in tasks.items() if task.status == "in_progress"]


def _commit(
    state: WorkState, command: str, found: tuple[str, str, str], seq: int, added: list[str] | bool, output: str = ""
) -> None:
    branch, sha, subject = found
    git = state.git
    everything = added is True or "*" in git.staged
    staged = [*git.staged, *(added if isinstance(added, list) else [])]
    # Dirty already leaves out what no commit can hold, unless git's own status listed it.
    dirty = [p for p, rec in state.files.items() if rec.dirty]
    taken = dirty if everything or not staged else [p for p in dirty if _under(p, staged)]
    for path in taken:
        state.files[path].dirty = False
        state.files[path].commits.append(sha)
    tasks = _commit_tasks(state, subject)
    for key in tasks:
        state.tasks.tasks[key].commits.append(sha)
    previous = max((c.seq for c in git.commits), default=0)
    checked = [f"`{c.command}` → {c.tally}" for c in state.checks.values() if c.ok and c.tally and c.seq > previous]
    body = commit_body(command)
    git.commits.append(
        Commit(
            sha,
            one_line(subject, 150),
            seq,
            branch,
            taken,
            tasks=tasks,
            checks=checked[-3:],
            body=body,
            # What the commit added, as git listed it: a file it only changed was made before.
            created=[m.group(1) for m in CREATE_MODE_RE.finditer(output[:20000])][:200],
        )
    )
    steps = state.turn.steps
    # From the first check after the last edit: the wrap-up, not the debugging before it.
    last_edit = max((i for i, s in enumerate(steps) if s.kind == "edit"), default=-1)
    routine: list[str] = []
    for step in steps[last_edit + 1 :]:
        if step.kind in ("check", "git", "tracker") and (not routine or routine[-1] != step.what):
            routine.append(step.what)
    routine.append(f"`{one_line(command, 100)}`")  # the commit itself ends it
    git.routine = routine[-8:]
    git.branch = branch or git.branch
    git.staged = []
    if git.tree is not None:
        git.tree = {p: s for p, s in git.tree.items() if s == "untracked" or not (everything or _under(p, taken))}


def _push(state: WorkState, sha: str, destination: str, seq: int, command: str) -> None:
    git = state.git
    git.pushes += 1
    if git.routine and git.commits and not git.commits[-1].pushed_to:
        git.routine = [*git.routine, f"`{one_line(command, 100)}`"][-9:]
    for commit in git.commits:
        if not commit.pushed_to:
            commit.pushed_to, commit.pushed_seq = destination, seq
    if sha and not any(c.sha.startswith(sha) or sha.startswith(c.sha) for c in git.commits):
        git.commits.append(Commit(sha, "", seq, destination, pushed_to=destination, pushed_seq=seq))


def _discard(state: WorkState, command: str) -> None:
    """`git restore x` / `git checkout -- x` undo x's edits; `git stash` puts every tracked change
    away and `git stash pop` brings the latest back."""
    for match in GIT_RESTORE_RE.finditer(command):
        words = [w.strip("\"'") for w in match.group(1).split()]
        if match.group(0).split()[1] == "checkout" and "--" not in words:
            continue  # `git checkout main` switches branch
        if any(w in ("--staged", "-S") for w in words) and not any(w in ("--worktree", "-W") for w in words):
            continue  # unstaged, still changed
        paths = [resolve(state, w) for w in words if not w.startswith("-")]
        everything = any(p in (".", ":/") for p in words)
        for path, rec in state.files.items():
            if rec.dirty and (everything or _under(path, paths)):
                rec.dirty = False
        if state.git.tree is not None:
            state.git.tree = {
                p: s for p, s in state.git.tree.items() if s == "untracked" or not (everything or _under(p, paths))
            }
    for match in GIT_STASH_RE.finditer(command):
        action = match.group(1) or "push"
        dirty = [p for p, rec in state.files.items() if rec.dirty]
        if action in ("push", "save"):
            state.git.stash.append(dirty)
            for path in dirty:
                state.files[path].dirty = False
        elif action in ("pop", "apply") and state.git.stash:
            for path in state.git.stash.pop() if action == "pop" else state.git.stash[-1]:
                if path in state.files:
                    state.files[path].dirty = True
        elif action in ("drop", "clear") and state.git.stash:
            state.git.stash = [] if action == "clear" else state.git.stash[:-1]


def _tree(state: WorkState, command: str, output: str, seq: int) -> None:
    git = state.git
    if GIT_STATUS_RE.search(command) and CLEAN_TREE_RE.search(output[:5000]):
        git.tree, git.tree_seq = {}, seq
        # Changes that no commit here took, clean now: something else committed them (a
        # hook's commit) or undid them; either way the latest commit is not known from here.
        gone = [r.path for r in state.files.values() if r.dirty and r.state != "deleted"]
        if gone:
            git.outside_seq, git.outside_files = seq, gone[:12]
        for rec in state.files.values():
            rec.dirty = False
        return
    seen: list[tuple[str, str]] = []

    def resolved(shown: str, from_root: bool) -> str:
        path = resolve(state, shown, from_root)
        seen.append((shown.strip("\"'"), path))
        return path

    entries = git_tree(command, output, resolved)
    for shown, path in seen:
        if path.startswith("/") and path.endswith("/" + shown.lstrip("./")) and not shown.startswith("/"):
            root = path[: len(path) - len(shown.lstrip("./")) - 1]
            if root and root not in git.roots:
                git.roots = [*git.roots, root][-4:]
    if entries is not None:
        if not GIT_STATUS_RE.search(command) and git.tree is not None:
            # A diff shows one side of the changes: the rest of the tree stands.
            side = set(entries.values())
            entries = {**{p: s for p, s in git.tree.items() if s not in side and p not in entries}, **entries}
        git.tree, git.tree_seq = entries, seq
        # Git's own word: a file it lists as changed is uncommitted, wherever it lives (a
        # project under /tmp is still a repository when git status runs in it).
        for path, status in entries.items():
            listed = state.files.get(path)
            if listed is not None and status != "untracked" and listed.state != "read":
                listed.dirty = True


def add_dir(state: WorkState, path: str) -> None:
    if path.startswith("/") and path not in state.git.dirs and len(state.git.dirs) < MAX_DIRS:
        state.git.dirs.append(path.rstrip("/") or "/")


def _shell_dirs(state: WorkState, command: str, output: str) -> None:
    """The directories a shell call's output states: git's toplevel, a reset to the session's."""
    for match in _CWD_RESET_RE.finditer(output[-2000:]):
        add_dir(state, os.path.normpath(match.group(1)))
    lines = output.strip().splitlines()
    if _TOPLEVEL_RE.search(command) and lines and lines[0].strip().startswith("/"):
        add_dir(state, os.path.normpath(lines[0].strip()))


def on_call(state: WorkState, call: Call, outcome: Outcome) -> None:
    if call.kind != "shell" or outcome.ok is None:
        return
    command = call.command or ""
    _shell_dirs(state, command, call.output)
    if "git" not in command:
        return
    clean = bool(CLEAN_TREE_RE.search(call.output[:5000]))
    if not outcome.ok and not clean:
        return
    shown_branch = _ON_BRANCH_RE.search(call.output[:2000])
    if shown_branch:
        state.git.branch = shown_branch.group(1)
    added = _added(state, command)
    for branch, sha, subject in commits_in_output(command, call.output):
        if not any(c.sha == sha for c in state.git.commits):
            _commit(state, command, (branch, sha, subject), call.seq, added, call.output)
    if added and not commits_in_output(command, call.output):
        state.git.staged = [*state.git.staged, *(added if isinstance(added, list) else ["*"])]
    for sha, destination in pushes_in_output(command, call.output):
        _push(state, sha, destination, call.seq, command)
    _tree(state, command, call.output, call.seq)
    _discard(state, command)
    switched = GIT_BRANCH_RE.search(command) or GIT_SWITCH_RE.search(command)
    if switched:
        state.git.branch = switched.group(1)
