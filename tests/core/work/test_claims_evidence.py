"""What the handoff states is what the evidence shows (the claims audit's findings, as rules):
git's own listing, a clean status no commit here explains, a search that found nothing, an
error printed again, a refused edit, a follow-up the agent filed, a script written and removed."""

from __future__ import annotations

from compaction.core.ledger import CRITICAL_CATEGORIES, Ledger, repair_summary
from compaction.core.summarizers.extractive.render import constraints, errors, goal, next_section, repository
from compaction.core.summarizers.extractive.standing import built_by, where_things_stand
from compaction.core.summarizers.extractive.view import View
from compaction.core.work import file_ops
from tests.core.work.story import Story, commit_output

STATUS = (
    "On branch master\nChanges not staged for commit:\n"
    "\tmodified:   src/a.py\n\tmodified:   tests/test_a.py\n\n"
    "Untracked files:\n\t.coverage\n"
)


def _stand(story: Story) -> str:
    return "\n".join(where_things_stand(View(story.state())))


def test_git_status_listing_modified_and_untracked_is_told_whole_even_under_tmp() -> None:
    story = (
        Story()
        .person("add a test")
        .edit("/tmp/proj/src/a.py", "x", "y")
        .edit("/tmp/proj/tests/test_a.py", "x", "y")
        .run("git status", STATUS)
    )
    said = _stand(story)
    assert "`src/a.py`" in said and "`tests/test_a.py`" in said and "`.coverage` (untracked)" in said


def test_a_file_only_read_that_git_lists_as_modified_is_not_dropped() -> None:
    story = Story().person("look").read("src/a.py").run("git status", STATUS)
    assert "`src/a.py` (modified)" in _stand(story)


def test_a_clean_status_after_edits_no_commit_took_leaves_the_latest_commit_unknown() -> None:
    story = (
        Story()
        .person("add it")
        .edit("/tmp/proj/src/a.py", "x", "y")
        .run("git status", STATUS)
        .run("git add src/a.py tests/test_a.py && git commit -m 'add'", commit_output("6322cf4", "add", "master"))
        .edit("/tmp/proj/.gitignore", "a", "a\n.coverage")
        .run("git status", "On branch master\nnothing to commit, working tree clean")
    )
    said = _stand(story)
    assert "no commit of this history took the edits of `.gitignore`" in said
    assert "the latest commit is not known from this history" in said
    assert any(
        line.startswith("- Latest commit made by a command of this history `6322cf4`")
        for line in repository(View(story.state()))
    )


def test_a_clean_status_after_a_commit_that_took_the_edits_claims_nothing_more() -> None:
    story = (
        Story()
        .person("add it")
        .edit("src/a.py", "x", "y")
        .run("git add -A && git commit -m 'add'", commit_output("6322cf4", "add"))
        .run("git status", "On branch main\nnothing to commit, working tree clean")
    )
    assert "not known from this history" not in _stand(story)


def test_a_search_that_found_nothing_is_not_told_as_gone_through() -> None:
    story = (
        Story().person("find the caller").run("grep -rn old_name src", "", error=True, said="Let me find the callers.")
    )
    said = _stand(story)
    assert "found nothing" in said and "went through" not in said
    tool = Story().person("find it").tool("Grep", {"pattern": "old_name"}, "No files found", said="Let me look.")
    assert "found nothing" in _stand(tool)


def test_an_error_printed_again_at_another_line_was_not_got_past() -> None:
    story = (
        Story()
        .person("fix the build")
        .run("mix compile", "error: lib/a.ex:45: undefined function foo/1\nException: exit code 1", error=True)
        .edit("lib/a.ex", "x", "y\nz")
        .run("mix compile", "error: lib/a.ex:47: undefined function foo/1\nException: exit code 1", error=True)
    )
    told = "\n".join(errors(View(story.state())))
    assert "got past" not in told


def test_an_error_the_next_run_did_not_print_is_told_as_such_not_as_fixed() -> None:
    story = (
        Story()
        .person("fix the build")
        .run("mix compile", "error: lib/a.ex:45: undefined function foo/1", error=True)
        .edit("lib/a.ex", "x", "y")
        .run("mix compile", "error: lib/b.ex:3: syntax error before: end", error=True)
    )
    told = "\n".join(errors(View(story.state())))
    assert "the next run (#7) got past it (failed otherwise)" in told


def test_a_refused_edit_is_to_be_redone_before_handing_in() -> None:
    story = (
        Story()
        .person("fix the handler")
        .edit(
            "src/handler.py",
            "a",
            "b",
            output="Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry.",
        )
    )
    steps = "\n".join(next_section(View(story.state())))
    assert "Redo the edit of `src/handler.py`: the tool refused it at #2 and the file is as it was" in steps


