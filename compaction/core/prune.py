"""Tool-output pruning: the cheap tier before (or beside) summarization.

Like opencode's prune and Anthropic's `clear_tool_uses` edit: outside a protected budget of
the newest tool output, old `tool_result` contents are served trimmed — their first and last
lines (where commands say what they did and how they failed) around a note that names the
tool, the size and the message number of the full output, so the model knows what was there
and can read it back (the recall API) or re-run the tool.
Stored messages are never touched: pruning is an overlay defined by one boundary,
`prune_before_seq` (results in messages with `seq < prune_before_seq` are served pruned).

Some results are kept even below the boundary, because the placeholder would cost the model
more than it saves:
- results of protected tools (e.g. `skill`: its output *is* the instructions being followed);
- error results (`is_error: true`) under `MIN_ERROR_PRUNE_TOKENS`: exactly what summaries tend
  to lose; a longer one (a failing test run's log) is trimmed with its error lines kept;
- results smaller than `MIN_PRUNE_TOKENS` (the trimmed form would save next to nothing).

The decision depends only on the block and the tool name, so the engine that plans a prune
(`plan_prune`) and the context builder that serves it (`prune_content`) always agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compaction.core.blocks import TOOL_RESULT, TOOL_USE

from .prompts import is_error_line
from .tokens import (
    MESSAGE_OVERHEAD,
    TOOL_RESULT_OVERHEAD,
    Tokenizer,
    count_block,
    count_text_cached,
    count_tool_result_content,
    get_tokenizer,
)
from .types import Content, Msg

PROTECT_TOKENS = 40_000
MIN_SAVINGS = 20_000
# A result this small is served as is: its trimmed form (head, note, tail) is ~150-350 tokens.
MIN_PRUNE_TOKENS = 300
MIN_ERROR_PRUNE_TOKENS = 1_000
MAX_KEPT_ERROR_LINES = 6
# What a trimmed output keeps: its first and last lines, each side capped in characters.
TRIM_HEAD_LINES, TRIM_HEAD_CHARS = 8, 600
TRIM_TAIL_LINES, TRIM_TAIL_CHARS = 5, 400
DEFAULT_PROTECTED_TOOLS: frozenset[str] = frozenset({"skill", "Skill"})
UNKNOWN_TOOL = "unknown tool"


@dataclass(frozen=True)
class PrunePlan:
    prune_before_seq: int | None  # None = pruning is not worth it
    tokens_saved: int  # served tokens saved by the overlay (0 when prune_before_seq is None)
    pruned: int  # tool_result blocks served as placeholders
    reason: str = ""
    # The first message whose served content changes: where the provider's cached prompt
    # stops matching (everything after it is billed again; compaction.core.policy).
    first_pruned_seq: int | None = None

    @property
    def nothing_to_prune(self) -> bool:
        return self.prune_before_seq is None


def placeholder(tool_name: str, tokens: int, seq: int | None = None) -> str:
    """The note standing for the trimmed middle (or, for output with no text, all) of a result."""
    where = f" (message #{seq} holds it all)" if seq else ""
    return f"[… {tool_name or UNKNOWN_TOOL} output trimmed: {tokens:,} tokens in all{where}; re-run the tool to see the rest …]"


def output_text(content: Any) -> str | None:
    """A result's text, or None when it holds something else (an image) that cannot be cut."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return None


def trimmed(content: Any, tool_name: str, tokens: int, seq: int | None = None) -> str:
    """A result's output as served when pruned: its first and last lines around the note."""
    note = placeholder(tool_name, tokens, seq)
    text = output_text(content)
    if not text:
        return note
    lines = text.splitlines()
    head = "\n".join(lines[:TRIM_HEAD_LINES])[:TRIM_HEAD_CHARS]
    rest = lines[TRIM_HEAD_LINES:]
    tail_lines = rest[-TRIM_TAIL_LINES:]
    middle = rest[: len(rest) - len(tail_lines)]
    # Error lines from the cut middle stay: they are what a reader of a failed run looks for.
    errors = [line[:300] for line in middle if is_error_line(line)][:MAX_KEPT_ERROR_LINES]
    if errors:
        note += "\n" + "\n".join(errors)
    tail = "\n".join(tail_lines)[-TRIM_TAIL_CHARS:]
    return f"{head}\n{note}\n{tail}".rstrip() if tail else f"{head}\n{note}"


