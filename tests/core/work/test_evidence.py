"""Evidence for every status (issue 32, item 1): a status is stated with the message it rests
on, and only as far as nothing later could have changed it. Each case is a general fact about
runs and git, never one transcript's wording."""

from __future__ import annotations

from compaction.core.summarizers.extractive import handoff
from compaction.core.summarizers.extractive.render import checks
from compaction.core.summarizers.extractive.standing import where_things_stand
from compaction.core.summarizers.extractive.view import View
from tests.core.work.story import Story, commit_output

CREDO_SUGGESTIONS = (
    "Checking 42 source files ...\n\nAnalysis took 0.4 seconds\n312 mods/funs, found 10 software design suggestions.\n"
)


def text_of(section, story: Story) -> str:  # noqa: ANN001 - a section function
    return "\n".join(section(View(story.state())))


def test_a_linters_suggestions_are_findings_not_a_pass_even_through_a_pipe() -> None:
    story = Story().person("tidy it").run("mix credo --strict 2>&1 | tail -20", CREDO_SUGGESTIONS)
    state = story.state()
    (check,) = state.checks.values()
    assert not check.ok and check.findings
    said = text_of(checks, story)
    assert "reported findings at #2: `312 mods/funs, found 10 software design suggestions.`" in said
    assert "passed" not in said


def test_a_clean_linter_run_passes() -> None:
    story = Story().run("mix credo --strict", "Analysis took 0.4 seconds\n312 mods/funs, found no issues.")
    (check,) = story.state().checks.values()
    assert check.ok and not check.findings


def test_a_check_piped_into_a_filter_printed_its_verdict_its_exit_status_unseen() -> None:
    story = Story().run("pytest -q 2>&1 | tail -5", "12 passed in 0.3s")
    said = text_of(checks, story)
    assert "printed `12 passed in 0.3s` at #1 (through `| tail`: its exit status unseen)" in said
    assert "passed at #1" not in said


def test_a_pass_is_stated_before_the_edits_that_followed_it() -> None:
    story = (
        Story()
        .person("fix the parser")
        .run("mix test", "10 tests, 0 failures")
        .edit("/p/lib/a.ex", "x", "y")
        .edit("/p/lib/b.ex", "x", "y")
    )
    said = text_of(where_things_stand, story)
    assert (
        "`mix test` passed at #2, reporting 10 tests, 0 failures, before the edits of `lib/a.ex` and `lib/b.ex` (#4–#6)"
        in said
    )
    # Stated under Where Things Stand, the run is not stated again under Checks.
    assert "`mix test`" not in text_of(checks, story)


def test_the_pipe_that_hid_several_exit_statuses_is_said_once() -> None:
    story = (
        Story()
        .person("ship it")
        .edit("/p/lib/a.ex", "x", "y")
        .run("git commit -am 'start'", commit_output("1a2b3c4", "start"))
        .run("mix test 2>&1 | tail -3", "10 tests, 0 failures")
        .run("mix credo --strict 2>&1 | tail -3", "found no issues.")
        .edit("/p/lib/b.ex", "x", "y")
    )
    said = text_of(where_things_stand, story)
    assert said.count("| tail") == 1, said
    assert "all ran through `| tail`: their exit status is unseen" in said
    # The edits after the runs are the ones the working-tree line names: not listed twice.
    assert "all before those edits" in said and said.count("`lib/b.ex`") == 1


def test_a_pass_after_the_last_edit_names_no_edits() -> None:
    story = Story().edit("/p/lib/a.ex", "x", "y").run("mix test", "10 tests, 0 failures")
    assert "before the edits" not in text_of(checks, story)


def test_a_later_pass_of_the_same_check_on_other_files_leaves_the_failure_unknown_not_blocking() -> None:
    story = (
        Story()
        .person("lint it")
        .run("mix credo lib/a.ex", "found 2 code readability issues.", error=True)
        .edit("/p/lib/a.ex", "x", "y")
        .run("mix credo lib/b.ex", "found no issues.")
    )
    state = story.state()
    (check,) = state.checks.values()
    assert check.partial_seq is not None and check.fixed_seq is None
    text = handoff(state)
    assert "Fix the failing" not in text and "Failing:" not in text
    assert "`mix credo lib/a.ex` failed at #2 and no later run covered it" in text


