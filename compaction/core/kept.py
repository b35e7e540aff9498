"""The kept part, served lean: how the messages kept after a summary are served.

After a compaction the provider is sent the summary and the kept (recent) messages. Stored as
they are, those messages repeat themselves — the same failing hook output after every commit
attempt, a file read twice around its edit, a search listing a hundred `node_modules` paths —
and their size is what the agent pays on every call until the next compaction. So tool results
in the kept part are served trimmed, by these rules, in this order (the first that applies):

1. `same` — an output repeated verbatim is kept once; every other copy is served as a pointer,
   "[same output as message #231 …]" (the stored seq: the recall tools read it back);
2. `superseded` — a file's content that a later call of the kept part read again (whole, or the
   same range) or changed is served as its first and last lines around a note naming the file,
   the later message and the message that holds it whole;
3. `long` — a search or listing output longer than LONG_LINES lines or LONG_TOKENS tokens is
   served as its first and last lines with a pointer to the full message;
4. `large` — an output over LARGE_TOKENS, and in the newest turn its largest outputs while they
   add up to more than LARGE_TOKENS, and
5. `old` — outside the newest `protect_tokens` of tool output, an output large enough to
   prune, are trimmed as `compaction.core.prune.trimmed` trims them (first and last lines, the
   error lines between, the message that holds it all).

What is never trimmed: the newest turn (the last assistant message that called tools, the
results answering it and everything after) but for its outputs beyond LARGE_TOKENS (they would
take most of what a compaction serves, and the recall tools read them back), the tool_use
blocks (a tool pair stays whole: only the result's text shrinks), the person's words and every
other text, outputs of protected tools (`skill`), outputs that are not plain text (images), and
a result whose trimmed form would not be smaller.

Nothing stored changes: `plan_kept` decides, at compaction time, which blocks are served how,
and the compaction stores that decision (`KeptPlan.as_json`). `kept_content` applies it to the
stored content on every request — a pure function of the stored message and its edits, so the
served prefix stays byte-identical from call to call until the next compaction; messages
appended after the compaction are served verbatim and no later message changes an earlier one's
edits (the plan never looks past the snapshot it was made from).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .blocks import TOOL_RESULT, TOOL_USE
from .fileops import call_file_ops
from .prune import DEFAULT_PROTECTED_TOOLS, MIN_ERROR_PRUNE_TOKENS, MIN_PRUNE_TOKENS, output_text, trimmed
from .tokens import MESSAGE_OVERHEAD, TOOL_RESULT_OVERHEAD, Tokenizer, count_block, count_tool_result_content
from .tool_vocabulary import EDITOR_TOOLS, READ_TOOLS, SEARCH_TOOLS, SHELL_TOOLS, shell_text, tool_input, tool_key
from .types import Content, Msg
from .vocabulary import FILE_PRINTERS, GIT_LISTING_RE, LISTERS

SAME, SUPERSEDED, LONG, LARGE, OLD = "same", "superseded", "long", "large", "old"
KINDS = (SAME, SUPERSEDED, LONG, LARGE, OLD)
PLAN_VERSION = 1

# In the kept part, the newest this many tokens of tool output (as served) stay whole; older
# outputs are trimmed (`old`). The summary changes the cached prompt from its start, so
# trimming the kept part costs no extra cache write.
KEPT_PROTECT_TOKENS = 2_000
# A copy shorter than this is served as it is: the pointer would save next to nothing.
MIN_SAME_TOKENS = 40
# A search or listing longer than either is `long`.
LONG_LINES = 40
LONG_TOKENS = 800
# An output this large is `large`, and so are the newest turn's outputs beyond this many tokens in
# all: the default keep budget serves about 10,000 tokens of messages, and after a compaction the
# whole served part (summary + kept messages) should stay ≤ 15,000.
LARGE_TOKENS = 8_000
# What a superseded file read or a long listing keeps: its first and last lines.
HEAD_LINES, HEAD_CHARS = 6, 500
TAIL_LINES, TAIL_CHARS = 3, 300
# Read arguments that select part of a file: such a read supersedes only the same part.
RANGE_KEYS = ("offset", "limit", "view_range", "line_range", "start_line", "end_line", "lines", "range")
_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")


@dataclass(frozen=True)
class KeptEdit:
    """One tool_result block served trimmed: its index in the message, the rule, the message it
    points to (`same`: the copy kept; `superseded`: the later read or edit), and what its note
    says (the tool's name, the output's tokens as stored), fixed when planned so that the
    served text never depends on a later lookup or another tokenizer."""

    block: int
    kind: str
    ref: int | None = None
    path: str = ""  # `superseded`: the file
    tool: str = ""
    tokens: int = 0
    changed: bool = False  # `superseded`: the later call changed the file (else read it again)


@dataclass(frozen=True)
class KeptPlan:
    """How the kept messages are served: seq → edits, seq → tokens as served (for `tokenizer`)."""

    edits: dict[int, tuple[KeptEdit, ...]] = field(default_factory=dict)
    tokens: dict[int, int] = field(default_factory=dict)
    tokenizer: str = ""
    tokens_saved: int = 0  # against the messages as stored
    kept_tokens: int = 0  # the kept messages as served with the plan

    @property
    def empty(self) -> bool:
        return not self.edits

    @property
    def first_changed_seq(self) -> int | None:
        return min(self.edits, default=None)

    def counts(self) -> dict[str, int]:
        """Blocks trimmed by each rule."""
        found = dict.fromkeys(KINDS, 0)
        for edits in self.edits.values():
            for edit in edits:
                found[edit.kind] += 1
        return found

    @property
    def reason(self) -> str:
        parts = [f"{n} {kind}" for kind, n in self.counts().items() if n]
        return f"kept part served lean ({', '.join(parts)}): {self.tokens_saved:,} tokens saved"

    def as_json(self) -> dict[str, Any]:
        if self.empty:
            return {}
        return {
            "version": PLAN_VERSION,
            "tokenizer": self.tokenizer,
            "tokens_saved": self.tokens_saved,
            "messages": [
                {
                    "seq": seq,
                    "tokens": self.tokens[seq],
                    "blocks": [_edit_json(edit) for edit in edits],
                }
                for seq, edits in sorted(self.edits.items())
            ],
        }


def _edit_json(edit: KeptEdit) -> dict[str, Any]:
    out: dict[str, Any] = {"block": edit.block, "kind": edit.kind, "tool": edit.tool, "tokens": edit.tokens}
    if edit.ref is not None:
        out["ref"] = edit.ref
    if edit.path:
        out["path"] = edit.path
    if edit.changed:
        out["changed"] = True
    return out


def plan_from_json(data: Any) -> KeptPlan:
    """A stored plan (`KeptPlan.as_json`); an empty plan for anything else (an older row, {})."""
    if not isinstance(data, dict) or data.get("version") != PLAN_VERSION:
        return KeptPlan()
    edits: dict[int, tuple[KeptEdit, ...]] = {}
    tokens: dict[int, int] = {}
    for row in data.get("messages") or []:
        try:
            seq = int(row["seq"])
            blocks = tuple(
                KeptEdit(
                    int(b["block"]),
                    str(b["kind"]),
                    int(b["ref"]) if b.get("ref") is not None else None,
                    str(b.get("path", "")),
                    str(b.get("tool", "")),
                    int(b.get("tokens", 0)),
                    b.get("changed") is True,
                )
                for b in row["blocks"]
                if b.get("kind") in KINDS
            )
            tokens[seq] = int(row["tokens"])
        except (KeyError, TypeError, ValueError):
            continue
        if blocks:
            edits[seq] = blocks
    return KeptPlan(edits, tokens, str(data.get("tokenizer", "")), int(data.get("tokens_saved", 0) or 0))


# --- serving ----------------------------------------------------------------------------


def _head_tail(text: str, note: str) -> str:
    lines = text.splitlines()
    head = "\n".join(lines[:HEAD_LINES])[:HEAD_CHARS]
    rest = lines[HEAD_LINES:]
    tail = "\n".join(rest[-TAIL_LINES:])[-TAIL_CHARS:] if len(rest) > TAIL_LINES else ""
    return "\n".join(part for part in (head, note, tail) if part)


def _line_count(text: str) -> int:
    return len(text.splitlines())


def served_output(edit: KeptEdit, content: Any, *, seq: int) -> str | None:
    """A tool result's output as served under `edit` (None: the output cannot be cut)."""
    text = output_text(content)
    if text is None:
        return None
    tool, tokens = edit.tool or "tool", edit.tokens
    if edit.kind == SAME:
        where = "earlier in this message" if edit.ref == seq else f"message #{edit.ref}"
        return f"[same {tool} output as in {where}: {tokens:,} tokens, repeated verbatim]"
    if edit.kind == SUPERSEDED:
        shown = min(HEAD_LINES, _line_count(text)) + TAIL_LINES
        note = (
            f"[… {max(0, _line_count(text) - shown):,} more lines of {edit.path or 'this file'}: out of date, the "
            f"file was {'changed' if edit.changed else 'read again'} at message #{edit.ref}; message #{seq} holds "
            "this read whole …]"
        )
        return _head_tail(text, note)
    if edit.kind == LONG:
        note = (
            f"[… {_line_count(text):,} lines of {tool} output, {tokens:,} tokens in all: first and last lines shown; "
            f"message #{seq} holds them all …]"
        )
        return _head_tail(text, note)
    return trimmed(content, edit.tool, tokens, seq)


