"""The handoff's sections, table by table: a state (told as a story) in, the lines out."""

from __future__ import annotations

import pytest

from compaction.core.summarizers.extractive import handoff
from compaction.core.summarizers.extractive.render import (
    constraints,
    decisions,
    done,
    errors,
    files,
    goal,
    in_progress,
    next_section,
    other,
    people,
    render,
)
from compaction.core.summarizers.extractive.standing import where_things_stand
from compaction.core.summarizers.extractive.view import TINY, View
from tests.core.work.story import Story, commit_output, push_output

SPEC = (
    "○ proj-a.2 · Close the review   [● P2 · OPEN]\nOwner: x\n\nDESCRIPTION\nClose every open annotation in one action.\n\n"
    "Output files:\n- `lib/review_live.ex` (modify)\n- `test/review_live_test.exs` (modify)\n\n"
    "Definition of Done:\n- The button closes every open annotation.\n- LiveView tests cover N>0 and N=0.\n"
)


def epic() -> Story:
    """Two tasks of an epic: the first closed, committed and pushed; the second half done."""
    return (
        Story()
        .person("Implement proj-a")
        .run("bd update proj-a.1 --status in_progress", "✓ Updated")
        .edit(
            "/p/lib/annotation.ex",
            "attribute :x",
            "attribute :state, :atom",
            said="Now add the `:state` attribute to annotation.ex.",
        )
        .run("mix test", "10 tests, 0 failures")
        .run("bd close proj-a.1", "✓ Closed")
        .run(
            "git add -A && git commit -m 'feat: state (proj-a.1)'",
            commit_output("1a2b3c4", "feat: state (proj-a.1)", "proj-a"),
        )
        .run("git push", push_output("0000000", "1a2b3c4", "proj-a"))
        .run("bd show proj-a.2", SPEC)
        .run("bd update proj-a.2 --status in_progress", "✓ Updated")
        .edit(
            "/p/lib/review_live.ex",
            "end",
            'def handle_event("close", _p, socket) do\n  {:noreply, socket}\nend\nend',
            said="Add the close handler.",
        )
        .says("Let me add the button next.")
    )


def lines(section, story: Story, **view) -> str:  # noqa: ANN001 - a section function
    return "\n".join(section(View(story.state(), **view)))


