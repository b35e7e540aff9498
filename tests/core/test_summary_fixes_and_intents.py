"""A cold reader's complaints about how a handoff reports what was done: the fix of a failure
is what changed before the retry (not "the retry succeeded"), and an intent the next call did
not carry out is no decision. Generated sessions, plus the shared transcripts."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary

from .generated import msgs as _msgs
from .generated import section as _section
from .generated import tool as _tool

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)
SHELLS = st.sampled_from(["Bash", "bash"])


def _fixed_line(summary: str, failing: str) -> str:
    errors = _section(summary, "### Errors and Fixes", "###")
    return next((line for line in errors.splitlines() if failing in line and "fixed" in line), "")


# ------------------------------------------------------------------ the fix is what changed


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, SHELLS, st.booleans())
def test_the_fix_is_the_part_the_retry_added(word, shell, looked_between):
    """`git add x && git commit` refused for an ignored file, then `git add -f x && git commit`:
    the fix is `git add -f x`, not the commit that then went through."""
    raw: list[dict] = [{"role": "user", "content": f"Commit the {word} stylesheet."}]
    commit = f'git commit -m "Add {word} styles"'
    ignored = (
        "Exit code 1\nThe following paths are ignored by one of your .gitignore files:\n"
        f"static/{word}.css\nhint: Use -f if you really want to add them."
    )
    _tool(raw, shell, {"command": f"git add static/{word}.css && {commit}"}, ignored, error=True)
    if looked_between:
        _tool(raw, shell, {"command": "git ls-files static/"}, "static/base.css")
    done = f"[main 1a2b3c4] Add {word} styles\n 1 file changed, 3 insertions(+)"
    _tool(raw, shell, {"command": f"git add -f static/{word}.css && {commit}"}, done)
    summary = extractive_summary(_msgs(raw))
    line = _fixed_line(summary, "ignored by one of your .gitignore files")
    assert f"`git add -f static/{word}.css`" in line, summary
    assert "git ls-files" not in line


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, SHELLS, st.booleans())
def test_the_fix_names_the_command_run_between_the_failure_and_the_pass(word, shell, same_check):
    """`npm test` fails on a missing module, `npm install x` runs, `npm test` passes: the
    install is the fix, and the reader is told so."""
    raw: list[dict] = [{"role": "user", "content": f"Make the {word} tests pass."}]
    missing = f"Exit code 1\nError: Cannot find module '{word}'\n1 failing"
    _tool(raw, shell, {"command": "npm test"}, missing, error=True)
    _tool(raw, shell, {"command": f"cat package.json | grep {word}"}, "")
    _tool(raw, shell, {"command": f"npm install {word}"}, f"added 1 package, and audited 2 packages\n{word}@1.0.0")
    _tool(raw, shell, {"command": "npm test" if same_check else "npm test -- --runInBand"}, "3 passing")
    summary = extractive_summary(_msgs(raw))
    line = _fixed_line(summary, f"Cannot find module '{word}'")
    assert f"`npm install {word}`" in line, summary
    assert "cat package.json" not in line


# ------------------------------------------------------------------ an intent is not a fact


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans(), st.booleans())
def test_a_stated_choice_is_a_decision_only_when_the_next_change_carries_it(word, carried, look_between):
    """ "X can't reach Y. I need to use `:auto` mode." then an edit: a decision when the edit
    puts `:auto` in; when it puts `{:shared, self()}` in instead, that is what the handoff
    reports, with the reason, and no file is said to have been edited "to use `:auto` mode"."""
    path = f"/repo/test/{word}_test.exs"
    raw: list[dict] = [{"role": "user", "content": f"Fix the {word} live tests."}]
    said = f"The {word} LiveView runs in a separate process that can't access the test sandbox. I need to use `:auto` mode."
    raw.append({"role": "assistant", "content": [{"type": "text", "text": said}]})
    if look_between:
        _tool(raw, "Read", {"file_path": path}, "setup do\n  Sandbox.checkout(Repo)\nend")
    new = "Sandbox.mode(Repo, :auto)" if carried else "Sandbox.mode(Repo, {:shared, self()})"
    edit = {"file_path": path, "old_string": "Sandbox.checkout(Repo)", "new_string": f"Sandbox.checkout(Repo)\n{new}"}
    _tool(raw, "Edit", edit, f"The file {path} has been updated successfully.")
    _tool(raw, "Bash", {"command": f"mix test {path}"}, "5 tests, 0 failures")
    summary = extractive_summary(_msgs(raw))
    decisions = _section(summary, "## Key Decisions", "\n## ")
    files = _section(summary, "### Files", "###")
    assert "separate process that can't access the test sandbox" in decisions, summary
    if carried:
        assert "Use `:auto` mode, because" in decisions
    else:
        assert "Use `:auto` mode, because" not in decisions
        assert "{:shared, self()}" in decisions
        assert "to use `:auto` mode" not in files


# ------------------------------------------------------------------ noise a cold reader skips


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.integers(min_value=3, max_value=40), st.integers(min_value=1, max_value=30))
def test_a_test_tally_is_reported_once_the_newest(word, first, more):
    """ "All 43 tests pass." said mid-way, then a run of 65 before the commit: the commit's check
    line gives 65, and the stale 43 is gone."""
    raw: list[dict] = [{"role": "user", "content": f"Add the {word} feature with tests."}]
    path = f"/repo/lib/{word}.ex"
    _tool(raw, "Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, "The file has been updated.")
    _tool(raw, "Bash", {"command": "mix test"}, f"{first} tests, 0 failures")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": f"All {first} tests pass for `{word}`."}]})
    _tool(raw, "Edit", {"file_path": path, "old_string": "b", "new_string": "c"}, "The file has been updated.")
    _tool(raw, "Bash", {"command": "mix test"}, f"{first + more} tests, 0 failures")
    _tool(raw, "Bash", {"command": f'git commit -am "Add {word}"'}, f"[main 1a2b3c4] Add {word}\n 1 file changed")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Committed."}]})
    done = _section(extractive_summary(_msgs(raw)), "### Done", "###")
    assert f"{first + more} tests, 0 failures" in done, done
    notes = [line for line in done.splitlines() if line.startswith("  - ")]  # under the commit
    assert not any(f"All {first} tests pass" in line for line in notes), done


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from(["alice", "bob"]), st.sampled_from(["/Users", "/home"]))
def test_the_reporters_home_paths_are_not_handed_over_as_the_users(word, name, home):
    """A traceback pasted from the reporter's machine names `/Users/alice/proj/tests/x.py`; the
    agent works in its own checkout: that path is nothing it can open."""
    pasted = f"{home}/{name}/code/proj/tests/{word}.py"
    issue = f'Fix this crash:\n  File "{pasted}", line 3\n    def {word}()\nSyntaxError: invalid syntax'
    raw: list[dict] = [{"role": "user", "content": issue}]
    repo_file = f"/repo/tests/{word}.py"
    _tool(raw, "Read", {"file_path": repo_file}, f"def {word}()\n    pass")
    _tool(raw, "Edit", {"file_path": repo_file, "old_string": f"def {word}()", "new_string": f"def {word}():"}, "ok")
    summary = extractive_summary(_msgs(raw))
    assert pasted not in _section(summary, "### Other", "\n## "), summary
    assert f"{word}.py" in summary


def _transcript_summaries():
    from tests.core.test_summary_cold_reader import _transcript_summaries as summaries

    return summaries()


_PRONOUN_LEAD = ("It ", "It's ", "They ", "They're ", "This is ", "That was ", "This means ")


def test_no_handed_over_finding_leans_on_a_sentence_that_was_dropped():
    """A note or a quoted remark that starts with a pronoun ("It's only in `x` which has its own
    copy.") lost its subject with the sentence before it."""
    for name, summary in _transcript_summaries():
        done = _section(summary, "### Done", "###")
        files = _section(summary, "### Files", "###")
        for line in done.splitlines():
            said = line.lstrip(" -").removeprefix("Found: ")
            assert not said.startswith(_PRONOUN_LEAD), (name, line)
        for line in files.splitlines():
            assert 'the agent noted: "It' not in line and 'the agent noted: "This is' not in line, (name, line)


def test_a_cause_given_with_an_error_is_not_repeated_under_done():
    """The cause the agent found for a failure is said once, beside the error it explains."""
    import re

    for name, summary in _transcript_summaries():
        errors = _section(summary, "### Errors and Fixes", "###")
        causes = {c.strip() for c in re.findall(r"\) ?: .*? — ([^—]{20,}?) — ", errors)}
        done = _section(summary, "### Done", "###")
        for line in done.splitlines():
            said = line.strip().lstrip("- ").removeprefix("Found: ").rstrip(".")
            assert said not in causes, (name, line)


def test_other_commands_lists_only_commands_the_summary_does_not_name():
    """ "Other commands run" is for what no section names: a command named elsewhere by its
    first words is not listed a second time."""
    for name, summary in _transcript_summaries():
        other = next((line for line in summary.splitlines() if line.startswith("- Other commands run")), "")
        rest = summary.replace(other, "").lower()
        for command in re.findall(r"`([^`]+)`", other):
            opening = " ".join(command.split()[:2]).lower()
            assert opening not in rest, (name, command)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.integers(min_value=26_000, max_value=90_000))
