"""A run's outcome comes from its exit status and the tool's own verdict lines (issue 32, held-out
claims audit h0): a command started in the background has none until a poll or the harness's
notice shows it ended; each command of an `a && b` chain is a run of its own, passed when the
chain got past it; a pipeline that ends counting lines printed a count, not a verdict; the last
command run is the last command, not the last check."""

from __future__ import annotations

from compaction.core.summarizers.extractive.remaining import next_steps
from compaction.core.summarizers.extractive.standing import steps_since_request, where_things_stand
from compaction.core.summarizers.extractive.view import View
from tests.core.work.story import Story, commit_output

STARTED = (
    "Command running in background with ID: be613ab. Output is being written to: "
    "/tmp/claude-1000/-p/tasks/be613ab.output"
)


def _poll(status: str, output: str, *, exit_code: int | None = None, timed_out: bool = False) -> str:
    code = f"<exit_code>{exit_code}</exit_code>\n\n" if exit_code is not None else ""
    retrieval = "timeout" if timed_out else "success"
    return (
        f"<retrieval_status>{retrieval}</retrieval_status>\n\n<task_id>be613ab</task_id>\n\n"
        f"<task_type>local_bash</task_type>\n\n<status>{status}</status>\n\n{code}<output>\n{output}\n</output>"
    )


def _started() -> Story:
    return (
        Story()
        .person("run the renderer tests")
        .edit("/p/lib/r.ex", "a", "b")
        .tool(
            "Bash",
            {"command": "mix test test/r_test.exs 2>&1", "run_in_background": True},
            STARTED,
            said="Let me run the tests now.",
        )
    )


def test_a_command_started_in_the_background_has_no_outcome_yet() -> None:
    story = _started().tool(
        "TaskOutput", {"task_id": "be613ab", "block": True}, _poll("running", "==> ecto\nCompiling", timed_out=True)
    )
    state = story.state()
    assert "mix test" not in state.checks  # no pass: the call only started it
    assert list(state.jobs) == ["be613ab"] and state.jobs["be613ab"].polled == 6
    v = View(state)
    said = "\n".join(where_things_stand(v))
    assert "passed" not in said
    assert "Started in the background at #4 (ID `be613ab`), its end not seen: `mix test test/r_test.exs`" in said
    assert (
        "its last call (taskoutput) showed `mix test test/r_test.exs` (started in the background at #4) still running"
        in said
    )
    steps = next_steps(v)
    assert steps[0].startswith("Collect the result of `mix test test/r_test.exs`, started in the background at #4")


def test_a_poll_that_shows_the_job_ended_is_that_commands_run() -> None:
    story = _started().tool(
        "TaskOutput", {"task_id": "be613ab"}, _poll("completed", "49 tests, 0 failures", exit_code=0)
    )
    state = story.state()
    check = state.checks["mix test"]
    assert (check.ok, check.seq, check.tally) == (True, 6, "49 tests, 0 failures")
    assert not state.jobs
    failed = _started().tool("TaskOutput", {"task_id": "be613ab"}, _poll("completed", "1 test, 1 failure", exit_code=2))
    assert failed.state().checks["mix test"].ok is False


def test_the_harness_notice_that_a_job_ended_gives_its_exit_status() -> None:
    notice = (
        "<task-notification>\n<task-id>be613ab</task-id>\n<output-file>/tmp/x/be613ab.output</output-file>\n"
        '<status>completed</status>\n<summary>Background command "Run tests" completed (exit code 1)</summary>\n'
        "</task-notification>\nRead the output file to retrieve the result: /tmp/x/be613ab.output"
    )
    state = _started().harness(notice).state()
    assert state.checks["mix test"].ok is False and not state.jobs


def test_a_stopped_job_is_owed_no_result() -> None:
    state = _started().tool("KillShell", {"shell_id": "be613ab"}, "Successfully killed shell: be613ab").state()
    assert not state.jobs


def test_each_check_of_an_and_chain_is_a_run_of_its_own() -> None:
    output = "Compiling 4 files (.ex)\nGenerated app\n..\nFinished in 0.8 seconds\n18 tests, 0 failures"
    command = "mix compile --warnings-as-errors 2>&1 && mix test test/a_test.exs 2>&1 | tail -10"
    state = Story().person("check it").run("mix compile --warnings-as-errors", "error: x", error=True)
    state = state.edit("/p/lib/a.ex", "x", "y").run(command, output).state()
    compile_check = state.checks["mix compile"]
    assert (compile_check.ok, compile_check.seq, compile_check.fixed_seq) == (True, 6, 6)
    assert state.checks["mix test"].ok is True
    # The tests failed, but their tally shows the chain got past the compile.
    failing = Story().person("check it").run("mix compile && mix test", "3 tests, 1 failure", error=True).state()
    assert failing.checks["mix compile"].ok is True and failing.checks["mix test"].ok is False
    # A chain stopped where nothing shows how far it got: the compile's outcome is unknown.
    stopped = Story().person("check it").run("mix compile && mix test", "** (CompileError)", error=True).state()
    assert "mix compile" not in stopped.checks
    # `a; b` runs b whatever a did: a's outcome is not shown.
    either = Story().person("check it").run("mix compile; mix test", "3 tests, 0 failures").state()
    assert "mix compile" not in either.checks


def test_a_pipeline_that_counts_lines_printed_a_count_not_a_verdict() -> None:
    command = 'cd packages/a && npm run check | grep "error TS" | wc -l'
    story = Story().person("fix the types").run(command, "11")
    state = story.state()
    assert not state.checks
    said = steps_since_request(View(state))
    assert "printed 11 (a count of the lines matching `error TS`)" in said and "passed" not in said
    # Elsewhere a count is output like any other.
    assert Story().person("count").run("ls src | wc -l", "11").state().turn.steps[-1].ok is True


def test_the_last_command_run_is_the_last_command_not_the_last_check() -> None:
    story = (
        Story()
        .person("add the test and commit")
        .edit("/p/tests/test_a.py", "x", "y")
        .run("python -m pytest tests/test_a.py -v", "2 passed in 0.01s")
        .run("git add tests/test_a.py && git commit -m 'Add test'", commit_output("abc1234", "Add test"))
    )
    said = steps_since_request(View(story.state()))
    assert said.endswith("then `git add tests/test_a.py && git commit -m 'Add test'` (#6)")


def test_a_codex_exec_session_that_outlived_its_wait_ends_at_the_poll_that_shows_its_exit_code() -> None:
    running = "Chunk ID: a1\nWall time: 10.0 seconds\nProcess running with session ID 58462\nOutput:\nCompiling"
    story = Story().person("run the tests").tool("exec_command", {"cmd": "cargo test"}, running)
    assert list(story.state().jobs) == ["58462"] and "cargo test" not in story.state().checks
    ended = "Chunk ID: b2\nWall time: 2.0 seconds\nProcess exited with code 101\nOutput:\ntest result: FAILED. 3 passed; 1 failed"
    state = story.tool("write_stdin", {"session_id": 58462, "chars": ""}, ended).state()
    assert not state.jobs and state.checks["cargo test"].ok is False


def test_a_file_that_holds_a_status_tag_is_no_poll_of_a_job() -> None:
    state = _started().read("/p/config.xml", "1→<job><status>completed</status></job>").state()
    assert list(state.jobs) == ["be613ab"] and "mix test" not in state.checks


def test_a_chain_whose_last_command_is_no_check_is_one_run_of_its_check() -> None:
    state = Story().person("commit").run("mix compile && git commit -am x", commit_output("abc1234", "x")).state()
    assert state.checks["mix compile"].runs == 1
