"""bench/claims_audit.py: where a transcript is cut, how a long output is shortened for the reader,
how the readers' audit.md tables are tallied; and, on the shared transcripts, one folder per cut
made through the service (import, compaction) with what a reader needs."""

from __future__ import annotations

import json
import re

import pytest

from bench import claims_audit as ca
from tests.corpus import TRANSCRIPTS, corpus


def _user(text):
    return {"role": "user", "content": text}


def _assistant(*blocks):
    return {"role": "assistant", "content": list(blocks)}


def _text(text):
    return {"type": "text", "text": text}


def _use(tool_id, name="Bash"):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"command": "ls"}}


def _result(tool_id, text="ok"):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


def test_a_cut_falls_after_a_whole_reply_never_inside_a_tool_pair():
    messages = [
        _user("fix the bug"),  # 1: a request, no reply yet
        _assistant(_text("Looking."), _use("a")),  # 2: a call waiting for its result
        {"role": "user", "content": [_result("a")]},  # 3: every call answered
        _assistant(_use("b"), _use("c")),  # 4: two calls
        {"role": "user", "content": [_result("b")]},  # 5: one of them still open
        {"role": "user", "content": [_result("c")]},  # 6: both answered
        _assistant(_text("Half of a reply")),  # 7: continued by the next assistant message
        _assistant(_text("Done.")),  # 8: the reply ends
        _user("thanks"),  # 9: a request
    ]
    assert ca.reply_ends(messages) == [3, 6, 8]


def test_cuts_are_spread_over_the_history_s_tokens_and_the_last_is_included():
    sums = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 300]  # the tenth message is long
    assert ca.spread([3, 6, 8, 10], sums, 3) == [8, 10]  # a third of 300 tokens is at message 8
    assert ca.spread([3, 6, 8, 10], [k * 10 for k in range(11)], 2) == [3, 10]
    assert ca.spread([3, 6, 8], sums, 1) == [8]
    assert ca.spread([], sums, 3) == []


def test_messages_are_mapped_to_the_lines_they_were_read_from():
    units = [
        json.dumps({"type": "user", "message": {"content": "fix the bug in parser.py"}}),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "Looking at it."}]}}),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "toolu_1"}]}}),
        json.dumps({"type": "progress"}),
        json.dumps({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}}),
    ]
    messages = [
        _user("fix the bug in parser.py"),
        _assistant(_text("Looking at it."), _use("toolu_1")),
        {"role": "user", "content": [_result("toolu_1", "")]},
        _assistant(_text("never written to the file")),
    ]
    # The result is found after its call, not at the call's own line that also names the id.
    assert ca.map_messages(messages, units) == [(0, 0), (1, 2), (4, 4), None]


def test_a_long_output_keeps_head_tail_and_the_lines_the_summary_names_with_a_note():
    lines = [f"line {n}" for n in range(1, 201)]
    lines[99] = "FAILED tests/test_parser.py::test_empty - AssertionError"
    text = "\n".join(lines)
    out = ca.cut_text(text, ca.Trim(3, 2, 400), ca.summary_terms("`tests/test_parser.py::test_empty` failed (#12)"))
    shown = out.split("\n")
    assert shown[:3] == ["line 1", "line 2", "line 3"]
    assert shown[-2:] == ["line 199", "line 200"]
    assert lines[99] in shown
    assert "[… lines 4–99 of 200 cut …]" in shown
    assert "[… lines 101–198 of 200 cut …]" in shown
    assert ca.cut_text("short\noutput", ca.Trim(3, 2, 400), set()) == "short\noutput"


def test_what_the_summary_quotes_is_kept_whole_wherever_it_is_in_a_long_output():
    lines = [f"line {n}" for n in range(1, 201)]
    lines[120] = "DESCRIPTION: Ongoing reviews are defined as open annotations across all sessions " + "x" * 400
    summary = "- gqc.5, in progress. The task: Add a page. Ongoing reviews are defined as open annotations across all…"
    evidence = ca.Evidence(set(), ca.summary_quotes(summary))
    assert "Ongoing reviews are defined as" in evidence.quotes
    shown = ca.cut_text("\n".join(lines), ca.Trim(3, 2, 400, middle=0), evidence).split("\n")
    assert lines[120] in shown  # whole, not cut to the level's line width
    # Few long lines (a tool call's JSON): the quote's surroundings are kept from the middle.
    long = "a" * 5000 + " Ongoing reviews are defined as open annotations " + "b" * 5000
    out = ca.cut_text(long, ca.Trim(3, 2, 400), evidence)
    assert "Ongoing reviews are defined as open annotations" in out and len(out) < 2000