def tool_names(messages: Iterable[Msg]) -> dict[str, str]:
    """tool_use id → tool name, from the tool_use blocks of `messages`."""
    names: dict[str, str] = {}
    for msg in messages:
        if msg.role != "assistant" or isinstance(msg.content, str):
            continue
        for block in msg.content:
            if block.get("type") == TOOL_USE and "id" in block:
                names[block["id"]] = str(block.get("name") or "")
    return names


def _prunable(block: dict[str, Any], name: str, tokens: int, protected_tools: frozenset[str]) -> bool:
    least = MIN_ERROR_PRUNE_TOKENS if block.get("is_error") else MIN_PRUNE_TOKENS
    return block.get("type") == TOOL_RESULT and name not in protected_tools and tokens >= least


def prune_content(
    content: Content,
    *,
    tool_names: Mapping[str, str],
    tokenizer: Tokenizer | None = None,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
    seq: int | None = None,
    skip: Collection[int] = (),
) -> Content:
    """The content served for a message below the prune boundary (a new object; input untouched).
    Blocks whose index is in `skip` are served as given (the kept plan served them already)."""
    if isinstance(content, str):
        return content
    tokenizer = tokenizer or get_tokenizer()
    served: list[dict[str, Any]] = []
    for i, block in enumerate(content):
        if block.get("type") != TOOL_RESULT or i in skip:
            served.append(block)
            continue
        name = tool_names.get(block.get("tool_use_id", ""), "")
        tokens = count_tool_result_content(block.get("content"), tokenizer)
        text = (
            trimmed(block.get("content"), name, tokens, seq)
            if _prunable(block, name, tokens, protected_tools)
            else None
        )
        if text is not None and tokenizer.count(text) < tokens:
            # Keep every other key (tool_use_id, cache_control...): only the output is cut.
            served.append({**block, "content": text})
        else:
            served.append(block)
    return served


@dataclass(frozen=True)
class PrunedOutput:
    seq: int
    tool_use_id: str
    tool_name: str
    tokens: int  # the output's tokens, replaced by a placeholder


def pruned_outputs(
    messages: Iterable[tuple[int, Content]],
    *,
    tool_names: Mapping[str, str],
    tokenizer: Tokenizer | None = None,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
) -> list[PrunedOutput]:
    """Which tool results of (seq, content) pairs below a prune boundary are served as
    placeholders: the same decision as `prune_content`, listed for people (the detail page)."""
    tokenizer = tokenizer or get_tokenizer()
    found: list[PrunedOutput] = []
    for seq, content in messages:
        if isinstance(content, str):
            continue
        for block in content:
            if block.get("type") != TOOL_RESULT:
                continue
            tool_use_id = str(block.get("tool_use_id", ""))
            name = tool_names.get(tool_use_id, "")
            tokens = count_tool_result_content(block.get("content"), tokenizer)
            if _prunable(block, name, tokens, protected_tools):
                found.append(PrunedOutput(seq, tool_use_id, name or UNKNOWN_TOOL, tokens))
    return found


@dataclass(frozen=True)
class PrunedMessage:
    content: Content  # as served (the stored object itself when nothing was pruned)
    tokens: int  # served tokens
    changed: bool  # some output was replaced by a placeholder
    outputs: dict[int, int]  # block index → output tokens of the blocks that could be pruned


def _size_hint(block: dict[str, Any]) -> int:
    """Characters of a block's text, to pick the block whose count is derived instead of counted."""
    content = block.get("content") if block.get("type") == TOOL_RESULT else block.get("text", block.get("input"))
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return 0