def test_a_read_refused_for_size_then_read_in_parts_is_no_error_to_fix(word, tokens):
    """The Read tool refuses a large file, the agent reads it in parts: nothing failed that a
    successor must fix, so Errors and Fixes does not list it (its line stays findable)."""
    path = f"/repo/lib/{word}.ex"
    raw: list[dict] = [{"role": "user", "content": f"Refactor the {word} module."}]
    refused = f"File content ({tokens} tokens) exceeds maximum allowed tokens (25000). Please use offset and limit."
    _tool(raw, "Read", {"file_path": path}, refused, error=True)
    _tool(raw, "Read", {"file_path": path, "offset": 1, "limit": 200}, f"defmodule {word} do")
    _tool(raw, "Edit", {"file_path": path, "old_string": "do", "new_string": "do\n  @moduledoc false"}, "ok")
    _tool(raw, "Bash", {"command": "mix test"}, "3 tests, 0 failures")
    summary = extractive_summary(_msgs(raw))
    assert f"({tokens} tokens)" not in _section(summary, "### Errors and Fixes", "###"), summary
    assert f"File content ({tokens} tokens) exceeds maximum allowed tokens" in summary


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from(["Edit", "edit"]))
def test_a_short_edit_is_quoted_as_code_not_as_a_list_of_its_names(word, tool):
    """A one-line config change reads as the line it added; `String.duplicate`,
    `test_{w}_` listed alone say nothing about what changed."""
    path = "/repo/config/test.exs"
    added = f'config :app, {word.title()}Web.Endpoint, secret_key_base: String.duplicate("test_{word}_", 4)'
    raw: list[dict] = [{"role": "user", "content": f"Configure the {word} endpoint for tests."}]
    keys = ("file_path", "old_string", "new_string") if tool == "Edit" else ("path", "oldText", "newText")
    inputs = dict(zip(keys, (path, "import Config\n", f"import Config\n\n{added}\n"), strict=True))
    _tool(raw, tool, inputs, f"The file {path} has been updated.")
    summary = extractive_summary(_msgs(raw))
    line = next(line for line in _section(summary, "### Files", "###").splitlines() if "config/test.exs" in line)
    assert f"`{added}`" in line, line


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans())
def test_steps_taken_do_not_repeat_the_commit_line(word, migrated):
    """The commit line says the checks passed and the issue closed; "Steps taken" adds only
    what it does not say (claiming the issue, a migration), or nothing."""
    issue = f"proj-{word[:3]}.1"
    raw: list[dict] = [{"role": "user", "content": f"Work on {issue}."}]
    _tool(raw, "Bash", {"command": f"bd update {issue} --status in_progress"}, f"Updated {issue}")
    if migrated:
        _tool(raw, "Bash", {"command": "mix ecto.migrate"}, "Migrated 1 migration")
    _tool(raw, "Edit", {"file_path": f"/repo/lib/{word}.ex", "old_string": "a", "new_string": "b"}, "ok")
    _tool(raw, "Bash", {"command": "mix test"}, "12 tests, 0 failures")
    _tool(raw, "Bash", {"command": f"bd close {issue}"}, f"Closed {issue}")
    _tool(raw, "Bash", {"command": f'git commit -am "Fix {word}"'}, f"[main 1a2b3c4] Fix {word}\n 1 file changed")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    summary = extractive_summary(_msgs(raw))
    done = _section(summary, "### Done", "###")
    assert "`mix test` → 12 tests, 0 failures" in done and f"closed `{issue}`" in done, done
    steps = next((line for line in done.splitlines() if "Steps taken" in line), "")
    assert "`mix test`" not in steps and "closed the issue" not in steps
    assert ("mix ecto.migrate" in steps) == migrated
    assert f"bd close {issue}" not in _section(summary, "### Other", "\n## ")


