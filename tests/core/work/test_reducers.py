"""The reducers, table by table: a story (events) in, the state it leaves out."""

from __future__ import annotations

import pytest

from tests.core.work.story import Story, commit_output, push_output

BD_SHOW = (
    "○ proj-abc.2 · Add the review page   [● P2 · OPEN]\nOwner: x · Type: task\n\nDESCRIPTION\n"
    "Add a page listing open annotations.\n- `lib/review_live.ex` (new)\n"
)
BD_LIST = (
    "○ proj-abc.3 [● P2] [task] - Close the review (blocked by: proj-abc.2)\n"
    "○ other-xyz [● P1] [epic] - Unrelated backlog item\n"
)

# (case, story, {task key: status}) — the tracker's word is the status, the latest wins.
TASK_CASES = [
    (
        "bd update sets in progress",
        Story().run("bd update proj-abc.1 --status in_progress", "✓ Updated"),
        {"proj-abc.1": "in_progress"},
    ),
    (
        "bd close closes each id named",
        Story().run("bd close proj-abc.1 proj-abc.2", "✓ Closed"),
        {"proj-abc.1": "closed", "proj-abc.2": "closed"},
    ),
    (
        "a reopen opens again",
        Story().run("bd close proj-a.1", "ok").run("bd reopen proj-a.1", "ok"),
        {"proj-a.1": "open"},
    ),
    (
        "a failed close changes nothing",
        Story()
        .run("bd update proj-a.1 --status in_progress", "ok")
        .run("bd close proj-a.1", "Error: no such issue", error=True),
        {"proj-a.1": "in_progress"},
    ),
    ("gh issue close", Story().run("gh issue close 12", "✓ Closed issue #12"), {"#12": "closed"}),
    ("bd show adds the item it shows", Story().run("bd show proj-abc.2", BD_SHOW), {"proj-abc.2": "open"}),
    (
        "a listing adds rows of the family in play only",
        Story().run("bd show proj-abc.2", BD_SHOW).run("bd list", BD_LIST),
        {"proj-abc.2": "open", "proj-abc.3": "open"},
    ),
    ("a listing alone adds nothing of the backlog", Story().run("bd list", BD_LIST), {}),
    (
        "the todo list replaces the earlier one",
        Story()
        .todos(("in_progress", "Write the parser"), ("pending", "Add tests"))
        .todos(("completed", "Write the parser"), ("in_progress", "Add tests")),
        {"todo:Write the parser": "closed", "todo:Add tests": "in_progress"},
    ),
]


@pytest.mark.parametrize(("case", "story", "expected"), TASK_CASES, ids=[c[0] for c in TASK_CASES])
def test_task_statuses(case: str, story: Story, expected: dict[str, str]) -> None:
    tasks = story.state().tasks.tasks
    assert {k: t.status for k, t in tasks.items()} == expected


def test_a_shown_item_keeps_its_title_description_new_files_and_blockers() -> None:
    state = Story().run("bd show proj-abc.2", BD_SHOW).run("bd list", BD_LIST).state()
    shown, listed = state.tasks.tasks["proj-abc.2"], state.tasks.tasks["proj-abc.3"]
    assert (shown.title, shown.outputs) == ("Add the review page", ["lib/review_live.ex"])
    assert shown.note.startswith("Add a page listing open annotations")
    assert (listed.title, listed.blocked_by, listed.parent) == ("Close the review", ["proj-abc.2"], "proj-abc")


