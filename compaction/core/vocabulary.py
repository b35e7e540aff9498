"""What commands mean, as tables: checks (test, build, lint runners), trackers, git, the shell's
own programs.

The one vocabulary of commands for everything that reads them (the work model's reducers, the
ledger, the extractive summarizer's text heuristics, the kept part): a runner, a tracker or a git
verb known here is known everywhere. Adding one is adding a row. What each pattern recognises,
with examples that must and must not match, is in compaction/core/rules.py (tests/core/test_rules.py).
"""

from __future__ import annotations

import re

# (kind, pattern over one command of a chain). The first row that matches names the kind.
CHECKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "test",
        re.compile(
            r"\b(pytest|py\.test|mix test|npm (?:run )?test|yarn test|pnpm (?:run )?test|cargo test|go test|jest|"
            r"vitest|rspec|make (?:test|check)|phpunit|tox|nox|unittest|manage\.py test|bun test|deno test|"
            r"just (?:test|check|ci)|gradle\w* test|mvn test|ctest|dotnet test|swift test|zig build test)\b"
        ),
    ),
    (
        "lint",
        re.compile(
            r"\b(mix credo|ruff|flake8|pylint|eslint|biome|prettier --check|rubocop|golangci-lint|cargo clippy|"
            r"npm run lint|pnpm (?:run )?lint|yarn lint|just lint|mix format --check|shellcheck|stylelint)\b"
        ),
    ),
    (
        "typecheck",
        re.compile(
            r"\b(mypy|pyright|tsc|npm run (?:check|typecheck)|pnpm (?:run )?(?:check|typecheck)|cargo check|go vet)\b"
        ),
    ),
    (
        "build",
        re.compile(
            r"\b(mix compile|cargo build|npm run build|pnpm (?:run )?build|yarn build|go build|make(?!\s+\w+=)|"
            r"docker build|gradle\w* build|mvn (?:package|compile|install)|dotnet build|node \S*build\S*|vite build|"
            r"webpack|just build)\b"
        ),
    ),
    (
        "migrate",
        re.compile(
            r"\b(mix ecto\.migrate|mix ash\.codegen|manage\.py (?:migrate|makemigrations)|alembic upgrade|rails db:migrate)\b"
        ),
    ),
)
# A run's tally: "65 tests, 0 failures", "3 passed, 1 failed in 0.4s", "found no offenses" (a
# count, not the end of a version: npm's "> pkg@0.7.29 test" echo is no tally; nor one file's
# count in parentheses, vitest's "✓ test/a.test.js (4 tests) 131ms").
TALLY_RE = re.compile(
    r"(?i)((?<![\d.@(])\b\d+ (?:tests?|examples?|doctests?|properties|passed|failed|failures?|errors?|specs?)\b[^\n]*|"
    r"\bfound no offenses\b[^\n]*|\ball checks passed\b[^\n]*|\bno issues\b[^\n]*|\bFound 0 errors\b[^\n]*)"
)
# A lint or type checker's verdict that it found something: "found 10 software design
# suggestions" (credo), "Found 3 errors in 2 files" (mypy, ruff), "✖ 5 problems (3 errors, 2
# warnings)" (eslint), "generated 2 warnings" (cargo clippy), "4 offenses detected" (rubocop).
# Findings are not a pass, whatever the exit status a pipe let through says.
FINDINGS_RE = re.compile(
    r"(?i)^.*?(?<![\w.])(?:found |generated )?[1-9]\d* (?:[a-z][\w-]* ){0,3}"
    r"(?:suggestions?|warnings?|issues?|problems?|offen[cs]es?|errors?|refactoring opportunities)\b.*$",
    re.M,
)
# A pipe after a command into a filter: the exit status the shell reports is the filter's
# (unless `set -o pipefail` or `PIPESTATUS`).
PIPE_FILTER_RE = re.compile(r"\|\s*(tail|head|grep|egrep|rg|sed|awk|cut|sort|uniq|less|more|tee|wc|cat)\b")
PIPEFAIL_RE = re.compile(r"pipefail|PIPESTATUS")
FAILED_COUNT_RE = re.compile(r"(?i)\b([1-9]\d*) (?:failed|failures?|errors?)\b")
EXIT_CODE_RE = re.compile(r"(?i)\bexit (?:code|status)[: ]+([1-9]\d*)")
# `git commit` on a clean tree exits 1: everything was committed already (not "nothing added to
# commit but untracked files present", where what was meant to be committed is not).
NOTHING_TO_COMMIT_RE = re.compile(r"(?m)^nothing to commit, working tree clean")
# A runner saying its run failed, where a pipe (`| head -30`) hid the exit status from the harness.
RUN_FAILED_RE = re.compile(
    r"(?m)^(?:npm (?:error|ERR!) code \S+|npm (?:error|ERR!) Lifecycle script `[^`]+` failed|"
    r"error Command failed with exit code [1-9]|\s*ELIFECYCLE\b.*failed|make(?:\[\d+\])?: \*\*\* .*Error [1-9])"
)

