"""A model's summary made to agree with the work state: what contradicts the evidence is
repaired and recorded; what the repair adds is only what a message shows."""

from __future__ import annotations

from compaction.core.summarizers.agree import agree
from tests.core.work.story import Story, commit_output, push_output

SUMMARY = """## Where Things Stand
- Task proj-a.1 is done; proj-a.2 is next.

## Goal
Ship the parser.

## Progress
### Done
- [x] proj-a.1 closed after the tests passed.

### In Progress
- [ ] proj-a.1: finishing the parser edge cases.

### Blocked
- (none)

## Next Steps
1. Close proj-a.1 once the tests pass.
2. Start proj-a.2.

## Critical Context
- (none)"""


def _state():
    return (
        Story()
        .person("Work through proj-a.1, then proj-a.2.")
        .run("bd update proj-a.1 --status in_progress", "ok")
        .edit("/p/parser.py", "1", "2")
        .run("git commit -am 'feat: parser (proj-a.1)'", commit_output("1a2b3c4", "feat: parser (proj-a.1)", "feat"))
        .run("git push", push_output("0000000", "1a2b3c4", "feat"))
        .run("bd close proj-a.1", "✓ Closed proj-a.1")
        .edit("/p/lexer.py", "1", "2")
        .run("git commit -am 'feat: lexer'", commit_output("5e6f7a8", "feat: lexer", "feat"))
        .state()
    )


def test_a_closed_task_listed_as_open_is_removed_and_the_repair_names_its_evidence():
    state = _state()
    closed = state.tasks.tasks["proj-a.1"].closed
    result = agree(SUMMARY, state)
    assert "- [ ] proj-a.1: finishing the parser edge cases." not in result.summary
    assert "1. Close proj-a.1 once the tests pass." not in result.summary
    # What says it is done stays, and so does what names another task.
    assert "- [x] proj-a.1 closed after the tests passed." in result.summary and "2. Start proj-a.2." in result.summary
    assert result.repairs.count(f"removed a line listing proj-a.1 as open (closed at #{closed})") == 2


def test_a_lost_commit_comes_back_with_only_what_the_history_shows_of_it():
    result = agree(SUMMARY, _state())
    pushed, local = _state().git.commits
    # The push was seen: said, with where. No push of the other was seen: said so, not "not pushed".
    assert (
        f'- Commit `1a2b3c4` "feat: parser (proj-a.1)" (#{pushed.seq}, pushed to `feat` at #{pushed.pushed_seq})'
        in result.summary
    )
    assert f'- Commit `5e6f7a8` "feat: lexer" (#{local.seq}, no push of it in this history)' in result.summary
    assert "not pushed" not in result.summary
    assert {"added commit 1a2b3c4", "added commit 5e6f7a8"} <= set(result.repairs)


def test_a_summary_that_agrees_gets_nothing_added():
    agreeing = SUMMARY.replace("- [ ] proj-a.1: finishing the parser edge cases.", "- [ ] proj-a.2: not started")
    agreeing = agreeing.replace("1. Close proj-a.1 once the tests pass.\n", "").replace(
        "## Critical Context\n- (none)", "## Critical Context\n- Commits `1a2b3c4` (pushed to feat) and `5e6f7a8`."
    )
    result = agree(agreeing, _state())
    assert result.repairs == [] and result.summary == agreeing