def test_uncommitted_files_are_git_statuss_word_only_when_it_ran_after_their_edits() -> None:
    story = (
        Story()
        .person("add the page")
        .edit("/p/lib/a.ex", "x", "y")
        .run("git status", "On branch main\nChanges not staged for commit:\n\tmodified:   lib/a.ex\n")
        .edit("/p/lib/b.ex", "x", "y")
    )
    told = "\n".join(where_things_stand(View(story.state())))
    assert "`git status` at #4 shows uncommitted: `lib/a.ex`." in told
    assert "Edited in this history, the last `git status` was at #4: `lib/b.ex` (#6)." in told


def test_a_clean_tree_after_a_commit_is_said_from_the_edits_unless_git_status_ran_after_it() -> None:
    from tests.core.work.story import commit_output

    story = (
        Story()
        .person("commit it")
        .edit("/p/lib/a.ex", "x", "y")
        .run("git add -A && git commit -m 'feat: a'", commit_output("1a2b3c4", "feat: a"))
    )
    told = "\n".join(where_things_stand(View(story.state())))
    assert (
        "No file was edited after `1a2b3c4` (#4); no `git status` ran, so the tree is known only from the edits."
        in told
    )
    story.run("git status", "On branch main\nnothing to commit, working tree clean")
    told = "\n".join(where_things_stand(View(story.state())))
    assert "`git status` at #6 showed nothing uncommitted, after the last commit and edit." in told


def test_a_commit_is_tied_to_a_task_only_by_its_message_or_the_close_before_it() -> None:
    from compaction.core.summarizers.extractive.render import done
    from tests.core.work.story import commit_output

    story = (
        Story()
        .person("work through the epic")
        .run("bd update proj-b.1 --status in_progress", "✓ Updated")
        .edit("/p/lib/a.ex", "x", "y")
        .run("bd close proj-b.1", "✓ Closed")
        .run("git add -A && git commit -m 'feat: schema'", commit_output("aaaaaaa", "feat: schema"))
        .run("bd update proj-b.2 --status in_progress", "✓ Updated")
        .edit("/p/lib/b.ex", "x", "y")
        .run("git add -A && git commit -m 'feat: page'", commit_output("bbbbbbb", "feat: page"))
    )
    told = text_of(done, story)
    assert (
        'Committed `aaaaaaa` "feat: schema" (#8), not pushed; closed since the previous commit: `proj-b.1` (#6)' in told
    )
    # proj-b.2 was in progress, never closed, and the message does not name it: nothing is said.
    assert "proj-b.2" not in told


HOOK_REJECTS = (
    "[DIALYZER]\nFinding suitable PLTs...\nChecking PLT...\n"
    "lib/spotter/a.ex:12:no_return Function run/0 has no local return.\n"
    "done (warnings were emitted)\nHalting VM with exit status 2\n"
)


def test_a_command_still_failing_after_repeated_attempts_is_the_blocker_stated_first() -> None:
    story = (
        Story()
        .person("commit the work")
        .edit("/p/lib/spotter/a.ex", "x", "y")
        .run("git add -A && git commit -m 'feat: a'", HOOK_REJECTS, error=True)
        .edit("/p/lib/spotter/a.ex", "y", "z")
        .run("git add -A && git commit -m 'feat: a'", HOOK_REJECTS, error=True)
        .run("git commit --no-verify -m 'feat: a'", HOOK_REJECTS, error=True)
    )
    text = handoff(story.state())
    stand = text.split("## Goal")[0]
    first = stand.splitlines()[1]
    assert first.startswith("- Blocked: `git commit` failed in each of its last 3 runs (#4–#10), still failing")
    assert "`lib/spotter/a.ex:12:no_return Function run/0 has no local return.`" in first
    assert "[DIALYZER]" not in text
    assert (
        "The commands run: `git add -A && git commit -m 'feat: a'` and `git commit --no-verify -m 'feat: a'`" in first
    )
    assert "1. Get past the failing `git commit` (failed in each of its last 3 runs" in text