def test_a_script_run_before_the_latest_edit_is_owed_again() -> None:
    story = (
        Story()
        .person("fix the bug")
        .write("repro.py", "import x\nprint(x.f())")
        .run("python repro.py", "Traceback (most recent call last):\nValueError: bad")
        .edit("src/x.py", "a", "b")
    )
    steps = "\n".join(next_section(View(story.state())))
    assert "Run `python repro.py` again: its last run (#4) was before the edits of `src/x.py` (#6)" in steps


def test_a_script_run_is_not_owed_again_for_another_script_written_after_it() -> None:
    story = (
        Story()
        .person("find the seed")
        .write("fetch.py", "print(get())")
        .run("python fetch.py", "[16] Got random number: 1364650861")
        .write("solve.py", "from z3 import *")
        .edit("solve.py", "a", "b")
    )
    steps = "\n".join(next_section(View(story.state())))
    assert "Run `python fetch.py` again" not in steps
    # A suite or a check covers any file: a test run is owed again after any edit.
    story = Story().person("fix it").write("fix.py", "x = 1").run("pytest", "1 passed").write("other.py", "y = 2")
    assert "Run `pytest` again: its last run (#4) was before the edits of `other.py` (#6)" in "\n".join(
        next_section(View(story.state()))
    )
    # The script itself edited after its run: owed again, for that file only.
    story = (
        Story()
        .person("fix it")
        .write("fix.py", "x = 1")
        .run("python fix.py", "ok")
        .write("other.py", "y = 2")
        .edit("fix.py", "x = 1", "x = 2")
    )
    steps = "\n".join(next_section(View(story.state())))
    assert "Run `python fix.py` again: its last run (#4) was before the edits of `fix.py` (#8)" in steps


def test_a_follow_up_the_agent_filed_while_working_is_not_the_next_step() -> None:
    story = (
        Story()
        .person("Work on proj-fum")
        .run("bd update proj-fum.4 --status in_progress", "✓ Updated issue: proj-fum.4")
        .run("bd create 'agent_id dropped' --parent proj-fum", "✓ Created issue: proj-fum.5")
        .run("bd close proj-fum.4", "✓ Closed proj-fum.4")
        .says("All done; filed proj-fum.5 for later.")
    )
    steps = next_section(View(story.state()))
    assert not any(
        step.startswith("1. Next open") or any(f"{lead} `proj-fum.5`" in step for lead in ("Then", "open:", "tracker:"))
        for step in steps
    )
    assert any("Not a step unless the person asks" in step and "`proj-fum.5`" in step for step in steps)
    assert "Filed by the agent in this history and still open (not started): `proj-fum.5`" in _stand(story)


def test_a_script_written_and_deleted_again_is_no_modified_file() -> None:
    story = (
        Story().person("fix it").write("reproduce.py", "print(1)").edit("src/x.py", "a", "b").run("rm reproduce.py", "")
    )
    assert file_ops(story.state()).modified == ["src/x.py"]


def test_a_correction_of_the_agents_step_is_not_told_as_a_standing_rule() -> None:
    story = (
        Story()
        .person("make the code block green")
        .edit("theme.ts", "a", "b")
        .says("Made the code block green and the border too.")
        .person("no, the border should stay as is")
    )
    told = "\n".join(constraints(View(story.state())))
    assert told == '- "no, the border should stay as is" (#5; said in answer to the agent\'s step before it)'
    # The person wrote on the same subject again later: cited beside it.
    story.edit("theme.ts", "b", "c").says("Reverted the border.").person(
        "actually the border color is #b5bd68, use that"
    )
    told = "\n".join(constraints(View(story.state())))
    assert (
        "(#5; said in answer to the agent's step before it; the person wrote on the same subject later, at #9)" in told
    )


def test_what_fixed_a_check_is_what_changed_after_its_last_failing_run() -> None:
    story = (
        Story()
        .person("fix the test")
        .run("pytest tests/test_a.py", "FAILED tests/test_a.py::test_a - AssertionError\n1 failed in 0.1s", error=True)
        .edit("src/first.py", "a", "b")
        .run("pytest tests/test_a.py", "FAILED tests/test_a.py::test_a - AssertionError\n1 failed in 0.1s", error=True)
        .edit("src/second.py", "a", "b")
        .run("pytest tests/test_a.py", "1 passed in 0.1s")
    )
    fix = story.state().checks["pytest"].fix
    assert "second.py" in fix and "first.py" not in fix


