"""Claims audit: cut stored transcripts, compact each cut as the service does, write a folder a
reader who has not seen the code can audit; then tally what the readers wrote.

    .venv/bin/python bench/claims_audit.py build --out DIR [--transcripts DIR] [--cuts 4]
        [--only NAME,...] [--min-tokens 12000] [--budget 250000]
    .venv/bin/python bench/claims_audit.py tally DIR [DIR ...]

build: every transcript in --transcripts (default $COMPACTOR_TRANSCRIPTS_DIR, else the shared
transcripts beside the project: Claude Code, pi, SWE-agent) is cut at --cuts points spread over
its history. A cut ends after a whole reply: after an assistant message that the transcript does
not continue (its last block is the last of that reply) or after the tool results that answer
every call before them; never inside a tool pair. The agent's own compactions in the file
(Claude Code's compact boundary and summary lines, pi's `compaction` lines) are left out of every
cut: the summary audited is the service's alone. Each cut is written as a file of the
transcript's own format (the lines up to the cut; a .traj's `history` up to the cut), imported
through compaction.importing.transcript_import as `manage.py import_transcript` does, compacted
by a manual compaction request with default settings run as the worker runs it, and the served
context read back through sessions.selectors.context_build. One folder per cut:

- transcript.md — the transcript up to the cut, message by message (#N, the numbers the summary
  uses), long tool outputs and inputs cut to head and tail with a note of what was left out
  (lines that name something the summary names are kept from the middle);
- summary.md — the summary message as served; kept.md — the messages served after it;
- map.tsv — message number → role → lines of the source transcript it came from;
- BRIEF.md — the reader's task: classify every factual claim of the summary TRUE / FALSE /
  STALE / UNSUPPORTED / MISLEADING with its evidence message, list what is missing, and write
  audit.md in a fixed table format (read by `tally`).

Where the files are written, what transcript they came from and which system made the summary
stay out of the folders (an index.tsv beside them, in --out).

tally: reads DIR/**/audit.md and prints a table per cut and the total: claims, each kind of
verdict that is not TRUE, the share not true, and items missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

VERDICTS = ("TRUE", "FALSE", "STALE", "UNSUPPORTED", "MISLEADING")
NOT_TRUE = VERDICTS[1:]
FORMATS = (".jsonl", ".traj")
FOLDER_BUDGET = 250_000  # characters a reader reads, all files together
SUMMARY_TOKEN_RE = re.compile(r"[A-Za-z0-9_./:-]{6,}|\b[0-9a-f]{7,40}\b")


# --- where the transcripts are -----------------------------------------------------------------


def transcripts_dir() -> Path | None:
    """$COMPACTOR_TRANSCRIPTS_DIR, else shared/data/transcripts beside the project (None: absent)."""
    if os.environ.get("COMPACTOR_TRANSCRIPTS_DIR"):
        return Path(os.environ["COMPACTOR_TRANSCRIPTS_DIR"])
    candidate = ROOT.parent / "shared/data/transcripts"
    return candidate if candidate.is_dir() else None


def transcript_files(folder: Path) -> list[Path]:
    """Main transcripts (a Claude Code session's subagent logs are its children, not cuts)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in FORMATS and "subagents" not in p.parts)


# --- the source as units (lines, or a .traj's history items) ----------------------------------


@dataclass
class Source:
    """A transcript file as units a cut keeps a prefix of: JSONL lines (the agent's own compaction
    lines left out), or the items of a .traj's `history`."""

    path: Path
    kind: str  # "jsonl" | "traj"
    units: list[str]  # each unit's text as it appears in the file (a line, or an item's JSON)
    numbers: list[int]  # each unit's number in the file: 1-based line, or 0-based history index
    document: dict[str, Any] | None = None  # the .traj document (its history replaced per cut)
    dropped: int = 0  # the agent's own compaction lines left out

    @property
    def unit_name(self) -> str:
        return "line" if self.kind == "jsonl" else "history item"

    def prefix_text(self, end: int) -> str:
        """The file of the cut: units [0, end)."""
        if self.kind == "jsonl":
            return "".join(u if u.endswith("\n") else u + "\n" for u in self.units[:end])
        assert self.document is not None
        doc = dict(self.document)
        doc["history"] = [json.loads(u) for u in self.units[:end]]
        # The run's last step (what it submitted) belongs to the end of the whole run only.
        if end < len(self.units):
            doc.pop("trajectory", None)
            doc.pop("info", None)
        return json.dumps(doc, ensure_ascii=False)


def _agent_compaction_line(entry: Any) -> bool:
    """A line holding the agent's own compaction (Claude Code's boundary or summary, pi's)."""
    if not isinstance(entry, dict):
        return False
    if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
        return True
    if entry.get("isCompactSummary"):
        return True
    return entry.get("type") == "compaction"


def load_source(path: Path) -> Source:
    if path.suffix == ".traj":
        document = json.loads(path.read_text(encoding="utf-8"))
        history = document.get("history") or []
        units = [json.dumps(item, ensure_ascii=False) for item in history]
        return Source(path, "traj", units, list(range(len(units))), document=document)
    units, numbers, dropped = [], [], 0
    with open(path, encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if _agent_compaction_line(entry):
                dropped += 1
                continue
            units.append(line)
            numbers.append(number)
    return Source(path, "jsonl", units, numbers, dropped=dropped)


def read_messages(text: str, suffix: str) -> list[dict[str, Any]]:
    """The messages the service stores for a transcript file's text (the import's reader and its
    rule for what is stored)."""
    from compaction.core.transcripts.detect import read_transcript
    from compaction.services import transcript_messages_for_api

    with tempfile.TemporaryDirectory(prefix="claims-audit-") as folder:
        file = Path(folder) / f"cut{suffix}"
        file.write_text(text, encoding="utf-8")
        return transcript_messages_for_api(read_transcript(file).messages)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


# --- message → source units ------------------------------------------------------------------


def _needles(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, string) pairs of a message that appear verbatim in the unit(s) it was read from:
    tool ids ("use" / "result"), and the start of each text ("text"; JSON-escaped, as the file
    holds it)."""
    out: list[tuple[str, str]] = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "tool_use" and block.get("id"):
            out.append(("use", str(block["id"])))
        elif kind == "tool_result":
            if block.get("tool_use_id"):
                out.append(("result", str(block["tool_use_id"])))
            text = _result_text(block.get("content")).strip()
            if text:
                out.append(("text", json.dumps(text[:40], ensure_ascii=False)[1:-1]))
        elif kind in ("text", "thinking"):
            text = str(block.get(kind) or "").strip()
            if text:
                out.append(("text", json.dumps(text[:40], ensure_ascii=False)[1:-1]))
    return out


def map_messages(messages: list[dict[str, Any]], units: list[str]) -> list[tuple[int, int] | None]:
    """Per message, the first and last unit index it was read from (None where none is found).
    The search moves forward through the file: a message starts at or after the previous start,
    a tool result after the unit of its call."""
    spans: list[tuple[int, int] | None] = []
    calls: dict[str, int] = {}
    start = 0
    for message in messages:
        found: list[int] = []
        for kind, needle in _needles(message):
            first = max(start, calls[needle] + 1) if kind == "result" and needle in calls else start
            for index in range(first, len(units)):
                if needle in units[index]:
                    found.append(index)
                    if kind == "use":
                        calls[needle] = index
                    break
        if found:
            spans.append((min(found), max(found)))
            start = min(found)
        else:
            spans.append(None)
    return spans


# --- where a cut may fall --------------------------------------------------------------------


def reply_ends(messages: list[dict[str, Any]]) -> list[int]:
    """Prefix lengths k that end after a whole reply: messages[k-1] is an assistant message with
    no tool call, or a user message of tool results that answers every call still open; and the
    next message (if any) does not continue it (a reply written over several messages)."""
    ends: list[int] = []
    open_calls: set[str] = set()
    for k, message in enumerate(messages, start=1):
        blocks = _blocks(message)
        uses = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
        results = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
        open_calls = (open_calls | uses) - results
        if open_calls:
            continue
        following = messages[k] if k < len(messages) else None
        if message.get("role") == "assistant" and not uses:
            if following is not None and following.get("role") == "assistant":
                continue
            ends.append(k)
        elif message.get("role") == "user" and results and len(results) == len(blocks):
            ends.append(k)
    return ends


def spread(candidates: list[int], sums: list[int], cuts: int) -> list[int]:
    """Up to `cuts` candidates (ascending prefix lengths) spread evenly over the history's tokens
    (`sums[k]`: tokens of the first k messages): the last candidate at or before each of 1/cuts,
    2/cuts, …, the whole; the last candidate always."""
    if not candidates or cuts <= 0:
        return []
    total = sums[candidates[-1]]
    picks = set()
    for i in range(1, cuts + 1):
        target = total * i / cuts
        below = [k for k in candidates if sums[k] <= target]
        picks.add(below[-1] if below else candidates[0])
    return sorted(picks)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("role") == b.get("role") and a.get("content") == b.get("content")


@dataclass
class Cut:
    end_message: int  # messages kept: [0, end_message)
    end_unit: int  # units kept: [0, end_unit)
    spans: list[tuple[int, int] | None]


def plan_cuts(
    source: Source, messages: list[dict[str, Any]], *, cuts: int, min_tokens: int, verify: bool = True
) -> list[Cut]:
    """Cuts spread over the reply ends whose prefix holds more than `min_tokens`; each one's file
    (the units up to the last unit of its last message) read again gives exactly the prefix of
    messages, or the next candidate before it is tried."""
    from compaction.core.tokens import count_content

    spans = map_messages(messages, source.units)
    sums, total = [0], 0
    for message in messages:
        total += count_content(message["content"])
        sums.append(total)
    candidates = [k for k in reply_ends(messages) if sums[k] > min_tokens and spans[k - 1] is not None]
    out: list[Cut] = []
    for wanted in spread(candidates, sums, cuts):
        for k in reversed([c for c in candidates if c <= wanted]):
            if any(c.end_message == k for c in out):
                break
            span = spans[k - 1]
            assert span is not None
            end_unit = span[1] + 1
            if k < len(messages) and spans[k] is not None and spans[k][0] < end_unit:  # type: ignore[index]
                continue  # the next message shares the unit: not a whole-reply cut in this file
            if verify:
                got = read_messages(source.prefix_text(end_unit), source.path.suffix)
                if len(got) != k or not all(_same(x, y) for x, y in zip(got, messages[:k], strict=True)):
                    print(
                        f"{source.path.name}: the file cut after message {k} reads as {len(got)} messages; tried the one before"
                    )
                    continue
            out.append(Cut(k, end_unit, spans[:k]))
            break
    return sorted(out, key=lambda c: c.end_message)


# --- rendering -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trim:
    head: int  # lines kept at the start of a long tool input or output
    tail: int  # and at its end
    chars: int  # a tool text longer than this is cut too
    words: int = 12_000  # the agent's own text beyond this is cut (the person's never below 12,000)
    middle: int = 12  # lines kept from a cut middle because they name something the summary names


LEVELS = (
    Trim(40, 40, 6000),
    Trim(20, 20, 3000),
    Trim(10, 10, 1500, 6000),
    Trim(5, 5, 800, 3000, 8),
    Trim(3, 3, 400, 2000, 6),
    Trim(2, 2, 250, 1200, 4),
    Trim(1, 1, 160, 800, 3),
)


def summary_terms(summary: str) -> set[str]:
    """Distinctive strings the summary names (paths, hashes, identifiers, numbers)."""
    return {t.strip(".:,") for t in SUMMARY_TOKEN_RE.findall(summary) if len(t.strip(".:,")) >= 6}


PIECE_SPLIT_RE = re.compile(r'(?<=[.;:!?])\s+|\n|…|\.\.\.|["`“”]|\s\(#\d+|\s—\s')


def summary_quotes(summary: str) -> tuple[str, ...]:
    """The starts (30 characters) of the summary's sentences and quoted pieces, each piece of a
    quote it cut with "…": a line of the transcript that holds one is what a claim was copied
    from, the evidence it rests on, and is kept whole."""
    pieces = []
    for piece in PIECE_SPLIT_RE.split(summary):
        piece = re.sub(r"^[\s#*>-]+|^\d+[.)]\s+", "", piece or "").strip()
        if len(piece) >= 30:
            pieces.append(piece[:30])
    return tuple(dict.fromkeys(pieces))


class Evidence(NamedTuple):
    """What of a long text must be shown: lines naming the summary's terms (up to a level's
    budget) and lines holding what it quotes (always, whole)."""

    terms: set[str]
    quotes: tuple[str, ...] = ()


def cut_text(text: str, trim: Trim, evidence: set[str] | Evidence) -> str:
    """`text` whole when short; else its head and tail lines, the middle lines that hold what the
    summary quotes (whole, however many), those that name one of its terms (at most
    `trim.middle`), and a note of what was left out."""
    terms, quotes = (evidence.terms, evidence.quotes) if isinstance(evidence, Evidence) else (evidence, ())
    lines = text.split("\n")
    if len(text) <= trim.chars and len(lines) <= trim.head + trim.tail + 5:
        return text
    width = max(80, trim.chars // max(1, trim.head + trim.tail))
    quoted = {n for n, value in enumerate(lines) if quotes and any(q in value for q in quotes)}

    def line(number: int) -> str:
        value = lines[number]
        if number in quoted or len(value) <= width * 2:
            return value
        return value[:width] + f" […{len(value) - width:,} chars cut]"

    if len(lines) <= trim.head + trim.tail + 5:
        return _cut_chars(text, trim.chars // 2, quotes)
    head, tail = range(trim.head), range(len(lines) - trim.tail, len(lines))
    named = [n for n in range(trim.head, len(lines) - trim.tail) if terms and any(term in lines[n] for term in terms)]
    middle = sorted({n for n in quoted if trim.head <= n < len(lines) - trim.tail} | set(named[: trim.middle]))
    out = [line(n) for n in head]
    previous = trim.head - 1
    for n in middle:
        if n == previous + 2:
            out.append(line(previous + 1))
        elif n > previous + 1:
            out.append(f"[… lines {previous + 2}–{n} of {len(lines)} cut …]")
        out.append(f"{line(n)}")
        previous = n
    first_tail = len(lines) - trim.tail
    if first_tail == previous + 2:
        out.append(line(previous + 1))
    elif first_tail > previous + 1:
        out.append(f"[… lines {previous + 2}–{first_tail} of {len(lines)} cut …]")
    out.extend(line(n) for n in tail)
    return "\n".join(out)


def _cut_chars(text: str, half: int, quotes: tuple[str, ...]) -> str:
    """A text of few long lines cut by characters: its start and end, and around each quoted
    piece found in the middle (up to five) the characters before and after it."""
    keep = [(0, half), (len(text) - half, len(text))]
    for quote in quotes:
        at = text.find(quote, half, len(text) - half)
        if at >= 0 and len(keep) < 7:
            keep.append((max(0, at - 200), min(len(text), at + 600)))
    keep.sort()
    merged: list[list[int]] = []
    for a, b in keep:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out = []
    for i, (a, b) in enumerate(merged):
        if i:
            out.append(f"\n[… {a - merged[i - 1][1]:,} characters cut …]\n")
        out.append(text[a:b])
    return "".join(out)


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{block.get('type')} block]")
    return "\n".join(parts)


def render_message(
    seq: int | None, message: dict[str, Any], trim: Trim, terms: set[str] | Evidence, names: dict[str, str]
) -> str:
    """One message as the reader sees it: `#N [User]`, `#N [Assistant]`, `#N [Tool call: name]`,
    `#N [Tool result: name]` (of the call with that name; `error` when the result says it is one)."""
    role = message.get("role", "?")
    head = f"#{seq}" if seq is not None else "(summary)"
    out = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            label = "Assistant" if role == "assistant" else "User"
            # Words (the person's, the agent's) are kept whole up to a generous bound; the
            # person's never below 12,000 characters.
            text = str(block.get("text", ""))
            bound = trim.words if role == "assistant" else max(trim.words, 12_000)
            # The person's message is cut by characters only: a long request of short lines
            # (a command's expansion, a pasted list) is shown whole up to its bound, so a
            # count the summary gives of it ("N more characters") can be checked.
            lines = max(trim.head, bound // 200) if role == "assistant" else bound
            words = Trim(lines, lines, bound, bound, trim.middle)
            out.append(f"{head} [{label}]:\n{cut_text(text, words, terms)}")
        elif kind == "thinking":
            out.append(f"{head} [Assistant thinking]:\n{cut_text(str(block.get('thinking', '')), trim, terms)}")
        elif kind == "tool_use":
            names[str(block.get("id"))] = str(block.get("name"))
            raw = json.dumps(block.get("input", {}), ensure_ascii=False, indent=1)
            out.append(f"{head} [Tool call: {block.get('name')}]:\n{cut_text(raw, trim, terms)}")
        elif kind == "tool_result":
            name = names.get(str(block.get("tool_use_id")), "?")
            status = ", error" if block.get("is_error") else ""
            text = _result_text(block.get("content"))
            out.append(f"{head} [Tool result: {name}{status}]:\n{cut_text(text, trim, terms)}")
        else:
            out.append(f"{head} [{kind} block]")
    return "\n\n".join(out)


def render_messages(pairs: list[tuple[int | None, dict[str, Any]]], trim: Trim, terms: set[str] | Evidence) -> str:
    names: dict[str, str] = {}
    return "\n\n---\n\n".join(render_message(seq, m, trim, terms, names) for seq, m in pairs) + "\n"


def render_fitting(
    pairs: list[tuple[int | None, dict[str, Any]]], terms: set[str] | Evidence, budget: int
) -> tuple[str, Trim]:
    """The transcript at the first trim level that fits `budget` characters (else the tightest)."""
    text, trim = "", LEVELS[-1]
    for trim in LEVELS:
        text = render_messages(pairs, trim, terms)
        if len(text.encode()) <= budget:
            break
    return text, trim


# --- compacting a cut through the service ----------------------------------------------------


@dataclass
class Served:
    seqs: list[int]  # stored seq of each message of the cut, in order
    summary: str
    kept: list[tuple[int, dict[str, Any]]]
    detail: str
    status: str
    first_kept_seq: int | None
    keep: int | None = None  # the keep budget set for a small history (None: the default)


def compact_cut(text: str, suffix: str, owner: Any, name: str, *, small_keep: float = 0.0) -> Served:
    """Import the cut's file as a new session, compact it (manual, default settings) as the worker
    does, and read the served context back. A history the default keep budget holds whole has
    nothing to compact: with `small_keep` it is compacted again keeping that share of its tokens
    (the only setting changed; `Served.keep` says so)."""
    from compaction import services
    from compaction.importing import transcript_import
    from compaction.models import Compaction, Reason
    from sessions.models import Message
    from sessions.selectors import context_build

    with tempfile.TemporaryDirectory(prefix="claims-audit-") as folder:
        file = Path(folder) / f"{name}{suffix}"
        file.write_text(text, encoding="utf-8")
        report = transcript_import(owner=owner, path=file, subagents=False)
    session = report.session

    def run(overrides: dict[str, Any] | None) -> Compaction:
        job = services.compaction_request(session=session, reason=Reason.MANUAL, overrides=overrides)
        job = Compaction.objects.get(pk=job.pk)
        if job.status == "queued":  # not run eagerly: run it as the worker would
            services.compaction_run_unless_replaying(compaction_id=job.pk)
            job = Compaction.objects.get(pk=job.pk)
        return job

    job, keep = run(None), None
    if job.status == "skipped" and small_keep:
        session.refresh_from_db()
        keep = int(small_keep * session_tokens(session))
        job = run({"keep_recent_tokens": keep})
    session.refresh_from_db()
    view = context_build(session=session)
    summary = ""
    kept: list[tuple[int, dict[str, Any]]] = []
    for seq, message in zip(view.seqs, view.messages, strict=True):
        if seq is None:
            summary = message["content"] if isinstance(message["content"], str) else _result_text(message["content"])
        else:
            kept.append((seq, message))
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    return Served(seqs, summary, kept, job.detail or job.error or "", job.status, job.first_kept_seq, keep)


def session_tokens(session: Any) -> int:
    from sessions.models import Message

    return sum(Message.objects.filter(session=session).values_list("token_count", flat=True))


# --- the folder ------------------------------------------------------------------------------

BRIEF = """\
# Your task: audit a handoff summary against the transcript it summarizes

An AI coding agent worked in a session recorded in `transcript.md`. At the end of that
transcript its context was compacted: the older messages were replaced by the summary in
`summary.md`, and the messages in `kept.md` were kept verbatim after it. An agent resuming the
work would read only `summary.md` then `kept.md`. Your job is to check whether what the summary
states is true, as of the end of the transcript, and what it leaves out that the resuming agent
would need.

## What to read
- `transcript.md` — every message up to the cut, numbered `#N` (the same numbers the summary
  uses). `[Tool call: X]` is the agent calling tool X; `[Tool result: X]` is what that call
  returned (`, error` when the result was flagged as an error). Long tool outputs and inputs are shortened to their head and tail; a note
  `[… lines a–b of c cut …]` says what was left out. Treat a shortened part as unknown to you,
  not as evidence either way.
- `summary.md` — the summary, exactly as it is given to the agent.
- `kept.md` — the messages given verbatim after the summary (they are also the last messages of
  `transcript.md`; the numbers match).
- `map.tsv` — where each message number came from in the original log (only if you need it).

## What to do
1. Split the summary into its factual claims: every statement about what was asked, done,
   decided, run, passed, failed, committed, changed, found, blocked or left to do; every
   number, hash, path, command and status it gives. One claim per row; a line that states two
   things is two claims. Instructions to the reader and headings are not claims.
2. Classify each claim, as of the end of the transcript:
   - **TRUE** — the transcript shows it (cite the message that does).
   - **FALSE** — the transcript contradicts it.
   - **STALE** — it was true at some point but a later message changed it (a check that passed
     before later edits; a file changed after it was reported committed; an error later fixed).
   - **UNSUPPORTED** — nothing in the transcript shows it (it may be a guess or an inference).
   - **MISLEADING** — literally defensible, but a resuming agent would draw a wrong conclusion
     (e.g. "passed" for a run whose output was hidden by a pipe, a finding called a success,
     a superseded failure presented as open, the wrong thing named as the next step).
3. List what an agent resuming the work would need and does not find in the summary or in
   `kept.md` (the current task's remaining items, the blocker and what was tried, the latest
   request, an open question, a status it would otherwise get wrong).

## What to write
Write exactly one file, `audit.md`, in this folder, in this format (the tables are read by a
program: keep the header rows and the columns exactly; no `|` inside a cell):

```
# Audit

## Claims

| # | claim | verdict | evidence | note |
|---|---|---|---|---|
| 1 | <the claim, quoted or closely paraphrased> | TRUE | #12 | <why, briefly> |
| 2 | ... | STALE | #40, #57 | <what changed it> |

## Missing

| # | what is missing | evidence | why the resuming agent needs it |
|---|---|---|---|
| 1 | ... | #88 | ... |

## Verdict
<two or three sentences: how far an agent could trust this summary, and its worst error>
```

The verdict column holds exactly one of TRUE, FALSE, STALE, UNSUPPORTED, MISLEADING. The
evidence column holds message numbers (`#N`), or `-` when there is none. Judge only from these
files; do not guess what a program would have done.
"""


def write_folder(
    folder: Path,
    *,
    source: Source,
    messages: list[dict[str, Any]],
    cut: Cut,
    served: Served,
    budget: int = FOLDER_BUDGET,
) -> dict[str, Any]:
    """The cut's audit folder; returns its figures (for the index)."""
    folder.mkdir(parents=True, exist_ok=True)
    seqs = served.seqs
    pairs: list[tuple[int | None, dict[str, Any]]] = list(zip(seqs, messages[: cut.end_message], strict=False))
    terms = Evidence(summary_terms(served.summary), summary_quotes(served.summary))
    (folder / "BRIEF.md").write_text(BRIEF, encoding="utf-8")
    (folder / "summary.md").write_text(served.summary.rstrip() + "\n", encoding="utf-8")
    kept_pairs: list[tuple[int | None, dict[str, Any]]] = list(served.kept)
    kept_text = render_fitting(kept_pairs, terms, budget // 4)[0] if kept_pairs else "(no messages kept)\n"
    (folder / "kept.md").write_text(kept_text, encoding="utf-8")
    rows = ["message\trole\t" + source.unit_name + "s"]
    for seq, message, span in zip(seqs, messages, cut.spans, strict=False):
        where = "?" if span is None else _unit_range(source, span)
        rows.append(f"#{seq}\t{message.get('role')}\t{where}")
    map_text = "\n".join(rows) + "\n"
    (folder / "map.tsv").write_text(map_text, encoding="utf-8")
    left = budget - len(BRIEF) - len(served.summary) - len(kept_text) - len(map_text)
    transcript, trim = render_fitting(pairs, terms, max(20_000, left))
    (folder / "transcript.md").write_text(transcript, encoding="utf-8")
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return {
        "messages": len(pairs),
        "kept": len(served.kept),
        "summary_chars": len(served.summary),
        "kept_chars": sum(len(json.dumps(m["content"], ensure_ascii=False)) for _, m in served.kept),
        "trim_lines": trim.head,
        "folder_bytes": size,
    }


def _unit_range(source: Source, span: tuple[int, int]) -> str:
    first, last = source.numbers[span[0]], source.numbers[span[1]]
    return f"{first}" if first == last else f"{first}-{last}"


def audit_transcript(
    path: Path,
    *,
    root: Path,
    out: Path,
    owner: Any,
    cuts: int,
    min_tokens: int,
    small_keep: float,
    first_number: int = 1,
) -> list[dict[str, Any]]:
    """The audit folders of one transcript's cuts (`out/cut-NN`, numbered from `first_number`);
    returns their index rows (which transcript, where cut: kept out of the folders)."""
    source = load_source(path)
    try:
        messages = read_messages(source.prefix_text(len(source.units)), path.suffix)
    except Exception as error:  # noqa: BLE001 - a file no importer reads is reported and skipped
        print(f"{path.name}: skipped ({error})"[:160])
        return []
    planned = plan_cuts(source, messages, cuts=cuts, min_tokens=min_tokens)
    if not planned:
        print(f"{path.name}: no cut (history under {min_tokens:,} tokens or no whole-reply end)")
        return []
    rows: list[dict[str, Any]] = []
    for cut in planned:
        name = f"cut-{first_number + len(rows):02d}"
        served = compact_cut(source.prefix_text(cut.end_unit), path.suffix, owner, name, small_keep=small_keep)
        if not served.summary:
            print(f"{path.name} @{cut.end_message}: no summary ({served.status}: {served.detail})"[:200])
            continue
        figures = write_folder(out / name, source=source, messages=messages, cut=cut, served=served)
        rows.append(
            {
                "folder": name,
                "transcript": str(path.relative_to(root)),
                "cut_messages": cut.end_message,
                "of_messages": len(messages),
                "cut_after_source": f"{source.unit_name} {source.numbers[cut.end_unit - 1]}",
                "first_kept_seq": served.first_kept_seq,
                "keep": served.keep or "default",
                **figures,
            }
        )
        print(
            f"{name}  {path.name[:40]:40} cut after #{served.seqs[-1]} of {len(messages)}; summary "
            f"{figures['summary_chars']:,} chars, {figures['kept']} kept; folder {figures['folder_bytes']:,} B",
            flush=True,
        )
    return rows


def build(args: argparse.Namespace) -> int:
    from _django import bench_database, django_setup

    django_setup(prefix="compactor-claims-audit-")
    with bench_database(celery_eager=True):
        from django.contrib.auth import get_user_model

        owner, _ = get_user_model().objects.get_or_create(username="claims-audit")
        out: Path = args.out
        out.mkdir(parents=True, exist_ok=True)
        rows: list[dict[str, Any]] = []
        only = {n for n in (args.only or "").split(",") if n}
        for path in transcript_files(args.transcripts):
            if only and not any(n in path.name for n in only):
                continue
            rows += audit_transcript(
                path,
                root=args.transcripts,
                out=out,
                owner=owner,
                cuts=args.cuts,
                min_tokens=args.min_tokens,
                small_keep=args.small_keep,
                first_number=len(rows) + 1,
            )
        if rows:
            keys = list(rows[0])
            lines = ["\t".join(keys)] + ["\t".join(str(r[k]) for k in keys) for r in rows]
            (out / "index.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        transcripts = len({r["transcript"] for r in rows})
        print(
            f"{len(rows)} audit folders of {transcripts} transcripts in {out} "
            "(index.tsv beside them says which is which: keep it out of the readers' view)"
        )
    return 0


# --- tally -----------------------------------------------------------------------------------


@dataclass
class Audit:
    name: str
    verdicts: Counter[str] = field(default_factory=Counter)
    missing: int = 0
    bad_rows: int = 0

    @property
    def claims(self) -> int:
        return sum(self.verdicts.values())

    @property
    def not_true(self) -> int:
        return sum(self.verdicts[v] for v in NOT_TRUE)


def _cells(line: str) -> list[str] | None:
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def parse_audit(text: str, name: str = "") -> Audit:
    """The verdicts of an audit.md's Claims table and the rows of its Missing table. A claims row
    whose verdict is not one of VERDICTS is counted as a bad row (and reported), never guessed."""
    audit = Audit(name)
    section = ""
    for line in text.splitlines():
        heading = re.match(r"^#{1,6}\s*(.+?)\s*$", line)
        if heading:
            section = heading.group(1).strip().lower()
            continue
        cells = _cells(line)
        if not cells or not cells[0] or not re.fullmatch(r"\d+", cells[0]):
            continue  # header, separator, or not a table row
        if section.startswith("claims"):
            verdict = cells[2].strip("* `").upper() if len(cells) > 2 else ""
            if verdict in VERDICTS:
                audit.verdicts[verdict] += 1
            else:
                audit.bad_rows += 1
        elif section.startswith("missing"):
            audit.missing += 1
    return audit


def find_audits(folders: list[Path]) -> list[tuple[Path, Audit]]:
    found = []
    for folder in folders:
        files = [folder] if folder.is_file() else sorted(folder.rglob("audit.md"))
        for file in files:
            found.append((file, parse_audit(file.read_text(encoding="utf-8"), file.parent.name)))
    return found


def tally_table(audits: list[Audit]) -> str:
    head = (
        f"{'cut':24} {'claims':>6} "
        + " ".join(f"{v:>11}" for v in NOT_TRUE)
        + f" {'not true':>9} {'%':>6} {'missing':>7}"
    )
    rows = [head]
    total = Audit("total")
    for audit in audits:
        rows.append(_row(audit))
        total.verdicts.update(audit.verdicts)
        total.missing += audit.missing
        total.bad_rows += audit.bad_rows
    rows.append(_row(total))
    if total.bad_rows:
        rows.append(f"{total.bad_rows} claim rows had no verdict among {', '.join(VERDICTS)} (not counted)")
    return "\n".join(rows)


def _row(audit: Audit) -> str:
    share = f"{100 * audit.not_true / audit.claims:.1f}" if audit.claims else "-"
    return (
        f"{audit.name[:24]:24} {audit.claims:>6} "
        + " ".join(f"{audit.verdicts[v]:>11}" for v in NOT_TRUE)
        + f" {audit.not_true:>9} {share:>6} {audit.missing:>7}"
    )


def tally(args: argparse.Namespace) -> int:
    found = find_audits(args.folders)
    if not found:
        print("no audit.md found under " + ", ".join(map(str, args.folders)))
        return 1
    print(tally_table([audit for _, audit in found]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="cut, compact and write the audit folders")
    default_dir = transcripts_dir()
    b.add_argument("--transcripts", type=Path, default=default_dir, required=default_dir is None)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--cuts", type=int, default=4, help="cuts per transcript")
    b.add_argument("--only", default="", help="comma-separated parts of file names to cut")
    b.add_argument("--min-tokens", type=int, default=1_500, help="smallest prefix cut (tokens)")
    b.add_argument(
        "--small-keep",
        type=float,
        default=0.3,
        help="a cut the default keep budget holds whole is compacted keeping this share of its tokens (0: skipped)",
    )
    t = sub.add_parser("tally", help="tally the readers' audit.md files")
    t.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args(argv)
    return build(args) if args.command == "build" else tally(args)


if __name__ == "__main__":
    raise SystemExit(main())
