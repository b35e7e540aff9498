"""The handoff on other agents' runs (SWE-agent, pi, short Claude Code turns), as a reader
checks it: the task is the task and not the worked example shown before it, a refused edit
is no edit, a file written and removed again is gone, work handed over with `submit` is
finished and says what it handed over, and a range that stops mid-turn or at the end of a
turn says which. Generated sessions (hypothesis) plus the real trajectories in shared/data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.text_heuristics import clean_user_text
from compaction.core.transcripts.swe_agent import read_swe_agent
from tests import services

from .generated import msgs as _msgs
from .generated import section as _section
from .generated import tool as _tool

SWE_DIR = services.TRANSCRIPTS / "swe-agent"
SWE_FILES = sorted(SWE_DIR.glob("*.traj"))
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _demonstration(issue_word: str, path_word: str) -> str:
    """SWE-agent's default demonstration template around an example run of another task."""
    return (
        "Here is a demonstration of how to correctly accomplish this task.\n"
        "It is included to show you how to correctly use the interface.\n"
        "You do not need to follow exactly what is done in the demonstration.\n"
        "--- DEMONSTRATION ---\n"
        f"We're currently solving the following issue within our repository. Here's the issue text:\n"
        f"ISSUE:\n{issue_word} serialization is wrong in /{path_word}/src/{path_word}.py\n\n"
        "INSTRUCTIONS:\nAlways reproduce the bug first. Never edit tests.\n"
        f"```\nopen /{path_word}/src/{path_word}.py\n```\n"
        "--- END OF DEMONSTRATION ---\n"
    )


class _SweRun:
    """A text-format SWE-agent run: one action per assistant message, observations as results."""

    def __init__(self, task: str) -> None:
        self.raw: list[dict] = [{"role": "user", "content": task}]
        self.calls = 0

    def act(self, thought: str, command: str, observation: str | None) -> None:
        self.calls += 1
        call_id = f"swe_action_{self.calls}"
        use = {"type": "tool_use", "id": call_id, "name": command.split()[0], "input": {"command": command}}
        self.raw.append({"role": "assistant", "content": [{"type": "text", "text": thought}, use]})
        if observation is not None:
            result = {"type": "tool_result", "tool_use_id": call_id, "content": observation}
            self.raw.append({"role": "user", "content": [result]})

    def say(self, text: str) -> None:
        self.raw.append({"role": "assistant", "content": [{"type": "text", "text": text}]})


REFUSED = (
    "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit "
    "commmand.\n\nERRORS:\n- E999 SyntaxError: unmatched ')'\n"
)


def _patch(path: str, added: int, removed: int) -> str:
    body = "".join(f"-old {i}\n" for i in range(removed)) + "".join(f"+new {i}\n" for i in range(added))
    return f"\ndiff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{removed} +1,{added} @@\n{body}"


# ------------------------------------------------------------------ demonstrations


@given(WORDS, WORDS, WORDS)
def test_a_demonstration_block_is_not_the_users_words(demo_issue, demo_path, task_word):
    task = f"Fix the {task_word} parser in src/{task_word}/parse.py."
    cleaned = clean_user_text(_demonstration(demo_issue, demo_path) + task)
    assert cleaned == task
    assert clean_user_text(task) == task  # nothing else is touched


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, WORDS)
def test_the_goal_is_the_task_not_the_demonstrations_issue(demo_issue, demo_path, task_word):
    demo_issue, demo_path = f"demo{demo_issue}", f"ex{demo_path}"  # never a part of the task's words
    run = _SweRun(_demonstration(demo_issue, demo_path) + f"ISSUE:\nThe {task_word} handler crashes on empty input")
    run.act("Let me find the handler.", f"find_file {task_word}.py", f"Found 1 matches: src/{task_word}.py")
    summary = extractive_summary(_msgs(run.raw))
    assert task_word in _section(summary, "## Goal", "## Constraints")
    assert demo_issue not in summary and demo_path not in summary
    assert "Never edit tests" not in summary


