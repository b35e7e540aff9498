"""What a cold reader of the handoff found wrong, as properties: a file only looked at is
never "edited", an edit's purpose is its own call's (never a neighbouring tool's), the
standing rules are rules (not bug reports, not the goal again), a choice with its reason is a
decision, a Stop hook's order is the hook's, and a harness's preamble is not the goal.
Generated sessions in every agent's tool dialect, plus the shared transcripts."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary

from .generated import msgs as _msgs
from .generated import section as _section
from .generated import tool as _tool

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


# ------------------------------------------------------------------ reads are not edits

# Each agent's ways of looking at a file: (tool, arguments for path p).
READ_FORMS = [
    ("str_replace_editor", lambda p: {"command": "view", "path": p}),
    ("str_replace_based_edit_tool", lambda p: {"command": "view", "path": p}),
    ("text_editor", lambda p: {"command": "view", "path": p, "view_range": [1, 20]}),
    ("Read", lambda p: {"file_path": p}),
    ("read", lambda p: {"path": p}),
    ("open", lambda p: {"command": f"open {p}"}),
    ("find_file", lambda p: {"command": f"find_file {p.rsplit('/', 1)[-1]}"}),
    ("search_file", lambda p: {"command": f"search_file needle {p}"}),
    ("Bash", lambda p: {"command": f"cat {p}"}),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    WORDS,
    st.lists(st.sampled_from(range(len(READ_FORMS))), min_size=1, max_size=5),
    st.integers(min_value=0, max_value=3),
)
def test_a_file_only_looked_at_is_never_edited(word, reads, edits):
    looked = f"/repo/pkg/{word}_seen.py"
    changed = f"/repo/pkg/{word}_fixed.py"
    raw: list[dict] = [{"role": "user", "content": f"Fix the {word} parser."}]
    for index in reads:
        name, args = READ_FORMS[index]
        _tool(raw, name, args(looked), f"1 {word} = 1")
        _tool(raw, name, args(changed), f"1 {word} = 1")
    for n in range(edits):
        inputs = {"command": "str_replace", "path": changed, "old_str": f"{word} = {n}", "new_str": f"{word} = {n + 1}"}
        _tool(raw, "str_replace_editor", inputs, f"The file {changed} has been edited.")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    summary = extractive_summary(_msgs(raw))
    files = _section(summary, "### Files", "###")
    repo = _section(summary, "### Repository State", "###")
    assert not re.search(rf"{word}_seen\.py`[^\n]*\b(edited|written|created)", files)
    assert f"{word}_seen.py" not in repo
    line = next((line for line in files.splitlines() if f"{word}_fixed.py" in line), "")
    if edits:
        assert {1: "edited once", 2: "edited twice"}.get(edits, f"edited {edits} times") in line
    else:
        assert "edited" not in line and f"{word}_fixed.py" not in repo


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from(["str_replace_editor", "str_replace_based_edit_tool"]), st.integers(0, 3))
def test_an_editors_create_writes_the_file_and_its_views_change_nothing(word, tool, views):
    path = f"/repo/{word}_repro.py"
    raw: list[dict] = [{"role": "user", "content": f"Reproduce the {word} bug."}]
    body = f"def check_{word}():\n    pass\n"
    _tool(raw, tool, {"command": "create", "path": path, "file_text": body}, f"File created successfully at: {path}")
    for _ in range(views):
        _tool(raw, tool, {"command": "view", "path": path}, f"1 def check_{word}():")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    files = _section(extractive_summary(_msgs(raw)), "### Files", "###")
    line = next(line for line in files.splitlines() if f"{word}_repro.py" in line)
    assert "was written" in line and "edited" not in line and f"check_{word}" in line


# ------------------------------------------------------------------ an edit's own purpose


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    WORDS,
    st.sampled_from(["TodoWrite", "todo_write", "update_plan"]),
    st.booleans(),
    st.booleans(),
)
def test_an_edits_purpose_is_never_a_neighbouring_calls(word, todo_tool, same_message, names_file):
    """Words said of a todo-list update are not what the edit after it was for; words that
    name the edited file are, even with the todo update and a read in between."""
    target = f"/repo/{word}.toml"
    raw: list[dict] = [{"role": "user", "content": f"Port the {word} project."}]
    said = f"Let me create a todo list and start porting the {word} code"
    if names_file:
        said = f"Now let me update {word}.toml for the new lints."
    todos = {"todos": [{"content": f"Port the {word} module", "status": "in_progress"}]}
    todos = (
        todos if todo_tool != "update_plan" else {"plan": [{"step": f"Port the {word} module", "status": "pending"}]}
    )
    edit = {"file_path": target, "old_string": "[dependencies]", "new_string": "[dependencies]\n\n[lints.rust]"}
    if same_message:
        uses = [
            {"type": "tool_use", "id": "t1", "name": todo_tool, "input": todos},
            {"type": "tool_use", "id": "e1", "name": "Edit", "input": edit},
        ]
        raw.append({"role": "assistant", "content": [{"type": "text", "text": said}, *uses]})
        results = [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ("t1", "e1")]
        raw.append({"role": "user", "content": results})
    else:
        _tool(raw, todo_tool, todos, "Todos have been modified successfully.", text=said)
        _tool(raw, "Read", {"file_path": target}, "[dependencies]")
        _tool(raw, "Edit", edit, f"The file {target} has been updated successfully.")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "The lints are configured."}]})
    files = _section(extractive_summary(_msgs(raw)), "### Files", "###")
    line = next(line for line in files.splitlines() if f"{word}.toml" in line)
    assert "todo list" not in line
    assert ("for the new lints" in line) == names_file


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS)
def test_a_preliminary_run_does_not_take_the_edits_purpose(word):
    """ "Now create the X test. Let me first install Y." → the install, then the write: the
    write is what the first sentence was for."""
    raw: list[dict] = [{"role": "user", "content": "Add the missing tests."}]
    said = f"Now create the {word} highlight test. Let me first install happy-dom."
    _tool(raw, "Bash", {"command": "npm install --save-dev happy-dom"}, "added 8 packages", text=said)
    _tool(raw, "Write", {"file_path": f"/repo/test/{word}.test.js", "content": "it('x', () => {})\n"}, "File created.")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "The test is written."}]})
    files = _section(extractive_summary(_msgs(raw)), "### Files", "###")
    assert f"{word} highlight test" in next(line for line in files.splitlines() if f"{word}.test.js" in line)


# ------------------------------------------------------------------ standing rules


def _session_with(messages: list[str]) -> str:
    raw: list[dict] = []
    for n, text in enumerate(messages):
        raw.append({"role": "user", "content": text})
        _tool(raw, "Read", {"file_path": f"/repo/src/theme{n}.ts"}, "export const x = 1")
        raw.append({"role": "assistant", "content": [{"type": "text", "text": "Looked at it."}]})
    raw.append({"role": "user", "content": "ok, next"})
    return extractive_summary(_msgs(raw))


# Bug reports and questions that carry a rule word or a correction opener: the user saw
# something, or asks; nothing here binds the work that follows.
REPORTS = [
    "actually, it's the bg color of the {w} panel that doesn't change",
    "ok, i think the {w} component doesn't adhere to the invariant that lines must not be wider than the width. investigate",
    "hm, i selected the {w} theme while you were working and got a crash, that should never happen.",
    "wait, do we only have a single {w} color? we have link text and link url in the old version",
    "no, that's not it, both use the {w} theme. can you write a test that prints each color?",
    "make sure {w}Text is also used. the heading uses another color, investigate",
]
# Standing rules, with and without the usual rule words.
RULES = [
    "use rgb values in the {w} themes, no color indices!",
    "omfg use hex colors for {w}, not names",
    "no console logs in {w}!",
    "don't modify the {w} theme",
    "always run the {w} tests before committing",
    "no, the {w} block should stay as is",
    "make sure to run the {w} linter before every commit",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.lists(st.sampled_from(REPORTS), min_size=1, max_size=3), st.sampled_from(RULES))
def test_constraints_hold_standing_rules_not_bug_reports(word, reports, rule):
    said = [f"port the {word} selector to the theme system", *[r.format(w=word) for r in reports]]
    said.append(rule.format(w=word))
    constraints = _section(_session_with(said), "## Constraints & Preferences", "## Progress")
    assert rule.format(w=word) in constraints
    for report in reports:
        assert report.format(w=word) not in constraints


def _transcript_summaries(cuts: int = 4):
    """(name, cut, summary) at a few cuts of every shared transcript."""
    from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages

    for path in TRANSCRIPTS:
        msgs = _messages(path)
        for k in range(1, cuts + 1):
            cut = max(2, len(msgs) * k // cuts)
            yield f"{path.stem[:30]}@{cut}", extractive_summary(msgs[:cut])


def test_constraints_never_repeat_the_goals_words():
    """A rule sentence the Goal quotes already (the first request's "Don't stop until …")
    is not quoted a second time under Constraints."""
    for name, summary in _transcript_summaries():
        goal = _section(summary, "## Goal", "\n## ").split("### User Messages")[0]
        task = "\n".join(line for line in goal.splitlines() if not line.startswith("- Latest request"))
        constraints = _section(summary, "## Constraints & Preferences", "## Progress")
        for item in re.findall(r'^- User: "(.*)"$', constraints, re.MULTILINE):
            for part in item.split(" … "):
                part = part.rstrip("…").strip()
                assert len(part) < 40 or part not in task, (name, part)


# ------------------------------------------------------------------ decisions


CHOICES = [
    "We have 100% line coverage on {w} (which is what matters for the coverage requirement).",
    "The {w} cache hit rate is good enough for this release.",
    "In Rust, I'll use a generic approach with an enum to represent either a single {w} or a nested list.",
]
PLAIN = [
    "The {w} module compiles and all 12 tests pass.",
    "Updated `{w}.rs` with the new function.",
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from(CHOICES + PLAIN), st.booleans())
def test_a_choice_with_its_reason_is_a_decision_and_a_report_is_not(word, said, reason_follows):
    said = said.format(w=word)
    follow = (
        " The one uncovered region can't fail in practice because the input is validated." if reason_follows else ""
    )
    raw: list[dict] = [{"role": "user", "content": f"Port the {word} library and reach 100% coverage."}]
    _tool(raw, "Bash", {"command": "cargo llvm-cov"}, "TOTAL 99.71% regions, 100.00% lines", text="Checking coverage.")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": said + follow}]})
    decisions = _section(extractive_summary(_msgs(raw)), "## Key Decisions", "## Next Steps")
    if said in [c.format(w=word) for c in CHOICES]:
        assert said in decisions
        if reason_follows and "matters" in said:
            assert "because the input is validated" in decisions
    else:
        assert "(none)" in decisions


# ------------------------------------------------------------------ a hook's demand


def _hook_feedback(found: str, steps: list[str]) -> str:
    listed = "\n".join(f"{n}. {step}" for n, step in enumerate(steps, 1))
    return (
        "Stop hook feedback:\n[${CLAUDE_PLUGIN_ROOT}/scripts/hooks/stop.sh]: # Running Quality Checks...\n\n"
        f"# {found}\n\nCannot exit with unstaged changes.\n\nBefore stopping, please:\n\n{listed}\n\n---\n\n"
        'If you\'ve hit a problem you cannot solve without user input:\n\n  "I have run into a problem."'
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.integers(min_value=0, max_value=2), st.booleans())
def test_a_hooks_demand_is_stated_as_the_hooks(word, calls_after, asks_commit):
    steps = [f"Run the {word} quality checks to verify they pass"]
    steps += ["Commit with a descriptive message: `git commit -m '...'`"] if asks_commit else []
    raw: list[dict] = [{"role": "user", "content": f"Fix the {word} rounding bug."}]
    _tool(raw, "Edit", {"file_path": f"/repo/{word}.py", "old_string": "a", "new_string": "b"}, "The file was updated.")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "The rounding is fixed."}]})
    raw.append({"role": "user", "content": _hook_feedback(f"{word.title()} Changes Detected", steps)})
    for n in range(calls_after):
        _tool(raw, "Bash", {"command": f"git status --short {n}"}, f" M {word}.py")
    next_steps = _section(extractive_summary(_msgs(raw)), "## Next Steps", "## Critical Context")
    assert "Stop hook feedback" not in next_steps and "user's latest" not in next_steps
    assert "Stop hook" in next_steps and "harness" in next_steps
    assert f"{word.title()} Changes Detected" in next_steps or "Commit the changes" in next_steps
    assert ("ommit" in next_steps) == asks_commit


def test_real_hook_feedback_is_never_quoted_as_the_users_request():
    for name, summary in _transcript_summaries(cuts=6):
        next_steps = _section(summary, "## Next Steps", "## Critical Context")
        assert not re.search(r"user's latest (?:request|message): \"\w+ hook", next_steps), name


# ------------------------------------------------------------------ a harness's task prompt


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.sampled_from(["ISSUE", "TASK", "PROBLEM STATEMENT"]), st.booleans())
def test_the_goal_leads_with_the_task_not_the_harness_preamble(lead, task_word, label, templated):
    lead = f"lead{lead}"  # never a word of the task
    preamble = f"We are currently working on the following {lead} in our repository. Here is the text:"
    task = f"The {task_word} parser drops the last field of every record."
    rules = "INSTRUCTIONS:\nYou should always wait for feedback after every command.\nAlways run the tests."
    text = f"{preamble}\n{label}:\n{task}\n\n{rules}" if templated else f"{preamble} {task}\nPlease fix it."
    raw: list[dict] = [{"role": "user", "content": text}]
    _tool(raw, "Bash", {"command": f"grep -rn {task_word} src"}, f"src/{task_word}.py:3: def parse")
    summary = extractive_summary(_msgs(raw))
    goal = _section(summary, "## Goal", "\n## ").strip().splitlines()[0]
    constraints = _section(summary, "## Constraints & Preferences", "## Progress")
    if templated:
        assert goal.startswith(f"{label.capitalize()}: {task}")
        assert lead not in goal and "wait for feedback" not in goal
        # The harness's rules are named as the template's, not as the user's own.
        assert "harness template" in constraints and 'User: "You should always' not in constraints
    else:
        assert goal.startswith(preamble)


def test_real_swe_runs_lead_with_their_issue():
    from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages

    for path in [p for p in TRANSCRIPTS if p.suffix == ".traj"]:
        msgs = _messages(path)
        summary = extractive_summary(msgs)
        goal = _section(summary, "## Goal", "\n## ").strip().splitlines()[0]
        assert not goal.startswith("We're currently solving the following issue"), path.name