def kept_content(content: Content, edits: Sequence[KeptEdit], *, seq: int) -> Content:
    """A stored message's content as served under its edits (a new object; input untouched).
    Only the edited tool results' content changes; every other key and block stays as stored."""
    if isinstance(content, str) or not edits:
        return content
    by_block = {edit.block: edit for edit in edits}
    served: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        edit = by_block.get(i)
        if edit is None or block.get("type") != TOOL_RESULT:
            served.append(block)
            continue
        text = served_output(edit, block.get("content"), seq=seq)
        served.append(block if text is None else {**block, "content": text})
    return served


# --- planning ---------------------------------------------------------------------------


@dataclass
class _Result:
    """One tool result of the kept part, as the plan weighs it."""

    index: int  # the message's index in the kept part
    seq: int
    block: int
    tool_use_id: str
    tool: str
    text: str | None  # None: not plain text (never trimmed)
    tokens: int  # output tokens as stored
    is_error: bool
    newest: bool  # in the newest turn
    protected: bool  # in the newest turn, or a protected tool's output
    edit: KeptEdit | None = None
    served: int | None = None  # output tokens as served under `edit`


def _newest_turn_start(messages: Sequence[Msg]) -> int:
    """Index of the newest turn's first message: the last assistant message that called tools
    (else the last assistant message; else the whole part)."""
    last_assistant = None
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role != "assistant":
            continue
        if last_assistant is None:
            last_assistant = i
        if m.tool_use_ids:
            return i
    return last_assistant if last_assistant is not None else 0


