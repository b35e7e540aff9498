"""Summary evaluation on the shared real Claude Code sessions that hold a Claude Code compaction.

    DEBUG=1 .venv/bin/python bench/summary_eval.py [--transcripts DIR] [--show]

For each session: the history before Claude Code's compaction boundary, one compaction with
default settings (200k window) through the pure core path a job takes (plan_cut → summarizer
chain → checks and repair; no API key, so the offline summarizer), served as the service
serves it (summary + turn-prefix summary in one message). Printed per session, for ours and for
Claude Code's own summary (the `isCompactSummary` line):

- recall: shared/tools/fidelity.py's ledger recall over the range Compactor summarized, as
  served and in prose lines only (`prose_only`);
- chars of the served text;
- open!: items resolved in the range (an issue closed, a failing command that later succeeded)
  that the summary still reports as open, blocked or a next step (`resolved_reported_open`);
- hash%: the range's commit hashes (created or pushed) kept, by default and with focus
  instructions asking for commit hashes (`FOCUS_HASHES`).

Claude Code summarized its whole pre-boundary history, so its open!/hash% figures are measured
over that range; recall is measured over Compactor's range for both, so the two are compared on the same messages.
The recall table, then the handoff table: the handoff's checks (first-person narration outside
quotes, harness text quoted as the person, closed items reported open, focus line similarity,
what a merged second summary keeps, sizes, tokens served after the compaction). The handoff
table is the last lines of the output.

--llm-replay adds a row per session for the LLM path on real model output: Claude Code's own
compaction call (`subagents/agent-acompact-*.jsonl`) answered by the local Messages-API test
server (tests/fake_anthropic.py) with the reply the model really gave, run through our
Anthropic summarizer (Claude Code's instructions as the custom prompt, must-keep ledger,
parsing, checks and repair) over the same history Claude Code summarized.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compaction.core.types import Fallback

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The corpus, the sessions and the core path a job takes are the tests' (tests/corpus.py): the
# figures here are measured on what the tests check.
from tests.corpus import (  # noqa: E402, F401 - also re-exported: bench/rules_eval.py reads them here
    SESSIONS,
    TRANSCRIPTS,
    WINDOW,
    as_msgs,
    compact_once,
    history_before_compaction,
    load_fidelity,
    messages_for_api,
    served_text,
    served_tokens,
    shared_dir,
)
from tests.handoff_facts import harness_lines, narration_lines  # noqa: E402

FOCUS_HASHES = "Keep every commit hash that was created or pushed, with what each commit contains."


# --- what happened in a range -------------------------------------------------------------

_SEGMENT_SPLIT_RE = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")
# Programs whose success or failure says nothing about the work (navigation, inspection).
_TRIVIAL_PROGRAMS = {"cd", "echo", "ls", "cat", "head", "tail", "pwd", "true", "sleep", "grep", "rg", "find", "wc"}
_ISSUE_ID = r"[A-Za-z][\w-]*-[\w]+(?:\.\d+)*"
_BD_CLOSE_RE = re.compile(rf"\bbd\s+close\s+((?:{_ISSUE_ID}\s*)+)")
_BD_STATUS_RE = re.compile(rf"\bbd\s+update\s+({_ISSUE_ID})\b[^\n&;|]*--status[= ](\w+)")
_GH_CLOSE_RE = re.compile(r"\bgh\s+issue\s+close\s+#?(\d+)")
_COMMIT_RE = re.compile(r"^\[[^\]\s]+(?: \(root-commit\))? ([0-9a-f]{7,40})\]", re.M)
_PUSH_RE = re.compile(r"\b[0-9a-f]{7,40}\.\.\.?([0-9a-f]{7,40})\s+\S+\s+->\s+\S+")
_CLOSED_STATES = {"closed", "done", "resolved", "completed"}
_SHOWN_ROW_RE = re.compile(r"^\s*(?:[↳↑→]\s*)?([○◐●✓✔])\s+([A-Za-z][\w-]*-[\w.]+)", re.M)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_text(block.get("content")))
    return "\n".join(parts)


def _command_heads(command: str) -> list[str]:
    """`program subcommand` of each non-trivial segment of a shell command line."""
    heads = []
    for segment in _SEGMENT_SPLIT_RE.split(command.split("<<")[0]):
        segment = segment.split("|")[0].strip()
        words = [w for w in segment.split() if "=" not in w or w.startswith("-")]
        if not words or words[0] in _TRIVIAL_PROGRAMS:
            continue
        program = words[0].rsplit("/", 1)[-1]
        second = next((w for w in words[1:3] if not w.startswith("-")), "")
        heads.append(f"{program} {second}".strip())
    return heads


@dataclass
class RangeEvents:
    """The last observed state of issues and commands in a range, and its commit hashes."""

    closed_issues: set[str] = field(default_factory=set)
    open_issues: set[str] = field(default_factory=set)  # touched in the range, not closed at its end
    fixed_commands: set[str] = field(default_factory=set)  # failed at some point, last run succeeded
    commit_hashes: list[str] = field(default_factory=list)


def range_events(messages: list[dict[str, Any]]) -> RangeEvents:
    """Walk tool calls in order with their results; the latest event of an item wins."""
    results: dict[str, tuple[bool, str]] = {}
    for m in messages:
        if isinstance(m.get("content"), list):
            for b in m["content"]:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    results[str(b.get("tool_use_id"))] = (bool(b.get("is_error")), _text(b.get("content")))
    issue_state: dict[str, bool] = {}  # id → closed
    command_state: dict[str, list[bool]] = {}  # head → [ever failed, last ok]
    hashes: list[str] = []
    for m in messages:
        if m.get("role") != "assistant" or not isinstance(m.get("content"), list):
            continue
        for b in m["content"]:
            if not isinstance(b, dict) or b.get("type") != "tool_use":
                continue
            command = (b.get("input") or {}).get("command")
            if not isinstance(command, str) or str(b.get("id")) not in results:
                continue
            is_error, output = results[str(b["id"])]
            if not is_error:
                for match in _BD_CLOSE_RE.finditer(command):
                    for issue in match.group(1).split():
                        issue_state[issue] = True
                for match in _GH_CLOSE_RE.finditer(command):
                    issue_state[f"#{match.group(1)}"] = True
                for issue, status in _BD_STATUS_RE.findall(command):
                    issue_state[issue] = status.lower() in _CLOSED_STATES
                # A tracker listing shows an issue's state as of then (bd reopens an epic when
                # children are added): the latest shown state of an issue already in play wins.
                for symbol, issue in _SHOWN_ROW_RE.findall(output):
                    if issue in issue_state:
                        issue_state[issue] = symbol in "✓✔"
                if "git commit" in command:
                    hashes += _COMMIT_RE.findall(output)
                if "git push" in command:
                    hashes += [h[:7] for h in _PUSH_RE.findall(output)]
            for head in _command_heads(command):
                state = command_state.setdefault(head, [False, True])
                state[0] = state[0] or is_error
                state[1] = not is_error
    return RangeEvents(
        closed_issues={i for i, closed in issue_state.items() if closed},
        open_issues={i for i, closed in issue_state.items() if not closed},
        fixed_commands={h for h, (failed, ok) in command_state.items() if failed and ok},
        commit_hashes=list(dict.fromkeys(h[:7] for h in hashes)),
    )


# --- what a summary reports as open -------------------------------------------------------

_OPEN_HEADING_RE = re.compile(
    r"\b(in progress|blocked|next|pending|open|remaining|todo|to do|current work|unresolved|outstanding|still)\b",
    re.I,
)
_HEADING_RE = re.compile(r"^\s*(#{1,6}\s+.*|\d+\.\s+[A-Z][^:]{2,60}:\s*$|\*\*[^*]{3,60}\*\*:?\s*$)")
_OPEN_LINE_RE = re.compile(
    r"\b(still (fails?|failing|open|broken)|not (yet )?(closed|fixed|passing|done)|fix what still fails|"
    r"remains? (open|blocked|failing)|in_progress|is blocked|blocked (by|on))\b",
    re.I,
)
_FAILURE_WORD_RE = re.compile(r"\b(fail\w*|error\w*|broken|fix\w*|red|blocked)\b", re.I)
_NEGATED_DONE_RE = re.compile(r"\bnot (yet )?(closed|done|completed|finished|committed|merged|fixed)\b", re.I)
_DONE_WORD_RE = re.compile(r"\b(closed|done|completed|finished|committed|merged|fixed|passing|passed)\b|✓|\[x\]", re.I)


_CODE_SPAN_RE = re.compile(r"`([^`\n]*)`")


def _without_commands(line: str) -> str:
    """The line with quoted commands (code spans holding a space) blanked out: they are a log."""
    return _CODE_SPAN_RE.sub(lambda m: " " if " " in m.group(1) else m.group(0), line)


_TAG_LINE_RE = re.compile(r"^\s*</?[a-z][\w-]*>\s*$")


def _open_lines(summary: str) -> list[str]:
    """Lines under an open / blocked / next heading, or that say on their own that something is open.
    The file lists (<read-files>, <modified-files>) and the summary's wrapping tags end a section."""
    lines, in_open = [], False
    for line in summary.splitlines():
        if _HEADING_RE.match(line) or _TAG_LINE_RE.match(line):
            in_open = bool(_OPEN_HEADING_RE.search(line)) and not _TAG_LINE_RE.match(line)
            continue
        if in_open or _OPEN_LINE_RE.search(_without_commands(line)):
            lines.append(line)
    return lines