# (case, story, {path: (state, dirty, commits)})
FILE_CASES = [
    ("an edit leaves the file changed", Story().edit("/p/a.py", "x = 1", "x = 2"), {"/p/a.py": ("edited", True, [])}),
    (
        "a refused edit changes nothing",
        Story().edit("/p/a.py", "x", "y", output="No changes were made: old_string not found"),
        {},
    ),
    (
        "a failed edit changes nothing",
        Story().tool(
            "Edit", {"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}, "String not found", error=True
        ),
        {},
    ),
    ("a read is a read", Story().read("/p/a.py"), {"/p/a.py": ("read", False, [])}),
    ("sed -i changes the file", Story().run("sed -i 's/a/b/' src/x.py", ""), {"src/x.py": ("edited", True, [])}),
    (
        "BSD sed's empty suffix is no file",
        Story().run("sed -i '' 's/a/b/g' src/x.py", ""),
        {"src/x.py": ("edited", True, [])},
    ),
    (
        "rm of a file written here leaves nothing to commit",
        Story().write("/p/t.py", "print(1)\n").run("rm /p/t.py", ""),
        {"/p/t.py": ("deleted", False, [])},
    ),
    (
        "git mv moves it",
        Story().edit("/p/a.py", "1", "2").run("git mv /p/a.py /p/b.py", ""),
        {"/p/a.py": ("moved", True, []), "/p/b.py": ("edited", True, [])},
    ),
    ("a redirect to /dev/null is no change", Story().run("python x.py > /dev/null", ""), {}),
]


@pytest.mark.parametrize(("case", "story", "expected"), FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_file_lifecycle(case: str, story: Story, expected: dict[str, tuple]) -> None:
    files = story.state().files
    assert {
        p: (r.state, r.dirty, r.commits) for p, r in files.items() if r.state != "read" or expected.get(p)
    } == expected


def test_a_path_the_program_says_does_not_exist_was_not_read() -> None:
    output = "cat: src/editor.ts: No such file or directory\nexport const borderColor = 1"
    # `| head` makes the pipeline exit 0: the call is a success whose output names the missing path.
    files = Story().run("cat src/editor.ts src/ui/editor.ts | head -20", output).state().files
    assert {p: r.state for p, r in files.items()} == {"src/ui/editor.ts": "read"}
    # A search shows matching lines, not the file: neither path was read (issue 32's audits).
    output = "grep: src/editor.ts: No such file or directory\nsrc/ui/editor.ts:12:  borderColor"
    files = Story().run("grep -n border src/editor.ts src/ui/editor.ts | head -20", output).state().files
    assert files == {}


def test_an_npm_install_changes_the_manifest_and_lock_in_the_directory_it_ran() -> None:
    state = Story().run("cd /p/web && npm install left-pad", "added 1 package").state()
    assert {"/p/web/package.json", "/p/web/package-lock.json"} <= set(state.files)


def test_an_edit_keeps_the_agents_stated_purpose_naming_the_file_and_the_definitions_it_adds() -> None:
    state = (
        Story()
        .edit(
            "/p/app.js",
            "const a = 1;",
            "function highlight(el) {\n  hljs.highlightElement(el);\n}",
            said="Let me look around. Now add the `highlight` helper to app.js.",
        )
        .state()
    )
    rec = state.files["/p/app.js"]
    assert [q.text for q in rec.purposes] == ["Now add the `highlight` helper to app.js."]
    assert rec.change == "adds `function highlight(el)`"


def test_vague_words_before_an_edit_are_no_purpose() -> None:
    state = (
        Story()
        .edit("/p/a.py", "x", "y", said="Let me apply all remaining changes in one batch.")
        .edit("/p/b.py", "x", "y", said="Let me create it now.")
        .state()
    )
    assert state.files["/p/a.py"].purposes == [] and state.files["/p/b.py"].purposes == []


# (case, story, {path: commits}, still dirty paths)
GIT_CASES = [
    (
        "a commit takes what it git-added and leaves the rest",
        Story()
        .edit("/p/a.py", "1", "2")
        .edit("/p/b.py", "1", "2")
        .run("cd /p && git add a.py && git commit -m 'a'", commit_output("1a2b3c4", "a")),
        {"/p/a.py": ["1a2b3c4"], "/p/b.py": []},
        {"/p/b.py"},
    ),
    (
        "git add -A then a commit takes everything",
        Story()
        .edit("/p/a.py", "1", "2")
        .edit("/p/b.py", "1", "2")
        .run("git add -A", "")
        .run("git commit -m 'all'", commit_output("2b3c4d5", "all")),
        {"/p/a.py": ["2b3c4d5"], "/p/b.py": ["2b3c4d5"]},
        set(),
    ),
    (
        "a clean git status settles every edit",
        Story().edit("/p/a.py", "1", "2").run("git status", "On branch main\nnothing to commit, working tree clean"),
        {"/p/a.py": []},
        set(),
    ),
    (
        "git restore discards the file's edits",
        Story().edit("/p/a.py", "1", "2").edit("/p/b.py", "1", "2").run("cd /p && git restore a.py", ""),
        {"/p/a.py": [], "/p/b.py": []},
        {"/p/b.py"},
    ),
    (
        "git stash puts edits away and pop brings them back",
        Story().edit("/p/a.py", "1", "2").run("git stash", "Saved").run("git stash pop", "ok"),
        {"/p/a.py": []},
        {"/p/a.py"},
    ),
]


@pytest.mark.parametrize(("case", "story", "commits", "dirty"), GIT_CASES, ids=[c[0] for c in GIT_CASES])
def test_commits_and_the_working_tree(case: str, story: Story, commits: dict[str, list[str]], dirty: set[str]) -> None:
    state = story.state()
    assert {p: state.files[p].commits for p in commits} == commits
    assert {p for p, r in state.files.items() if r.dirty} == dirty


def test_a_push_marks_the_commits_before_it_pushed_and_a_commit_names_its_tasks() -> None:
    state = (
        Story()
        .run("bd update proj-a.1 --status in_progress", "ok")
        .edit("/p/a.py", "1", "2")
        .run("git commit -am 'feat: a (proj-a.1)'", commit_output("1a2b3c4", "feat: a (proj-a.1)", "feat"))
        .run("git push", push_output("0000000", "1a2b3c4", "feat"))
        .state()
    )
    (commit,) = state.git.commits
    assert (commit.sha, commit.branch, commit.pushed_to, commit.tasks) == ("1a2b3c4", "feat", "feat", ["proj-a.1"])
    assert state.tasks.tasks["proj-a.1"].commits == ["1a2b3c4"] and state.git.branch == "feat"


def test_git_status_lists_untracked_and_modified_files_relative_to_the_shell() -> None:
    status = "On branch main\nChanges not staged for commit:\n\tmodified:   src/a.py\n\nUntracked files:\n\tnotes.md\n"
    state = Story().read("/p/src/a.py").run("cd /p && git status", status).state()
    assert state.git.tree == {"/p/src/a.py": "modified", "/p/notes.md": "untracked"}


# (case, story, check key, (ok, failed_seq is set, fixed))
CHECK_CASES = [
    ("a passing run", Story().run("pytest tests", "3 passed in 0.1s"), "pytest", (True, False, False)),
    ("a failing run", Story().run("pytest tests", "1 failed, 2 passed", error=True), "pytest", (False, True, False)),
    (
        "a pass after a failure fixes it",
        Story().run("pytest tests", "1 failed", error=True).edit("/p/a.py", "1", "2").run("pytest tests", "3 passed"),
        "pytest",
        (True, True, True),
    ),
    (
        "a narrower pass does not",
        Story().run("pytest tests", "1 failed", error=True).run("pytest tests/test_b.py", "1 passed"),
        "pytest",
        (True, True, False),
    ),
    (
        "a wider pass does",
        Story().run("mix test test/a_test.exs", "1 failure", error=True).run("mix test", "10 tests, 0 failures"),
        "mix test",
        (True, True, True),
    ),
]


@pytest.mark.parametrize(("case", "story", "key", "expected"), CHECK_CASES, ids=[c[0] for c in CHECK_CASES])
def test_checks(case: str, story: Story, key: str, expected: tuple) -> None:
    check = story.state().checks[key]
    assert (check.ok, check.failed_seq is not None, check.fixed_seq is not None) == expected


def test_a_fix_names_what_changed_between_the_failure_and_the_pass() -> None:
    state = (
        Story()
        .run("npm test", "Error: Cannot find module 'left-pad'\n1 failed", error=True)
        .run("npm install left-pad", "added 1 package")
        .edit("/p/src/pad.js", "a", "b")
        .run("npm test", "5 passed")
        .state()
    )
    check = state.checks["npm test"]
    assert check.fix == "edits to `pad.js`; ran `npm install left-pad`"
    (error,) = state.errors
    assert (error.line, error.status) == ("Error: Cannot find module 'left-pad'", "resolved")
    assert error.resolution.endswith("then `npm test` passed")


# (case, story, [(line, status)])
ERROR_CASES = [
    ("a grep without matches is an answer", Story().run("grep -n foo src/a.py", "", error=True), []),
    (
        "a look at a missing file is an error",
        Story().run("cat src/nope.py", "cat: src/nope.py: No such file or directory", error=True),
        [("cat: src/nope.py: No such file or directory", "open")],
    ),
    ("a passing run's warnings are no errors", Story().run("pytest", "warning: deprecated\n3 passed"), []),
    (
        "a refused call is no error",
        Story().run(
            "rm -rf build",
            "The user doesn't want to proceed with this tool use. The tool use was rejected.",
            error=True,
        ),
        [],
    ),
    (
        "a later success of the same command resolves it",
        Story()
        .run("git push", "fatal: The current branch x has no upstream branch.", error=True)
        .run("git push --set-upstream origin x", push_output("0000000", "1a2b3c4", "x")),
        [("fatal: The current branch x has no upstream branch.", "resolved")],
    ),
    (
        "a failed read resolves when the file is read",
        Story()
        .tool(
            "Read",
            {"file_path": "/p/big.json"},
            "File content (85812 tokens) exceeds maximum allowed tokens (25000).",
            error=True,
        )
        .tool("Read", {"file_path": "/p/big.json", "offset": 1, "limit": 100}, "1→{"),
        [("File content (85812 tokens) exceeds maximum allowed tokens (25000).", "resolved")],
    ),
]


@pytest.mark.parametrize(("case", "story", "expected"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors(case: str, story: Story, expected: list[tuple[str, str]]) -> None:
    assert [(e.line, e.status) for e in story.state().errors] == expected


def test_the_agents_reading_of_a_failure_is_kept_with_it() -> None:
    state = (
        Story()
        .run("mix test", "** (RuntimeError) no :secret_key_base configuration found\n1 failure", error=True)
        .says("The endpoint isn't configured for the test env. Let me add it.")
        .state()
    )
    (error,) = state.errors
    assert error.diagnosis is not None and error.diagnosis.text == "The endpoint isn't configured for the test env."


# (case, story, [(by, reason)])
DECISION_CASES = [
    (
        "a reason the next edit carries out",
        Story().edit(
            "/p/m.exs",
            "alter",
            "rename",
            said="The generated migration uses ALTER TABLE which SQLite doesn't support for nullability. I need to rewrite it as a table rewrite.",
        ),
        [("agent", "The generated migration uses ALTER TABLE which SQLite doesn't support for nullability.")],
    ),
    (
        "what would fail otherwise is a reason",
        Story().edit(
            "/p/m2.exs",
            "add",
            "rewrite",
            said="The migration adds a NOT NULL column without a default, which will fail on SQLite if rows exist. Let me rewrite it.",
        ),
        [
            (
                "agent",
                "The migration adds a NOT NULL column without a default, which will fail on SQLite if rows exist.",
            )
        ],
    ),
    (
        "a linter's complaint the edit answers is a reason",
        Story().edit(
            "/p/r.ex",
            "a",
            "b",
            said="Credo reports nesting too deep in `classify`. Let me extract the inner logic into a helper.",
        ),
        [("agent", "Credo reports nesting too deep in `classify`.")],
    ),
    (
        "a reason for a look is no decision",
        Story().read("/p/m.exs", said="The migration fails because SQLite is picky. Let me check it."),
        [],
    ),
    (
        "a passing 'since' is no decision",
        Story().edit("/p/t.exs", "a", "b", said="Now replace build_conn() with just build_conn since we imported it."),
        [],
    ),
    (
        "a plan the person approved",
        Story().tool(
            "ExitPlanMode",
            {"plan": "# Plan: parallel path\n1. Keep render/1 unchanged for backward compat\n2. Add render/2"},
            "User has approved your plan.",
        ),
        [("plan", "Keep render/1 unchanged for backward compat; Add render/2")],
    ),
]


@pytest.mark.parametrize(("case", "story", "expected"), DECISION_CASES, ids=[c[0] for c in DECISION_CASES])
def test_decisions(case: str, story: Story, expected: list[tuple[str, str]]) -> None:
    assert [(d.by, d.reason) for d in story.state().decisions] == expected


# (case, story, [(kind, queued)] of the person's messages, harness texts counted)
PEOPLE_CASES = [
    ("a request", Story().person("Add a dark theme"), [("request", False)], 0),
    ("a rule", Story().person("never push to main"), [("rule", False)], 0),
    ("thanks is chatter", Story().person("ok thanks"), [("chatter", False)], 0),
    (
        "a skill document is the harness's",
        Story().harness("Base directory for this skill: /x\n\n# Prefer local/cached results"),
        [],
        1,
    ),
    (
        "a command caveat is the harness's",
        Story().harness(
            "Caveat: The messages below were generated by the user while running local commands. DO NOT respond."
        ),
        [],
        1,
    ),
    (
        "a reminder is the harness's",
        Story().harness("<system-reminder>\nThe TodoWrite tool hasn't been used recently.\n</system-reminder>"),
        [],
        1,
    ),
    (
        "a message queued inside a reminder is the person's",
        Story().harness(
            "<system-reminder>\nThe user sent the following message:\ncheck again\n\nPlease address this message and continue with your tasks.\n</system-reminder>"
        ),
        [("request", True)],
        0,
    ),
]


@pytest.mark.parametrize(("case", "story", "expected", "injected"), PEOPLE_CASES, ids=[c[0] for c in PEOPLE_CASES])
def test_only_the_persons_words_are_the_persons(case: str, story: Story, expected: list, injected: int) -> None:
    people = story.state().people
    assert [(p.kind, p.queued) for p in people.messages] == expected
    assert people.injected == injected


def test_a_stop_hook_demand_is_the_harness_and_a_refusal_the_persons() -> None:
    state = (
        Story()
        .person("add a docstring")
        .harness("Stop hook feedback:\nCannot exit with uncommitted changes: commit them first")
        .run("git push -f", "The user doesn't want to proceed with this tool use.", error=True)
        .state()
    )
    assert [d.text for d in state.people.demands] == ["Cannot exit with uncommitted changes: commit them first"]
    assert [q.text for q in state.people.refusals] == ["bash: The user doesn't want to proceed with this tool use."]


def test_a_task_template_gives_the_task_and_the_hand_in_command() -> None:
    template = (
        "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
        "Pixel Representation should be optional\n\nINSTRUCTIONS:\nWhen you're satisfied, you can submit your "
        "changes to the code base by simply running the submit command."
    )
    state = Story().harness(template).state()
    assert [p.text for p in state.people.messages] == ["Pixel Representation should be optional"]
    assert state.people.handover == "submit"


def test_the_turn_follows_the_latest_request_and_its_report() -> None:
    state = (
        Story()
        .person("fix the parser")
        .run("pytest", "1 passed")
        .says("Fixed: the parser now skips blank lines.")
        .person("ok")
        .state()
    )
    turn = state.turn
    assert turn.request == 1 and turn.calls == 1 and not turn.ended  # "ok" goes on with the same request
    assert state.people.messages[0].answer is not None
    assert state.people.messages[0].answer.text == "Fixed: the parser now skips blank lines."


def test_a_commit_keeps_what_its_message_body_says_it_did_and_a_close_its_reason() -> None:
    message = (
        "git commit -m \"$(cat <<'EOF'\nfeat: threads (proj-a.1)\n\nAdd render/2 with a cwd option.\n\n"
        '- Thinking blocks rendered\n- Tool threading via thread_key\n\nCo-Authored-By: A <a@b>\nEOF\n)"'
    )
    state = (
        Story()
        .run("bd update proj-a.1 --status in_progress", "ok")
        .edit("/p/a.py", "1", "2")
        .run('bd close proj-a.1 --reason="Threads and thinking rows; 49 tests pass"', "✓ Closed proj-a.1")
        .run(message, commit_output("1a2b3c4", "feat: threads (proj-a.1)"))
        .run("gh issue close 7 --comment 'Fixed by 1a2b3c4'", "✓ Closed issue #7")
        .state()
    )
    (commit,) = state.git.commits
    assert commit.body == "Add render/2 with a cwd option. Thinking blocks rendered; Tool threading via thread_key"
    assert state.tasks.tasks["proj-a.1"].reason == "Threads and thinking rows; 49 tests pass"
    assert state.tasks.tasks["#7"].reason == "Fixed by 1a2b3c4"


def test_the_agents_own_files_outside_the_repository_are_never_uncommitted_or_committed() -> None:
    state = (
        Story()
        .edit("/p/src/theme.ts", "a", "b")
        .tool("Write", {"file_path": "~/.pi/agent/themes/nord.json", "content": "{}"}, "Wrote the file")
        .tool("Write", {"file_path": "/home/u/.claude/plans/plan.md", "content": "# Plan"}, "File created")
        .run("git commit -am 'theme'", commit_output("1a2b3c4", "theme"))
        .state()
    )
    assert state.files["/p/src/theme.ts"].commits == ["1a2b3c4"]
    for path in ("~/.pi/agent/themes/nord.json", "/home/u/.claude/plans/plan.md"):
        assert not state.files[path].dirty and state.files[path].commits == [], path


def test_a_stopped_commands_error_is_how_it_stopped_not_the_runners_chatter_before_it() -> None:
    output = (
        "Debugger attached.\n\n> @acme/tui@0.7.29 test\n> node --test --import tsx test/*.test.ts\n\n"
        "(Use `node --trace-warnings ...` to show where the warning was created)\nDebugger attached.\n\n\nCommand aborted"
    )
    state = Story().person("run the tests").run("npm test", output, error=True).state()
    assert [e.line for e in state.errors] == ["Command aborted"]
    # npm's echo "> @acme/tui@0.7.29 test" is no tally of "29 test".
    assert [(c.ok, c.tally) for c in state.checks.values()] == [(False, "")]
    # A real error line still wins over both.
    state = Story().person("run it").run("npm test", "Debugger attached.\nTypeError: x is not a function", error=True)
    assert [e.line for e in state.state().errors] == ["TypeError: x is not a function"]


def test_a_commit_on_a_clean_tree_is_no_error_but_one_that_left_untracked_files_is() -> None:
    clean = "On branch master\nnothing to commit, working tree clean"
    state = Story().person("commit it").run("git add .gitignore && git commit -m 'ignore'", clean, error=True).state()
    assert state.errors == []
    untracked = 'On branch master\nUntracked files:\n\tnotes.md\nnothing added to commit but untracked files present (use "git add" to track)'
    state = Story().person("commit it").run("git commit -m 'notes'", untracked, error=True).state()
    assert [e.source for e in state.errors] == ["git commit -m 'notes'"]


def test_a_script_run_from_its_own_directory_settles_its_failure_from_the_project() -> None:
    state = (
        Story()
        .person("add highlight.js and rebuild the assets")
        .run("cd /p/app && mix compile", "Compiled")
        .run("node assets/build.js", '✘ [ERROR] Could not resolve "js/app.js"', error=True)
        .run("cd /p/app/assets && node build.js", "build done")
        .state()
    )
    builds = [c for c in state.checks.values() if c.kind == "build" and "build.js" in c.command]
    assert [(c.ok, c.failed_seq, c.fixed_seq) for c in builds] == [(True, 4, 6)]
    assert [(e.status, e.resolved_seq) for e in state.errors] == [("resolved", 7)]
    # The same script name in another directory is another build.
    state = (
        Story()
        .person("build")
        .run("cd /p/app && node assets/build.js", "✘ [ERROR] boom", error=True)
        .run("cd /p/other && node build.js", "ok")
        .state()
    )
    assert [e.status for e in state.errors] == ["open"]


def test_a_files_own_count_in_parentheses_is_no_tally_of_the_run() -> None:
    truncated = " ✓ test/highlight.test.js (4 tests) 131ms\n...\n</persisted-output>"
    state = Story().person("run the JS tests").run("npx vitest run", truncated).state()
    assert [(c.ok, c.tally) for c in state.checks.values()] == [(True, "")]
    whole = truncated.replace("...", " Test Files  1 passed (1)\n      Tests  4 passed (4)")
    state = Story().person("run the JS tests").run("npx vitest run", whole).state()
    assert [c.tally for c in state.checks.values()] == ["4 passed (4)"]


def test_a_build_whose_pipe_hid_its_exit_status_still_failed_when_the_runner_says_so() -> None:
    output = (
        "npm error Lifecycle script `build` failed with error:\nnpm error code 1\n"
        "npm error path /p/packages/coding-agent\n"
    )
    state = Story().person("publish").run("npm run build -w @acme/agent 2>&1 | head -30", output).state()
    assert [(c.ok, c.failure) for c in state.checks.values()] == [
        (False, "npm error Lifecycle script `build` failed with error: npm error code 1")
    ]
    state = Story().person("build").run("npm run build | tail -3", "> acme@1.0 build\n> tsc\n\nDone").state()
    assert [c.ok for c in state.checks.values()] == [True]


def test_a_state_stored_before_the_count_was_named_folded_still_skips_what_it_read():
    from compaction.core.types import Msg
    from compaction.core.work import fold, from_json, to_json

    msgs = [Msg(1, "user", "Fix the parser", 4), Msg(2, "assistant", "On it.", 3)]
    stored = to_json(fold(msgs))
    assert stored["folded"] == 2 and "messages" not in stored
    old = {k: v for k, v in stored.items() if k != "folded"} | {"messages": 2}
    state = from_json(old)
    assert state is not None and state.folded == 2
    assert to_json(fold(msgs, state)) == to_json(state)  # nothing folded twice