def test_parallel_calls_are_told_together_not_one_as_the_last() -> None:
    story = Story().person("check the layout")
    story.raw.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look at both."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls docs"}},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "grep -rn CODEOWNERS ."}},
            ],
        }
    )
    story.raw.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a.md"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "", "is_error": True},
            ],
        }
    )
    said = _stand(story)
    assert "made 2 calls at once: `ls docs` went through and `grep -rn CODEOWNERS .` found nothing" in said


def test_the_first_requests_answer_carries_the_persons_reply_to_it() -> None:
    story = Story().person("port the selector").edit("sel.ts", "a", "b").says("Ported the selector.")
    story.person("you broke it, i undid your changes, try again").edit("sel.ts", "a", "c").says("Redone.")
    story.person("now the footer").says("Done.").person("and the header").says("Done.")
    told = "\n".join(goal(View(story.state())))
    assert 'answered at #4 (the person\'s reply, #5: "you broke it, i undid your changes, try again")' in told


def test_repaired_items_get_a_heading_of_their_own() -> None:
    ledger = Ledger(items={c: [] for c in CRITICAL_CATEGORIES})
    ledger.items["errors"] = ["src/a.ts(10,34): error TS1343: import.meta is not allowed"]
    summary = '## Goal\n- x\n\n## Critical Context\n\n### The Person\'s Messages\n- #1 "x"\n'
    repaired, _added = repair_summary(summary, ledger)
    assert "### Also in the history, verbatim" in repaired
    assert repaired.index("### Also in the history") < repaired.index("- Error (verbatim): src/a.ts(10,34)")


def test_a_filtered_or_narrower_run_does_not_get_past_an_earlier_error() -> None:
    story = (
        Story()
        .person("fix the types")
        .run("npm run check", "src/a.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'.", error=True)
        .edit("src/b.ts", "a", "b")
        .run(
            'npm run check | grep "b.ts"',
            "src/b.ts(9,2): error TS2322: Type 'string' is not assignable to type 'number'.",
            error=True,
        )
    )
    assert "got past" not in "\n".join(errors(View(story.state())))


def test_failing_runs_followed_by_an_edit_are_no_blocker() -> None:
    failure = "src/a.ts(3,1): error TS2339: Property 'x' does not exist on type 'Y'."
    story = (
        Story()
        .person("fix the types")
        .run("npx tsc --noEmit", failure, error=True)
        .run("npx tsc --noEmit", failure, error=True)
    )
    assert "Blocked:" in _stand(story)
    story.edit("src/a.ts", "a", "b")
    said = _stand(story)
    assert "Blocked:" not in said
    assert "Failing: `npx tsc --noEmit` since #2" in said and "not run again since the edits of `src/a.ts` (#6)" in said


def test_an_epic_in_progress_is_not_told_as_still_open() -> None:
    story = (
        Story()
        .person("Implement proj-gqc")
        .run("bd update proj-gqc --status in_progress", "✓ Updated issue: proj-gqc")
        .run("bd update proj-gqc.1 --status in_progress", "✓ Updated issue: proj-gqc.1")
        .run("bd show proj-gqc.2", "○ proj-gqc.2 · Second part   [● P2 · OPEN]")
    )
    said = _stand(story)
    assert "Epic in progress: `proj-gqc`" in said
    assert "Open: `proj-gqc.2`" in said and "`proj-gqc` " not in said.split("Open:")[1]


def test_a_generated_file_named_with_another_timestamp_is_made() -> None:
    note = "Add refs.\n\n## Files\n- `priv/repo/migrations/20260211213000_add_refs.exs` (new)\n"
    story = (
        Story()
        .person("Implement proj-gqc.1")
        .run("bd show proj-gqc.1", f"◐ proj-gqc.1 · Refs   [● P2 · IN_PROGRESS]\n\nDESCRIPTION\n{note}")
        .write("/p/priv/repo/migrations/20260211203856_add_refs.exs", "defmodule M do\nend")
    )
    steps = "\n".join(next_section(View(story.state())))
    assert "20260211213000_add_refs.exs" not in steps


def _batch(story: Story, calls: list[tuple[str, dict[str, str], str, bool]]) -> Story:
    """One assistant message with several calls, then one message with all their results."""
    story.raw.append(
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": f"b{i}", "name": name, "input": args}
                for i, (name, args, _, _) in enumerate(calls)
            ],
        }
    )
    story.raw.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"b{i}", "content": out, "is_error": err}
                for i, (_, _, out, err) in enumerate(calls)
            ],
        }
    )
    return story