@pytest.mark.parametrize("path", SWE_FILES, ids=lambda p: p.name)
def test_real_trajectories_keep_demonstrations_in_the_system_prompt(path: Path):
    history = json.loads(path.read_text())["history"]
    demos = [item["content"] for item in history if item.get("is_demo")]
    t = read_swe_agent(path)
    for demo in demos:
        assert demo in t.system_prompt
        assert not any(demo[:200] in json.dumps(m["content"]) for m in t.messages)
    summary = extractive_summary(_msgs(t.messages))
    for demo in demos:
        # Nothing the summary names as the user's own comes from the example run.
        for line in summary.splitlines():
            if line.startswith("- Paths named by the user:"):
                for named in line.split(":", 1)[1].split(","):
                    assert named.strip() not in demo or any(
                        named.strip() in json.dumps(m["content"]) for m in t.messages if m["role"] == "user"
                    )


@pytest.mark.parametrize("path", SWE_FILES, ids=lambda p: p.name)
def test_a_runs_last_action_is_answered_by_the_trajectorys_observation(path: Path):
    traj = json.loads(path.read_text())
    steps = traj.get("trajectory") or []
    t = read_swe_agent(path)
    last = t.messages[-1]
    info = traj.get("info") or {}
    if traj["history"][-1]["role"] == "assistant" and steps and steps[-1]["observation"].strip():
        assert last["role"] == "user" and last["content"][0]["content"] == steps[-1]["observation"]
    elif traj["history"][-1]["role"] == "assistant" and info.get("exit_status") == "submitted":
        # Submitted without an observation: what was submitted answers the last action.
        assert last["role"] == "user" and last["content"][0]["content"] == info["submission"]
    results = [b for m in t.messages if m["role"] == "user" for b in m["content"] if isinstance(b, dict)]
    assert all(b.get("content") != "" for b in results if b.get("type") == "tool_result")


# ------------------------------------------------------------------ edits, deletions, submit


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["ok", "refused"]), min_size=1, max_size=6),
    st.booleans(),
    st.sampled_from(["submit_patch", "submit_silent", "turn_end", "mid_turn"]),
)
def test_swe_runs_read_as_what_happened(edits, scratch_removed, ending):
    target = "pkg/handlers/core.py"
    run = _SweRun("ISSUE:\nThe core handler rejects optional fields")
    run.act("First, I'll create a script to reproduce the bug.", "create reproduce.py", "[File: reproduce.py]")
    run.act("Let me paste the example in.", "edit 1:1\nprint(1)\nend_of_edit", "[File: reproduce.py (1 lines)]")
    run.act("Let me open the handler.", f"open {target} 10", f"[File: {target} (90 lines total)]")
    for outcome in edits:
        run.act(
            "We need to exclude the optional fields from the required list when the flag is set.",
            "edit 10:12\n    required = []\nend_of_edit",
            REFUSED if outcome == "refused" else f"[File: {target} (91 lines total)]",
        )
    if scratch_removed:
        run.act("The bug is fixed; removing the script.", "rm reproduce.py", "Your command ran successfully.")
    if ending == "submit_patch":
        run.act("The fix works; submitting.", "submit", _patch(target, 2, 1))
    elif ending == "submit_silent":
        run.act("Submitting.", "submit", None)
    elif ending == "turn_end":
        run.say("The handler now skips optional fields.")
    summary = extractive_summary(_msgs(run.raw))
    repo = _section(summary, "### Repository State", "###")
    files = _section(summary, "### Files", "###")
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    accepted = edits.count("ok")
    refused = edits.count("refused")

    # A file written and removed again is gone: not pending anywhere, and read as deleted.
    if scratch_removed:
        assert "reproduce.py" not in repo
        assert "deleted" in next(line for line in files.splitlines() if "reproduce.py" in line)
    else:
        assert "reproduce.py" in repo
    # A refused edit changed nothing: counted apart from the edits that went through.
    line = next((line for line in files.splitlines() if target in line), "")
    if accepted:
        assert {1: "edited once", 2: "edited twice"}.get(accepted, f"edited {accepted} times") in line
        assert target in repo
        if refused:
            assert f"{refused} refused" in line
            # What the edit was for, in the agent's words from before the refused attempts.
            assert "exclude the optional fields" in line
    else:
        assert "unchanged" in line and target not in repo
    if refused:
        assert "E999 SyntaxError: unmatched ')'" in _section(summary, "### Errors and Fixes", "###")
    # How the run ended decides what is next.
    if ending == "submit_patch":
        assert f"`{target}` (+2 −1 lines)" in _section(summary, "### Done", "### In Progress")
        assert "handed over" in next_steps and "latest request" not in next_steps
    elif ending == "submit_silent":
        assert "`submit`" in next_steps and "went through" in next_steps
    elif ending == "turn_end":
        assert "Continue with the user's latest request" not in next_steps
        assert "wait for the user" in next_steps
    else:
        assert "inside the assistant's turn" in _section(summary, "### In Progress", "### Blocked")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=4), st.booleans())
