"""Tool-output pruning: the cheap tier before (or beside) summarization.

Like opencode's prune and Anthropic's `clear_tool_uses` edit: outside a protected budget of
the newest tool output, old `tool_result` contents are served as a one-line placeholder that
names the tool and the size, so the model knows what was there and can re-run the tool.
Stored messages are never touched: pruning is an overlay defined by one boundary,
`prune_before_seq` (results in messages with `seq < prune_before_seq` are served pruned).

Some results are kept even below the boundary, because the placeholder would cost the model
more than it saves:
- results of protected tools (e.g. `skill`: its output *is* the instructions being followed);
- error results (`is_error: true`): short, and exactly what summaries tend to lose;
- results smaller than `MIN_PRUNE_TOKENS` (the placeholder would save next to nothing).

The decision depends only on the block and the tool name, so the engine that plans a prune
(`plan_prune`) and the context builder that serves it (`prune_content`) always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .tokens import TOOL_RESULT_OVERHEAD, Tokenizer, count_tool_result_content, get_tokenizer
from .types import Content, Msg

PROTECT_TOKENS = 40_000
MIN_SAVINGS = 20_000
# A result this small is served as is: the placeholder alone is ~20 tokens.
MIN_PRUNE_TOKENS = 100
DEFAULT_PROTECTED_TOOLS: frozenset[str] = frozenset({"skill", "Skill"})
UNKNOWN_TOOL = "unknown tool"


@dataclass(frozen=True)
class PrunePlan:
    prune_before_seq: int | None  # None = pruning is not worth it
    tokens_saved: int  # served tokens saved by the overlay (0 when prune_before_seq is None)
    pruned: int  # tool_result blocks served as placeholders
    reason: str = ""

    @property
    def nothing_to_prune(self) -> bool:
        return self.prune_before_seq is None


def placeholder(tool_name: str, tokens: int) -> str:
    return f"[tool output pruned: {tool_name or UNKNOWN_TOOL}, {tokens:,} tokens — re-run the tool if needed]"


def tool_names(messages: Iterable[Msg]) -> dict[str, str]:
    """tool_use id → tool name, from the tool_use blocks of `messages`."""
    names: dict[str, str] = {}
    for msg in messages:
        if msg.role != "assistant" or isinstance(msg.content, str):
            continue
        for block in msg.content:
            if block.get("type") == "tool_use" and "id" in block:
                names[block["id"]] = str(block.get("name") or "")
    return names


def _prunable(block: dict[str, Any], name: str, tokens: int, protected_tools: frozenset[str]) -> bool:
    return (
        block.get("type") == "tool_result"
        and not block.get("is_error")
        and name not in protected_tools
        and tokens >= MIN_PRUNE_TOKENS
    )


def prune_content(
    content: Content,
    *,
    tool_names: Mapping[str, str],
    tokenizer: Tokenizer | None = None,
    protected_tools: frozenset[str] = DEFAULT_PROTECTED_TOOLS,
) -> Content:
    """The content served for a message below the prune boundary (a new object; input untouched)."""
    if isinstance(content, str):
        return content
    tokenizer = tokenizer or get_tokenizer()
    served: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") != "tool_result":
            served.append(block)
            continue
        name = tool_names.get(block.get("tool_use_id", ""), "")
        tokens = count_tool_result_content(block.get("content"), tokenizer)
        if _prunable(block, name, tokens, protected_tools):
            # Keep every other key (tool_use_id, cache_control...): only the output goes.
            served.append({**block, "content": placeholder(name, tokens)})
        else:
            served.append(block)
    return served


def _block_savings(
    block: dict[str, Any], names: Mapping[str, str], tokenizer: Tokenizer, protected_tools: frozenset[str]
) -> tuple[int, int]:
    """(tokens of this result's output, tokens saved if it were pruned; 0 if it is kept)."""
    name = names.get(block.get("tool_use_id", ""), "")
    tokens = count_tool_result_content(block.get("content"), tokenizer)
    if not _prunable(block, name, tokens, protected_tools):
        return tokens, 0
    return tokens, max(0, tokens - tokenizer.count(placeholder(name, tokens)))


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
                if block.get("type") != "tool_result":
                    continue
                tokens, saved = _block_savings(block, all_names, tokenizer, protected_tools)
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
    return PrunePlan(boundary, tokens_saved, pruned, f"{pruned} tool results before seq {boundary} pruned")
