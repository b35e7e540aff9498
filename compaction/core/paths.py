"""The project a session works in, from the paths it touched: its directory, and paths shown
relative to it (the summary's sections and its file tags)."""

from __future__ import annotations

import os
import re

# An agent's own files under the home directory (~/.claude/plans, ~/.pi/agent): not the project.
AGENT_HOME_RE = re.compile(r"^(?:/Users|/home)/[^/]+/\.")
_HOME_DIR_RE = re.compile(r"(?:/Users|/home)/[^/]+")  # a home directory itself (fullmatch)
# Scratch space (a background task's output file, a macOS temporary item): not the project either.
SCRATCH_DIR_RE = re.compile(r"^(?:/tmp/|/var/tmp/|/private/|/var/folders/)")

_SYSTEM_DIRS = frozenset(
    {"", "/", "/home", "/Users", "/tmp", "/var", "/private", "/usr", "/opt", "/root", "/mnt", "/srv"}
)
# A directory of these names is inside a project, not its root ("lib/x.ex" reads better than "x.ex").
SOURCE_DIRS = frozenset(
    "lib src test tests spec app apps assets priv config pkg internal cmd packages web static templates scripts docs".split()
)

# Prose, not source: what a code block inside one shows (`defp aliases`) defines nothing.
PROSE_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".rst", ".txt", ".adoc", ".asciidoc", ".org", ".tex"})


def is_prose(path: str) -> bool:
    """Whether `path` is a document (a plan, a README, notes), not source code."""
    return os.path.splitext(path.lower())[1] in PROSE_SUFFIXES


def _project_dir(path: str) -> str:
    while path.count("/") >= 2 and os.path.basename(path) in SOURCE_DIRS:
        path = os.path.dirname(path)
    return path


def common_root(paths: list[str], share: float = 0.6) -> str:
    """The project's directory, to show paths relative to it: the directory all changed files
    share, or when that is too shallow (a plan in ~/.claude, a scratch file elsewhere), the
    deepest one holding at least `share` of them."""
    dirs = [os.path.dirname(p) for p in paths if p.startswith("/") and not AGENT_HOME_RE.match(p)]
    if not dirs:
        return ""
    shared = _project_dir(os.path.commonpath(dirs))
    if shared not in _SYSTEM_DIRS and not _HOME_DIR_RE.fullmatch(shared):
        return shared
    best = ""
    for candidate in {d[:i] for d in dirs for i in [len(d), *(k for k, c in enumerate(d) if c == "/")]}:
        if candidate in _SYSTEM_DIRS or candidate.count("/") < 2 or len(candidate) <= len(best):
            continue
        if sum(1 for d in dirs if d == candidate or d.startswith(candidate + "/")) >= share * len(dirs):
            best = candidate
    return _project_dir(best) if best else best


def relative(path: str, root: str) -> str:
    """`path` relative to `root` when it is inside it, else as it is."""
    return path[len(root) + 1 :] if root and path.startswith(root + "/") else path


def agents_own(path: str) -> bool:
    """A file of the agent's own under the home directory (~/.pi/agent/themes/x.json,
    ~/.claude/plans/p.md): never the project's."""
    return path.startswith("~") or bool(AGENT_HOME_RE.match(path))


def outside_repository(path: str) -> bool:
    """A file no commit of the project can hold: the agent's own files under the home directory
    (~/.pi/agent/themes, ~/.claude/plans) and scratch files. Changing one leaves nothing to commit."""
    return agents_own(path) or path.startswith(("/tmp/", "/var/tmp/"))


def project_root(changed: list[str], seen: list[str], dirs: list[str], named: list[str]) -> str:
    """The project's directory: where the files the work changed lie (all files seen when one
    changed), unless the session's own directory holds it. The files' common directory can be
    deeper than the project (one file under lib/x/y changed), while paths in the task, git's
    output and commands are relative to the project: a directory the history states the shell
    works in (`dirs`: a `cd` target, git's toplevel) or that a path named relative to the project
    (`named`: "lib/x/y/a.ex") places a seen file in is the root when the common one is inside it;
    the nearest such (a parent of several projects is no project)."""
    inside = [p for p in changed if not outside_repository(p) and not SCRATCH_DIR_RE.match(p)]
    if len(set(inside)) < 2:
        # One changed file says little of where the project is: every file seen does.
        inside = [p for p in seen if not outside_repository(p)] or changed
    root = common_root(inside or seen)
    if not root:
        return ""
    found = list(dirs)
    for name in named:
        name = name.strip("`'\"").removeprefix("./")
        if "/" in name and not name.startswith(("/", "~", "../")):
            found += [f[: -len(name) - 1] for f in seen if f.endswith("/" + name)]
    holding = [
        d
        for d in found
        if d not in _SYSTEM_DIRS
        and not _HOME_DIR_RE.fullmatch(d)
        and not AGENT_HOME_RE.match(d)
        and (root == d or root.startswith(d + "/"))
    ]
    return max(holding, key=len) if holding else root
