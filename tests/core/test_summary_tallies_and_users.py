"""What a reader checks first in two places: a test run's tally is the run's total (a runner
that reports suite after suite prints several), and the user's messages are all accounted
for — one message typed in several blocks is one message, and messages left out say so."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.summarizers.extractive.sections import MAX_USER_MESSAGES


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def _run(raw: list[dict], command: str, output: str, *, error: bool = False) -> None:
    call_id = f"c{len(raw)}"
    use = {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}
    raw.append({"role": "assistant", "content": [use]})
    result = {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": error}
    raw.append({"role": "user", "content": [result]})


def _cargo_suite(passed: int, failed: int) -> str:
    verdict = "FAILED" if failed else "ok"
    return (
        f"running {passed + failed} tests\n"
        f"test result: {verdict}. {passed} passed; {failed} failed; 0 ignored; 0 measured; 0 filtered out; "
        "finished in 0.01s\n"
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=4), st.integers(0, 3))
def test_a_run_of_several_suites_reports_their_total(suites, failing_suite):
    """`cargo test` prints the unit tests' tally, then the doc-tests' ("5 passed"): the run's
    total is their sum, and one failing suite fails the run."""
    failing = failing_suite if failing_suite < len(suites) else None
    tallies = [_cargo_suite(passed, 1 if n == failing else 0) for n, passed in enumerate(suites)]
    output = "   Compiling demo v0.1.0\n" + "\n   Doc-tests demo\n".join(tallies)
    raw: list[dict] = [{"role": "user", "content": "Port the parser to Rust and run the tests."}]
    _run(raw, "cargo test", output)
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Ran the tests."}]})
    summary = extractive_summary(se.as_msgs(raw))
    if failing is None:
        assert f"{sum(suites)} passed; 0 failed" in _section(summary, "### Done", "### In Progress")
        assert ("tallies" in summary) == (len(suites) > 1)
    else:
        assert "Fix what still fails: `cargo test`" in _section(summary, "## Next Steps", "## Critical")


def test_tallies_of_different_things_are_not_added_up() -> None:
    raw: list[dict] = [{"role": "user", "content": "Run the frontend tests."}]
    _run(raw, "npx jest", "Test Suites: 2 passed, 2 total\nTests:       30 passed, 30 total\nSnapshots:   0 total\n")
    raw.append({"role": "assistant", "content": [{"type": "text", "text": "Ran the tests."}]})
    summary = extractive_summary(se.as_msgs(raw))
    assert "30 passed, 30 total" in summary and "32 passed" not in summary


# ------------------------------------------------------------------------ the user's messages


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, MAX_USER_MESSAGES + 25), st.sampled_from([1_500, 3_000, 13_107]))
def test_user_messages_left_out_are_always_counted(count, budget):
    """However many are hidden for space — between the first and the newest, or dropped to
    fit the budget — the list says how many, so no rule goes missing without trace."""
    raw: list[dict] = []
    for n in range(count):
        raw.append({"role": "user", "content": f"Request {n}: move handler_{n} into its own module " + "x" * 60})
        raw.append({"role": "assistant", "content": [{"type": "text", "text": f"Moved handler_{n}."}]})
    summary = extractive_summary(se.as_msgs(raw), budget=budget)
    listed = _section(summary, "### User Messages (oldest first)", "## Constraints")
    quoted = {n for n in range(count) if re.search(rf"Request {n}: move handler_{n}\b", summary)}
    marker = re.search(r"\((\d+) of the user's messages in this range are not shown here\)", listed)
    goal = _section(summary, "## Goal", "### User Messages")
    in_list = {n for n in quoted if re.search(rf"Request {n}: move handler_{n}\b", listed)}
    in_goal = {n for n in quoted if re.search(rf"Request {n}: move handler_{n}\b", goal)} - in_list
    # Every message is quoted (in the list, or under Goal: the first and the latest) or counted.
    assert (int(marker.group(1)) if marker else 0) == count - len(in_list) - len(in_goal), summary


def test_one_message_typed_in_several_blocks_is_one_message() -> None:
    raw: list[dict] = [
        {"role": "user", "content": "Add a CSV export to the report page."},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "I added the export button. Should I also add a PDF export?"}],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "TypeError: cannot serialize Decimal at export.py:41"},
                {"type": "text", "text": "why does this fail?"},
            ],
        },
    ]
    summary = extractive_summary(se.as_msgs(raw))
    # Read as one message: the question is about the pasted error, not an answer to the
    # assistant's question about PDF exports.
    assert "replying to" not in summary
    assert re.search(r"TypeError: cannot serialize Decimal at export\.py:41\s+why does this fail\?", summary)