def test_a_command_that_failed_then_passed_is_no_blocker() -> None:
    story = (
        Story()
        .person("commit the work")
        .run("git commit -m 'feat: a'", HOOK_REJECTS, error=True)
        .run("git commit -m 'feat: a'", HOOK_REJECTS, error=True)
        .run("git commit -m 'feat: a'", "[main 1a2b3c4] feat: a\n 1 file changed")
    )
    assert "Blocked" not in handoff(story.state())


def test_the_task_is_carried_whole_within_the_budget_and_a_cut_says_how_much_is_left_out() -> None:
    from compaction.core.summarizers.extractive.render import goal

    items = "\n".join(f"{n}. Step {n}: change module {n} so its test passes." for n in range(1, 40))
    task = f"Fix the handler.\n{items}"
    told = text_of(goal, Story().person(task))
    assert "39. Step 39: change module 39 so its test passes." in told and "more characters" not in told
    huge = task + "\n" + "Background. " * 800
    told = text_of(goal, Story().person(huge))
    assert "more characters in #1)" in told
    left = int(told.split("(")[-2].split(" more")[0].replace(",", ""))
    assert 4_000 + left >= len(" ".join(huge.split())) - 10


def test_every_pending_todo_is_listed() -> None:
    items = [("pending", f"Port module {n}") for n in range(1, 9)]
    story = Story().person("port it").todos(("completed", "Set up"), *items)
    told = "\n".join(where_things_stand(View(story.state())))
    assert all(f'"Port module {n}"' in told for n in range(1, 9)), told
    assert 'done: "Set up"' in told


def test_a_script_that_ran_is_not_said_to_have_passed_and_its_printed_error_is_told() -> None:
    from compaction.core.summarizers.extractive.render import in_progress

    story = (
        Story()
        .person("reproduce the bug")
        .write("/p/reproduce.py", "import x\n")
        .run(
            "python reproduce.py",
            "Traceback (most recent call last):\n  File 'reproduce.py'\nAttributeError: no PixelRepresentation",
        )
    )
    told = text_of(in_progress, story)
    assert "last ran `python reproduce.py` (#4), which printed `AttributeError: no PixelRepresentation`" in told
    assert "passed" not in told


def test_what_a_script_printed_is_its_last_lines_never_a_warning_or_the_harness_footer() -> None:
    from compaction.core.summarizers.extractive.render import in_progress

    output = (
        "Warning: _curses.error: setupterm: could not find terminfo database\n\n"
        "/p/fetch.py:4: BytesWarning: Text is not bytes; assuming ASCII\n  r.sendline('')\n"
        "[15] Got random number: 4\n\n[16] Got random number: 1364650861\n\n"
        "[*] Closed connection to host port 4242\n(Open file: /p/fetch.py)\n(Current directory: /p)\nbash-$"
    )
    story = Story().person("get the numbers").write("/p/fetch.py", "import x\n").run("python fetch.py", output)
    told = text_of(in_progress, story)
    assert "which printed `[16] Got random number: 1364650861 / [*] Closed connection to host port 4242`" in told, told
    assert "Warning" not in told
    page = "<hr />\nYour name is test.<br />\n</body></html>///PROCESS-DONE:0:PROCESS-DONE///"
    told = text_of(in_progress, Story().person("probe it").run("curl http://h/forms.pl", page))
    assert "which printed `Your name is test.<br />`" in told, told
    quiet = "Your command ran successfully and did not produce any output.\n(Current directory: /p)\nbash-$"
    told = text_of(in_progress, Story().person("tidy").run("mv a.txt b.txt", quiet))
    assert "printed" not in told, told


def test_a_reply_that_announces_its_next_step_is_no_finished_turn() -> None:
    from compaction.core.summarizers.extractive.render import done

    story = Story().person("fix the import").edit("/p/a.py", "x", "y").says("The edit is in. Now let me run the tests:")
    told = "\n".join(where_things_stand(View(story.state())))
    assert "ended its turn" not in told and "The agent was mid-turn" in told
    assert "fix the import" not in text_of(done, story)
    finished = Story().person("fix the import").edit("/p/a.py", "x", "y").says("Fixed. Let me know if you need more.")
    told = "\n".join(where_things_stand(View(finished.state())))
    assert "The agent ended its turn at #4" in told