def _short_id(issue: str) -> str:
    # bd ids are "<project>-<id>"; summaries often drop the project prefix ("gqc.1").
    return issue.split("-", 1)[1] if "-" in issue and not issue.startswith("#") else issue


def _first_issue(line: str, stems: set[str]) -> str | None:
    """The first issue of the tracked projects a line names, as its short id ("gqc.1")."""
    if not stems:
        return None
    alternatives = "|".join(re.escape(s) for s in sorted(stems, key=len, reverse=True))
    # Not inside a path or a longer name ("spotter-worktrees/spotter-gqc/lib" names no issue).
    pattern = rf"(?<![\w.#/-])(?:[\w]+-)?((?:{alternatives})(?:\.\d+)*)(?![\w/-]|\.\d)"
    match = re.search(pattern, line, re.I)
    return match.group(1).lower() if match else None


def _open_item_lines(summary: str, events: RangeEvents) -> list[tuple[str, str]]:
    """(item, line) for each resolved item a line reports as open: the first issue the line names
    (its subject; "gqc.7 blocked by gqc.5" is about gqc.7), or a fixed command on a line that
    speaks of its failure (re-running tests is a fair next step). Commands quoted on a line
    (code spans with a space) are a log, not a status; a line that says done does not count."""
    hits = []
    stems = {_short_id(i).split(".")[0] for i in events.closed_issues | events.open_issues}
    closed = {_short_id(i).lower(): i for i in events.closed_issues}
    for line in _open_lines(summary):
        prose = _without_commands(line)
        if _DONE_WORD_RE.search(_NEGATED_DONE_RE.sub(" ", prose)):
            continue
        subject = _first_issue(prose, stems)
        if subject in closed:
            hits.append((closed[subject], line))
        if _FAILURE_WORD_RE.search(prose):
            hits += [(head, line) for head in events.fixed_commands if head.lower() in line.lower()]
    return hits