# Trackers: (tracker, pattern of a command that changes an item's status, status it sets or
# None when the pattern names it in group "status"). Ids are group "ids" (space-separated).
_ID = r"[A-Za-z][\w-]*-[\w]+(?:\.\d+)*|#?\d+"
TRACKER_STATUS: tuple[tuple[str, re.Pattern[str], str | None], ...] = (
    ("bd", re.compile(rf"\bbd\s+close\s+(?P<ids>(?:(?:{_ID})\s*)+)"), "closed"),
    ("bd", re.compile(rf"\bbd\s+reopen\s+(?P<ids>(?:(?:{_ID})\s*)+)"), "open"),
    ("bd", re.compile(rf"\bbd\s+update\s+(?P<ids>{_ID})\b[^\n&;|]*?--status[= ](?P<status>\w+)"), None),
    ("gh", re.compile(r"\bgh\s+issue\s+close\s+(?P<ids>#?\d+)"), "closed"),
    ("gh", re.compile(r"\bgh\s+issue\s+reopen\s+(?P<ids>#?\d+)"), "open"),
    ("glab", re.compile(r"\bglab\s+issue\s+close\s+(?P<ids>#?\d+)"), "closed"),
    ("jira", re.compile(rf"\bjira\s+issue\s+move\s+(?P<ids>{_ID})\s+['\"]?(?P<status>[\w ]+?)['\"]?(?:\s|$)"), None),
    (
        "linear",
        re.compile(rf"\blinear\s+issue\s+update\s+(?P<ids>{_ID})\b[^\n&;|]*?--state[= ]['\"]?(?P<status>\w+)"),
        None,
    ),
)
# A task key (bd-a1b, PROJ-7, #12) named in text: not a piece of a longer name, path or version
# ("bd-a1b" is not named by "bd-a1b2", "x/bd-a1b" or "bd-a1b.1"). KEY stands for the key, escaped
# (names_key); the rule's row tests the bounds around it.
NAMED_KEY_RE = re.compile(r"(?<![\w.-])KEY(?![\w-]|\.\d)")


def names_key(text: str, key: str) -> bool:
    """Whether `text` names the task `key` (NAMED_KEY_RE's bounds around it)."""
    return re.search(NAMED_KEY_RE.pattern.replace("KEY", re.escape(key)), text) is not None


TRACKER_CMD_RE = re.compile(r"(?:^|[\s;&|(])(bd|gh|glab|jira|linear)\s")
STATUS_WORDS = {
    "closed": "closed",
    "done": "closed",
    "resolved": "closed",
    "completed": "closed",
    "fixed": "closed",
    "in_progress": "in_progress",
    "in-progress": "in_progress",
    "in progress": "in_progress",
    "started": "in_progress",
    "blocked": "blocked",
    "open": "open",
    "todo": "open",
    "reopened": "open",
}

