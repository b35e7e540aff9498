"""Errors and Fixes as the runs show them (issue 32, "evidence for every status"): a fix names
everything that changed since the error, a failure printed again after an attempt is a failure
of its own, "2×" is one command line run twice, a rerun is the same command line minus its filter,
and a failure a later run superseded does not look open."""

from __future__ import annotations

from compaction.core.summarizers.extractive.render import errors
from compaction.core.summarizers.extractive.view import View
from tests.core.work.story import Story


def _told(story: Story) -> list[str]:
    return errors(View(story.state()))


def test_a_fix_names_every_change_since_the_error_not_only_those_after_the_last_failure() -> None:
    story = (
        Story()
        .person("add the live tests")
        .run("mix test", "** (RuntimeError) no :secret_key_base configuration found\n3 tests, 2 failures", error=True)
        .edit("config/test.exs", "a", "b")
        .run("mix test test/live_test.exs", "** (RuntimeError) requires lazy_html\n2 tests, 2 failures", error=True)
        .edit("test/live_test.exs", "a", "b")
        .run("mix test", "3 tests, 0 failures")
    )
    first = next(e for e in story.state().errors if "secret_key_base" in e.line)
    assert first.status == "resolved"
    assert "`test.exs`" in first.resolution and "`live_test.exs`" in first.resolution, first.resolution
    assert "(#4–#8)" in first.resolution, first.resolution


def test_an_error_printed_again_after_an_attempt_is_a_failure_of_its_own() -> None:
    shown = (
        '** (ArgumentError) expected selector ".badge" to return a single element, but got none within: '
        '<div class="header"><a href="/">Back</a></div><div style="display: flex; gap: 0;">'
    )
    story = (
        Story()
        .person("fix the live tests")
        .run("mix test test/live_test.exs", shown + "<p>No transcript available</p>\n12 tests, 11 failures", error=True)
        .says("The issue is clear: the LiveView process can't access the SQL sandbox.")
        .edit("test/live_test.exs", "checkout", "start_owner")
        .run("mix test test/live_test.exs", shown + "<p>Subagent output</p>\n12 tests, 2 failures", error=True)
        .says("The loader is missing the agent_id field.")
        .edit("test/live_test.exs", "agent_id", "text")
        .run("mix test test/live_test.exs", "12 tests, 1 failure", error=True)
    )
    told = _told(story)
    first = next(line for line in told if "No transcript available" in line)
    latest = next(line for line in told if "Subagent output" in line)
    assert "(2×)" not in first + latest
    assert "SQL sandbox" in first and "the same error again at #" in first, first
    assert "SQL sandbox" not in latest and "agent_id" in latest and "got past it" in latest, latest


def test_one_error_from_two_command_lines_is_not_one_command_failing_twice() -> None:
    line = "src/theme.ts(5,15): error TS2305: Module '\"tui\"' has no exported member 'EditorTheme'."
    story = (
        Story()
        .person("release it")
        .run('npm run build 2>&1 | grep -A 5 "agent" | tail -20', line + "\nnpm error code 2")
        .run("npm run build -w agent 2>&1 | head -30", line + "\nnpm error code 2")
    )
    told = "\n".join(_told(story))
    assert "(2×)" not in told, told
    assert "`npm run build -w agent` failed (#5)" in told, told
    assert "the same error again at #5, from `npm run build -w agent" in told, told


def test_the_same_command_line_run_twice_unchanged_is_one_failure_twice() -> None:
    story = (
        Story()
        .person("build it")
        .run("make", "cc: error: missing.c: No such file or directory\nmake: *** [all] Error 1", error=True)
        .run("make", "cc: error: missing.c: No such file or directory\nmake: *** [all] Error 1", error=True)
    )
    assert "(2×)" in "\n".join(_told(story))
    story.edit("Makefile", "missing.c", "main.c").run(
        "make", "cc: error: missing.c: No such file or directory\nmake: *** [all] Error 1", error=True
    )
    told = "\n".join(_told(story))
    assert "(2×) (#5): `cc: error: missing.c: No such file or directory` — then edits to `Makefile`" in told, told
    assert "the same error again at #9" in told, told