# (case, story, section, expected fragments in order)
CASES = [
    (
        "where things stand names the closed, the current and what is uncommitted and unchecked",
        epic(),
        lambda v: where_things_stand(v),
        [
            "Closed: `proj-a.1`.",
            'In progress: `proj-a.2` "Close the review"',
            "Commits on `proj-a`: 1a2b3c4 — all pushed",
            "Edited after `1a2b3c4` (#10), no `git status` ran: `lib/review_live.ex` (#18).",
            "Checks: `mix test` passed at #6, reporting 10 tests, 0 failures, before those edits.",
            'The agent was mid-turn; its latest words (#20): "Let me add the button next."',
        ],
    ),
    (
        "next steps finish the task by its spec, in the agent's order, and push like before",
        epic(),
        next_section,
        [
            '1. Finish `proj-a.2` "Close the review": write the tests it asks for in `test/review_live_test.exs`',
            "then run `mix test`",
            "then close `proj-a.2`, then commit",
            "then push",
        ],
    ),
    (
        "in progress quotes the task and says what its work has done so far",
        epic(),
        in_progress,
        [
            "Its description (#15):\n  Close every open annotation in one action.\n  Output files:\n  - `lib/review_live.ex` (modify)\n"
            "  - `test/review_live_test.exs` (modify)\n  Definition of Done:\n  - The button closes every open annotation.\n"
            "  - LiveView tests cover N>0 and N=0.",
            'Done so far — `lib/review_live.ex`: adds `def handle_event("close", _p, socket)`',
        ],
    ),
    (
        "done names the commit, what it closed and that it is pushed",
        epic(),
        done,
        [
            'Committed `1a2b3c4` "feat: state (proj-a.1)" (#10), pushed to `proj-a`; its message names `proj-a.1` (closed at #8)'
        ],
    ),
    ("the goal is the person's request", epic(), goal, ['"Implement proj-a" (#1)']),
    (
        "a rule is quoted where it was said; a skill document never",
        Story()
        .person("Fix the login bug")
        .harness("Base directory for this skill: /s\n\nAlways prefer cached results.")
        .person("never push to main"),
        constraints,
        ['"never push to main" (#3)'],
    ),
    (
        "a failing run: its line, the agent's reading, what it changed next, and the fix",
        Story()
        .run("mix test", "** (RuntimeError) no :secret_key_base configuration found\n1 failure", error=True)
        .says("The endpoint isn't configured for the test env.")
        .edit(
            "/p/config/test.exs",
            "x",
            'config :app, Endpoint, secret_key_base: "x"',
            said="Add the endpoint config for tests.",
        )
        .run("mix test", "3 tests, 0 failures"),
        errors,
        [
            "`mix test` failed (#2): `** (RuntimeError) no :secret_key_base configuration found`",
            "the agent's reading: \"The endpoint isn't configured for the test env.\"",
            'then edits to `test.exs` ("Add the endpoint config for tests.")',
            "fixed (#7)",
        ],
    ),
    (
        "a failure the work went past is said to be so",
        Story()
        .run("curl http://localhost:9/x", "curl: (7) Failed to connect", error=True)
        .edit("/p/a.py", "1", "2")
        .run("pytest", "1 passed"),
        errors,
        ["not run again after it; edits since: `a.py` (#3)"],
    ),
    (
        "a decision quotes the agent's reason, attached to the file it shaped",
        Story().edit(
            "/p/m.exs",
            "alter",
            "rename",
            said="SQLite doesn't support ALTER COLUMN for nullability. I'll rewrite it as a table copy.",
        ),
        decisions,
        [
            "`m.exs` (#1): \"I'll rewrite it as a table copy.\" — the agent's reason:",
            '"SQLite doesn\'t support ALTER COLUMN for nullability."',
        ],
    ),
    (
        "a file committed earlier is described by its purpose",
        epic(),
        files,
        [
            '`lib/annotation.ex` was edited once and is committed in `1a2b3c4`; the agent\'s stated purpose: "Now add the `:state` attribute to annotation.ex."'
        ],
    ),
    (
        "every person message is listed when some are not quoted elsewhere",
        Story().person("first task").person("also keep the old API").person("latest: ship it"),
        people,
        ['#1 "first task"', '#2 "also keep the old API"', '#3 "latest: ship it"'],
    ),
]


@pytest.mark.parametrize(("case", "story", "section", "expected"), CASES, ids=[c[0] for c in CASES])
def test_section_lines(case: str, story: Story, section, expected: list[str]) -> None:  # noqa: ANN001
    text = "\n".join(section(View(story.state())))
    position = 0
    for fragment in expected:
        found = text.find(fragment, position)
        assert found >= 0, f"{fragment!r} missing (or out of order) in:\n{text}"
        position = found + len(fragment)


def test_work_that_is_finished_says_so_and_waits() -> None:
    story = (
        Story().person("add a docstring").edit("/p/a.py", "", '"""Doc."""\n').says("Done: added the module docstring.")
    )
    steps = lines(next_section, story)
    assert steps == "1. The work appears finished (the agent reported at #4): wait for the person's next request."


def test_a_last_reply_that_asks_the_person_leaves_the_request_open_with_the_question_verbatim() -> None:
    report = (
        "VS Code ignores the RGB values.\n\nLet me check your VS Code settings:\n\n"
        "1. **Minimum contrast ratio:**\n   - Search: `terminal.integrated.minimumContrastRatio`\n"
        "   - What's it set to? Try setting it to `1`\n\nThis is a VS Code bug, not our code."
    )
    story = Story().person("the grays all look the same").edit("/p/theme.ts", "a", "b").says(report)
    steps = lines(next_section, story)
    assert "appears finished" not in steps and "Wait for the person's answer" in steps
    assert "What's it set to?" in steps and "Let me check your VS Code settings:" in steps
    assert "the grays all look the same" not in "\n".join(done(View(story.state())))
    said = "\n".join(where_things_stand(View(story.state())))
    assert "waiting for the person's answer to: \"Let me check your VS Code settings: … What's it set to?\"" in said