# Git: the parts of a chain that commit, push, switch branch, discard.
# `git commit` prints "[branch 1a2b3c4] message"; `git push` prints "old..new  src -> dst".
COMMIT_OUTPUT_RE = re.compile(r"^\[([\w./+-]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$", re.MULTILINE)
PUSH_OUTPUT_RE = re.compile(
    r"^\s*(?:\+\s*)?(?:([0-9a-f]{7,40})\.\.\.?([0-9a-f]{7,40})|\* \[new (?:branch|tag)\])\s+(\S+)\s+->\s+(\S+)",
    re.MULTILINE,
)
# `git commit` lists each file the commit adds to the repository: " create mode 100644 path".
CREATE_MODE_RE = re.compile(r"(?m)^ create mode \d{6} (\S.*?)\s*$")
GIT_COMMIT_RE = re.compile(r"\bgit\b[^|;&\n]*\bcommit\b")
GIT_PUSH_RE = re.compile(r"\bgit\b[^|;&\n]*\bpush\b")
GIT_STATUS_RE = re.compile(r"\bgit\s+(?:-C\s+\S+\s+)?status\b([^;&|\n]*)")
GIT_DIFF_STAT_RE = re.compile(r"\bgit\s+diff\s+((?:-{1,2}[\w-]+(?:=\S+)?\s*)*)(?=$|[;&|\n>2])")
GIT_ADD_RE = re.compile(r"\bgit\s+add\s+([^;&|\n]+)")
GIT_BRANCH_RE = re.compile(r"\bgit\s+(?:checkout\s+-[bB]|switch\s+-[cC]|worktree\s+add\s+(?:-b\s+)?)\s*([\w./-]+)")
GIT_SWITCH_RE = re.compile(r"\bgit\s+(?:checkout|switch)\s+(?!-)([\w./-]+)\s*(?:$|[;&|])")
GIT_RESTORE_RE = re.compile(r"\bgit\s+(?:restore|checkout)\s+([^;&|\n]+)")
GIT_STASH_RE = re.compile(r"\bgit\s+stash(?:\s+(push|save|pop|apply|drop|list|show|clear))?\b")
GIT_MV_RE = re.compile(r"(?:^|&&|;|\|\|)\s*(?:git\s+)?mv\s+(?:-\w+\s+)*(\S+)\s+(\S+)\s*(?=$|[;&|])")
DELETE_RE = re.compile(r"(?:^|&&|\|\||;|\n)\s*(?:sudo\s+)?(?:git\s+rm|rm|unlink)\s+([^;&|\n]+)")
CLEAN_TREE_RE = re.compile(r"(?i)nothing to commit,? \(?working (?:tree|directory) clean")
# A package manager adding or removing a dependency rewrites its manifest and lock file.
MANIFEST_CMD_RE = re.compile(
    r"(?:^|&&|;|\|\|)\s*(npm\s+(?:install|i|add|uninstall|remove|rm)|yarn\s+(?:add|remove)|pnpm\s+(?:add|remove|install|i)|"
    r"cargo\s+(?:add|remove)|poetry\s+(?:add|remove)|uv\s+(?:add|remove)|go\s+get|bundle\s+add)((?:\s+(?!\d*>)[^\s;&|>]+)*)"
)
MANIFESTS = {
    "npm": ("package.json", "package-lock.json"),
    "yarn": ("package.json", "yarn.lock"),
    "pnpm": ("package.json", "pnpm-lock.yaml"),
    "cargo": ("Cargo.toml", "Cargo.lock"),
    "poetry": ("pyproject.toml", "poetry.lock"),
    "uv": ("pyproject.toml", "uv.lock"),
    "go": ("go.mod", "go.sum"),
    "bundle": ("Gemfile", "Gemfile.lock"),
}
# Commands that only look: their exit status 1 is an answer ("no match", "differs"), and their
# output is file content, where "error" is just a word. Not `git fetch`: it exits non-zero only
# when it failed (no network, no access), and its output is git's, not a file's.
PROBE_RE = re.compile(
    r"^\s*(?:cd\s+\S+\s*&&\s*)?(?:grep|rg|ag|ack|find|fd|ls|cat|head|tail|wc|which|type|test|\[|diff|sleep|echo|"
    r"pwd|file|stat|tree|less|more|sed -n|awk|git (?:status|diff|log|show|ls-files|branch|rev-parse|remote))\b"
)
# How a program says a path it was given does not exist (the C library's text for ENOENT, which
# grep, cat, ls, head, sed … print after the path): "grep: src/a.ts: No such file or directory",
# "ls: cannot access 'x': No such file or directory". Group 1: the path.
NO_SUCH_FILE_RE = re.compile(r"(?m)(?:^|: |cannot access )['\"]?([^\s'\":]+)['\"]?: No such file or directory")
# Shell programs that print a file, and those that search or list (their output names files).
FILE_PRINTERS = frozenset({"cat", "nl", "bat", "batcat", "head", "tail", "less", "more"})
LISTERS = frozenset({"find", "fd", "fdfind", "ls", "tree", "grep", "egrep", "fgrep", "rg", "ag", "ack", "locate", "du"})
GIT_LISTING_RE = re.compile(r"^git\s+(?:ls-files|ls-tree|grep)\b")
# Programs every shell session uses to look around or move files: they say nothing of how a
# project is worked on (readers of the handoff called "`ls` (-la), `tail` (-30)" noise).
SHELL_UTILITIES = frozenset(
    "ls cat head tail grep rg egrep find fd wc sort uniq cut awk sed tr xargs tee less more file stat "
    "du df pwd which whoami env date diff tree realpath readlink basename dirname mkdir touch cp mv rm "
    "chmod ps kill jq".split()
)
# Programs whose last operand is where they write (`cp a b`, `mv a dir/`, `ln -s a b`): a later
# success writing the same destination settles an earlier failure of the same program, whatever
# it copied from (the source is what the failure was about: a path that did not exist).
COPIERS = frozenset({"cp", "mv", "ln", "install", "rsync", "scp"})
# What a chain does around the command it exists to run (change directory, set a variable, print).
PLUMBING = frozenset({"cd", "echo", "export", "source", "set", "sleep", "true", "pushd", "popd", "clear", "printf"})