# ------------------------------------------------------------------ a pass fixes only its own target

_RUNNERS = {
    "mix test": (
        "test/{}_test.exs",
        "Exit code 2\n** (MatchError) no match of right hand side value: :{}\n3 tests, 1 failure",
    ),
    "pytest": ("tests/test_{}.py", "Exit code 1\nE   AssertionError: {} mismatch\n1 failed, 2 passed"),
    "cargo test": (
        "{}",
        "Exit code 101\nthread '{}' panicked at src/lib.rs:3:5\ntest result: FAILED. 0 passed; 1 failed",
    ),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.sampled_from(sorted(_RUNNERS)), st.sampled_from(["other", "same", "suite"]))
def test_a_failure_is_fixed_only_by_a_pass_of_its_own_target_or_more(word, other, runner, passed):
    """`mix test a.exs` fails, then `mix test b.exs` passes: a is still failing. A later pass of
    a itself, or of the whole suite, fixes it."""
    target, failure = _RUNNERS[runner]
    raw: list[dict] = [{"role": "user", "content": f"Make the {word} tests pass."}]
    failing = f"{runner} {target.format(word)}"
    _tool(raw, "Bash", {"command": failing}, failure.format(word), error=True)
    ran = {"other": f"{runner} {target.format(other + 'x')}", "same": failing, "suite": runner}[passed]
    _tool(raw, "Bash", {"command": ran}, "7 tests, 0 failures\ntest result: ok. 7 passed")
    errors = _section(extractive_summary(_msgs(raw)), "### Errors and Fixes", "###")
    line = next((line for line in errors.splitlines() if f"`{failing}`" in line), "")
    if passed == "other":
        assert line.startswith("- Still failing") and "fixed" not in line, errors
    else:
        assert "fixed" in line, errors


