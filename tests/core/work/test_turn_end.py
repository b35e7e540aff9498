"""Where the agent stopped, told true to the history: the words quoted with the last calls are
that message's own, a call that returned is told with its result (the next step follows from
it, no rerun), and the project's directory is the session's, not the changed files' deeper one."""

from __future__ import annotations

from compaction.core.paths import project_root
from compaction.core.summarizers.extractive.remaining import next_steps
from compaction.core.summarizers.extractive.standing import where_things_stand
from compaction.core.summarizers.extractive.view import View
from tests.core.work.story import Story


def _standing(story: Story) -> str:
    return "\n".join(where_things_stand(View(story.state())))


def test_words_quoted_with_the_last_call_are_from_its_own_message() -> None:
    story = (
        Story()
        .person("evaluate the generated files")
        .read("/p/a.yml", said="I'll evaluate this systematically. Let me first examine the files.")
        .run("ls -la /p/docs", "total 0")
    )
    text = _standing(story)
    assert "its words before it" not in text, text
    assert "that call came without words; its last words, at #2: \"I'll evaluate" in text, text


def test_words_from_before_the_latest_request_are_not_told_with_its_calls() -> None:
    story = (
        Story()
        .person("start the server")
        .run("mix phx.server &", "started", said="The server is starting. Let me check the MCP status.")
        .person("scrolling still does not work, search the web for it")
        .run("ls assets/js", "app.js")
    )
    text = _standing(story)
    assert "MCP" not in text and "that call came without words" in text, text


def test_words_of_the_calls_own_message_are_quoted() -> None:
    story = Story().person("run it").run("python a.py", "ok", said="Now I run the script.")
    assert 'its words before it: "Now I run the script."' in _standing(story)


def test_a_run_that_returned_is_told_with_what_it_printed_and_the_next_step_follows_from_it() -> None:
    story = (
        Story()
        .person("recover the seed")
        .write("/p/get_seed.py", "print(seed)\n")
        .run(
            "python get_seed.py",
            "125379498\n(Open file: /p/get_seed.py)\n(Current directory: /p)\nbash-$",
            said="We will now run the file, and see if we recover the seed.",
        )
    )
    state = story.state()
    assert "ran, printing `125379498`" in _standing(story)
    steps = "\n".join(next_steps(View(state)))
    assert "from the result of `python get_seed.py`" in steps and "`125379498`" in steps, steps
    assert "from where the agent stopped" not in steps, steps


def test_the_project_is_the_sessions_directory_not_the_changed_files_deeper_one() -> None:
    renderer = "/home/u/proj/lib/app/services/renderer.ex"
    # The task names the file relative to the project: its absolute path places the project.
    assert project_root([renderer], [renderer], [], ["lib/app/services/renderer.ex"]) == "/home/u/proj"
    # A `cd` target (or git's toplevel) that holds the files' common directory.
    files = ["/r/packages/a/src/x.ts", "/r/packages/a/src/y.ts"]
    assert project_root(files, files, ["/r"], []) == "/r"
    # Never a directory that does not hold the files, nor the home directory.
    assert project_root(files, files, ["/tmp/build", "/home/u"], []) == "/r/packages/a"
    # An agent's own file (a plan under ~/.claude) says nothing of where the project is.
    seen = [renderer, "/home/u/proj/test/app/renderer_test.exs", "/home/u/.claude/plans/p.md"]
    assert project_root([renderer, seen[2]], seen, [], []) == "/home/u/proj"


def test_a_cd_before_the_checks_places_the_project() -> None:
    story = (
        Story()
        .person("fix the build")
        .edit("/r/packages/a/src/x.ts", "a", "b")
        .edit("/r/packages/a/src/y.ts", "a", "b")
        .run("cd /r && npm run build", "built")
    )
    assert View(story.state()).root == "/r"