@pytest.mark.parametrize(
    ("report", "asks"),
    [
        ("Done. Should I proceed with bumping the version?\n\n```bash\nnpm run version:minor\n```", True),
        ("Fixed it. Would you like me to commit these changes?", True),
        ("**Edge cases not handled:**\n- What happens if PR creation fails?\n- What if the issue has no label?", False),
        ("**Ready to use immediately?** No. Made `allow_nil?: true` optional.", False),
        ("Added the docstring. Is there anything else you'd like me to do?", False),
    ],
)
def test_only_a_question_put_to_the_person_is_an_open_question(report: str, asks: bool) -> None:
    story = Story().person("release it").says(report)
    steps = lines(next_section, story)
    assert ("Wait for the person's answer" in steps) is asks, steps


@pytest.mark.parametrize(
    ("report", "open_"),
    [
        ("Oh wait, these errors look like API mismatches. The TUI changes were never committed.", True),
        ("The import still fails after the revert?", True),
        ("Done: the build passes with no errors.", False),
        ("Fixed the errors; 49 tests, 0 failures.", False),
    ],
)
def test_a_last_report_that_leaves_trouble_open_is_no_finish(report: str, open_: bool) -> None:
    story = Story().person("add a docstring").edit("/p/a.py", "", '"""Doc."""\n').says(report)
    steps = lines(next_section, story)
    assert ("left this open" in steps and report[:30] in steps) is open_, steps
    assert ("appears finished" in steps) is not open_


@pytest.mark.parametrize(
    "report",
    [
        "Oh wait, these errors look like API mismatches. The TUI changes were never committed. Did we revert",
        "Here is the fix:\n\n```python\ndef f():\n    return 1",
    ],
)
def test_a_reply_cut_mid_sentence_is_no_report_and_no_finish(report: str) -> None:
    """A reply that stops mid-sentence (or inside a code fence it opened) is told as cut off, not
    as the agent's report, and does not answer the request (it is no "Done")."""
    story = Story().person("add a docstring").edit("/p/a.py", "", '"""Doc."""\n').says(report)
    state = story.state()
    standing = "\n".join(where_things_stand(View(state)))
    assert "ends mid-sentence" in standing and "reporting" not in standing, standing
    steps = lines(next_section, story)
    assert "ends mid-sentence" in steps and "appears finished" not in steps, steps
    assert all(p.answer is None for p in state.people.messages)


def test_an_open_child_is_next_the_epic_is_no_step_and_the_backlog_never() -> None:
    listing = (
        "○ proj-b [● P2] [epic] - The epic\n○ proj-b.2 [● P2] [task] - Second child\n○ zzz-q [● P1] [task] - Backlog\n"
    )
    story = (
        Story()
        .run("bd show proj-b.1", "○ proj-b.1 · First child   [● P2 · OPEN]\n")
        .run("bd close proj-b.1", "ok")
        .run("bd list", listing)
    )
    text = lines(next_section, story)
    # Closing the epic is nobody's request here: it is closed when its children are, by whoever does.
    assert "`proj-b.2`" in text and "`proj-b` " not in text and "zzz-q" not in text


def test_a_commit_of_a_gitignored_path_is_told_to_use_git_add_f() -> None:
    story = (
        Story()
        .write("/p/priv/static/assets/app.css", "body {}\n")
        .run(
            "cd /p && git add priv/static/assets/app.css",
            "The following paths are ignored by one of your .gitignore files:\npriv/static/assets\nhint: Use -f",
            error=True,
        )
        .run("cd /p && git add -f priv/static/assets/app.css && git commit -m css", commit_output("2b3c4d5", "css"))
        .edit("/p/priv/static/assets/app.css", "body {}", "body { color: red }")
    )
    assert "add `priv/static/assets/app.css` with `git add -f`: git ignores that directory" in lines(
        next_section, story
    )


def test_without_git_the_summary_claims_nothing_about_commits() -> None:
    story = Story().person("tweak the colors").edit("/p/theme.json", "#fff", "#eee").says("Done.")
    text = render(View(story.state()))
    assert "ncommitted" not in text and "Changed since the latest request: `theme.json` (no git command ran" in text


def test_the_assistants_words_appear_only_as_labelled_quotes() -> None:
    story = epic().says("I see - the issue is the function doesn't exist with that name.").person("ok")
    text = render(View(story.state()))
    for line in text.splitlines():
        bare = line.split('"')[0::2]  # outside double quotes
        assert not any(word in part for part in bare for word in ("I see", "Let me", "I'll ")), line