def _diagnosed(second_run_ok: bool) -> Story:
    said = (
        "The LiveView process can't access the sandbox because it runs in another process. I'll switch to shared mode."
    )
    story = (
        Story()
        .person("make the tests pass")
        .run(
            "mix test", "** (DBConnection.OwnershipError) cannot find ownership process\n1 test, 1 failure", error=True
        )
        .edit("/p/test/live_test.exs", "Sandbox.checkout(Repo)", "Sandbox.mode(Repo, {:shared, self()})", said=said)
    )
    if second_run_ok:
        return story.run("mix test", "12 tests, 0 failures")
    return story.run(
        "mix test", "** (ArgumentError) expected selector to return one element\n1 test, 1 failure", error=True
    )


def test_a_diagnosis_the_next_run_disproved_is_no_decision() -> None:
    from compaction.core.summarizers.extractive.render import decisions

    assert "can't access the sandbox" in text_of(decisions, _diagnosed(True))
    assert text_of(decisions, _diagnosed(False)) == ""


def test_the_agents_own_progress_is_no_reason() -> None:
    from compaction.core.summarizers.extractive.render import decisions

    said = "The import isn't used yet because I haven't updated the template. Let me update the template."
    story = Story().person("wire it").edit("/p/lib/page.ex", "a", "b", said=said)
    assert text_of(decisions, story) == ""


def test_a_directory_removed_whole_is_among_the_deleted_with_its_files() -> None:
    from compaction.core.summarizers.extractive.render import files

    story = (
        Story()
        .person("port it to Rust and delete the Python")
        .write("/p/tests/test_a.py", "def test(): pass\n")
        .write("/p/src/lib.rs", "pub fn a() {}\n")
        .run("rm -r tests/ && rm src/a.py src/b.py", "")
    )
    state = story.state()
    assert state.files["/p/tests/test_a.py"].state == "deleted"
    assert "`tests/`" in text_of(files, story)


def test_a_read_that_failed_is_no_file_read() -> None:
    from compaction.core.work import file_ops

    state = Story().person("look").tool("Read", {"file_path": "/p/missing.py"}, "File does not exist.").state()
    assert "/p/missing.py" not in file_ops(state).read


def test_a_files_length_counts_every_line_and_a_replacement_says_what_it_added_not_a_line_count() -> None:
    from compaction.core.work.parse import edit_change

    content = "fn a() {}\n\n// b\n\nfn b() {}\n"
    assert edit_change("Write", {"file_path": "/p/a.rs", "content": content}).summary.startswith("written, 5 lines")
    old = "\n".join(f"line {n}" for n in range(10))
    new = old.replace(
        "line 3",
        "the third line now says something rather longer than before\nand a second new line that is long too, longer still",
    )
    said = edit_change("Edit", {"file_path": "/p/a.py", "old_string": old, "new_string": new}).summary
    # A count of lines ("11 lines in place of 10") cannot be checked against an edit shown
    # shortened and says nothing of what changed: the new lines do.
    assert said.startswith("its new lines include `the third line now says") and "in place of" not in said, said
    defs = "def parse(text):\n    return text\n\ndef render(view):\n    return view\n\nclass Page:\n    pass\n"
    said = edit_change("Edit", {"file_path": "/p/a.py", "old_string": "x = 1", "new_string": defs}).summary
    assert said == "adds `def parse(text):`, and defines `render`, `Page`", said


def test_a_check_piped_into_a_filter_that_printed_errors_failed() -> None:
    printed = "src/theme.ts(70,5): error TS2353: Object literal may only specify known properties\n"
    story = Story().person("fix the types").run('npm run check 2>&1 | grep "theme"', printed)
    (check,) = story.state().checks.values()
    assert not check.ok
    said = text_of(checks, story)
    assert "failed at #2: `src/theme.ts(70,5): error TS2353" in said