# ------------------------------------------------------------------ an error line keeps what its ":" announces

_ANNOUNCED = [
    ("The following paths are ignored by one of your .gitignore files:", "static/{}.css", "git add static/{}.css"),
    (
        "error: The following untracked working tree files would be overwritten by merge:",
        "lib/{}.ex",
        "git merge origin/{}",
    ),
    ("Error: Build failed with 1 error:", 'error: Could not resolve "js/{}.js"', "node assets/build.js"),
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from(_ANNOUNCED), SHELLS, st.booleans())
def test_an_error_line_ending_in_a_colon_keeps_the_line_it_announces(word, announced, shell, retried):
    """ "…ignored by one of your .gitignore files:" names no file; the path is on the next line
    and is the part a successor needs."""
    header, follows, command = announced
    raw: list[dict] = [{"role": "user", "content": f"Ship the {word} change."}]
    output = f"Exit code 1\n{header}\n{follows.format(word)}\nhint: see the docs."
    _tool(raw, shell, {"command": command.format(word)}, output, error=True)
    if retried:
        _tool(raw, shell, {"command": f"ls lib/{word}"}, f"{word}.ex")
    summary = extractive_summary(_msgs(raw))
    said = [line for line in summary.splitlines() if header in line]
    assert said and all(f"{header} {follows.format(word)}" in line for line in said), summary


def test_no_error_handed_over_ends_at_a_colon():
    """An error line that ends in ":" announced the next line: handed over alone it says nothing."""
    for name, summary in _transcript_summaries():
        told = _section(summary, "### Errors and Fixes", "###") + _section(summary, "### Blocked", "###")
        for line in told.splitlines():
            assert not re.search(r"\S: (?:—|\|)|\S:$", line), (name, line)


# ------------------------------------------------------------------ a read's purpose is its own