def test_focus_gathers_what_it_names_and_puts_it_first() -> None:
    state = epic().state()
    plain = handoff(state)
    focused = handoff(state, instructions="focus on the commit hashes and what is uncommitted")
    focus = focused.split("## Focus", 1)[1].split("\n## ", 1)[0]
    assert "`1a2b3c4`" in focus and "Uncommitted: `lib/review_live.ex`" in focus
    assert "## Focus" not in plain


def thirty_committed_steps() -> Story:
    """Thirty requests, each an edit, a commit and a report: a long session for a tiny budget."""
    story = Story()
    for i in range(30):
        story.person(f"Request {i}: update src/mod_{i}.py so that step {i} passes, keeping the old behaviour around.")
        story.edit(f"/p/src/mod_{i}.py", "a", "b" * 200, said=f"Now update mod_{i}.py for step {i}.")
        story.run(f"git commit -am 'step {i}'", commit_output(f"{i:07x}", f"step {i}"))
        story.says(f"Step {i} done.")
    return story


def test_a_tiny_budget_compresses_old_work_but_keeps_every_commit_and_names_every_persons_message() -> None:
    state = thirty_committed_steps().state()
    text = handoff(state, budget=1_500, max_chars=6_000)
    assert len(text) <= 6_000
    for i in range(30):
        assert f"{i:07x}" in text
    # The newest 20 of the person's messages quoted, the older ones by number (stored whole).
    people = text.split("### The Person's Messages", 1)[1]
    assert all(f"Request {i}: update" in people for i in range(10, 30))
    older = [p.seq for p in state.people.messages[:10]]
    assert "10 earlier messages, stored whole: " + ", ".join(f"#{seq}" for seq in older) in people


def test_a_persons_message_of_several_texts_is_cited_once_among_the_earlier_ones() -> None:
    story = thirty_committed_steps()
    # One message holding two of the person's lines (sent together, or merged by the agent).
    story.raw[0]["content"].append({"type": "text", "text": "and keep the old tests green while you are at it"})
    state = story.state()
    assert [p.seq for p in state.people.messages[:3]] == [1, 1, 7]  # two texts of message #1
    text = handoff(state, budget=1_500, max_chars=6_000)
    older = list(dict.fromkeys(p.seq for p in state.people.messages[:11]))
    assert "10 earlier messages, stored whole: " + ", ".join(f"#{seq}" for seq in older) + "\n" in text


def test_a_deleted_file_is_named_as_deleted_without_what_its_edits_had_added() -> None:
    story = (
        Story()
        .person("Try a nord theme, then drop it again")
        .write("/p/themes/nord.json", '{"accent": "nord8"}\n', said="Write the nord theme")
        .edit("/p/src/theme.ts", "dark", "nord", said="Point the loader at nord")
        .run("rm /p/themes/nord.json")
        .run("rm /p/src/theme.ts")
        .run("git commit -qam 'Drop the theme loader'", commit_output("a1b2c3d", "Drop"))
    )
    lines = files(View(story.state()))
    assert "- `themes/nord.json` was written, then deleted again (nothing left to commit)" in lines
    loader = next(line for line in lines if "src/theme.ts" in line)
    assert "was deleted" in loader and "nord" not in loader.split("`src/theme.ts`", 1)[1], loader


def test_a_short_latest_request_is_told_with_the_agents_words_it_answers() -> None:
    story = (
        Story()
        .person("Bump the version and update the CHANGELOG for the theme work")
        .edit("/p/CHANGELOG.md", "## [Unreleased]", "## [0.8.0]", said="Move Unreleased to 0.8.0")
        .says(
            "Perfect! Now ready for commit and tag. The steps are:\n\n```bash\ngit add .\n"
            'git commit -m "Release v0.8.0"\ngit tag v0.8.0\ngit push origin main\ngit push origin v0.8.0\n```\n\n'
            "Then:\n```bash\nnpm run publish\n```\n\nShould I proceed with committing and tagging?"
        )
        .person("yeah, do it all")
    )
    assert where_things_stand(View(story.state())) == [
        'The person\'s latest request (#5): "yeah, do it all", in reply to the agent\'s #4: "Perfect! Now ready for '
        "commit and tag. The steps are: ```bash git add . git commit -m 'Release v0.8.0' git tag v0.8.0 git push origin "
        'main git push origin v0.8.0 ``` Then: ```bash npm run publish ``` Should I proceed with committing and tagging?"',
        # Not "mid-turn" with the words before the request: the agent has not started on it.
        "The agent has not answered the latest request (#5) yet.",
    ]
    # Within a tight budget: the beginning, and the question the reply answers whole.
    tight = where_things_stand(View(story.state(), level=TINY))[0]
    assert tight.endswith(' … Should I proceed with committing and tagging?"'), tight
    # A short request that says what it wants stands alone.
    story.says("Done: released.").person("delete the custom theme")
    assert "in reply to" not in "\n".join(where_things_stand(View(story.state())))
    # The second text of one message answers what the first did.
    story.says("Deleted. Shall I also remove its entry from the README?")
    story.raw.append(
        {"role": "user", "content": [{"type": "text", "text": "/the"}, {"type": "text", "text": "yes, that too"}]}
    )
    stand = "\n".join(where_things_stand(View(story.state())))
    assert (
        '"yes, that too", in reply to the agent\'s #8: "Deleted. Shall I also remove its entry from the README?"'
        in stand
    )