def test_the_person_s_long_request_of_short_lines_is_shown_whole_up_to_its_bound():
    request = "\n".join(f"- step {n}: do the thing number {n}" for n in range(1, 241))  # 240 lines, ~8,000 chars
    shown = ca.render_message(1, _user(request), ca.LEVELS[-1], set(), {})
    assert shown == f"#1 [User]:\n{request}"
    # The agent's words of the same shape are still cut to the level's lines.
    agent = ca.render_message(2, _assistant(_text(request)), ca.LEVELS[-1], set(), {})
    assert "cut …]" in agent


AUDIT = """# Audit

## Claims

| # | claim | verdict | evidence | note |
|---|---|---|---|---|
| 1 | the tests passed | TRUE | #12 | exit 0 |
| 2 | committed as abc1234 | STALE | #40, #57 | edited after |
| 3 | the build is clean | **FALSE** | #60 | error at #60 |
| 4 | credo passed | MISLEADING | #70 | findings |
| 5 | the person asked for X | UNSUPPORTED | - | |
| 6 | something | PROBABLY | #3 | not a verdict |

## Missing

| # | what is missing | evidence | why the resuming agent needs it |
|---|---|---|---|
| 1 | the blocker | #88 | it fails every commit |
| 2 | the open question | #90 | unanswered |

## Verdict
Mostly right.
"""


def test_an_audit_table_is_tallied_by_verdict_and_a_row_without_one_is_reported():
    audit = ca.parse_audit(AUDIT, "cut-01")
    assert dict(audit.verdicts) == {"TRUE": 1, "STALE": 1, "FALSE": 1, "MISLEADING": 1, "UNSUPPORTED": 1}
    assert (audit.claims, audit.not_true, audit.missing, audit.bad_rows) == (5, 4, 2, 1)
    table = ca.tally_table([audit, ca.parse_audit(AUDIT.replace("STALE", "TRUE"), "cut-02")])
    rows = {
        line.split()[0]: line.split() for line in table.splitlines()[1:] if line.split()[0].startswith(("cut", "total"))
    }
    # claims, FALSE, STALE, UNSUPPORTED, MISLEADING, not true, %, missing
    assert rows["cut-01"][1:] == ["5", "1", "1", "1", "1", "4", "80.0", "2"]
    assert rows["cut-02"][1:] == ["5", "1", "0", "1", "1", "3", "60.0", "2"]
    assert rows["total"][1:] == ["10", "2", "1", "2", "2", "7", "70.0", "4"]
    assert "2 claim rows had no verdict" in table


def test_tally_reads_every_audit_under_the_folders(tmp_path, capsys):
    for name in ("cut-01", "cut-02"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "audit.md").write_text(AUDIT, encoding="utf-8")
    (tmp_path / "cut-03").mkdir()  # not read yet: no audit.md
    assert ca.main(["tally", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^total\s+10\s", out, re.M)
    assert ca.main(["tally", str(tmp_path / "cut-03")]) == 1


# --- on the shared transcripts, through the service --------------------------------------------


@corpus
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["swe-agent/katy.traj", "claude-code/reliability-python-to-rust-port.jsonl"])
def test_each_cut_is_a_folder_a_reader_can_audit(name, tmp_path, django_user_model):
    root = TRANSCRIPTS
    owner = django_user_model.objects.create(username="auditor")
    rows = ca.audit_transcript(
        root / name, root=root, out=tmp_path, owner=owner, cuts=2, min_tokens=1_500, small_keep=0.3
    )
    assert len(rows) == 2
    for row in rows:
        folder = tmp_path / row["folder"]
        files = {p.name for p in folder.iterdir()}
        assert files == {"BRIEF.md", "summary.md", "kept.md", "map.tsv", "transcript.md"}
        summary = (folder / "summary.md").read_text()
        transcript = (folder / "transcript.md").read_text()
        handles = {int(n) for n in re.findall(r"^#(\d+) \[", transcript, re.M)}
        assert handles == set(range(1, row["cut_messages"] + 1))
        # Every message number the summary cites is a message of the transcript shown.
        cited = {int(n) for n in re.findall(r"#(\d+)\b", summary)}
        assert cited and cited <= handles
        assert row["folder_bytes"] <= ca.FOLDER_BUDGET * 1.1
        mapped = (folder / "map.tsv").read_text().splitlines()[1:]
        assert len(mapped) == row["cut_messages"] and not any(line.endswith("\t?") for line in mapped)
        # Nothing in the folder says which system wrote the summary or where the files are.
        for file in folder.iterdir():
            text = file.read_text()
            assert not re.search(r"compactor|claims_audit|/work/|extractive", text, re.I), file.name
