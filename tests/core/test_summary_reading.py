"""How the offline handoff reads to an engineer continuing the work (issue #7's blind read),
as properties on generated sessions: each file is one sentence saying what was done to it,
where it stands (committed where, or not yet) and what it was for, in plain words."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary

PURPOSES = ["add the retry helper", "extract the parser into a module", "rewrite the date handling", "fix the import"]
ORDER_WORDS = ["", " first", " now", " too"]
FILES = ["src/render.py", "lib/app/parser.ex", "assets/js/app.js", "src/lib.rs"]


def _tool(messages: list[dict], name: str, inputs: dict, output: str, say: str = "", *, error: bool = False) -> None:
    tool_id = f"toolu_{len(messages):04d}"
    blocks = ([{"type": "text", "text": say}] if say else []) + [
        {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
    ]
    messages.append({"role": "assistant", "content": blocks})
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
    messages.append({"role": "user", "content": [result]})


@st.composite
def edit_sessions(draw) -> tuple[list[dict], dict[str, str], dict[str, str | None]]:
    """Files edited with a stated purpose, some committed (hash), the rest left uncommitted."""
    messages: list[dict] = [{"role": "user", "content": "Clean up the rendering code and commit as you go."}]
    paths = draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=4, unique=True))
    purposes: dict[str, str] = {}
    committed: dict[str, str | None] = {}
    for n, path in enumerate(paths):
        purpose = draw(st.sampled_from(PURPOSES))
        order = draw(st.sampled_from(ORDER_WORDS))
        purposes[path] = purpose
        edit = {"file_path": f"/home/dev/app/{path}", "old_string": "a", "new_string": "b"}
        _tool(messages, "Edit", edit, "The file was updated.", say=f"Now {purpose} in {path}{order}.")
        committed[path] = None
        if draw(st.booleans()):  # `commit -a` takes every file edited since the last commit
            digest = f"c0ffe{n:02x}"
            _tool(messages, "Bash", {"command": f"git commit -am 'step {n}'"}, f"[main {digest}] step {n}")
            committed.update({p: digest for p, h in committed.items() if h is None})
    return messages, purposes, committed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=edit_sessions())
def test_each_changed_file_is_one_sentence_with_its_state_and_purpose(session) -> None:
    messages, purposes, committed = session
    summary = extractive_summary(se.as_msgs(messages))
    files = summary.split("### Files", 1)[1]
    assert "the agent's purpose" not in files  # machine phrasing the reader has to decode
    for path, purpose in purposes.items():
        # Paths are shown relative to the project root the summarizer infers.
        (line,) = [
            ln for ln in files.splitlines() if re.match(rf"- `[\w/]*{re.escape(path.rsplit('/', 1)[-1])}` was ", ln)
        ]
        assert f"to {purpose}" in line, line
        assert not re.search(r"\b(first|now|too)$", line), line  # the moment's order word is gone
        if committed[path]:
            assert f"committed in `{committed[path]}`" in line, line
        elif any(committed.values()):
            assert "not committed yet" in line, line


SIGN_OFFS = [
    "Everything should be working smoothly now.",
    "Ready for the new release whenever you are!",
    "This should eliminate the flicker you were seeing!",
    "Let me know if you want any other changes.",
]
PIPES = ["", " | grep -E error", " | tail -5", " 2>&1 | grep -v warning"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    closing=st.lists(st.sampled_from(SIGN_OFFS), min_size=1, max_size=3, unique=True),
    pipes=st.lists(st.sampled_from(PIPES), min_size=2, max_size=4),
)
def test_done_keeps_the_report_without_sign_offs_or_the_same_check_twice(closing, pipes) -> None:
    messages: list[dict] = [{"role": "user", "content": "Make the footer dimmer."}]
    for pipe in pipes:  # the same check, re-run with different plumbing after it
        _tool(messages, "Bash", {"command": f"cd packages/app && npm run check{pipe}"}, "ok")
    report = "I've updated `footer.ts` to use the dim colour for the context usage."
    messages.append({"role": "assistant", "content": " ".join([report, *closing])})
    summary = extractive_summary(se.as_msgs(messages))
    done = summary.split("### Done", 1)[1].split("### In Progress", 1)[0]
    assert "`footer.ts` to use the dim colour" in done
    assert summary.count("`footer.ts` to use the dim colour") == 1  # not again as "where it stopped"
    for sentence in closing:
        assert sentence not in summary
    assert done.count("npm run check") == 1, done


def test_a_cut_line_never_ends_inside_a_code_span() -> None:
    from compaction.core.summarizers.extractive.analysis import one_line

    for limit in range(20, 80):
        text = "Invalid themes now fall back on startup and during a switch (`setTheme` returns an error) too."
        assert one_line(text, limit).count("`") % 2 == 0, one_line(text, limit)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.sampled_from(FILES), min_size=1, max_size=3, unique=True),
    edits=st.lists(st.integers(min_value=1, max_value=3), min_size=3, max_size=3),
)
def test_text_format_editor_edits_land_on_the_open_file(files, edits) -> None:
    """SWE-agent's `edit 10:12` names no file: it changes the one `open` or `create` named last.
    The file the fix is in must be listed as changed, with how often."""
    messages: list[dict] = [{"role": "user", "content": "Fix the crash when the attribute is missing."}]
    for path, count in zip(files, edits, strict=False):
        verb = "create" if path.endswith(".rs") else "open"
        _tool(messages, verb, {"command": f"{verb} {path}"}, f"[File: {path} (40 lines total)]")
        for n in range(count):
            _tool(messages, "edit", {"command": f"edit {n + 1}:{n + 2}\n    return x\nend_of_edit"}, "File updated.")
    summary = extractive_summary(se.as_msgs(messages))
    files_part = summary.split("### Files", 1)[1]
    for path, count in zip(files, edits, strict=False):
        name = re.escape(path.rsplit("/", 1)[-1])
        times = {1: "once", 2: "twice"}.get(count, f"{count} times")
        if path.endswith(".rs"):  # created, then edited
            assert re.search(rf"`[\w/]*{name}` was written" + (", then edited" if count else ""), files_part)
        else:
            assert re.search(rf"`[\w/]*{name}` was edited {times}", files_part), files_part


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    asks=st.lists(
        st.sampled_from(
            [
                "Port the parser to Rust and keep the public API unchanged.",
                "Now add the CSV export to the reports page.",
                "Also make the footer dimmer.",
            ]
        ),
        min_size=1,
        max_size=3,
        unique=True,
    ),
    todos=st.lists(st.sampled_from(["Port the lexer", "Port the parser", "Update Justfile"]), min_size=2, unique=True),
)
def test_no_user_message_or_todo_is_listed_twice(asks, todos) -> None:
    """A message quoted under Goal is not quoted again under User Messages; completed todos are
    one line; a rule heading without its rule ("Stop hook feedback:") is no constraint."""
    messages: list[dict] = []
    for ask in asks:
        messages.append({"role": "user", "content": ask})
        todo_input = {"todos": [{"content": t, "status": "completed", "activeForm": t} for t in todos]}
        _tool(messages, "TodoWrite", todo_input, "Todos have been modified successfully.")
    messages.append({"role": "user", "content": "Stop hook feedback:\n- Cannot exit with unstaged changes"})
    summary = extractive_summary(se.as_msgs(messages))
    goal = summary.split("## Constraints", 1)[0]
    listed = goal.split("### User Messages", 1)[1] if "### User Messages" in goal else ""
    for ask in asks:
        assert ask in goal, ask  # every request is in the user's words, once, above Constraints
        assert goal.count(ask) == 1, goal
    assert all(ask not in listed for ask in asks if ask in goal.split("### User Messages", 1)[0])
    assert summary.count("Todos completed:") == 1
    assert all(todo in summary for todo in todos)
    assert 'User: "Stop hook feedback:"' not in summary


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    open_count=st.integers(min_value=1, max_value=3),
    heading=st.sampled_from(["## Problem", "# Context", "### Why"]),
)
def test_an_open_issue_is_described_once_without_its_markdown_heading(open_count, heading) -> None:
    """`bd show` output: each open issue's title is written once (where it is next or in
    progress), not again in the issue-state line; its description loses the heading line."""
    messages: list[dict] = [{"role": "user", "content": "Work on epic web-q8: start with the first ready task."}]
    titles = {f"web-q8.{n}": f"Render the audit panel part {n}" for n in range(1, open_count + 1)}
    for issue, title in titles.items():
        shown = (
            f"○ {issue} · {title}   [● P2 · OPEN]\n\nDESCRIPTION\n{heading}\nThe panel for {issue} is hard to scan.\n"
        )
        _tool(messages, "Bash", {"command": f"bd show {issue}"}, shown)
    first = next(iter(titles))
    _tool(messages, "Bash", {"command": f"bd update {first} --status in_progress"}, f"✓ Updated issue: {first}")
    summary = extractive_summary(se.as_msgs(messages))
    for issue, title in titles.items():
        assert summary.count(title) == 1, (title, summary)
        assert f"The panel for {issue} is hard to scan." in summary
    assert heading not in summary


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    root=st.sampled_from(["/Users/dev/workspaces/mono-repo", "/home/dev/projects/app", "packages/coding-agent"]),
    ids=st.integers(min_value=1, max_value=6),
)
def test_steps_name_commands_by_what_they_run_cut_between_words(root, ids) -> None:
    issues = " ".join(f"web-q8.{n}" for n in range(1, ids + 1))
    messages: list[dict] = [{"role": "user", "content": "Do the web-q8 issues and commit."}]
    _tool(messages, "Bash", {"command": "bd update web-q8.1 --status in_progress"}, "✓ Updated issue: web-q8.1")
    _tool(messages, "Bash", {"command": f"cd {root} && npm run build 2>&1 | tail -5"}, "built in 1.2s")
    _tool(messages, "Bash", {"command": f"bd close {issues}"}, "✓ Closed")
    _tool(messages, "Bash", {"command": "git commit -am 'feat: audit panel'"}, "[main abc1234] feat: audit panel")
    summary = extractive_summary(se.as_msgs(messages))
    (steps,) = [line for line in summary.splitlines() if "Steps taken:" in line]
    assert "`npm run build`" in steps and "cd " not in steps, steps
    for span in re.findall(r"`([^`]+)`", steps):
        assert not span.endswith("…") or span.endswith(" …"), span  # cut between words
        assert (
            span.rstrip(" …") in f"cd {root} && npm run build bd update web-q8.1 --status in_progress bd close {issues}"
        )


def test_the_users_rules_survive_successive_compactions_of_a_long_real_session() -> None:
    """pi's long theming session compacted three times, each merging the previous summary:
    every rule the user gave stays quoted (the issue's lost "E2E tests only" case), and the
    merged handoff stays within the 16k-character target."""
    from compaction.core.ledger import parse_summary_sections
    from compaction.core.summarizers import SummaryInput, build_chain, summarize
    from compaction.core.transcripts.detect import read_transcript
    from tests.services import TRANSCRIPTS

    transcript = read_transcript(TRANSCRIPTS / "pi" / "large-session.jsonl")
    messages = se.as_msgs(se.messages_for_api(transcript.messages))
    chain = build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0)
    third = len(messages) // 3
    previous, rules = None, []
    for k in range(3):
        part = messages[k * third : (k + 1) * third] if k < 2 else messages[2 * third :]
        result = summarize(SummaryInput(messages=part, previous_summary=previous, output_budget=13_107), chain)
        assert [rule for rule in rules if rule not in result.summary] == []
        assert len(result.summary) <= 16_000
        previous, rules = result.summary, parse_summary_sections(result.summary).get("constraints", [])
    assert len(rules) >= 3  # the session's rules were found at all


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    targets=st.lists(st.sampled_from(["a.yml", "b.yml", "ci/c.yml"]), min_size=1, max_size=3, unique=True),
    exception=st.sampled_from(["ModuleNotFoundError: No module named 'yaml'", "KeyError: 'jobs'"]),
)
def test_an_error_is_its_exception_line_once_without_markup(targets, exception) -> None:
    """A traceback is reported by its exception line, not its "Traceback (most recent call
    last)" header; the same line printed by several runs is listed once; a tool's error tags
    (<tool_use_error>) are not part of the error."""
    messages: list[dict] = [{"role": "user", "content": "Check that the workflow files are valid YAML."}]
    for target in targets:
        command = f"python3 -c \"import yaml; yaml.safe_load(open('{target}'))\""
        trace = f'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n{exception}'
        _tool(messages, "Bash", {"command": command}, trace)
    missing = "<tool_use_error>File does not exist.</tool_use_error>"
    _tool(messages, "Read", {"file_path": "/home/dev/app/missing.yml"}, missing, error=True)
    summary = extractive_summary(se.as_msgs(messages))
    errors = summary.split("### Errors and Fixes", 1)[1].split("###", 1)[0]
    assert "Traceback (most recent call last)" not in errors
    assert errors.count(exception) == 1, errors
    assert "File does not exist." in errors and "tool_use_error" not in errors


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hedge=st.sampled_from(["might", "probably", "perhaps"]),
    choice=st.sampled_from(
        [
            "I'll use the csv module instead of pandas because pandas is not installed.",
            "We chose RGB values rather than palette indices so that every terminal shows the same colour.",
        ]
    ),
)
def test_a_guess_is_not_a_key_decision(hedge, choice) -> None:
    guess = f"If the terminal reports a light background, it {hedge} load the light theme instead of the dark one."
    messages: list[dict] = [
        {"role": "user", "content": "The colours look different in the editor terminal."},
        {"role": "assistant", "content": guess},
        {"role": "assistant", "content": choice},
    ]
    summary = extractive_summary(se.as_msgs(messages))
    decisions = summary.split("## Key Decisions", 1)[1].split("## Next Steps", 1)[0]
    assert choice.rstrip(".") in decisions, decisions
    assert guess.rstrip(".") not in decisions, decisions


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    quoted=st.sampled_from(["> - No fixing existing code to satisfy checkers", "> Install the tools via Igniter."]),
    rows=st.lists(st.sampled_from(["web-q8.1", "web-q8.2", "web-q8.3"]), min_size=1, max_size=3, unique=True),
)
def test_a_finished_report_with_a_table_closes_the_request(quoted, rows) -> None:
    """The assistant quoting a plan (blockquote) reports nothing done; a markdown table reads as
    its cells; last words reporting the work created/done leave nothing "in progress" and no
    "continue with the latest request" (the request was answered)."""
    messages: list[dict] = [{"role": "user", "content": "create the beads"}]
    plan = f"The plan says:\n\n{quoted}\n\nI'll create the beads now."
    messages.append({"role": "assistant", "content": plan})
    for issue in rows:
        _tool(messages, "Bash", {"command": f'bd create --title="Task {issue}"'}, f"✓ Created issue: {issue}")
    table = "\n".join(["| Bead ID | Task |", "|---------|------|", *[f"| {i} | Task {i} |" for i in rows]])
    messages.append({"role": "assistant", "content": f"## Beads Created\n\n{table}\n\nRun `bd ready` to see them."})
    summary = extractive_summary(se.as_msgs(messages))
    assert quoted.lstrip("> -").rstrip(".") not in summary
    assert "|---" not in summary and "| Bead ID |" not in summary
    for issue in rows:
        assert f"{issue}: Task {issue}" in summary
    in_progress = summary.split("### In Progress", 1)[1].split("###", 1)[0]
    assert "- (none)" in in_progress, in_progress
    assert "Continue with the user's latest request" not in summary


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    verb=st.sampled_from(["deleted", "removed", "written", "updated"]),
    edited=st.lists(st.sampled_from(FILES), max_size=3, unique=True),
)
def test_last_words_reporting_the_request_done_close_it(verb, edited) -> None:
    """ "The `custom.json` theme has been deleted." answers the latest request: it is not the
    place the work stopped, nor is the request a next step; edits left uncommitted are said."""
    messages: list[dict] = [{"role": "user", "content": "delete the custom theme"}]
    for path in edited:
        edit = {"file_path": f"/home/dev/app/{path}", "old_string": "a", "new_string": "b"}
        _tool(messages, "Edit", edit, "The file was updated.")
    _tool(messages, "Bash", {"command": "rm ~/.pi/agent/themes/custom.json"}, "")
    messages.append({"role": "assistant", "content": f"Done. The `custom.json` theme has been {verb}."})
    summary = extractive_summary(se.as_msgs(messages))
    nxt = summary.split("## Next Steps", 1)[1].split("##", 1)[0]
    assert "Continue with the user's latest request" not in nxt
    assert "Nothing is left open" in nxt
    assert ("not committed" in nxt or "no commit seen" in nxt) == bool(edited), nxt
    assert "Where the work stopped" not in summary
