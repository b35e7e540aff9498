"""What the handoff states is what the evidence shows (the claims audit's findings, as rules):
git's own listing, a clean status no commit here explains, a search that found nothing, an
error printed again, a refused edit, a follow-up the agent filed, a script written and removed."""

from __future__ import annotations

from compaction.core.summarizers.extractive.render import errors, next_section, repository
from compaction.core.summarizers.extractive.standing import where_things_stand
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
    assert "did not print it" not in told and "got past" not in told


def test_an_error_the_next_run_did_not_print_is_told_as_such_not_as_fixed() -> None:
    story = (
        Story()
        .person("fix the build")
        .run("mix compile", "error: lib/a.ex:45: undefined function foo/1", error=True)
        .edit("lib/a.ex", "x", "y")
        .run("mix compile", "error: lib/b.ex:3: syntax error before: end", error=True)
    )
    told = "\n".join(errors(View(story.state())))
    assert "the next run (#7) did not print it (it failed with other errors)" in told


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
    assert not any(step.startswith("1. Next open") or "Then `proj-fum.5`" in step for step in steps)
    assert any("Not a step unless the person asks" in step and "`proj-fum.5`" in step for step in steps)
    assert "Filed by the agent in this history and still open (not started): `proj-fum.5`" in _stand(story)


def test_a_script_written_and_deleted_again_is_no_modified_file() -> None:
    story = (
        Story().person("fix it").write("reproduce.py", "print(1)").edit("src/x.py", "a", "b").run("rm reproduce.py", "")
    )
    assert file_ops(story.state()).modified == ["src/x.py"]