def test_without_git_every_changed_file_is_described_and_a_scratch_script_is_gone() -> None:
    """A SWE-agent run: an editor's `create` of a reproduction script, the fix, the script removed,
    the work handed in. No git ran, so no file is "uncommitted" and all are told under Files."""
    template = (
        "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
        "Pixel Representation should be optional\n\nINSTRUCTIONS:\nWhen you're satisfied, you can submit your "
        "changes to the code base by simply running the submit command."
    )
    story = (
        Story()
        .harness(template)
        .tool("create", {"filename": "/repo/reproduce.py"}, "[File: /repo/reproduce.py (1 lines total)]")
        .edit("/repo/reproduce.py", "", "ds = Dataset()\nds.pixel_array", said="Paste the example from the issue")
        .run("python /repo/reproduce.py", "KeyError: PixelRepresentation", error=True)
        .edit(
            "/repo/pydicom/numpy_handler.py",
            "required = ['PixelRepresentation']",
            "required = []\nif 'PixelData' in ds:\n    required.append('PixelRepresentation')",
            said="Require PixelRepresentation only for integer pixel data",
        )
        .run("python /repo/reproduce.py", "ok")
        .run("rm /repo/reproduce.py")
        .tool("submit", {}, "diff --git a/pydicom/numpy_handler.py b/pydicom/numpy_handler.py")
    )
    v = View(story.state())
    told = files(v)
    assert any(line.startswith("- `pydicom/numpy_handler.py` was edited once") and "PixelData" in line for line in told)
    assert "- `reproduce.py` was written, then deleted again (nothing left to commit)" in told
    stand = "\n".join(where_things_stand(v))
    assert "Changed since the latest request: `pydicom/numpy_handler.py` (no git command ran" in stand
    assert in_progress(v) == []  # handed in: nothing is in progress


def test_the_tools_line_names_the_projects_programs_not_the_shells_utilities_or_flags() -> None:
    story = (
        Story()
        .person("Add highlight.js to the transcript view")
        .run("ls -la assets", "app.js")
        .run("tail -30 log/dev.log", "ok")
        .run("cd assets && npm install --save highlight.js", "added 1 package")
        .run("mix test", "49 tests, 0 failures")
        .run("grep -rn hljs assets/js", "")
        .run('head -5 t.jsonl | python3 -c "import sys,json; [print(json.dumps({k:v for k,v in x})) for x in y]"', "{}")
    )
    # Not all it ran (`ls`, `tail`, `grep` are left out): said as some, not as the whole list.
    assert other(View(story.state())) == ["- Programs run in the shell include: `npm` (install), `mix` (test)"]


def test_a_hook_demand_the_agent_stopped_after_is_told_as_answered() -> None:
    demand = "Stop hook feedback:\nCannot exit with untracked files: commit them first"
    story = Story().person("Add multiply_numbers with a test").harness(demand)
    live = "\n".join(where_things_stand(View(story.state())))
    assert 'The harness\'s hook demanded (#2): "Cannot exit with untracked files: commit them first"' in live
    assert "without a new demand" not in live
    story.run("git add -A && git commit -m 'ignore generated files'", commit_output("6322cf4", "ignore")).says("Done.")
    answered = "\n".join(where_things_stand(View(story.state())))
    assert "; the agent's turn ended after it (#5) without a new demand" in answered