def _calls(messages: Sequence[Msg]) -> dict[str, tuple[int, dict[str, Any]]]:
    """tool_use id → (index of the message calling it, the tool_use block)."""
    calls: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, m in enumerate(messages):
        if m.role == "assistant" and not isinstance(m.content, str):
            for block in m.content:
                if block.get("type") == TOOL_USE and "id" in block:
                    calls[str(block["id"])] = (index, block)
    return calls


def _results(
    messages: Sequence[Msg], names: Mapping[str, str], tokenizer: Tokenizer, protected_tools: frozenset[str]
) -> list[_Result]:
    newest = _newest_turn_start(messages)
    found: list[_Result] = []
    for index, m in enumerate(messages):
        if m.role != "user" or isinstance(m.content, str):
            continue
        for i, block in enumerate(m.content):
            if block.get("type") != TOOL_RESULT:
                continue
            tool_use_id = str(block.get("tool_use_id", ""))
            tool = names.get(tool_use_id, "")
            content = block.get("content")
            found.append(
                _Result(
                    index=index,
                    seq=m.seq,
                    block=i,
                    tool_use_id=tool_use_id,
                    tool=tool,
                    text=output_text(content),
                    tokens=count_tool_result_content(content, tokenizer),
                    is_error=bool(block.get("is_error")),
                    newest=index >= newest,
                    protected=index >= newest or tool in protected_tools,
                )
            )
    return found


def _mark_same(results: list[_Result]) -> None:
    """Every copy of an output but one becomes a pointer to the copy kept: the first copy in
    the newest turn when there is one (it is served whole anyway), else the first copy."""
    groups: dict[str, list[_Result]] = {}
    for r in results:
        if r.text is not None and r.tokens >= MIN_SAME_TOKENS:
            groups.setdefault(r.text.strip(), []).append(r)
    for copies in groups.values():
        if len(copies) < 2:
            continue
        kept = next((r for r in copies if r.protected), copies[0])
        for r in copies:
            if r is not kept and not r.protected:
                r.edit = KeptEdit(r.block, SAME, kept.seq, tool=r.tool, tokens=r.tokens)


def _shell_segments(command: str) -> list[str]:
    return [s.strip() for s in _SEGMENT_SPLIT.split(command) if s.strip()]


