"""A cold reader's complaints about how a handoff reports what was done: the fix of a failure
is what changed before the retry (not "the retry succeeded"), and an intent the next call did
not carry out is no decision. Generated sessions, plus the shared transcripts."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.tokens import count_content
from compaction.core.types import Msg

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)
SHELLS = st.sampled_from(["Bash", "bash"])


def _msgs(raw: list[dict]) -> list[Msg]:
    return [Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(raw)]


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def _tool(raw: list[dict], name: str, inputs: dict, output: str, *, error: bool = False, text: str = "") -> None:
    tool_id = f"toolu_{len(raw):04d}"
    said = [{"type": "text", "text": text}] if text else []
    use = {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
    raw.append({"role": "assistant", "content": [*said, use]})
    raw.append({"role": "user", "content": [result]})


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