def prune_served(
    content: Content,
    *,
    stored_tokens: int | None,
    tool_names: Mapping[str, str],
    tokenizer: Tokenizer,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
    known_outputs: Mapping[int, int] | None = None,
    seq: int | None = None,
) -> PrunedMessage:
    """Content served for a message below the boundary, its token count, and whether it changed.

    The same content and count as `prune_content` + `count_content`, without re-tokenizing the
    message on every request. `stored_tokens` is the message's stored count, i.e.
    `count_content(content, tokenizer)`, which is a sum over blocks: the largest block's count is
    derived from it (stored minus the other blocks' counts), so a message with a single tool
    result (the usual case) tokenizes nothing but its short placeholder (cached by text).
    A pruned block costs `TOOL_RESULT_OVERHEAD + count(placeholder)` instead of
    `TOOL_RESULT_OVERHEAD + output`, so the served count is stored minus the difference.
    `stored_tokens=None` (a count made with another tokenizer) counts every block instead.
    `known_outputs` (block index → output tokens, from an earlier call's `.outputs` for the same
    stored message: messages are never rewritten) skips the counting altogether.
    """
    if isinstance(content, str):
        tokens = stored_tokens if stored_tokens is not None else MESSAGE_OVERHEAD + tokenizer.count(content)
        return PrunedMessage(content, tokens, False, {})
    candidates = [
        i
        for i, block in enumerate(content)
        if block.get("type") == TOOL_RESULT and tool_names.get(block.get("tool_use_id", ""), "") not in protected_tools
    ]
    if not candidates:  # nothing here can be pruned: served as stored
        if stored_tokens is None:
            stored_tokens = MESSAGE_OVERHEAD + sum(count_block(b, tokenizer) for b in content)
        return PrunedMessage(content, stored_tokens, False, {})
    if stored_tokens is not None and known_outputs is not None and all(i in known_outputs for i in candidates):
        return _serve(content, stored_tokens, {i: known_outputs[i] for i in candidates}, tool_names, tokenizer, seq)
    outputs, tokens = _count_outputs(content, candidates, stored_tokens, tokenizer)
    return _serve(content, tokens, outputs, tool_names, tokenizer, seq)


def _derivable(content: list[dict[str, Any]], candidates: list[int], stored_tokens: int | None) -> int | None:
    """The candidate whose count is derived from the stored one (None: count them all): the
    largest, when that tokenizes less than counting it would, since every other block must then
    be counted (text and tool_use are short)."""
    if stored_tokens is None:
        return None
    wanted = set(candidates)
    sizes = [_size_hint(block) for block in content]
    largest = max(candidates, key=lambda i: sizes[i])
    return largest if sizes[largest] >= sum(size for i, size in enumerate(sizes) if i not in wanted) else None


def _count_outputs(
    content: list[dict[str, Any]], candidates: list[int], stored_tokens: int | None, tokenizer: Tokenizer
) -> tuple[dict[int, int], int]:
    """(block index → output tokens of each candidate, the message's token count): the stored
    count when it is this tokenizer's, else every block counted."""
    wanted = set(candidates)
    derived = _derivable(content, candidates, stored_tokens)
    outputs: dict[int, int] = {}
    others = 0  # framed count of every block but the derived one
    for i, block in enumerate(content):
        if i == derived:
            continue
        if i in wanted:
            outputs[i] = count_tool_result_content(block.get("content"), tokenizer)
            others += TOOL_RESULT_OVERHEAD + outputs[i]
        elif derived is not None:
            others += count_block(block, tokenizer)
    if derived is not None and stored_tokens is not None:
        outputs[derived] = stored_tokens - MESSAGE_OVERHEAD - others - TOOL_RESULT_OVERHEAD
        if outputs[derived] < 0:  # the stored count is not this tokenizer's: count it after all
            outputs[derived] = count_tool_result_content(content[derived].get("content"), tokenizer)
            stored_tokens = None
    if stored_tokens is None:
        stored_tokens = MESSAGE_OVERHEAD + sum(
            TOOL_RESULT_OVERHEAD + outputs[i] if i in outputs else count_block(b, tokenizer)
            for i, b in enumerate(content)
        )
    return outputs, stored_tokens