def _program(segment: str) -> str:
    words = segment.split()
    while words and ("=" in words[0] and not words[0].startswith("-") or words[0] in ("sudo", "time", "command")):
        words = words[1:]
    return words[0].rsplit("/", 1)[-1] if words else ""


def _read_of(call: dict[str, Any]) -> tuple[str, str] | None:
    """(path, range) when the call prints one file's content (range "" for the whole file)."""
    name = call.get("name")
    key = tool_key(name)
    inp = tool_input(call)
    if key in SHELL_TOOLS:
        command = shell_text(inp) or ""
        programs = {_program(s.split("|", 1)[0]) for s in _shell_segments(command)} - {"cd", "pwd", "echo"}
        if not programs or not programs <= FILE_PRINTERS:
            return None
        ranged = bool(programs - {"cat", "nl", "bat", "batcat", "less", "more"}) or "|" in command
        part = command if ranged else ""
    elif key in READ_TOOLS or (
        key in EDITOR_TOOLS and isinstance(inp, dict) and str(inp.get("command", "")).lower() == "view"
    ):
        part = repr(sorted((k, str(v)) for k, v in inp.items() if k in RANGE_KEYS)) if isinstance(inp, dict) else ""
        part = "" if part == "[]" else part
    else:
        return None
    ops, _ = call_file_ops(str(name or ""), inp)
    if len(ops.read) != 1 or ops.modified:
        return None
    return ops.read[0], part


def _is_listing(call: dict[str, Any]) -> bool:
    key = tool_key(call.get("name"))
    if key in SEARCH_TOOLS:
        return True
    if key not in SHELL_TOOLS:
        return False
    command = shell_text(tool_input(call)) or ""
    segments = _shell_segments(command)
    return any(
        _program(part) in LISTERS or GIT_LISTING_RE.match(part.strip())
        for segment in segments
        for part in segment.split("|")[:1]
    )


def _file_events(messages: Sequence[Msg]) -> dict[str, list[tuple[int, str, str | None]]]:
    """path → (message index, tool_use id, part read; None: changed) for every call of the part."""
    events: dict[str, list[tuple[int, str, str | None]]] = {}
    for index, m in enumerate(messages):
        if m.role != "assistant" or isinstance(m.content, str):
            continue
        for block in m.content:
            if block.get("type") != TOOL_USE:
                continue
            read = _read_of(block)
            if read is not None:
                events.setdefault(read[0], []).append((index, str(block.get("id", "")), read[1]))
                continue
            ops, _ = call_file_ops(str(block.get("name") or ""), tool_input(block))
            for path in ops.modified:
                events.setdefault(path, []).append((index, str(block.get("id", "")), None))
    return events


def _mark_superseded(
    results: list[_Result], messages: Sequence[Msg], calls: Mapping[str, tuple[int, dict[str, Any]]]
) -> None:
    """A file read whose file a later message changes, or reads again (whole, or the same part)
    with another output (the same output again is `same`, not out of date)."""
    events = _file_events(messages)
    texts = {r.tool_use_id: r.text for r in results}
    for r in results:
        if r.edit is not None or r.protected or r.is_error or r.text is None or r.tool_use_id not in calls:
            continue
        use_index, call = calls[r.tool_use_id]
        read = _read_of(call)
        if read is None:
            continue
        path, part = read
        for index, other_id, other in events.get(path, []):
            if index <= use_index:
                continue
            if other is None or (other in ("", part) and texts.get(other_id) != r.text):
                r.edit = KeptEdit(r.block, SUPERSEDED, messages[index].seq, path, r.tool, r.tokens, other is None)
                break


def _mark_long(results: list[_Result], calls: Mapping[str, tuple[int, dict[str, Any]]]) -> None:
    for r in results:
        if r.edit is not None or r.protected or r.is_error or r.text is None or r.tool_use_id not in calls:
            continue
        if _is_listing(calls[r.tool_use_id][1]) and (r.tokens > LONG_TOKENS or _line_count(r.text) > LONG_LINES):
            r.edit = KeptEdit(r.block, LONG, tool=r.tool, tokens=r.tokens)