def test_a_later_run_with_other_arguments_is_not_a_filtered_rerun() -> None:
    story = (
        Story()
        .person("check the types")
        .run(
            "cd packages/agent && npx tsc --noEmit",
            "../tui/test/chat.ts(28,2): error TS2739: Type '{}' is missing properties",
            error=True,
        )
        .run(
            'cd packages/agent && npx tsc --noEmit src/**/*.ts 2>&1 | grep -v "^../tui"',
            "src/a.ts(104,35): error TS1343: The 'import.meta' meta-property is only allowed with --module",
        )
        .edit("packages/agent/src/a.ts", "a", "b")
    )
    first = next(line for line in _told(story) if "TS2739" in line)
    assert "only through" not in first, first
    assert "not run again with these arguments (a later `tsc` run, #4, had others)" in first, first


def test_a_failed_copy_is_settled_by_a_later_copy_to_the_same_destination() -> None:
    story = (
        Story()
        .person("make me a theme")
        .run(
            "mkdir -p ~/.app/themes && cp $(npm root -g)/app/dist/theme/dark.json ~/.app/themes/custom.json",
            "cp: /usr/lib/node_modules/app/dist/theme/dark.json: No such file or directory\nCommand exited with code 1",
            error=True,
        )
        .run("mkdir -p ~/.app/themes && cp src/theme/dark.json ~/.app/themes/custom.json", "(no output)")
        .run("cp src/theme/light.json ~/.app/themes/other.json", "(no output)")
    )
    (error,) = story.state().errors
    assert (error.status, error.resolved_seq) == ("resolved", 5)


def test_a_copy_to_another_destination_settles_nothing() -> None:
    story = (
        Story()
        .person("copy it")
        .run("cp /nope/a.json ~/x/a.json", "cp: /nope/a.json: No such file or directory", error=True)
        .run("cp src/b.json ~/x/b.json", "(no output)")
    )
    (error,) = story.state().errors
    assert error.status == "open"


def test_a_failure_a_later_whole_project_check_of_its_kind_passed_over_says_so() -> None:
    story = (
        Story()
        .person("fix the types")
        .run(
            'cd packages/agent && npx tsc --noEmit src/**/*.ts 2>&1 | grep -v "^../tui"',
            "src/a.ts(104,35): error TS1343: The 'import.meta' meta-property is only allowed with --module\n"
            "Command exited with code 2",
            error=True,
        )
        .edit("packages/agent/src/b.ts", "a", "b")
        .run("cd packages/agent && npm run check", "> tsgo --noEmit\n")
    )
    first = next(line for line in _told(story) if "TS1343" in line)
    assert "a later typecheck, `npm run check` with no file arguments in `packages/agent`, passed at #6" in first, first
    elsewhere = (
        Story()
        .person("x")
        .run("cd packages/agent && npx tsc --noEmit src/a.ts", "src/a.ts(1,1): error TS1343: nope", error=True)
    )
    elsewhere.run("cd packages/tui && npm run check", "> tsgo --noEmit\n")
    assert "with no file arguments" not in "\n".join(_told(elsewhere))


def test_a_failure_printed_again_after_attempts_names_the_earlier_runs() -> None:
    refused = "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry."
    story = Story().person("fix the reader")
    for attempt in range(3):
        story.run(
            "python -m pytest tests/test_reader.py",
            f"E   SyntaxError: invalid syntax\n1 error in 0.1{attempt}s",
            error=True,
        )
        story.says("The issue is the missing colon.")
        story.edit("src/reader.py", f"a{attempt}", f"b{attempt}", output=refused if attempt < 2 else "")
    told = "\n".join(_told(story))
    latest = next(line for line in told.splitlines() if "(#13; the same error before it at #3, #8)" in line)
    assert "(3×)" not in told and "SyntaxError" in latest, told


def test_a_failing_checks_line_is_named_with_the_run_that_printed_it() -> None:
    from compaction.core.summarizers.extractive.standing import where_things_stand

    story = (
        Story()
        .person("fix the type errors")
        .run(
            "npm run check",
            "test/chat.ts(93,18): error TS2554: Expected 3-4 arguments, but got 2.\n"
            "test/wrap.test.ts(70,52): error TS2353: Object literal may only specify known properties",
            error=True,
        )
        .edit("test/chat.ts", "x", "y")
        .run(
            'npm run check | grep "wrap"',
            "test/wrap.test.ts(70,52): error TS2353: Object literal may only specify known properties",
        )
        .edit("test/wrap.test.ts", "x", "y")
    )
    said = "\n".join(where_things_stand(View(story.state())))
    assert (
        'Failing: `npm run check` since #2; its latest run, `npm run check | grep "wrap"` (#6), printed'
        " `test/wrap.test.ts(70,52)" in said
    ), said