def _serve(
    content: list[dict[str, Any]],
    stored_tokens: int,
    outputs: dict[int, int],
    tool_names: Mapping[str, str],
    tokenizer: Tokenizer,
    seq: int | None,
) -> PrunedMessage:
    """Trimmed outputs for the candidates (`outputs`) large enough to prune; the count follows."""
    served: list[dict[str, Any]] = []
    tokens = stored_tokens
    changed = False
    for i, block in enumerate(content):
        output = outputs.get(i)
        if output is None or output < (MIN_ERROR_PRUNE_TOKENS if block.get("is_error") else MIN_PRUNE_TOKENS):
            served.append(block)
            continue
        text = trimmed(block.get("content"), tool_names.get(block.get("tool_use_id", ""), ""), output, seq)
        cost = count_text_cached(text, tokenizer)
        if cost >= output:
            served.append(block)
            continue
        served.append({**block, "content": text})
        tokens -= output - cost
        changed = True
    return PrunedMessage(served if changed else content, tokens, changed, outputs)


def _block_savings(
    block: dict[str, Any], names: Mapping[str, str], tokenizer: Tokenizer, protected_tools: frozenset[str], seq: int
) -> tuple[int, int]:
    """(tokens of this result's output, tokens saved if it were pruned; 0 if it is kept)."""
    name = names.get(block.get("tool_use_id", ""), "")
    tokens = count_tool_result_content(block.get("content"), tokenizer)
    if not _prunable(block, name, tokens, protected_tools):
        return tokens, 0
    return tokens, max(0, tokens - count_text_cached(trimmed(block.get("content"), name, tokens, seq), tokenizer))


def plan_prune(
    messages: list[Msg],
    *,
    protect_tokens: int = PROTECT_TOKENS,
    min_savings: int = MIN_SAVINGS,
    tokenizer: Tokenizer | None = None,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
    names: Mapping[str, str] | None = None,
) -> PrunePlan:
    """Where to put the prune boundary over `messages` (the messages currently in context).

    Walks from the newest message back, adding up tool output. The newest `protect_tokens`
    of tool output stay verbatim, and so does the message whose output crosses that budget;
    every message before it is below the boundary. Worth it only if at least `min_savings`
    tokens are saved (opencode: protect 40k, prune only when ≥ 20k is reclaimable).
    `names` adds tool names for tool_use blocks outside `messages` (before the cut).
    """
    tokenizer = tokenizer or get_tokenizer()
    all_names = {**(names or {}), **tool_names(messages)}
    per_message: list[tuple[int, int, int]] = []  # (output tokens, savings, pruned blocks) per message
    for msg in messages:
        output = savings = pruned = 0
        if msg.role == "user" and not isinstance(msg.content, str):
            for block in msg.content:
                if block.get("type") != TOOL_RESULT:
                    continue
                tokens, saved = _block_savings(block, all_names, tokenizer, protected_tools, msg.seq)
                output += tokens + TOOL_RESULT_OVERHEAD
                savings += saved
                pruned += 1 if saved else 0
        per_message.append((output, savings, pruned))
    # The message whose output crosses the budget is itself kept: the newest result is never
    # pruned, however large (the model has not even seen it yet).
    seen_output = 0
    boundary_index: int | None = None
    for index in range(len(messages) - 1, -1, -1):
        seen_output += per_message[index][0]
        if seen_output > protect_tokens:
            boundary_index = index
            break
    if boundary_index is None or boundary_index == 0:
        return PrunePlan(
            None, 0, 0, f"all tool output ({seen_output:,} tokens) is within the protected {protect_tokens:,}"
        )
    below = per_message[:boundary_index]
    tokens_saved = sum(s for _, s, _ in below)
    pruned = sum(p for _, _, p in below)
    if tokens_saved < min_savings or pruned == 0:
        return PrunePlan(None, 0, 0, f"pruning would save {tokens_saved:,} tokens, less than {min_savings:,}")
    boundary = messages[boundary_index].seq
    first = next(messages[i].seq for i, (_, saved, _) in enumerate(below) if saved)
    return PrunePlan(boundary, tokens_saved, pruned, f"{pruned} tool results before seq {boundary} pruned", first)