def test_an_intent_carried_out_by_its_own_call_is_not_a_next_step(extra_calls, later_step):
    raw: list[dict] = [{"role": "user", "content": "Fix the failing parser check."}]
    for n in range(extra_calls):
        use = {"type": "tool_use", "id": f"r{n}", "name": "Read", "input": {"file_path": f"src/m{n}.py"}}
        raw += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"r{n}", "content": "x = 1"}]},
        ]
    intent = "Next, I will run the parser script to verify the fix."
    later = " Then I will commit the parser change." if later_step else ""
    use = {"type": "tool_use", "id": "run", "name": "Bash", "input": {"command": "python parser.py"}}
    raw += [
        {"role": "assistant", "content": [{"type": "text", "text": intent + later}, use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "run", "content": "8.2"}]},
    ]
    summary = extractive_summary(_msgs(raw))
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    assert intent not in next_steps
    assert ("commit the parser change" in next_steps) == later_step
    assert "`python parser.py`" in _section(summary, "### In Progress", "### Blocked")


# ------------------------------------------------------------------ the goal


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.integers(min_value=0, max_value=5))
def test_a_quick_chore_before_the_task_is_not_the_goal(chore_word, task_word, chore_calls):
    chore = f"start {chore_word} in background"
    task_word = f"view{task_word}"
    task = f"the {task_word} view still does not scroll back; search the web for how the terminal handles it"
    raw: list[dict] = [{"role": "user", "content": chore}]
    for n in range(chore_calls):
        use = {"type": "tool_use", "id": f"c{n}", "name": "Bash", "input": {"command": f"echo {n}"}}
        raw += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{n}", "content": "ok"}]},
        ]
    raw += [{"role": "assistant", "content": [{"type": "text", "text": "Started."}]}, {"role": "user", "content": task}]
    goal = _section(extractive_summary(_msgs(raw)), "## Goal", "## Constraints")
    first_line = goal.strip().splitlines()[0]
    # Both requests are there whatever happens; the goal leads with the task unless the
    # first request set real work going (more than a couple of calls).
    assert chore in goal and task in goal
    assert (task_word in first_line) == (chore_calls <= 2)


def test_real_runs_name_their_task_and_ending():
    pydicom = read_swe_agent(SWE_DIR / "pydicom__pydicom-1458.traj")
    summary = extractive_summary(_msgs(pydicom.messages))
    goal = _section(summary, "## Goal", "## Constraints")
    issue = json.loads((SWE_DIR / "pydicom__pydicom-1458.traj").read_text())["history"][2]["content"]
    title = re.search(r"ISSUE:\n(.+)", issue).group(1).strip()
    assert title in goal
    # The harness's instructions once, named as its template's (not as the user's own rules).
    constraints = _section(summary, "## Constraints", "## Progress")
    assert len(re.findall(r"^- .*harness template", constraints, re.MULTILINE)) == 1
    assert '- User: "' not in constraints
    assert "ask the user" not in _section(summary, "## Next Steps", "## Critical Context")