def resolved_reported_open(summary: str, events: RangeEvents) -> list[str]:
    """Resolved items (closed issues, commands whose failure was later fixed) that the summary
    lists as open, blocked or a next step."""
    return sorted({item for item, _line in _open_item_lines(summary, events)})


def hashes_kept(summary: str, events: RangeEvents) -> tuple[int, int]:
    text = summary.lower()
    return sum(1 for h in events.commit_hashes if h.lower() in text), len(events.commit_hashes)


# --- one session --------------------------------------------------------------------------


@dataclass
class SummaryScore:
    recall: float | None
    prose_recall: float | None
    chars: int
    open_items: list[str]
    hashes: tuple[int, int]
    text: str = ""


@dataclass
class SessionEval:
    name: str
    range_messages: int
    ours: SummaryScore
    focus: SummaryScore
    claude: SummaryScore
    seconds: float
    fallbacks: list[Fallback]
    llm: SummaryScore | None = None  # --llm-replay: the real reply through our LLM path


def llm_replay(path: Path, history: list[dict[str, Any]]) -> tuple[str, str]:
    """(served summary, strategy) of our Anthropic summarizer answered with the real reply the
    model gave Claude Code for this session, over the history Claude Code summarized."""
    from compaction.core.summarizers import SummaryInput, build_chain, summarize
    from tests.fake_anthropic import FakeAnthropic, Step, recorded_compaction

    (call_path,) = sorted((path.parent / path.stem / "subagents").glob("agent-acompact-*.jsonl"))
    call = recorded_compaction(call_path)
    custom = "{conversation}\n\n" + call.prompt.replace("{", "{{").replace("}", "}}")
    with FakeAnthropic(default=Step.success(call.response)) as server:
        chain = build_chain(
            api_key="sk-ant-replay", base_url=server.base_url, model="claude-haiku-4-5", timeout=60, max_retries=0
        )
        result = summarize(SummaryInput(messages=as_msgs(history), custom_prompt=custom), chain)
    return served_text(result), result.strategy


