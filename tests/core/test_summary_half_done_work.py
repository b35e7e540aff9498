"""A cold reader's complaints about how a handoff reports work left half done: the latest edit
reads as what the agent said it was doing, not as a list of the names it added; the next step
says what the agent's practice and the issue still ask for. Generated sessions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary

from .generated import msgs as _msgs
from .generated import section as _section
from .generated import tool as _tool

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _hook_code(word: str) -> str:
    """A change too long to quote: the summary can only name what it added, or say what it is for."""
    return (
        f"Hooks.{word.title()}Highlighter = {{\n"
        f"  mounted() {{ highlight{word.title()}(this.el) }},\n"
        f"  updated() {{ highlight{word.title()}(this.el) }},\n"
        f"}}\n"
        f"function highlight{word.title()}(root) {{\n"
        f"  root.querySelectorAll('pre code').forEach((block) => hljs.highlightElement(block))\n"
        f"}}\n"
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.integers(min_value=1, max_value=3), st.sampled_from(["app.js", "`app.js`"]))
def test_the_latest_edit_reads_as_what_the_agent_said_it_was_doing(word, edits, named):
    """ "Now update app.js to add the highlighter hook" then an edit, and the range ends: the
    work since the request leads with those words, and the names the edit added follow."""
    path = "/repo/assets/js/app.js"
    raw: list[dict] = [{"role": "user", "content": f"Add {word} highlighting to the transcript."}]
    for number in range(edits - 1):
        _tool(raw, "Edit", {"file_path": path, "old_string": "x", "new_string": f"import hljs{number}"}, "ok")
    said = f"Now update {named} to add the {word} highlighter hook."
    _tool(
        raw,
        "Edit",
        {"file_path": path, "old_string": "let Hooks = {}", "new_string": _hook_code(word)},
        "ok",
        text=said,
    )
    summary = extractive_summary(_msgs(raw))
    line = next(line for line in _section(summary, "### Done", "###").splitlines() if "app.js` edited" in line)
    told = f"update {named} to add the {word} highlighter hook"
    assert told in line, summary
    # The names come after the reason, not instead of it.
    assert f"Hooks.{word.title()}Highlighter" in line.split(told, 1)[1], line


def _finish_line(summary: str, issue: str) -> str:
    steps = _section(summary, "## Next Steps", "\n## ")
    return next(line for line in steps.splitlines() if f"Finish `{issue}`" in line)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans(), st.sampled_from(["main", "feature-x"]))
def test_the_next_step_pushes_when_the_agent_pushed_its_earlier_commits(word, pushed, branch):
    """Each issue committed and pushed, the next one edited and the range ends: finishing it
    ends with a push, as the earlier ones did; with nothing pushed, no push is asked for."""
    raw: list[dict] = [{"role": "user", "content": f"Work on epic proj-{word}: take the ready tasks one by one."}]
    first, second = f"proj-{word}.1", f"proj-{word}.2"
    _tool(raw, "Bash", {"command": f"bd update {first} --status in_progress"}, f"✓ Updated issue: {first}")
    _tool(raw, "Edit", {"file_path": f"/repo/lib/{word}.ex", "old_string": "a", "new_string": "b = 1"}, "ok")
    _tool(raw, "Bash", {"command": "mix test"}, "12 tests, 0 failures")
    commit = f'git add -A && git commit -m "feat: {word} ({first})"'
    _tool(raw, "Bash", {"command": commit}, f"[{branch} 1a2b3c4] feat: {word} ({first})\n 1 file changed")
    if pushed:
        _tool(raw, "Bash", {"command": "git push"}, f"To github.com:o/r.git\n   0f0f0f0..1a2b3c4  {branch} -> {branch}")
    _tool(raw, "Bash", {"command": f"bd close {first}"}, f"✓ Closed {first}")
    _tool(raw, "Bash", {"command": f"bd update {second} --status in_progress"}, f"✓ Updated issue: {second}")
    _tool(raw, "Edit", {"file_path": f"/repo/lib/{word}_live.ex", "old_string": "a", "new_string": "c = 2"}, "ok")
    summary = extractive_summary(_msgs(raw))
    line = _finish_line(summary, second)
    assert ("push" in line) == pushed, line
    if pushed:
        assert line.index("commit") < line.index("push"), line


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans(), st.sampled_from(["new", "create"]))
def test_the_next_step_names_the_new_files_the_issue_lists_and_no_call_made(word, wrote_live, marker):
    """The issue lists its output files, some marked new; the range ends with some written:
    finishing it names the new ones no call created, and none the agent already wrote."""
    issue = f"proj-{word}.3"
    raw: list[dict] = [{"role": "user", "content": f"Work on {issue}."}]
    shown = (
        f"○ {issue} · Add the {word} review page   [● P2 · OPEN]\n\nDESCRIPTION\n"
        f"Add a review page for {word}.\n\nOutput files:\n"
        f"- `lib/{word}.ex` (modify)\n- `lib/{word}_live.ex` ({marker})\n- `test/{word}_live_test.exs` ({marker})\n\n"
        "Definition of Done:\n- Tests cover the page.\n"
    )
    _tool(raw, "Bash", {"command": f"bd show {issue}"}, shown)
    _tool(raw, "Bash", {"command": f"bd update {issue} --status in_progress"}, f"✓ Updated issue: {issue}")
    _tool(raw, "Edit", {"file_path": f"/repo/lib/{word}.ex", "old_string": "a", "new_string": "b = 1"}, "ok")
    if wrote_live:
        _tool(raw, "Write", {"file_path": f"/repo/lib/{word}_live.ex", "content": "defmodule Live do\nend\n"}, "ok")
    summary = extractive_summary(_msgs(raw))
    line = _finish_line(summary, issue)
    assert f"`test/{word}_live_test.exs`" in line, line
    assert (f"`lib/{word}_live.ex`" in line) != wrote_live, line
    assert f"`lib/{word}.ex`" not in line, line


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans())
def test_the_words_before_the_latest_edits_are_said_once_beside_them(word, two):
    """The agent's "Now update app.js to add the hook." before the edit it led into is told
    with that edit under Done, not quoted again as its last words."""
    raw: list[dict] = [{"role": "user", "content": f"Add {word} highlighting to the transcript."}]
    told = [f"update app.js to add the {word} highlighter hook"]
    _tool(
        raw,
        "Edit",
        {"file_path": "/repo/assets/js/app.js", "old_string": "let Hooks = {}", "new_string": _hook_code(word)},
        "ok",
        text=f"Now {told[0]}.",
    )
    if two:
        told.append(f"add the {word} code styles to app.css")
        css = "\n".join(f".hljs-{word}-{n} {{ color: #{n}{n}{n}; }}" for n in range(6))
        _tool(
            raw,
            "Edit",
            {"file_path": "/repo/assets/css/app.css", "old_string": "/* end */", "new_string": css},
            "ok",
            text=f"Now {told[1]}.",
        )
    summary = extractive_summary(_msgs(raw))
    progress = _section(summary, "## Progress", "\n## ").lower()
    for words in told:
        assert progress.count(words) == 1, summary
        assert any(words in line and "edited" in line for line in progress.splitlines()), summary


def _test_blocks(word: str) -> str:
    """Test code too long to quote: a Files line can name what it adds or say what it is for."""
    return "\n".join(
        f'  test "{word} {field}" do\n    assert row.{word}_{field} == expected_{field}({word}_fixture())\n  end'
        for field in ("thread_key", "subagent_ref", "code_language")
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans(), st.integers(min_value=1, max_value=3))
def test_a_files_line_leads_with_what_the_agent_said_its_edits_do(word, for_all, edits):
    """ "Now let me update the test file with new test blocks for all enriched features." then
    a read and the edits: the file's line under Files says what the edits were for, the names
    they added after it — an "all" that qualifies the blocks is no vague "update all files"."""
    path = f"/repo/test/{word}_renderer_test.exs"
    told = f"update the test file with new test blocks for {'all ' if for_all else ''}{word} rendering"
    raw: list[dict] = [{"role": "user", "content": f"Render {word} metadata in the transcript."}]
    _tool(raw, "Read", {"file_path": path}, "defmodule RendererTest do\nend\n", text=f"Now let me {told}.")
    for number in range(edits):
        code = _test_blocks(f"{word}{number}")
        _tool(raw, "Edit", {"file_path": path, "old_string": f"end{number}", "new_string": code}, "ok")
    _tool(raw, "Bash", {"command": "mix test"}, "3 tests, 0 failures")
    summary = extractive_summary(_msgs(raw))
    line = next(line for line in _section(summary, "### Files", "\n#").splitlines() if path.split("/")[-1] in line)
    assert f"to {told} (`" in line, line
    assert line.index(told) < line.index("thread_key"), line