def test_tasks_a_session_only_created_are_open_not_next_steps() -> None:
    story = (
        Story()
        .person("create the beads")
        .run("bd create 'Quality tools' -t epic", "✓ Created issue: proj-0p7")
        .run("bd create 'Install Credo' --parent proj-0p7", "✓ Created issue: proj-0p7.1")
        .run("bd create 'Add mix quality alias' --parent proj-0p7", "✓ Created issue: proj-0p7.2")
    )
    steps = next_section(View(story.state()))
    assert steps[0] == (
        "1. Open in the tracker, none started in this history (not asked to be implemented so far): "
        '`proj-0p7.1` "Install Credo" and `proj-0p7.2` "Add mix quality alias".'
    )
    assert not any("Close the epic" in step for step in steps)


def test_a_rule_that_introduces_a_list_is_quoted_with_its_items() -> None:
    brief = (
        "Evaluate this bootstrap simulation using the rubric below. " + "Context. " * 60 + "\n\nSUCCESS CRITERIA:\n"
        "Generated system must:\n- Process test issue end-to-end without errors\n"
        "- Pass syntax validation (yamllint, shellcheck)\n- GitHub workflow triggers on issue creation\n\n"
        "SIMULATION OUTPUT:\nThe agent produced an 8-file manifest."
    )
    rules = constraints(View(Story().person(brief).state()))
    assert rules == [
        '- "Generated system must: Process test issue end-to-end without errors; Pass syntax validation '
        '(yamllint, shellcheck); GitHub workflow triggers on issue creation" (#1)'
    ]


def test_a_report_is_quoted_from_where_it_starts_not_from_its_announcement() -> None:
    story = (
        Story()
        .person("Evaluate the simulation")
        .read("/p/manifest.md")
        .says(
            "Now I have enough information to provide a comprehensive evaluation. Let me compile my findings:\n\n"
            "# EVALUATION\nCompleteness: 18/30. Correctness: 20/30."
        )
    )
    stand = where_things_stand(View(story.state()))
    assert (
        stand[-1]
        == 'The agent ended its turn at #4, reporting: "# EVALUATION Completeness: 18/30. Correctness: 20/30."'
    )
    # A report that is nothing but such words is quoted as it is.
    story.person("ok, and?").says("Let me summarize.")
    assert where_things_stand(View(story.state()))[-1].endswith('reporting: "Let me summarize."')


def test_files_deleted_in_one_sweep_share_a_line_and_a_written_file_says_its_size_once() -> None:
    story = Story().person("Port this Python project to Rust and delete the Python sources")
    for name in ("math_utils", "list_utils", "string_utils"):
        story.run(f"rm /p/src/{name}.py")
    story.write("/p/src/lib.rs", "pub mod math_utils;\n")
    story.write("/p/src/math_utils.rs", "pub fn factorial(n: u64) -> u64 {\n    (1..=n).product()\n}\n")
    lines = files(View(story.state()))
    assert "- Deleted (3): `src/math_utils.py`, `src/list_utils.py` and `src/string_utils.py`" in lines
    assert "- `src/lib.rs` was written; 1 line" in lines
    assert "- `src/math_utils.rs` was written; 3 lines, defining `factorial`" in lines


def test_a_push_or_commit_is_owed_to_the_latest_request_only_while_there_is_one_to_make() -> None:
    story = (
        Story()
        .person("Implement the close button, commit and push")
        .edit("/p/lib/review_live.ex", "a", 'def handle_event("close", _, socket)')
        .run("git add -A && git commit -m 'close button'", commit_output("05fd186", "close button"))
    )
    owed = next_section(View(story.state()))
    assert any("Push (the latest request asks for it)" in step or "Push `05fd186`" in step for step in owed), owed
    story.run("git push", push_output("bb53fb4", "05fd186")).says("Pushed.").person("did you push?")
    story.run("git status", "On branch main\\nnothing to commit, working tree clean").says("Yes, everything is pushed.")
    steps = next_section(View(story.state()))
    assert not any("Push" in step or "commit (" in step for step in steps), steps