def _use(raw: list[dict], name: str, inputs: dict) -> str:
    tool_id = f"toolu_{len(raw):04d}_{len(str(raw))}"
    raw[-1]["content"].append({"type": "tool_use", "id": tool_id, "name": name, "input": inputs})
    return tool_id


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.booleans())
def test_a_read_is_given_the_reason_said_for_it_not_for_another_read(first, second, both_said):
    """ "Let me check `a.py` to understand X." Read a.py, then "Let me also look at `b.py` to
    understand Y." Read b.py, the results after both: b.py was read for Y, a.py for X. Without
    the second sentence, b.py was read for no reason the summary can give (not for X)."""
    a_path, b_path = f"/repo/src/{first}_a.py", f"/repo/src/{second}_b.py"
    why_a = f"Let me check `{first}_a.py` to understand how the {first} cache loads."
    why_b = f"Let me also look at `{second}_b.py` to understand how the {second} queue drains."
    raw: list[dict] = [{"role": "user", "content": f"Explain the {first} cache."}]
    raw.append({"role": "assistant", "content": [{"type": "text", "text": why_a}]})
    a_id = _use(raw, "Read", {"file_path": a_path})
    if both_said:
        raw[-1]["content"].append({"type": "text", "text": why_b})
    b_id = _use(raw, "Read", {"file_path": b_path})
    results = [(a_id, f"def {first}(): pass"), (b_id, f"def {second}(): pass")]
    raw.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": out} for i, out in results]}
    )
    summary = extractive_summary(_msgs(raw))
    lines = summary.splitlines()
    a_line = next((line for line in lines if f"{first}_a.py` was read" in line), "")
    b_line = next((line for line in lines if f"{second}_b.py` was read" in line), "")
    assert f"{first} cache loads" in a_line and f"{first} cache" not in b_line, summary
    assert (f"{second} queue drains" in b_line) == both_said and f"{second} queue" not in a_line, summary


# ------------------------------------------------------------------ git undoing edits


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, WORDS, st.sampled_from(["restore", "checkout", "stash", "stash pop"]), st.booleans())
def test_a_restore_or_stash_updates_what_is_uncommitted(kept, undone, action, status_seen):
    """`git restore x` / `git checkout -- x` undo x's edits: x is no longer uncommitted.
    `git stash` puts every edit away (said as stashed, not as uncommitted); `git stash pop`
    brings them back."""
    raw: list[dict] = [{"role": "user", "content": f"Tweak {kept} and {undone}."}]
    _tool(raw, "Bash", {"command": "git log --oneline -1"}, "1a2b3c4 start")
    paths = [f"/repo/lib/{kept}_k.ex", f"/repo/lib/{undone}_u.ex"]
    for path in paths:
        _tool(raw, "Edit", {"file_path": path, "old_string": "a", "new_string": "b"}, "ok")
    if status_seen:
        status = "".join(f" M lib/{p.rsplit('/', 1)[-1]}\n" for p in paths)
        _tool(raw, "Bash", {"command": "git status --short"}, status)
    discard = {
        "restore": [f"git restore lib/{undone}_u.ex"],
        "checkout": [f"git checkout -- lib/{undone}_u.ex"],
        "stash": ["git stash"],
        "stash pop": ["git stash", "git stash pop"],
    }[action]
    for command in discard:
        _tool(raw, "Bash", {"command": command}, "")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    summary = extractive_summary(_msgs(raw))
    pending = [
        line
        for line in summary.splitlines()
        if re.search(r"(?i)not committed|uncommitted|no commit seen", line) and "Other commands run" not in line
    ]
    said = " ".join(pending)
    if action in ("restore", "checkout"):
        assert f"{kept}_k.ex" in said and f"{undone}_u.ex" not in said, summary
    elif action == "stash":
        assert f"{kept}_k.ex" not in said and f"{undone}_u.ex" not in said, summary
        assert re.search(rf"Stashed.*{undone}_u\.ex", summary), summary
    else:
        assert f"{kept}_k.ex" in said and f"{undone}_u.ex" in said, summary
        assert "Stashed" not in summary


# A request naming a commit, a push or a stop owes that (other tests hold it): not "finished".
PLAIN_WORDS = WORDS.filter(lambda w: not any(verb in w for verb in ("commit", "push", "stop")))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PLAIN_WORDS, st.booleans(), st.sampled_from(["mix test", "pytest", "npm test"]))
def test_work_that_appears_finished_says_when_nothing_checked_it(word, checked, check):
    """The range ends inside the turn after an edit: "appears finished" is a guess; when no test
    or build ran after the edit, the line says the work is not checked."""
    path = f"/repo/lib/{word}.ex"
    raw: list[dict] = [{"role": "user", "content": f"Rename the {word} helper."}]
    _tool(raw, "Edit", {"file_path": path, "old_string": "old_name", "new_string": f"{word}_name"}, "ok")
    if checked:
        _tool(raw, "Bash", {"command": check}, "12 tests, 0 failures")
    summary = extractive_summary(_msgs(raw))
    line = next((line for line in summary.splitlines() if "appears finished" in line), "")
    assert line, summary
    assert ("not checked" in line) == (not checked), line
    if not checked:
        assert f"{word}.ex" in line.split("not checked", 1)[1]
