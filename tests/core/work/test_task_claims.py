"""What remains, in the task's own words, and which work belongs to which task (claims audit r0,
cut-01/04/05): an edit belongs to a task only when the history ties it to it; the step that
closes a task names the check its definition of done names; the tracker's open tasks are told
with what blocks them, in no order the history does not set; a task's file list is carried whole;
a description is cited where its text is (the tool's result, not its call)."""

from __future__ import annotations

from compaction.core.summarizers.extractive.render import in_progress, next_section
from compaction.core.summarizers.extractive.standing import where_things_stand
from compaction.core.summarizers.extractive.view import View
from compaction.core.work.parse import tracker_items
from tests.core.work.story import Story


def _show(key: str, title: str, description: str, tail: str = "") -> str:
    return f"○ {key} · {title}   [● P2 · OPEN]\nOwner: x\n\nDESCRIPTION\n{description}\n{tail}"


def _lines(lines: list[str]) -> str:
    return "\n".join(lines)


def test_edits_made_while_two_tasks_were_in_progress_are_told_once_not_under_each() -> None:
    story = (
        Story()
        .person("Implement proj-a")
        .run("bd update proj-a.1 --status in_progress", "✓ Updated issue: proj-a.1")
        .edit("/p/lib/schema.ex", "x", "field :source, :atom", said="Add the source field to schema.ex.")
        .run("bd update proj-a.2 --status in_progress", "✓ Updated issue: proj-a.2")
        .edit("/p/lib/renderer.ex", "x", "message_id: msg.id", said="Normalize message ids in renderer.ex.")
        .edit("/p/assets/app.js", "x", "Hooks.Selection = {}", said="Add the selection hook to app.js.")
    )
    said = _lines(in_progress(View(story.state())))
    # Only proj-a.1 was in progress when schema.ex was edited: its own.
    assert "Done so far — `lib/schema.ex`" in said
    # The later edits are told once, as work the history does not tie to one task.
    assert said.count("lib/renderer.ex") == 1 and said.count("assets/app.js") == 1
    assert "no status change ties them to one of them" in said
    assert "`proj-a.1` and `proj-a.2` were in progress at once" in said
    done_so_far = [line for line in said.splitlines() if "Done so far" in line]
    assert len(done_so_far) == 1 and "renderer.ex" not in done_so_far[0]


def test_a_task_first_shown_already_in_progress_keeps_its_work() -> None:
    shown = "◐ proj-a.1 · Schema   [● P2 · IN_PROGRESS]\nOwner: x\n\nDESCRIPTION\nAdd the field.\n"
    story = (
        Story()
        .person("Continue proj-a.1")
        .run("bd show proj-a.1", shown)
        .edit("/p/lib/schema.ex", "x", "field :source, :atom", said="Add the source field to schema.ex.")
    )
    assert "Done so far — `lib/schema.ex`" in _lines(in_progress(View(story.state())))


def _renderer_task(key: str, title: str, description: str) -> Story:
    """The person asks for tracker task `key`; the agent shows it, takes it on and edits the renderer."""
    return (
        Story()
        .person(f"Implement {key}")
        .run(f"bd show {key}", _show(key, title, description))
        .run(f"bd update {key} --status in_progress", f"✓ Updated issue: {key}")
        .edit("/p/lib/renderer.ex", "x", "y")
    )


RENDERER_DONE = "Capture the selection.\n\nDefinition of Done:\n- `mix test test/a/renderer_test.exs` passes.\n"


def test_the_step_that_closes_a_task_names_the_check_its_done_when_names() -> None:
    story = (
        _renderer_task("proj-a.2", "Capture selection", RENDERER_DONE)
        .run("mix compile --force", "Generated app")
        .edit("/p/lib/renderer.ex", "y", "z")
    )
    steps = _lines(next_section(View(story.state())))
    assert "run `mix test test/a/renderer_test.exs` (its done-when names it), then close `proj-a.2`" in steps
    assert "run `mix compile --force`" not in steps


def test_a_run_given_the_named_test_file_among_others_covers_it() -> None:
    story = _renderer_task("proj-a.2", "Capture selection", RENDERER_DONE).run(
        "mix test test/a/other_test.exs test/a/renderer_test.exs 2>&1 | tail -5", "12 tests, 0 failures"
    )
    steps = _lines(next_section(View(story.state())))
    assert "renderer_test.exs` (its done-when" not in steps and "close `proj-a.2`" in steps


def test_a_task_edited_with_no_check_run_after_asks_for_one_before_it_is_closed() -> None:
    story = _renderer_task(
        "proj-a.1", "Enrich", "Enrich the lines.\n\nDefinition of Done:\n- Tests exist, were executed and pass.\n"
    )
    steps = _lines(next_section(View(story.state())))
    assert "check the edits of `lib/renderer.ex`" in steps and "which no test, lint or build run came after" in steps


