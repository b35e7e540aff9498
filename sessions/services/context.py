"""The served context: the messages in context as the provider is sent them, and their sizes.

Never re-tokenized as a whole: stored counts are used as they are, a pruned message's count is
derived from its stored count (`prune_served`), the summary message's count is stored with its
compaction. Only a max_tokens reply with hidden tool calls and a message with whitespace-only
text (left out of what is served) are recounted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Sum

from compaction.core import tokens as core_tokens
from compaction.core.kept import KeptPlan, kept_content, plan_from_json
from compaction.core.orphans import orphaned_results, results_as_text
from compaction.core.provenance import without_provenance
from compaction.core.prune import prune_content, prune_served, tool_names
from compaction.core.summary_message import render_summary_message
from compaction.core.types import Msg
from compaction.selectors import Overlay, active_overlay

from .. import validation
from ..models import Message, Session, ToolCall
from .config import session_tokenizer
from .meter import counters_copy, meter_set
from .served import LRU, is_max_tokens, needs_serving, served_content, truncated_content


@dataclass
class ServedMessage:
    seq: int
    role: str
    content: Any
    tokens: int  # tokens as served (after the prune overlay / truncation)
    stored_tokens: int
    pruned: bool = False  # some tool output served trimmed or as a pointer (prune or kept plan)
    dropped: bool = False  # nothing left to serve (only whitespace-only text): content None, 0 tokens


@dataclass
class ServedContext:
    system: str
    system_tokens: int
    summary_text: str | None
    summary_tokens: int
    messages: list[ServedMessage]
    stored: list[Msg] | None = None  # the same messages as stored (only when asked for)
    overlay: Overlay | None = None  # the active compaction it was served with

    @property
    def tokens(self) -> int:
        return self.system_tokens + self.summary_tokens + sum(m.tokens for m in self.messages)


# Output token counts of pruned messages with several tool results, by (session, seq,
# tokenizer): stored messages are never rewritten, so a count never goes stale. A single
# result's count is derived from the stored message count and needs no entry.
PRUNE_OUTPUTS = LRU(100_000)

# The active compaction's kept plan, parsed, by compaction id: a compaction's plan never changes
# once it is written.
KEPT_PLANS = LRU(1_000)


def overlay_kept_plan(overlay: Overlay | None) -> KeptPlan:
    """How the overlay serves its kept messages (an empty plan when it trims none)."""
    if overlay is None or not overlay.kept_plan:
        return KeptPlan()
    plan: KeptPlan | None = KEPT_PLANS.get(overlay.id)
    if plan is None:
        plan = plan_from_json(overlay.kept_plan)
        KEPT_PLANS.put(overlay.id, plan)
    return plan


# A message row as the served context and the engine read it: seq, role, content, token_count,
# provider_usage, the tool ids stored beside the content at append, and its provenance.
ContextRow = tuple[int, str, Any, int, Any, list[str], list[str], str]


def context_rows(session: Session, first_kept: int) -> list[ContextRow]:
    return list(
        Message.objects.filter(session=session, seq__gte=first_kept)
        .order_by("seq")
        .values_list(
            "seq", "role", "content", "token_count", "provider_usage", "tool_use_ids", "tool_result_ids", "provenance"
        )
    )


def _answered_ids(rows: list[ContextRow]) -> set[str]:
    """Every tool_use id a message of `rows` holds a result for (from the stored ids)."""
    return {tool_id for row in rows if row[1] == "user" for tool_id in row[6]}


def _pruned_tool_names(session: Session, rows: list[ContextRow], prune_below: int) -> dict[str, str]:
    """Tool names of the results below the prune boundary (their uses are before them, maybe
    before the cut, then read from the stored tool calls)."""
    below = [Msg(*row[:4], row[5], row[6]) for row in rows if row[0] < prune_below]
    names = tool_names(below)
    missing = {tid for m in below if m.role == "user" for tid in m.tool_result_ids} - names.keys()
    if missing:
        names.update(
            ToolCall.objects.filter(session=session, tool_use_id__in=missing).values_list("tool_use_id", "name")
        )
    return names


class _Serving:
    """What serving the rows of one context shares: the tokenizer, the tool names below the
    prune boundary, the kept plan and the ids answered in context (read only when a message
    needs them)."""

    def __init__(
        self,
        session: Session,
        tokenizer: core_tokens.Tokenizer,
        rows: list[ContextRow],
        prune_below: int,
        kept: KeptPlan | None = None,
    ):
        self.session_id = session.pk
        self.tokenizer = tokenizer
        self.rows = rows
        self.prune_below = prune_below
        self.kept = kept or KeptPlan()
        self.names = _pruned_tool_names(session, rows, prune_below) if prune_below else {}
        # Stored counts are the current tokenizer's unless the session switched tokenizers since.
        self.stored_exact = core_tokens.single_tokenizer()
        self._answered: set[str] | None = None

    def count(self, content: Any) -> int:
        return 0 if content is None else core_tokens.count_content(content, self.tokenizer)

    def serve(self, row: ContextRow) -> ServedMessage:
        seq, role, content, stored_tokens, usage = row[:5]
        out, tokens, changed, pruned = content, stored_tokens, False, False
        if seq in self.kept.edits and role == "user" and isinstance(content, list):
            out, tokens, changed, pruned = self._kept(seq, content)
        elif seq < self.prune_below and role == "user" and isinstance(content, list):
            out, tokens, changed, pruned = self._pruned(seq, content, stored_tokens)
        elif needs_serving(role, content, usage):  # rare: only these messages are recounted
            if self._answered is None:
                self._answered = _answered_ids(self.rows)
            out, changed = served_content(role, content, usage, self._answered)
            if changed:
                tokens = self.count(out)
        return ServedMessage(
            seq=seq,
            role=role,
            # A text block's provenance is the store's, not the provider's (it refuses the field).
            content=without_provenance(out) if isinstance(out, list) else out,
            tokens=tokens if changed else stored_tokens,
            stored_tokens=stored_tokens,
            pruned=pruned,
            dropped=out is None,
        )

    def _kept(self, seq: int, content: list[Any]) -> tuple[Any, int, bool, bool]:
        """(content, tokens, changed, pruned) of a kept message the kept plan trims: its count as
        planned, unless another tokenizer counts now or a prune boundary (a prune made after the
        summary) trims its other outputs too — then counted."""
        edits = self.kept.edits[seq]
        out: Any = kept_content(content, edits, seq=seq)  # None once nothing is left to serve
        recount = self.kept.tokenizer != self.tokenizer.name
        if seq < self.prune_below:
            edited = {edit.block for edit in edits}
            pruned = prune_content(out, tool_names=self.names, tokenizer=self.tokenizer, seq=seq, skip=edited)
            recount = recount or any(a is not b for a, b in zip(pruned, out, strict=True))
            out = pruned
        if validation.has_blank_text(out):
            out, recount = validation.without_blank_text(out), True
        tokens = self.count(out) if recount else self.kept.tokens[seq]
        return out, tokens, True, True

    def _pruned(self, seq: int, content: list[Any], stored_tokens: int) -> tuple[Any, int, bool, bool]:
        """(content, tokens, changed, pruned) of a user message below the prune boundary."""
        key = (self.session_id, seq, self.tokenizer.name)
        pruned = prune_served(
            content,
            stored_tokens=stored_tokens if self.stored_exact else None,
            tool_names=self.names,
            tokenizer=self.tokenizer,
            known_outputs=PRUNE_OUTPUTS.get(key) if self.stored_exact else None,
            seq=seq,
        )
        if self.stored_exact and len(pruned.outputs) > 1:
            PRUNE_OUTPUTS.put(key, pruned.outputs)
        out: Any = pruned.content  # None once nothing is left to serve
        tokens, changed = pruned.tokens, pruned.changed
        if validation.has_blank_text(out):
            out, changed = validation.without_blank_text(out), True
            tokens = self.count(out)
        return out, tokens, changed, pruned.changed


def _strip_final_reply(served: list[ServedMessage]) -> None:
    """The API rejects an assistant reply ending in whitespace as the final message (only
    there). Its count stays that of the reply as served once the conversation goes on (at most
    the stripped whitespace's token more): the cached usage needs no update when an append
    makes it non-final."""
    for m in reversed(served):
        if not m.dropped:
            if m.role == "assistant":
                m.content = validation.without_trailing_whitespace(m.content)
            return


def served_context(session: Session, *, keep_stored: bool = False) -> ServedContext:
    """The served context (see the module doc); `keep_stored` adds the messages as stored."""
    tokenizer = session_tokenizer(session)
    overlay = active_overlay(session)
    first_kept = overlay.kept_from if overlay else 1
    summary_text = None
    if overlay and overlay.has_summary:
        summary_text = render_summary_message(overlay.summary, overlay.turn_prefix_summary or "")
    rows = context_rows(session, first_kept)
    serving = _Serving(session, tokenizer, rows, overlay.prune_below if overlay else 0, overlay_kept_plan(overlay))
    served = [serving.serve(row) for row in rows]
    if first_kept > 1:
        _serve_orphaned_results(served, tokenizer)
    _strip_final_reply(served)
    return ServedContext(
        system=session.system_prompt,
        system_tokens=session.system_prompt_tokens,
        summary_text=summary_text,
        summary_tokens=_summary_tokens(overlay, summary_text, tokenizer) if overlay and summary_text else 0,
        messages=served,
        stored=engine_messages(rows) if keep_stored else None,
        overlay=overlay,
    )


def engine_messages(rows: list[ContextRow]) -> list[Msg]:
    """Context rows as the engine cuts them: as stored, with their stored tool ids (the cut reads
    no block), except that a max_tokens reply's dropped tool calls are not tool_uses waiting for
    a result (they are never answered nor served), which the cut would never summarize."""
    answered: set[str] | None = None
    messages = []
    for seq, role, content, tokens, usage, use_ids, result_ids, provenance in rows:
        uses = use_ids
        if role == "assistant" and is_max_tokens(usage) and isinstance(content, list):
            if answered is None:
                answered = _answered_ids(rows)
            hidden = set(truncated_content(content, answered)[1])
            if hidden:
                uses = [tool_id for tool_id in use_ids if tool_id not in hidden]
        messages.append(Msg(seq, role, content, tokens, uses, result_ids, provenance))
    return messages


def _serve_orphaned_results(served: list[ServedMessage], tokenizer: core_tokens.Tokenizer) -> None:
    """A result whose tool_use is before the kept part (compacted before the cut kept waiting
    tool_uses) is served as text: the provider rejects a tool_result without its tool_use.
    Appends refuse such a result, so only a context after a compaction can hold one."""
    orphaned = orphaned_results([Msg(m.seq, m.role, m.content or [], 0) for m in served if not m.dropped])
    for m in served:
        if m.seq in orphaned:
            m.content = results_as_text(m.content, orphaned[m.seq])
            m.tokens = core_tokens.count_content(m.content, tokenizer)


def summary_message_count(*, session: Session, summary: str, turn_prefix_summary: str = "") -> tuple[int, str]:
    """(tokens, tokenizer name) of a summary as served (render_summary_message), for storing on
    its compaction (Compaction.summary_message_tokens / summary_tokenizer)."""
    tokenizer = session_tokenizer(session)
    if not summary.strip():
        return 0, tokenizer.name
    return core_tokens.count_content(render_summary_message(summary, turn_prefix_summary), tokenizer), tokenizer.name


def _summary_tokens(overlay: Overlay, summary_text: str, tokenizer: core_tokens.Tokenizer) -> int:
    """The served summary's count: stored with the compaction when made with this tokenizer
    (no per-process cache to thrash past a few dozen sessions), else counted (cached by text)."""
    if overlay.summary_message_tokens is not None and overlay.summary_tokenizer == tokenizer.name:
        return overlay.summary_message_tokens
    return core_tokens.count_content_cached(summary_text, tokenizer)


def served_summary_tokens(session: Session) -> int:
    """The active summary as served (preamble included), counted as the served context counts it."""
    overlay = active_overlay(session)
    if overlay is None or not overlay.has_summary:
        return 0
    text = render_summary_message(overlay.summary, overlay.turn_prefix_summary or "")
    return _summary_tokens(overlay, text, session_tokenizer(session))


def _as_msgs(served: list[ServedMessage]) -> list[Msg]:
    # A message left out of the served context stays in the list, empty and with 0 tokens, so
    # that per-seq lookups and cut points still find every stored message in context.
    return [Msg(m.seq, m.role, m.content if not m.dropped else [], m.tokens) for m in served]


def context_messages(session: Session, *, served: bool = False) -> list[Msg]:
    """The messages currently in context (from the active compaction's first_kept_seq on).

    Default: as stored, with stored token counts (what the engine cuts and summarizes).
    `served=True`: as served, after the prune overlay and max_tokens truncation.
    """
    if served:
        return _as_msgs(served_context(session).messages)
    overlay = active_overlay(session)
    return engine_messages(context_rows(session, overlay.kept_from if overlay else 1))


def context_messages_both(session: Session) -> tuple[list[Msg], list[Msg]]:
    """(as stored, as served): context_messages(session) and context_messages(session,
    served=True) from one read of the messages in context (a compaction job's snapshot)."""
    view = served_context(session, keep_stored=True)
    return view.stored or [], _as_msgs(view.messages)


def context_recount(session: Session, *, reset_reported: bool) -> None:
    """Recount the cached usage of a locked session from its served context and save it."""
    view = served_context(session)
    totals = Message.objects.filter(session=session).aggregate(total=Sum("token_count"))
    session.context_tokens = view.tokens
    session.total_message_tokens = totals["total"] or 0
    fields = ["context_tokens", "total_message_tokens", "tokens_since_report", "updated_at"]
    if reset_reported:
        # The provider's last figure described a context that is no longer served. Its
        # calibration offset (what only the provider counts) stays: usage = estimate + offset.
        session.reported_input_tokens = None
        session.reported_at_seq = None
        session.tokens_since_report = 0
        fields += ["reported_input_tokens", "reported_at_seq"]
    elif session.reported_input_tokens is not None:
        # Served sizes may have changed (a hidden tool_use answered): recount what is after the report.
        reported_at = session.reported_at_seq or 0
        session.tokens_since_report = sum(m.tokens for m in view.messages if m.seq > reported_at)
    session.save(update_fields=[*fields, *meter_set(session)])


def session_recompute_usage(*, session: Session, reset_reported: bool = True) -> Session:
    """Full recompute of the cached usage, after a compaction is activated or undone.

    Locks the session row so a concurrent append cannot interleave its incremental update.
    Returns the locked, updated instance (the caller's `session` is refreshed too).
    """
    with transaction.atomic():
        locked: Session = Session.objects.select_for_update().get(pk=session.pk)
        context_recount(locked, reset_reported=reset_reported)
    counters_copy(locked, session)
    return locked