def _as_api(messages: list[Any]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def score_summary(fidelity: ModuleType, scored: list[dict], events: RangeEvents, text: str) -> SummaryScore:
    return SummaryScore(
        recall=fidelity.score(scored, text)["recall"],
        prose_recall=fidelity.score(scored, fidelity.prose_only(text))["recall"],
        chars=len(text),
        open_items=resolved_reported_open(text, events),
        hashes=hashes_kept(text, events),
        text=text,
    )


def evaluate_session(path: Path, fidelity: ModuleType | None = None, *, replay: bool = False) -> SessionEval:
    started = time.perf_counter()
    fidelity = fidelity or load_fidelity()
    history, claude_summary = history_before_compaction(path)
    cut, ours = compact_once(history)
    _, focused = compact_once(history, instructions=FOCUS_HASHES)
    summarized = _as_api(cut.summarized)
    events = range_events(summarized)
    full_events = range_events(history)
    llm = None
    if replay:
        text, _strategy = llm_replay(path, history)
        llm = score_summary(fidelity, summarized, full_events, text)
    return SessionEval(
        llm=llm,
        name=path.name[:8],
        range_messages=len(summarized),
        ours=score_summary(fidelity, summarized, events, served_text(ours)),
        focus=score_summary(fidelity, summarized, events, served_text(focused)),
        claude=score_summary(fidelity, summarized, full_events, claude_summary),
        seconds=time.perf_counter() - started,
        fallbacks=ours.fallbacks,
    )


# --- what a handoff must hold --------------------------------------------------------------

FOCUS_OTHER = "focus on the failing checks and what is uncommitted"


def line_similarity(a: str, b: str) -> float:
    """How alike two summaries are, line by line (headings and blank lines left out)."""
    import difflib

    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.startswith(("#", "<", "</"))]

    return round(difflib.SequenceMatcher(None, lines(a), lines(b), autojunk=False).ratio(), 2)


@dataclass
class MergeCheck:
    commits: tuple[int, int]  # the first compaction's commits the merged summary names
    people: tuple[int, int]  # the person's messages of the first range it quotes (by their start)
    chars: int  # the merged summary's size