def check_kind(command: str) -> str:
    """test | lint | typecheck | build | migrate for a command that checks the work, or ""."""
    for kind, pattern in CHECKS:
        if pattern.search(command):
            return kind
    return ""


def check_runner(command: str) -> str:
    """The runner a check command names, as matched ("pytest", "mix test"), or ""."""
    for _kind, pattern in CHECKS:
        match = pattern.search(command)
        if match:
            return " ".join(match.group(0).split())
    return ""


def tracker_changes(command: str) -> list[tuple[str, str, str]]:
    """(tracker, item id, new status) for every status change a command line makes."""
    out: list[tuple[str, str, str]] = []
    for tracker, pattern, status in TRACKER_STATUS:
        for match in pattern.finditer(command):
            new = status or STATUS_WORDS.get(match.group("status").strip().lower(), "")
            if not new:
                continue
            for item in match.group("ids").split():
                if item.startswith("-") or "=" in item or '"' in item:
                    break  # options follow the ids
                bare = item.lstrip("#")
                out.append((tracker, f"#{bare}" if bare.isdigit() else item, new))
    return out


def is_probe(command: str) -> bool:
    return bool(PROBE_RE.match(command))


# A file tool's answer that the file could not be read (a read that failed is no file read,
# whether or not the tool flagged its result as an error).
READ_FAILED_RE = re.compile(
    r"(?i)^\W*(?:<tool_use_error>\s*)?(?:error:?\s*)?(?:file does not exist|no such file or directory|"
    r"enoent\b|file not found|path does not exist|the path \S+ does not exist|could not (?:read|open|find) (?:the )?file)"
)

# A search tool's or program's answer that nothing matched (Claude Code's Grep and Glob, SWE-agent's
# find_file / search_dir, ripgrep's and grep's silence told by the harness as "(no output)").
NO_MATCHES_RE = re.compile(
    r"(?i)^\W*(?:no (?:matches|files|results|match) (?:found|for)\b|found 0 (?:matches|files|results)\b|"
    r"\(no output\)\s*$|no files matched\b)"
)


def found_nothing(output: str) -> bool:
    """Whether a search's output says it found nothing: empty, or the tool's own words for it."""
    text = output.strip()
    return not text or bool(NO_MATCHES_RE.match(text[:300]))


# A file tool's answer that an edit was refused and the file left as it was (SWE-agent's lint
# gate, an editor's "no replacement was performed"): a failed attempt, not an edit.
EDIT_REFUSED_RE = re.compile(
    r"(?i)\b(your proposed edit has introduced|edit (?:was|has) not (?:been )?applied|(?:file|it) (?:was )?not modified|"
    r"no replacement was performed|did not appear verbatim|no changes? (?:was|were) made)\b"
)
