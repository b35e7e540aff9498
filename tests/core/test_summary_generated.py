"""Issue #7's summary properties on generated coding sessions (hypothesis): an agent works
through tracker issues — claims one, edits files, runs a check that may fail and get fixed,
commits, pushes, closes it — with terminal colours in the output and heredoc commit messages.
Whatever the mix, one compaction of the range (offline summarizer, chain checks and repair)
must not report a closed issue or a fixed failure as open, must name what is still open, must
keep the commit hashes when the focus asks for them, and stays noise-free and within 16k chars.

`test_range_events_*` check bench/summary_eval.py's detector against a plain model of the
same events; the `test_target_*` tests are the summarizer's targets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se

CHECKS = ["mix test", "mix credo --strict", "pytest -q", "npm run build", "cargo test"]
FILES = ["lib/app/parser.ex", "src/render.py", "assets/js/app.js", "src/lib.rs", "test/parser_test.exs"]
ANSI = "\x1b[31m"


@dataclass
class Session:
    messages: list[dict] = field(default_factory=list)
    closed: set[str] = field(default_factory=set)
    open: set[str] = field(default_factory=set)
    checks: dict[str, list[bool]] = field(default_factory=dict)  # program → [ever failed, last passed]
    hashes: list[str] = field(default_factory=list)
    _ids: int = 0

    def tool(self, name: str, inputs: dict, output: str, *, error: bool = False, say: str = "") -> None:
        self._ids += 1
        tool_id = f"toolu_{self._ids:04d}"
        blocks = ([{"type": "text", "text": say}] if say else []) + [
            {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
        ]
        self.messages.append({"role": "assistant", "content": blocks})
        result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
        self.messages.append({"role": "user", "content": [result]})

    def bash(self, command: str, output: str, *, error: bool = False, say: str = "") -> None:
        self.tool("Bash", {"command": command, "description": "run"}, output, error=error, say=say)

    def check(self, command: str, output: str, *, error: bool = False, say: str = "") -> None:
        self.bash(command, output, error=error, say=say)
        words = command.split()
        program = " ".join([words[0], *[w for w in words[1:2] if not w.startswith("-")]])
        state = self.checks.setdefault(program, [False, True])
        state[0], state[1] = state[0] or error, not error

    @property
    def fixed(self) -> set[str]:
        """Checks that failed at some point and passed when last run."""
        return {program for program, (failed, passed) in self.checks.items() if failed and passed}


@st.composite
def sessions(draw) -> Session:
    s = Session()
    epic = draw(st.sampled_from(["spot-qx", "app-k7", "core-b2"]))
    count = draw(st.integers(min_value=2, max_value=5))
    s.messages.append(
        {"role": "user", "content": f"Implement the issues of epic {epic}: commit and push each one, then close it."}
    )
    for n in range(1, count + 1):
        issue = f"{epic}.{n}"
        s.bash(f"bd update {issue} --status in_progress", f"✓ Updated issue: {issue}", say=f"Starting {issue}.")
        path = draw(st.sampled_from(FILES))
        s.tool("Edit", {"file_path": f"/repo/{path}", "old_string": "a", "new_string": "b"}, "The file was updated.")
        check = draw(st.sampled_from(CHECKS))
        if draw(st.booleans()):
            s.check(
                check,
                f"{ANSI}** (CompileError) {path}:12: undefined function parse/1\x1b[0m\nExit code 1",
                error=True,
                say="Running the checks.",
            )
            s.tool(
                "Edit", {"file_path": f"/repo/{path}", "old_string": "b", "new_string": "c"}, "The file was updated."
            )
        last_issue = n == count
        if last_issue and draw(st.booleans()):
            s.open.add(issue)  # the range ends with this one still in progress
            s.messages.append(
                {"role": "assistant", "content": [{"type": "text", "text": f"Now writing the tests for {issue}."}]}
            )
            break
        s.check(check, f"{ANSI}Finished in 0.4 seconds\x1b[0m\n12 tests, 0 failures", say="Checks again.")
        # Unique per issue, never all digits (a commit hash, not a number).
        digest = draw(st.sampled_from("abcdef")) + draw(st.text(alphabet="0123456789abcdef", min_size=5, max_size=5))
        digest += f"{n:x}"
        s.bash(
            f"git add -A && git commit -m \"$(cat <<'EOF'\nfeat: {issue} done\n\nCo-Authored-By: bot\nEOF\n)\"",
            f"[{epic} {digest}] feat: {issue} done\n 2 files changed, 14 insertions(+)",
            say=f"Committing {issue}.",
        )
        s.hashes.append(digest)
        s.bash(f"bd close {issue}", f"✓ Closed {issue}")
        s.closed.add(issue)
        if draw(st.booleans()):
            s.messages.append({"role": "user", "content": f"Good. Keep going with the next issue of {epic}."})
    return s


# --- the detector ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions())
def test_range_events_match_the_session(session: Session) -> None:
    events = se.range_events(session.messages)
    assert events.closed_issues == session.closed
    assert events.open_issues == session.open
    assert events.fixed_commands == session.fixed
    assert events.commit_hashes == session.hashes


@settings(max_examples=60, deadline=None)
@given(session=sessions())
def test_a_summary_saying_every_closed_issue_is_next_is_caught(session: Session) -> None:
    summary = "## Next Steps\n" + "\n".join(
        f"- Finish issue `{issue}` and close it" for issue in sorted(session.closed)
    )
    assert se.resolved_reported_open(summary, se.range_events(session.messages)) == sorted(session.closed)


# --- the summarizer's targets ----------------------------------------------------------------

ANSI_RE = re.compile(r"\x1b\[|\[\d{1,3}(?:;\d{1,3})*m")
CUT_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?EOF['\"]?\s*\)?\"?`?\s*(?:→|$)", re.M)


def summarize_range(messages: list[dict], instructions: str | None = None) -> str:
    """One compaction of the whole generated range, served as the service serves it."""
    from compaction.core.summarizers import SummaryInput, build_chain, summarize

    chain = build_chain(api_key=None, base_url=None, model="claude-haiku-4-5", timeout=30, max_retries=0)
    result = summarize(SummaryInput(messages=se.as_msgs(messages), instructions=instructions), chain)
    return se.served_text(result)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions())
def test_target_generated_nothing_resolved_reported_open_and_what_is_open_is_named(session: Session) -> None:
    served = summarize_range(session.messages)
    assert se.resolved_reported_open(served, se.range_events(session.messages)) == []
    for issue in session.open:
        assert re.search(rf"(?<![\w.]){re.escape(issue)}(?![\w-]|\.\d)", served), issue
    assert not ANSI_RE.search(served)
    assert not CUT_HEREDOC_RE.search(served)
    assert len(served) <= 16_000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions())
def test_target_generated_focus_on_commit_hashes_keeps_them(session: Session) -> None:
    served = summarize_range(session.messages, instructions=se.FOCUS_HASHES)
    kept, total = se.hashes_kept(served, se.range_events(session.messages))
    assert kept >= 0.8 * total, (kept, total)
