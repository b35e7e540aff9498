"""What held and what is true of files at the end: a rule or decision whose code name the later
edits took out again is replaced; a file deleted later is deleted, not changed; an edit count the
reader can check; definitions from source files only; an edit's purpose from a sentence that
names its file."""

from __future__ import annotations

from compaction.core.summarizers.extractive.files_said import also_named
from compaction.core.summarizers.extractive.render import constraints, decisions, files
from compaction.core.summarizers.extractive.view import TERSE, View
from compaction.core.work import file_ops
from tests.core.work.story import Story

THEME = "/p/src/theme.ts"


def _followed_then_revised() -> Story:
    """The person asks for `toolText`, the agent puts it in (a decision with its reason), the
    person revises it and the edits take it out again."""
    return (
        Story()
        .person("make sure toolText is also used in the tool headings")
        .edit(
            THEME,
            'text = theme.bold("read")',
            'text = theme.fg("toolText", theme.bold("read"))',
            said="I'll use `toolText` for the heading because the heading needs its own color.",
        )
        .edit(THEME, 'text = theme.bold("edit")', 'text = theme.fg("toolText", theme.bold("edit"))')
        .person("well, i think it should be toolTitle and toolOutput?")
        .edit(
            THEME,
            'text = theme.fg("toolText", theme.bold("read"))',
            'text = theme.fg("toolTitle", theme.bold("read"))',
        )
        .edit(
            THEME,
            'text = theme.fg("toolText", theme.bold("edit"))',
            'text = theme.fg("toolTitle", theme.bold("edit"))',
        )
    )


def test_a_rule_whose_code_name_the_later_edits_took_out_is_said_replaced() -> None:
    (line,) = constraints(View(_followed_then_revised().state()))
    assert "later replaced: after the person's #6, edits #7–#9 took `toolText` out again" in line


def test_a_decision_whose_code_name_the_later_edits_took_out_is_no_decision() -> None:
    story = _followed_then_revised()
    assert decisions(View(story.state())) == []
    # Until the revision, it held.
    kept = Story()
    kept.raw = story.raw[:6]
    assert any("toolText" in line for line in decisions(View(kept.state())))


def test_a_rule_the_edits_kept_to_by_taking_a_name_out_holds() -> None:
    story = (
        Story()
        .person("never call legacyInit again, it leaks")
        .edit(THEME, "legacyInit();\nstart();", "start();")
        .edit(THEME, "legacyInit();", "")
    )
    (line,) = constraints(View(story.state()))
    assert "replaced" not in line


def test_a_name_put_in_and_kept_leaves_the_rule_standing() -> None:
    story = (
        Story()
        .person("make sure toolText is also used in the tool headings")
        .edit(THEME, "a", 'theme.fg("toolText", a)')
        .edit(THEME, "b", 'theme.fg("toolText", b)')
        .edit(THEME, 'theme.fg("toolText", a)', 'theme.fg("toolText", a2)')  # moved, not taken out
    )
    (line,) = constraints(View(story.state()))
    assert "replaced" not in line


def test_a_file_deleted_later_is_deleted_not_changed() -> None:
    story = Story().person("make a theme")
    for n in range(10):  # more files than a terse summary describes one by one
        story.edit(f"/p/src/a{n}.ts", "x", "y")
    story = (
        story.run("mkdir -p ~/.app/themes && cp src/dark.json ~/.app/themes/test.json")
        .run("cp src/dark.json ~/.app/themes/nord.json")
        .run("cp src/dark.json ~/.app/themes/keep.json")
        .run("cd /p && rm ~/.app/themes/test.json ~/.app/themes/nord.json")
    )
    state = story.state()
    assert {p: state.files[p].state for p in state.files if "themes" in p} == {
        "~/.app/themes/test.json": "deleted",
        "~/.app/themes/nord.json": "deleted",
        "~/.app/themes/keep.json": "edited",
    }
    # No commit holds a file under ~: deleted there, nothing of it is left.
    assert "~/.app/themes/keep.json" in file_ops(state).modified
    assert not {"~/.app/themes/test.json", "~/.app/themes/nord.json"} & set(file_ops(state).modified)
    told = files(View(state, level=TERSE))
    assert [line for line in told if "nord.json" in line or "test.json" in line] == [
        "- `~/.app/themes/test.json` was deleted",
        "- `~/.app/themes/nord.json` was deleted",
    ]
    # Where files are only named, the deleted ones are named apart.
    named = also_named(View(state), [state.files[p] for p in state.files if "themes" in p], 30)
    assert named == [
        "Also changed (1): `~/.app/themes/keep.json`",
        "Also deleted (2): `~/.app/themes/test.json` and `~/.app/themes/nord.json`",
    ]


def test_a_tracked_file_deleted_stays_a_change_to_commit() -> None:
    state = Story().edit("/p/src/a.ts", "x", "y").run("cd /p && rm src/old.ts").state()
    assert "/p/src/old.ts" in file_ops(state).modified


def test_an_edit_count_is_the_edit_tools_when_shell_commands_also_changed_the_file() -> None:
    story = (
        Story()
        .person("fix the tests")
        .edit("/p/test/a.test.ts", "x", "y")
        .run("sed -i 's/a/b/' /p/test/a.test.ts")
        .edit("/p/test/a.test.ts", "y", "z")
    )
    told = "\n".join(files(View(story.state())))
    assert "`test/a.test.ts` was edited #2–#6, twice with the edit tool and also by shell commands" in told
    only_tool = Story().edit("/p/a.py", "x", "y").edit("/p/a.py", "y", "z").edit("/p/a.py", "z", "w")
    assert "`a.py` was edited 3 times (#1–#5)" in "\n".join(files(View(only_tool.state())))


def test_a_document_defines_nothing_its_code_blocks_show() -> None:
    plan = "# Plan\n\n## Task 2\n\n```elixir\ndefp aliases do\n  []\nend\n```\n"
    state = (
        Story()
        .write("/p/plan.md", plan)
        .write("/p/lib/mix.ex", "defmodule Mix do\n  defp aliases do\n  end\nend\n")
        .state()
    )
    assert "defining" not in state.files["/p/plan.md"].change
    assert "defining `Mix`" in state.files["/p/lib/mix.ex"].change


def test_an_edits_purpose_is_a_sentence_naming_its_file_as_a_word() -> None:
    story = Story()
    story.raw.append(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "text",
                    "text": "**Task 1**: Extend annotation schema.\n**Task 2**: Renderer `message_id` normalization.",
                },
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Edit",
                    "input": {"file_path": "/p/lib/annotation.ex", "old_string": "a", "new_string": "b"},
                },
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Edit",
                    "input": {"file_path": "/p/lib/message.ex", "old_string": "a", "new_string": "b"},
                },
            ],
        }
    )
    story.raw.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "updated"},
                {"type": "tool_result", "tool_use_id": "t2", "content": "updated"},
            ],
        }
    )
    state = story.state()
    assert [q.text for q in state.files["/p/lib/annotation.ex"].purposes] == ["Task 1: Extend annotation schema."]
    assert state.files["/p/lib/message.ex"].purposes == []


def test_the_later_message_on_a_rules_subject_cited_is_the_next_one() -> None:
    story = Story().person("the footer must use the dimmest gray, always")
    for later in (
        "the footer is too dark, fix it",
        "keep the footer as it is now",
        "the dimmest shade is unreadable, change it",
        "drop the dimmest shade from the theme",
    ):
        story.says("Done.").person(later)
    line = constraints(View(story.state()))[0]
    assert "the person wrote on the same subject later, at #3, #5 and #7" in line