# ------------------------------------------------------------------ Claude Code turn endings


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["src/app.py", ".gitignore", "README.md", "lib/core.ex"]), min_size=1, unique=True),
    st.booleans(),
)
def test_gits_clean_tree_settles_what_is_pending(edited, commit_attempt):
    """`git status` saying "nothing to commit, working tree clean" (a hook committed for the
    agent) leaves nothing uncommitted, and a `git commit` that finds nothing is no failure."""
    raw: list[dict] = [{"role": "user", "content": "Add the ignore rules and commit."}]
    _tool(raw, "Bash", {"command": "pytest -q"}, "3 passed in 0.01s")
    _tool(raw, "Bash", {"command": "git commit -am 'first'"}, "[main 1a2b3c4] first\n 1 file changed")
    for path in edited:
        _tool(raw, "Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, "The file was updated.")
    _tool(raw, "Bash", {"command": "git status"}, "On branch main\nnothing to commit, working tree clean")
    if commit_attempt:
        output = "Exit code 1\nOn branch main\nnothing to commit, working tree clean"
        _tool(raw, "Bash", {"command": "git add -A && git commit -m 'second'"}, output, error=True)
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "The tree is clean; everything is in."}]})
    summary = extractive_summary(_msgs(raw))
    assert "Uncommitted" not in summary and "not committed" not in summary
    assert "(none)" in _section(summary, "### Blocked", "## Key Decisions")
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    assert "Commit the changes" not in next_steps and "Fix what still fails" not in next_steps
    # Only code asks for the checks again; a docs or ignore-file edit does not.
    assert ("Re-run the checks" in next_steps) == any(p.endswith((".py", ".ex")) for p in edited)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["Stop", "SubagentStop", "PreToolUse"]), WORDS)
def test_a_hooks_feedback_is_labelled_and_names_no_user_paths(hook, word):
    feedback = f"{hook} hook feedback:\n[/opt/hooks/{word}.sh]: Cannot exit with untracked files:\n  build/{word}.pyc"
    raw = [
        {"role": "user", "content": f"Write src/{word}.py with a main function."},
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": feedback},
        {"role": "assistant", "content": [{"type": "text", "text": "I will ignore the build files."}]},
    ]
    summary = extractive_summary(_msgs(raw))
    goal = _section(summary, "## Goal", "## Constraints")
    assert f"the user's {hook} hook, sent by the harness" in goal
    assert f"/opt/hooks/{word}.sh" not in "".join(line for line in summary.splitlines() if "named by the user" in line)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.booleans())
def test_instead_of_alone_is_a_comparison_not_a_decision(old, new, chosen):
    old, new = f"old{old}", f"new{new}"
    sentence = (
        f"I'll use the `{new}` helper instead of `{old}` for all the rendering code."
        if chosen
        else f"The `render` signature now takes a `{new}` function instead of an `{old}` object."
    )
    raw = [
        {"role": "user", "content": "Port the renderer to the new helpers."},
        {"role": "assistant", "content": [{"type": "text", "text": sentence}]},
    ]
    decisions = _section(extractive_summary(_msgs(raw)), "## Key Decisions", "## Next Steps")
    assert (new in decisions) == chosen


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(WORDS, st.integers(min_value=0, max_value=2)), min_size=2, max_size=8, unique_by=lambda t: t[0])
)
def test_without_commits_each_report_sits_under_the_request_it_answered(requests):
    """Many requests and no commit: a report is listed under the request before it, and no
    lead-in line is left without the lines it introduces."""
    raw: list[dict] = []
    for word, reports in requests:
        raw.append({"role": "user", "content": f"make the {word} color a little brighter please"})
        text = " ".join(f"Updated `{word}{n}.json` so the {word} color is brighter now." for n in range(reports))
        raw.append({"role": "assistant", "content": [{"type": "text", "text": text or "Looking."}]})
    done = _section(extractive_summary(_msgs(raw), budget=4000), "### Done", "### In Progress").strip().splitlines()
    for index, line in enumerate(done):
        if line.startswith("- For "):
            assert index + 1 < len(done) and done[index + 1].startswith("  - "), done
        match = re.search(r"Updated `(\w+?)\d\.json`", line)
        if match and len([r for r in requests if r[1]]) >= 2:
            header = next(h for h in reversed(done[:index]) if h.startswith("- For "))
            assert f"the {match.group(1)} color" in header
