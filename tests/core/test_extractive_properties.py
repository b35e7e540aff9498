"""Properties of the offline handoff on generated sessions (hypothesis) and on real ones nobody
tuned for: status reconciled to the latest event, every commit hash and user message kept, no
terminal noise or cut heredoc, bounded size, and a repair that never floods."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.ledger import MAX_REPAIR_ERRORS, build_ledger, repair_summary
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.summarizers.chain import MAX_SUMMARY_CHARS
from compaction.core.tokens import count_content, count_text
from compaction.core.transcripts.claude_code import read_claude_code
from compaction.core.transcripts.pi import read_pi
from compaction.core.transcripts.swe_agent import read_swe_agent
from compaction.core.types import Msg
from tests import services

ANSI_RE = re.compile(r"\x1b\[|\[\d{1,3}(?:;\d{1,3})*m")
CUT_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?EOF")
BUDGET = 13_107


def _msg(seq: int, role: str, content) -> Msg:
    return Msg(seq, role, content, count_content(content))


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


class _Session:
    """Builds a Claude Code-shaped session event by event and remembers what really happened."""

    def __init__(self) -> None:
        self.msgs: list[Msg] = []
        self.calls = 0
        self.issue_state: dict[str, str] = {}
        self.command_ok: dict[str, bool] = {}
        self.commits: list[str] = []
        self.user_texts: list[str] = []
        self.error_lines: dict[str, str] = {}

    def _add(self, role: str, content) -> None:
        self.msgs.append(_msg(len(self.msgs) + 1, role, content))

    def user(self, text: str) -> None:
        self.user_texts.append(text)
        self._add("user", text)

    def say(self, text: str) -> None:
        self._add("assistant", [{"type": "text", "text": text}])

    def run(self, command: str, output: str, *, is_error: bool = False) -> None:
        self.calls += 1
        use_id = f"t{self.calls}"
        self._add("assistant", [{"type": "tool_use", "id": use_id, "name": "Bash", "input": {"command": command}}])
        result = {"type": "tool_result", "tool_use_id": use_id, "content": output}
        if is_error:
            result["is_error"] = True
        self._add("user", [result])

    def edit(self, path: str, added: str) -> None:
        self.calls += 1
        use_id = f"t{self.calls}"
        args = {"file_path": path, "old_string": "pass", "new_string": added}
        self._add("assistant", [{"type": "tool_use", "id": use_id, "name": "Edit", "input": args}])
        self._add("user", [{"type": "tool_result", "tool_use_id": use_id, "content": "ok"}])


REQUESTS = (
    "Add retries to the {x} client.",
    "Never log the API key in {x}.",
    "now the {x} tests",
    "ok",
    "Use httpx instead of requests in {x}, please.",
)

_events = st.lists(
    st.tuples(
        st.sampled_from(["user", "start", "close", "fail", "pass", "edit", "commit", "say"]),
        st.integers(min_value=0, max_value=4),
    ),
    min_size=1,
    max_size=40,
)


def _build(events: list[tuple[str, int]]) -> _Session:
    s = _Session()
    s.user("Work through the open issues of the proj tracker.")
    for n, (kind, k) in enumerate(events):
        issue, check = f"proj-{k}", f"make check{k}"
        if kind == "user":
            s.user(REQUESTS[k].format(x=f"mod{n}"))
        elif kind == "start":
            s.run(f"bd update {issue} --status in_progress", f"✓ Updated issue: {issue}")
            s.issue_state[issue] = "in_progress"
        elif kind == "close":
            s.run(f"bd close {issue}", f"✓ Closed {issue}")
            s.issue_state[issue] = "closed"
        elif kind == "fail":
            line = f"error: \x1b[31mcheck{k} failed at step {n}\x1b[0m"
            s.run(check, f"Exit code 1\n{line}", is_error=True)
            s.command_ok[check] = False
            s.error_lines[check] = f"error: check{k} failed at step {n}"
        elif kind == "pass":
            s.run(check, "12 tests, 0 failures")
            s.command_ok[check] = True
        elif kind == "edit":
            s.edit(f"src/mod{k}.py", f"def handler_{k}():\n    return {n}")
        elif kind == "commit":
            sha = f"{n:02d}{k}abc{n % 10}f"[:7]
            message = f"feat: step {n} of the proj work"
            s.run(
                f"git commit -m \"$(cat <<'EOF'\n{message}\n\nCo-Authored-By: bot\nEOF\n)\"", f"[main {sha}] {message}"
            )
            s.commits.append(sha)
        elif kind == "say":
            s.say(f"The check{k} target fails because `mod{k}` is missing the retry wrapper. I'll add it next.")
    return s


def _summarize(msgs: list[Msg], instructions: str | None = None):
    return summarize(
        SummaryInput(messages=msgs, output_budget=BUDGET, instructions=instructions),
        build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events)
def test_the_handoff_reports_the_state_at_the_end_of_the_range(events):
    s = _build(events)
    result = _summarize(s.msgs)
    text = result.summary
    assert result.strategy == "extractive", result.fallbacks
    assert len(text) <= MAX_SUMMARY_CHARS and count_text(text) <= BUDGET
    assert not ANSI_RE.search(text + result.turn_prefix_summary)
    assert not CUT_HEREDOC_RE.search(text)
    open_part = _section(text, "### In Progress", "## Key Decisions") + _section(text, "## Next Steps", "## Critical")
    for issue, state in s.issue_state.items():
        if state == "closed":
            # The last word on it was "closed": never in progress, blocked or a next step.
            assert not re.search(rf"`{re.escape(issue)}`", open_part), (issue, open_part)
    for check, ok in s.command_ok.items():
        if ok:
            assert f"`{check}` failed" not in open_part and f"`{check}`," not in open_part
        else:
            assert s.error_lines[check] in text  # the exact line, colour codes stripped
    for sha in s.commits:
        assert f"`{sha}`" in text
    if len(s.user_texts) <= 29:
        for said in s.user_texts:
            assert said in text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=80), st.integers(min_value=0, max_value=80))
def test_repair_adds_only_current_errors_and_never_floods(failing, fixed):
    s = _Session()
    s.user("Fix the type errors.")
    for i in range(fixed):
        s.run(f"tsc -p pkg{i}", f"src/f{i}.ts(3,1): error TS2304: Cannot find name 'x{i}'.", is_error=True)
        s.run(f"tsc -p pkg{i}", "")
    for i in range(failing):
        s.run(f"eslint pkg{i}", f"src/g{i}.ts(9,2): error no-undef: 'y{i}' is not defined", is_error=True)
    ledger = build_ledger(s.msgs)
    assert len(ledger.items["errors"]) == failing and len(ledger.resolved_errors) == fixed
    poor = "## Goal\nFix the type errors.\n\n## Critical Context\n- (none)\n"
    repaired, added = repair_summary(poor, ledger, budget=4000, max_chars=6000)
    appended = [line for line in repaired.splitlines() if line.startswith("- Error (verbatim): ")]
    assert len(appended) == added["errors"] <= MAX_REPAIR_ERRORS
    assert all("TS2304" not in line for line in appended)  # superseded by a later clean run
    assert len(repaired) <= 6000 and count_text(repaired) <= 4000
    assert added["errors"] + added["skipped_for_budget"] >= min(failing, 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=12, unique=True))
def test_focus_on_commit_hashes_keeps_and_counts_every_hash(ids):
    s = _Session()
    s.user("Ship the release.")
    for i in ids:
        s.edit(f"src/r{i}.py", f"VERSION_{i} = {i}")
        s.run(f"git commit -am 'release step {i}'", f"[main {i}{i}f0c{i}d] release step {i}")
    s.run(
        "git push origin main",
        f"To git.example:r.git\n   {ids[0]}{ids[0]}f0c{ids[0]}d..{ids[-1]}{ids[-1]}f0c{ids[-1]}d  main -> main",
    )
    result = _summarize(s.msgs, instructions="keep the commit hashes pushed")
    hashes = [f"{i}{i}f0c{i}d" for i in ids]
    assert all(h in result.summary for h in hashes)
    focus = result.fidelity["focus"]
    assert focus["total"] == len(hashes) and focus["kept"] == len(hashes)


def _real_sessions():
    root = services.TRANSCRIPTS
    yield "pi", read_pi(root / "pi/large-session.jsonl")
    yield "rust-port", read_claude_code(root / "claude-code/reliability-python-to-rust-port.jsonl")
    yield "swe-pydicom", read_swe_agent(root / "swe-agent/pydicom__pydicom-1458.traj")
    yield "tool-heavy", read_claude_code(root / "claude-code/tool_heavy.jsonl")


@pytest.mark.parametrize("name,transcript", list(_real_sessions()), ids=lambda v: v if isinstance(v, str) else "")
def test_real_sessions_nobody_tuned_for_get_a_bounded_clean_handoff(name, transcript):
    msgs = [_msg(i + 1, m["role"], m["content"]) for i, m in enumerate(transcript.messages)]
    result = _summarize(msgs)
    text = result.summary
    assert result.strategy == "extractive", result.fallbacks
    assert len(text) <= MAX_SUMMARY_CHARS and count_text(text) <= BUDGET
    assert not ANSI_RE.search(text) and not CUT_HEREDOC_RE.search(text)
    # Repair stays small: the summary already holds what matters.
    assert result.fidelity["repaired"]["errors"] <= MAX_REPAIR_ERRORS
    # Every heading, and no sentence fragments left dangling as a whole bullet.
    for line in text.splitlines():
        if line.startswith("- ") and len(line) < 200:
            assert not line.rstrip().endswith((" the", " a", " to", " and", " of")), line