def _mark_large(results: list[_Result], protected_tools: frozenset[str]) -> None:
    """An output over LARGE_TOKENS outside the newest turn; in the newest turn, its largest
    outputs, largest first, until the rest add up to LARGE_TOKENS at most."""
    eligible = [r for r in results if r.edit is None and r.text is not None and r.tool not in protected_tools]
    for r in eligible:
        if not r.newest and r.tokens > LARGE_TOKENS:
            r.edit = KeptEdit(r.block, LARGE, tool=r.tool, tokens=r.tokens)
    newest = sum(r.tokens for r in results if r.newest)
    for r in sorted((r for r in eligible if r.newest), key=lambda r: -r.tokens):
        if newest <= LARGE_TOKENS or r.tokens < MIN_PRUNE_TOKENS:
            break
        r.edit = KeptEdit(r.block, LARGE, tool=r.tool, tokens=r.tokens)
        newest -= r.tokens


def _served_size(r: _Result, content: Any, tokenizer: Tokenizer) -> int | None:
    """Output tokens of `r` as served under its edit; None when that is not smaller."""
    assert r.edit is not None
    text = served_output(r.edit, content, seq=r.seq)
    if text is None:
        return None
    cost = tokenizer.count(text)
    return cost if cost < r.tokens else None


def _mark_old(results: list[_Result], protect_tokens: int) -> None:
    """Outside the newest `protect_tokens` of output (the output that crosses the budget stays
    whole too), outputs large enough to prune are trimmed. Weighed as stored, not as served: a
    recent output trimmed by another rule must not pull old ones into the protected window."""
    seen = 0
    for r in reversed(results):
        if seen > protect_tokens:
            least = MIN_ERROR_PRUNE_TOKENS if r.is_error else MIN_PRUNE_TOKENS
            if r.edit is None and not r.protected and r.text is not None and r.tokens >= least:
                r.edit = KeptEdit(r.block, OLD, tool=r.tool, tokens=r.tokens)
        seen += TOOL_RESULT_OVERHEAD + r.tokens


def plan_kept(
    kept: Sequence[Msg],
    *,
    names: Mapping[str, str],
    tokenizer: Tokenizer,
    protect_tokens: int = KEPT_PROTECT_TOKENS,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
) -> KeptPlan:
    """How to serve `kept` (the messages kept after a summary, as stored, oldest first; `names`:
    tool_use id → tool name, including calls before the cut). See the module doc."""
    messages = list(kept)
    calls = _calls(messages)
    results = _results(messages, names, tokenizer, protected_tools)
    by_seq = {m.seq: m for m in messages}
    _mark_same(results)
    _mark_superseded(results, messages, calls)
    _mark_long(results, calls)
    _mark_large(results, protected_tools)
    _settle(results, by_seq, tokenizer)
    _mark_old(results, protect_tokens)
    _settle(results, by_seq, tokenizer)
    return _plan(messages, results, tokenizer)


def _settle(results: list[_Result], by_seq: Mapping[int, Msg], tokenizer: Tokenizer) -> None:
    """Size every new edit; drop those whose served form would not be smaller."""
    for r in results:
        if r.edit is None or r.served is not None:
            continue
        content = by_seq[r.seq].content
        block = content[r.block] if isinstance(content, list) else {}
        r.served = _served_size(r, block.get("content"), tokenizer)
        if r.served is None:
            r.edit = None


def _plan(messages: list[Msg], results: list[_Result], tokenizer: Tokenizer) -> KeptPlan:
    edits: dict[int, list[KeptEdit]] = {}
    saved_by_seq: dict[int, int] = {}
    for r in results:
        if r.edit is not None and r.served is not None:
            edits.setdefault(r.seq, []).append(r.edit)
            saved_by_seq[r.seq] = saved_by_seq.get(r.seq, 0) + r.tokens - r.served
    tokens: dict[int, int] = {}
    total = 0
    for m in messages:
        if m.seq in edits:
            stored = MESSAGE_OVERHEAD + sum(count_block(b, tokenizer) for b in m.blocks)
            tokens[m.seq] = stored - saved_by_seq[m.seq]
            total += tokens[m.seq]
        else:
            total += m.tokens
    return KeptPlan(
        {seq: tuple(e) for seq, e in edits.items()},
        tokens,
        tokenizer.name,
        sum(saved_by_seq.values()),
        total,
    )


def served_kept(kept: Sequence[Msg], plan: KeptPlan) -> list[Msg]:
    """`kept` as `plan` serves it (each Msg with its served content and tokens): what the
    offline tools (the benches, blind reads) show without the service."""
    return [
        Msg(m.seq, m.role, kept_content(m.content, plan.edits[m.seq], seq=m.seq), plan.tokens[m.seq])
        if m.seq in plan.edits
        else m
        for m in kept
    ]