def test_a_search_is_no_file_read() -> None:
    from compaction.core.work import file_ops

    state = (
        Story()
        .person("look")
        .tool("Grep", {"pattern": "borderColor", "path": "/p/src/editor.ts"}, "12: borderColor: x")
        .run("grep -n borderColor /p/src/other.ts", "3: borderColor")
        .run("cat /p/src/read.ts", "const a = 1")
        .state()
    )
    assert file_ops(state).read == ["/p/src/read.ts"]


CTF_TASK = (
    "We're currently solving the following CTF challenge. The CTF challenge is a cryptography problem named "
    '"Katy", worth 10 points. The description is:\ni like waffles and random ppl!!!! lol\n'
    "Files included in the challenge: ['release']\n\n"
    "INSTRUCTIONS:\nNow, you're going to solve this challenge on your own.\n"
    "Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME.\n"
    "When you think you have found the flag, you can submit your solution by simply running the submit command.\n"
)


def test_a_task_inside_a_harness_template_keeps_what_kind_of_task_it_is_and_its_instructions() -> None:
    from compaction.core.summarizers.extractive.render import constraints, goal

    story = Story().person(CTF_TASK)
    told = text_of(goal, story)
    assert "a cryptography problem named 'Katy'" in told and "i like waffles" in told
    rules = text_of(constraints, story)
    assert "YOU CAN ONLY ENTER ONE COMMAND AT A TIME" in rules and "the harness's words" in rules
    assert "waffles" not in rules  # the task's flavour text is no rule of the person's


def test_a_reported_request_carries_the_persons_reply_to_the_report() -> None:
    from compaction.core.summarizers.extractive.render import done

    story = (
        Story()
        .person("port the selector to the theme system")
        .edit("/p/src/selector.ts", "chalk", "theme")
        .says("Done: the selector uses the theme now.")
        .person("you broke that component, i undid your changes. do it properly this time")
    )
    told = text_of(done, story)
    assert "the person's reply (#5): \"you broke that component, i undid your changes." in told


def test_an_edit_the_tool_refused_is_an_attempt_not_a_blocker() -> None:
    from compaction.core.summarizers.extractive.render import blocked

    refused = "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit command."
    story = (
        Story()
        .person("fix the handler")
        .tool(
            "str_replace_editor",
            {"command": "str_replace", "path": "/p/h.py", "old_str": "a", "new_str": "b("},
            refused,
        )
    )
    assert text_of(blocked, story) == ""
    told = "\n".join(where_things_stand(View(story.state())))
    assert "nothing was changed by it" in told


def test_a_definition_is_quoted_as_written_and_an_editor_range_is_replaced_not_added() -> None:
    from compaction.core.work.parse import edit_change

    said = edit_change("edit", {"command": "edit 4:4\ndef division(a: float, b: float) -> float:\nend_of_edit"}).summary
    assert "`def division(a: float, b: float) -> float:`" in said, said
    assert "added" not in said


def test_a_traceback_is_told_by_its_exception_line() -> None:
    from compaction.core.summarizers.extractive.render import in_progress

    output = (
        "Traceback (most recent call last):\n  File 'r.py', line 3\n    raise AttributeError(\n"
        "AttributeError: Unable to convert the pixel data: PixelRepresentation missing"
    )
    story = Story().person("reproduce it").write("/p/r.py", "x\n").run("python r.py", output)
    assert "which printed `AttributeError: Unable to convert the pixel data" in text_of(in_progress, story)


def test_a_tally_summed_over_suites_says_so() -> None:
    from compaction.core.work.parse import run_outcome

    out = "test result: ok. 29 passed; 0 failed\n   Doc-tests x\ntest result: ok. 5 passed; 0 failed\n"
    _ok, tally, _error = run_outcome(out, False)
    assert "34 passed" in tally and "summed over 2 suites" in tally


def test_pending_todos_are_next_steps_even_when_no_tracker_task_was_started() -> None:
    from compaction.core.summarizers.extractive.render import next_section

    story = Story().person("port it").todos(("completed", "Set up"), ("pending", "Update Justfile"))
    steps = text_of(next_section, story)
    assert '"Update Justfile"' in steps and "not asked" not in steps
