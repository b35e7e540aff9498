"""bench/summary_eval.py's detectors on hand-built ranges and summaries, and its figures on the
shared real sessions (measured properties, not wording). Quality targets the summarizer must
meet are in test_summary_targets.py."""

from __future__ import annotations

import pytest

from bench import summary_eval as se
from tests.corpus import TRANSCRIPTS, corpus


def call(tool_id: str, command: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}],
    }


def result(tool_id: str, text: str, *, error: bool = False) -> dict:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}],
    }


RANGE = [
    {"role": "user", "content": "Tackle the beads of the epic, commit and push each one."},
    call("t1", "bd update proj-abc.1 --status in_progress"),
    result("t1", "Updated"),
    call("t2", "cd /repo && mix credo --strict"),
    result("t2", "Exit code 1\n2 refactoring opportunities", error=True),
    call("t3", "git add -A && git commit -m \"$(cat <<'EOF'\nfeat: thing\nEOF\n)\""),
    result("t3", "[proj-abc 1a2b3c4] feat: thing\n 2 files changed"),
    call("t4", "mix credo --strict 2>&1 | tail -5"),
    result("t4", "no issues"),
    call("t5", "bd close proj-abc.1 proj-abc.2"),
    result("t5", "Closed proj-abc.1\nClosed proj-abc.2"),
    call("t6", "git push"),
    result("t6", "   1a2b3c4..9f8e7d6  proj-abc -> proj-abc"),
    call("t7", "bd update proj-abc.3 --status in_progress"),
    result("t7", "Updated"),
    call("t8", "bd close proj-abc.9"),
    result("t8", "Error: no such issue", error=True),
]


def test_range_events_keep_the_last_state_of_each_item():
    events = se.range_events(RANGE)
    assert events.closed_issues == {"proj-abc.1", "proj-abc.2"}  # abc.9's close failed
    assert events.open_issues == {"proj-abc.3"}
    assert "mix credo" in events.fixed_commands
    assert "git commit" not in events.fixed_commands  # never failed
    assert events.commit_hashes == ["1a2b3c4", "9f8e7d6"]


def test_a_reopened_issue_is_open_again():
    reopened = [*RANGE, call("t9", "bd update proj-abc.1 --status open"), result("t9", "Updated")]
    events = se.range_events(reopened)
    assert "proj-abc.1" not in events.closed_issues and "proj-abc.1" in events.open_issues


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ("## Next Steps\n1. Finish issue `proj-abc.1` and close it", ["proj-abc.1"]),
        ("## In Progress\n- abc.2: wire the selection hook", ["proj-abc.2"]),  # short ids count
        ("## Blocked\n- `mix credo --strict` fails with 2 refactoring opportunities", ["mix credo"]),
        ("## Notes\n- Fix what still fails: `mix credo --strict`", ["mix credo"]),
        ("## Done\n- proj-abc.1 closed in 1a2b3c4", []),
        ("## Next Steps\n- abc.1 and abc.2 are done; continue with abc.3", []),  # says done
        ("## Next Steps\n- abc.3 (blocked by abc.1): start after review", []),  # the subject is abc.3
        ("## Next Steps\n- Run `mix credo --strict` again after the next edit", []),  # no failure claimed
        ("## Critical Context\n- Commands: `bd update proj-abc.1 --status in_progress`", []),  # a log
        ("## Next Steps\n- Issue abc.1 is marked in_progress (not closed yet)", ["proj-abc.1"]),
    ],
)
def test_resolved_reported_open(summary, expected):
    assert se.resolved_reported_open(summary, se.range_events(RANGE)) == expected


def test_hashes_kept_matches_short_prefixes():
    events = se.range_events(RANGE)
    assert se.hashes_kept("Committed 1a2b3c4 (feat: thing).", events) == (1, 2)


@pytest.fixture(scope="module")
def evaluations():
    fidelity = se.load_fidelity()
    return [se.evaluate_session(TRANSCRIPTS / "claude-code" / f"{name}.jsonl", fidelity) for name in se.SESSIONS]


@corpus
def test_each_session_is_evaluated_on_a_range_with_resolved_work(evaluations):
    for ev in evaluations:
        assert ev.range_messages > 20
        # Claude Code's summary is scored too, with the same scorer.
        assert ev.claude.recall is not None and 0 < ev.claude.recall <= 1
        assert ev.claude.chars > 5_000
        assert ev.ours.recall is not None and ev.ours.prose_recall is not None
        # The focus instruction changes the job, not the scoring: both are scored the same way.
        assert ev.focus.hashes[1] == ev.ours.hashes[1]


@corpus
def test_the_table_is_the_end_of_the_output(evaluations, capsys, monkeypatch):
    monkeypatch.setattr(
        se, "evaluate_session", lambda path, fidelity=None, replay=False: evaluations[se.SESSIONS.index(path.stem)]
    )
    monkeypatch.setattr("sys.argv", ["summary_eval.py"])
    assert se.main() == 0
    out = capsys.readouterr().out.rstrip()
    table = se.table(evaluations)
    assert "\n".join(table) in out  # the recall table, then the handoff table last
    assert out.splitlines()[-len(evaluations) - 2].startswith("session   narr harn")
    assert len(table) <= 12
    assert all(ev.name in "\n".join(table) for ev in evaluations)


def test_file_lists_and_paths_name_no_open_issue():
    summary = (
        "## Next Steps\n- Write the tests\n\n<read-files>\n/home/u/worktrees/proj-abc/lib/app.ex\n</read-files>\n"
        "<modified-files>\n/home/u/proj-abc.1/notes.md\n</modified-files>"
    )
    assert se.resolved_reported_open(summary, se.range_events(RANGE)) == []