def test_a_description_is_cited_at_the_message_holding_it_not_the_call() -> None:
    spec = _show("proj-a.3", "Persist", "Persist the refs.\n\nDefinition of Done:\n- `mix compile` passes.\n")
    story = Story().person("Implement proj-a").run("bd show proj-a.3", spec)
    state = story.state()
    task = state.tasks.tasks["proj-a.3"]
    assert task.note_seq == task.opened + 1  # the tool's result, one message after its call


def test_open_tracker_tasks_are_told_with_their_blockers_in_no_order_the_history_does_not_set() -> None:
    shown = _show(
        "proj-f.1",
        "Enrich",
        "Enrich the lines.",
        "\nBLOCKS\n  ← ○ proj-f.2: Rebuild the panel ● P2\n  ← ○ proj-f.4: Add coverage ● P2\n",
    )
    listed = (
        "↳ ○ proj-f.1: Enrich ● P2\n  ↳ ○ proj-f.2: Rebuild the panel ● P2\n"
        "  ↳ ○ proj-f.3: Highlight code ● P2\n  ↳ ○ proj-f.4: Add coverage ● P2\n"
    )
    story = (
        Story()
        .person("Work on proj-f")
        .run("bd show proj-f", "○ proj-f [EPIC] · Readability   [● P2 · OPEN]\n\nCHILDREN\n" + listed)
        .run("bd show proj-f.1", shown)
        .run("bd update proj-f.1 --status in_progress", "✓ Updated issue: proj-f.1")
        .edit("/p/lib/renderer.ex", "x", "y")
    )
    steps = next_section(View(story.state()))
    text = _lines(steps)
    assert "Then `proj-f" not in text
    assert '`proj-f.2` "Rebuild the panel" (blocked by `proj-f.1`)' in text
    assert '`proj-f.4` "Add coverage" (blocked by `proj-f.1`)' in text
    assert '`proj-f.3` "Highlight code"' in text and '`proj-f.3` "Highlight code" (blocked' not in text


def test_bd_show_dependency_sections_are_read() -> None:
    shown = _show(
        "proj-g.3",
        "Persist",
        "Persist.",
        "\nDEPENDS ON\n  → ○ proj-g.1: Schema ● P2\n  → ○ proj-g.2: Capture ● P2\n\nBLOCKS\n  ← ○ proj-g.4: Tests ● P2\n",
    )
    item = next(i for i in tracker_items(shown) if i.key == "proj-g.3")
    assert item.blocked_by == ["proj-g.1", "proj-g.2"] and item.blocks == ["proj-g.4"]


def test_the_step_carries_every_test_file_the_task_lists() -> None:
    spec = _show(
        "proj-f.4",
        "Add coverage",
        "Add test coverage.\n\nOutput files:\n- `test/a/renderer_test.exs` (modify)\n"
        "- `test/a/live_test.exs` (new or modify)\n- `assets/test/render.test.js` (modify)\n\n"
        "Definition of Done:\n- Tests to verify the behaviour exist, were executed and pass.\n",
    )
    story = (
        Story()
        .person("Work on proj-f")
        .run("bd show proj-f.4", spec)
        .run("bd update proj-f.4 --status in_progress", "✓ Updated issue: proj-f.4")
    )
    steps = _lines(next_section(View(story.state())))
    assert "`test/a/renderer_test.exs`, `test/a/live_test.exs` and `assets/test/render.test.js`" in steps


def _begun_story(words: str, *, edit_after: bool = True) -> Story:
    story = (
        Story()
        .person("Implement proj-a")
        .run("bd update proj-a.1 --status in_progress", "✓ Updated issue: proj-a.1")
        .run(
            "bd list --status=open",
            "○ proj-a.3 [● P2] [task] - Persist refs (blocked by: proj-a.1)\n"
            "◐ proj-a.1 [● P2] [task] - Schema (blocks: proj-a.3)\n",
        )
        .edit("/p/lib/schema.ex", "x", "y")
        .says(words)
    )
    return story.edit("/p/lib/live.ex", "a", "b", said="Add the refs to live.ex.") if edit_after else story


def test_a_task_the_agent_took_on_while_the_tracker_shows_it_open_is_told_as_begun() -> None:
    for words in ("Now implement Task 3 — the live view.", "Now implement proj-a.3: the live view."):
        v = View(_begun_story(words).state())
        stand = "\n".join(where_things_stand(v))
        assert "Begun though the tracker still shows it open: `proj-a.3`" in stand, words
        assert "edits followed from #" in stand
        steps = _lines(next_section(v))
        assert 'Continue `proj-a.3` "Persist refs", begun at #' in steps
        assert (
            "the tracker still shows it open, blocked by `proj-a.1`" in steps and "Also open: `proj-a.3`" not in steps
        )


def test_words_that_only_mention_a_task_or_announce_it_with_no_edit_after_do_not_begin_it() -> None:
    for story in (
        _begun_story("Task 3 depends on both of them."),
        _begun_story("Now implement Task 3 — the live view.", edit_after=False),
    ):
        v = View(story.state())
        assert "Begun" not in "\n".join(where_things_stand(v))
        assert "Also open: `proj-a.3`" in _lines(next_section(v))