def test_a_file_the_read_tool_said_does_not_exist_is_no_file_read_by_the_same_messages_calls() -> None:
    missing = "/p/BOOTLOADER.md"
    for order in (1, -1):
        calls = [
            ("Bash", {"command": f"cat {missing} 2>/dev/null | head -50"}, "", False),
            ("Read", {"file_path": missing}, "<tool_use_error>File does not exist.</tool_use_error>", True),
        ][::order]
        story = _batch(Story().person("review the repo"), calls).read("/p/archive/BOOTLOADER.md")
        assert file_ops(story.state()).read == ["/p/archive/BOOTLOADER.md"]
    # A file read in an earlier message and then answered "does not exist" was read then.
    earlier = _batch(
        Story().person("review").read(missing),
        [("Read", {"file_path": missing}, "<tool_use_error>File does not exist.</tool_use_error>", True)],
    )
    assert file_ops(earlier.state()).read == [missing]


def test_a_file_is_new_in_a_commit_only_when_git_printed_create_mode_for_it() -> None:
    def commit(subject: str) -> str:
        return f"git add -A && git commit -m '{subject}'"

    story = (
        Story()
        .person("Add the review page, then launch from it")
        .write("/p/lib/review_live.ex", "defmodule ReviewLive do\n  def mount(_, _, s), do: {:ok, s}\nend\n")
        .run(
            commit("feat: review page"), commit_output("bb53fb4", "feat: review page", created=("lib/review_live.ex",))
        )
        .edit("/p/lib/review_live.ex", "end\n", '  def handle_event("open", _, s), do: {:noreply, s}\nend\n')
        .write("/p/lib/token_store.ex", "defmodule TokenStore do\n  def mint(x), do: x\nend\n")
        .run(commit("feat: launch"), commit_output("a230dbf", "feat: launch", created=("lib/token_store.ex",)))
    )
    view = View(story.state())
    launch = next(c for c in story.state().git.commits if c.sha == "a230dbf")
    built = built_by(view, launch)
    assert any(b.startswith("`lib/token_store.ex` (new, ") for b in built), built
    assert any(b.startswith("`lib/review_live.ex` (") for b in built), built
    assert not any(b.startswith("`lib/review_live.ex` (new") for b in built), built


def test_a_check_run_again_through_a_filter_is_not_told_as_not_run_again() -> None:
    story = (
        Story()
        .person("fix the type errors")
        .run(
            "npm run check",
            "test/chat.ts(28,2): error TS2739: Type '{}' is missing properties\n"
            "test/wrap.test.ts(70,52): error TS2353: Object literal may only specify known properties",
            error=True,
        )
        .edit("test/chat.ts", "x", "y")
        .run(
            'npm run check | grep "wrap"',
            "test/wrap.test.ts(70,52): error TS2353: Object literal may only specify known properties",
        )
    )
    told = "\n".join(errors(View(story.state())))
    first = next(line for line in told.splitlines() if "TS2739" in line)
    assert "not run again" not in first, first
    assert "run again (#6) only through `grep`: its other errors unseen" in first, first


def test_the_agents_reading_of_a_failure_is_its_prose_never_a_line_of_the_code_it_fenced() -> None:
    refused = "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry."
    said = (
        "It seems there was a syntax error in the edit due to an unmatched ']' character. I will try again.\n\n"
        "```\nedit 287:295\n    missing = [elem for elem in required if elem not in ds]\nend_of_edit\n```"
    )
    story = (
        Story()
        .person("fix the handler")
        .edit("src/handler.py", "a", "b", output=refused)
        .edit("src/handler.py", "a", "c", output=refused, said=said)
    )
    told = "\n".join(errors(View(story.state())))
    assert (
        "the agent's reading: \"It seems there was a syntax error in the edit due to an unmatched ']' character.\""
        in told
    )
    assert "missing = [" not in told


def test_a_read_that_found_no_file_is_a_finding_not_an_open_error() -> None:
    missing = "<tool_use_error>File does not exist.</tool_use_error>"
    story = (
        Story()
        .person("evaluate the generated files")
        .tool("Read", {"file_path": "/p/.github/CODEOWNERS"}, missing, error=True)
        .read("/p/README.md")
    )
    told = "\n".join(errors(View(story.state())))
    assert "`.github/CODEOWNERS` does not exist: the read at #3 answered" in told, told
    assert "still open" not in told and "failed" not in told
    stand = _stand(story)
    assert "was refused or failed" not in stand and "not resolved" not in stand
    # A scratch file outside the project (a background task's output not written yet) is no finding.
    scratch = (
        Story().person("wait").tool("Read", {"file_path": "/tmp/claude-1000/tasks/b1.output"}, missing, error=True)
    )
    assert "does not exist" not in "\n".join(errors(View(scratch.state())))
    # Once the work writes the file, its absence is history.
    later = story.write("/p/.github/CODEOWNERS", "* @owner")
    assert "does not exist" not in "\n".join(errors(View(later.state())))