def merge_check(history: list[dict[str, Any]]) -> MergeCheck:
    """Two compactions: at the middle of the history, then at its end continuing the first's
    stored state. The second must keep the first's commits and the person's messages."""
    from compaction.core.work import from_json

    # The first compaction keeps little, so that its summary holds most of the work.
    first_cut, first = compact_once(history[: len(history) * 3 // 4], keep=4_000)
    state = from_json(first.work_state)
    rest = history[state.through :] if state else history
    start = (state.through if state else 0) + 1
    _cut, second = compact_once(rest, previous_state=state, previous_summary=first.summary, first_seq=start)
    text = served_text(second).lower()
    shas = [c.sha[:7] for c in state.git.commits if c.subject] if state else []
    said = [p.text[:40].lower() for p in state.people.messages if p.kind != "chatter"] if state else []
    return MergeCheck(
        (sum(1 for s in shas if s in text), len(shas)),
        (sum(1 for p in said if p in text), len(said)),
        len(served_text(second)),
    )


@dataclass
class HandoffCheck:
    name: str
    narration: int
    harness: int
    open_items: int
    focus_similarity: tuple[float, float]
    merge: MergeCheck
    chars: int
    served: int


def handoff_check(path: Path) -> HandoffCheck:
    history, _claude = history_before_compaction(path)
    cut, ours = compact_once(history)
    text = served_text(ours)
    _, hashes = compact_once(history, instructions=FOCUS_HASHES)
    _, failing = compact_once(history, instructions=FOCUS_OTHER)
    return HandoffCheck(
        name=path.name[:8],
        narration=len(narration_lines(text)),
        harness=len(harness_lines(text)),
        open_items=len(resolved_reported_open(text, range_events(history))),
        focus_similarity=(
            line_similarity(ours.summary, hashes.summary),
            line_similarity(ours.summary, failing.summary),
        ),
        merge=merge_check(history),
        chars=len(text),
        served=served_tokens(cut, ours, history),
    )


def handoff_table(checks: list[HandoffCheck]) -> list[str]:
    header = f"{'session':<9} {'narr':>4} {'harn':>4} {'open!':>5} {'focus sim':>9} {'merge commits/people':>20} {'chars':>6} {'merged':>6} {'served':>6}"
    rows = [header, "-" * len(header)]
    for c in checks:
        merge = f"{c.merge.commits[0]}/{c.merge.commits[1]} {c.merge.people[0]}/{c.merge.people[1]}"
        sim = f"{c.focus_similarity[0]:.2f} {c.focus_similarity[1]:.2f}"
        rows.append(
            f"{c.name:<9} {c.narration:>4} {c.harness:>4} {c.open_items:>5} {sim:>9} {merge:>20} {c.chars:>6,} "
            f"{c.merge.chars:>6,} {c.served:>6,}"
        )
    return rows


def _pct(kept: tuple[int, int]) -> str:
    return f"{100 * kept[0] // kept[1]}% {kept[0]}/{kept[1]}" if kept[1] else "-"


def table(evals: list[SessionEval]) -> list[str]:
    header = f"{'session':<9} {'summary':<12} {'recall':>6} {'prose':>6} {'chars':>7} {'open!':>5} {'hashes':>9}"
    rows = [header, "-" * len(header)]
    for ev in evals:
        scores = [("compactor", ev.ours), ("+focus hash", ev.focus), ("claude code", ev.claude)]
        if ev.llm is not None:
            scores.append(("cc reply+llm", ev.llm))
        for label, s in scores:
            rows.append(
                f"{ev.name:<9} {label:<12} {s.recall or 0:>6.2f} {s.prose_recall or 0:>6.2f} {s.chars:>7,} "
                f"{len(s.open_items):>5} {_pct(s.hashes):>9}"
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=Path, default=None, help="folder holding claude-code/")
    parser.add_argument("--show", action="store_true", help="print our served summaries too")
    parser.add_argument(
        "--llm-replay", action="store_true", help="also run the LLM path on Claude Code's real replies (local server)"
    )
    args = parser.parse_args()
    base = args.transcripts or TRANSCRIPTS
    fidelity = load_fidelity()
    started = time.perf_counter()
    evals = [
        evaluate_session(base / "claude-code" / f"{name}.jsonl", fidelity, replay=args.llm_replay) for name in SESSIONS
    ]
    for ev in evals:
        if args.show:
            print(f"=== {ev.name} served summary\n{ev.ours.text}\n")
        print(
            f"{ev.name}: {ev.range_messages} messages summarized in {ev.seconds:.1f} s; "
            f"fallbacks: {', '.join(f.strategy for f in ev.fallbacks) or 'none'}"
        )
        for label, s in (("compactor", ev.ours), ("claude code", ev.claude)):
            if s.open_items:
                print(f"  {label} reports resolved items as open: {', '.join(s.open_items)}")
    print(f"total {time.perf_counter() - started:.1f} s")
    print(
        "recall/prose: shared/tools/fidelity.py over Compactor's range; open!: resolved items "
        "reported open/blocked/next; hashes: commit hashes of the range kept"
    )
    print("\n".join(table(evals)))
    checks = [handoff_check(base / "claude-code" / f"{name}.jsonl") for name in SESSIONS]
    print(
        "\nnarr: lines with the agent's first-person words outside quotes; harn: injected harness text under "
        "Goal/Constraints/the person's messages; open!: items closed by the newest message reported open; focus "
        "sim: line similarity to the default summary (commit hashes / failing checks); merge: the first of two "
        "compactions' commits and person messages the merged summary keeps; chars: served summary (and merged); "
        "served: tokens served after the compaction (summary + kept, old output trimmed)"
    )
    print("\n".join(handoff_table(checks)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