def test_a_hand_in_is_told_with_what_it_handed_in() -> None:
    story = (
        Story()
        .person("Find the flag on web.chal.csaw.io:8000")
        .run("curl http://web.chal.csaw.io:8000/cgi-bin/file.pl?/flag", "FLAG{p3rl_6}")
        .tool("submit", {"command": "submit FLAG{p3rl_6}"}, "FLAG{p3rl_6}")
    )
    assert "The agent handed the work in with `submit FLAG{p3rl_6}` at #4." in where_things_stand(View(story.state()))


def test_a_file_is_new_only_in_the_commit_that_added_it() -> None:
    def commit(subject: str, body: str) -> str:
        return f"git add -A && git commit -m \"$(cat <<'EOF'\n{subject}\n\n{body}\nEOF\n)\""

    story = (
        Story()
        .person("Add the review page, then the close button")
        .write("/p/lib/review_live.ex", "defmodule ReviewLive do\nend\n")
        .run(
            commit("feat: review page", "Add ReviewLive."),
            commit_output("bb53fb4", "feat: review page", created=("lib/review_live.ex",)),
        )
        .edit("/p/lib/review_live.ex", "end", 'def handle_event("close", _, s), do: {:noreply, s}\nend')
        .write("/p/lib/token_store.ex", "defmodule TokenStore do\nend\n")
        .run(
            commit("feat: close button", "Add the close event."),
            commit_output("05fd186", "feat: close button", created=("lib/token_store.ex",)),
        )
    )
    lines = "\n".join(files(View(story.state())))
    assert "Committed in `05fd186` and unchanged since then: " in lines, lines
    assert "`lib/token_store.ex` (new)" in lines
    assert "`lib/review_live.ex`" in lines and "`lib/review_live.ex` (new)" not in lines


def test_a_clean_tree_is_claimed_from_git_status_only_when_one_ran_after_the_last_commit() -> None:
    story = (
        Story()
        .person("Release it")
        .edit("/p/CHANGELOG.md", "## [Unreleased]", "## [0.8.0]")
        .run("git add -A && git commit -m 'Release v0.8.0'", commit_output("45ffe0a", "Release v0.8.0"))
    )
    told = "\n".join(where_things_stand(View(story.state())))
    assert (
        "No file was edited after `45ffe0a` (#4); no `git status` ran, so the tree is known only from the edits" in told
    )
    story.run("git status", "On branch main\nnothing to commit, working tree clean")
    told = "\n".join(where_things_stand(View(story.state())))
    assert "`git status` at #6 showed nothing uncommitted, after the last commit and edit" in told


def test_a_commit_says_which_definitions_its_changes_added() -> None:
    story = (
        Story()
        .person("add the close action")
        .edit("/p/lib/review.ex", "  # end", "  def close(socket, id) do\n    socket\n  end")
        .run("git add lib/review.ex && git commit -m 'feat: close'", commit_output("1a2b3c4", "feat: close"))
    )
    said = "\n".join(done(View(story.state())))
    assert "definitions its changes add: `lib/review.ex` (`def close(socket, id)`)" in said, said


def test_an_option_weighed_before_the_reason_is_not_the_choice() -> None:
    said = (
        "Two options: 1. Remove `toolText` from the theme. "
        "2. Wrap the heading in `toolText` instead of bold. Which is better here?"
    )
    story = Story().edit("/p/tool.ts", "bold(x)", "fg('toolText', x)", said=said)
    told = "\n".join(decisions(View(story.state())))
    assert "Remove `toolText`" not in told, told


def test_a_hand_in_whose_result_only_repeats_the_value_is_not_told_as_work_done() -> None:
    """A CTF's `submit` of a guess: the result echoes the value and says nothing of acceptance, so
    the next step says what was handed in, not "nothing further"; a result that says more (a
    diff, a verdict) is a hand-in as before."""
    template = (
        "We're currently solving the following CTF challenge.\nTASK DESCRIPTION:\nFind the flag.\n\n"
        "INSTRUCTIONS:\nWhen you find the flag, you can submit it by running the submit command."
    )
    guess = Story().harness(template).tool("submit", {"command": "submit '4242'"}, "4242")
    steps = "\n".join(next_section(View(guess.state())))
    assert "Nothing further" not in steps
    assert "`submit '4242'`" in steps and "shows no acceptance" in steps
    diff = Story().harness(template).tool("submit", {"command": "submit"}, "diff --git a/x.py b/x.py\n+fixed")
    assert "Nothing further: the work was handed in." in "\n".join(next_section(View(diff.state())))
