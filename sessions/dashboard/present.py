"""Turn stored rows into what the dashboard shows: numbers in words, message blocks, markdown.

Pure functions (no queries) so the templates stay dumb and every figure can be tested.
Nothing here marks user text safe: templates autoescape it; only `render_markdown` returns
HTML, and that HTML has been through nh3's allow-list sanitizer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import nh3
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from compaction.core.blocks import IMAGE, TEXT, THINKING_KINDS, TOOL_RESULT, TOOL_USE, block_text
from compaction.core.config import usage_level
from compaction.core.kept import plan_from_json
from compaction.services import skip_reason as compaction_skip_reason

TEXT_PREVIEW_CHARS = 1200
TOOL_ARG_CHARS = 160

# Tool input keys that best describe a call, most specific first ("Read /a/b.py", "Bash ls").
MAIN_ARG_KEYS = (
    "command",
    "file_path",
    "path",
    "notebook_path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
    "skill",
    "todos",
)


def fmt_int(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def fmt_short(value: int | None) -> str:
    """167094 → "167k", 1_250_000 → "1.25M" (compact figures for table cells)."""
    if value is None:
        return "—"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1000:
        return f"{round(value / 1000)}k"
    return str(value)


def fmt_duration(ms: int | None) -> str:
    if ms is None:
        return "—"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    return f"{minutes} min {sec} s"


def fmt_ago(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "never"
    now = now or timezone.now()
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 60:
        return "just now"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            count = seconds // size
            if unit == "day":
                return f"{count} day{'s' if count != 1 else ''} ago"
            return f"{count} {unit} ago"
    return "just now"  # unreachable; keeps type checkers calm


def fmt_size(chars: int) -> str:
    if chars >= 1_000_000:
        return f"{chars / 1_000_000:.1f}M chars"
    if chars >= 10_000:
        return f"{chars / 1000:.0f}k chars"
    return f"{chars:,} chars"


@dataclass(frozen=True)
class Usage:
    """One session's context usage as the dashboard draws it (bar, gauge, list row)."""

    tokens: int
    context_window: int
    trigger_tokens: int

    @property
    def percent(self) -> float:
        return 100.0 * self.tokens / self.context_window if self.context_window else 0.0

    @property
    def bar_percent(self) -> float:
        return min(100.0, round(self.percent, 1))

    @property
    def trigger_percent(self) -> float:
        return min(100.0, round(100.0 * self.trigger_tokens / self.context_window, 1)) if self.context_window else 0.0

    @property
    def level(self) -> str:
        """ok / near (within 10 % of the window below the trigger) / over (at or past it)."""
        return usage_level(tokens=self.tokens, trigger_tokens=self.trigger_tokens, context_window=self.context_window)

    @property
    def words(self) -> str:
        return (
            f"{self.tokens:,} / {self.context_window:,} tokens ({self.percent:.0f}%)"
            f" · auto-compact at {self.trigger_tokens:,}"
        )

    @property
    def runway(self) -> int:
        """Tokens of new work before the trigger is crossed (negative: past it)."""
        return self.trigger_tokens - self.tokens

    @property
    def runway_words(self) -> str:
        if self.runway <= 0:
            return f"Runway: none — {-self.runway:,} tokens past the trigger"
        return f"Runway left: {self.runway:,} tokens before the next auto-compaction"

    @property
    def short(self) -> str:
        return f"{fmt_short(self.tokens)} / {fmt_short(self.context_window)}"


def compaction_line(compaction: Any, now: datetime | None = None) -> str:
    """ "167k → 21k · 2 min ago" for the sessions list."""
    return (
        f"{fmt_short(compaction.tokens_before)} → {fmt_short(compaction.tokens_after)}"
        f" · {fmt_ago(compaction.finished_at or compaction.created_at, now)}"
    )


REASON_WORDS = {"threshold": "auto", "manual": "manual", "overflow": "overflow", "import": "import"}


def is_prune(compaction: Any) -> bool:
    """A prune-only compaction: old tool output served as placeholders, no new summary."""
    return compaction.strategy == "prune" and compaction.prune_before_seq is not None


def boundary_seq(compaction: Any) -> int | None:
    """The message the timeline shows this compaction's boundary above."""
    return compaction.prune_before_seq if is_prune(compaction) else compaction.first_kept_seq


def boundary_line(compaction: Any) -> str:
    """ "Compacted · auto · 412 messages → summary · 167,094 → 21,380 tokens · 3.2 s", or for a
    prune: "Tool output pruned · auto · 37 tool results before #4,431 · 408,104 → 207,737 tokens"."""
    reason = REASON_WORDS.get(compaction.reason, compaction.reason)
    if is_prune(compaction):
        pruned = (compaction.usage or {}).get("tool_results_pruned")
        what = f"{pruned:,} tool result{'s' if pruned != 1 else ''}" if isinstance(pruned, int) else "tool results"
        parts = ["Tool output pruned", reason, f"{what} before #{compaction.prune_before_seq}"]
    else:
        parts = ["Compacted", reason, f"{compaction.messages_summarized:,} messages → summary"]
    parts.append(f"{fmt_int(compaction.tokens_before)} → {fmt_int(compaction.tokens_after)} tokens")
    if compaction.duration_ms is not None:
        parts.append(fmt_duration(compaction.duration_ms))
    return " · ".join(parts)


def skip_reason(detail: str | None) -> str:
    """Why a job compacted nothing (the services' wording), capitalised under the page's own heading."""
    text = compaction_skip_reason(detail)
    return text[:1].upper() + text[1:]


def tokens_saved(compaction: Any) -> int | None:
    """What the compaction took off the served context: before − after, the figures shown
    beside it (never the planner's estimate, which is counted on another basis)."""
    if compaction.tokens_before is None or compaction.tokens_after is None:
        return None
    return compaction.tokens_before - compaction.tokens_after


# The prune planner's own estimate; the page shows tokens_saved instead (one figure, one basis).
# The summarizer's calls have their own table (summarizer_calls).
HIDDEN_USAGE_KEYS = frozenset({"tokens_saved_estimate", "per_call"})


@dataclass(frozen=True)
class SummarizerCall:
    """One call to the summarizer model as the compaction pages show it (figures formatted)."""

    label: str  # "1", "2", … or "Total"
    input_tokens: str  # uncached input, as the provider reports it
    cache_write: str
    cache_read: str
    output_tokens: str
    cost: str
    latency: str
    stop_reason: str
    shown: str  # how much of the history the model was shown


def _usd(value: Any) -> str:
    return f"${value:,.4f}" if isinstance(value, (int, float)) else "—"


def _shown(call: dict[str, Any]) -> str:
    tokens = call.get("transcript_tokens")
    if not isinstance(tokens, int):
        return "—"
    cap = call.get("tool_output_cap")
    how = "whole" if cap is None else f"tool outputs cut to {cap:,} characters"
    return f"{tokens:,} tokens, {how}"


def summarizer_calls(usage: dict[str, Any] | None) -> list[SummarizerCall]:
    """The summarizer's calls of a compaction — tokens, cost, latency, what the model was shown —
    and their total; [] for a compaction that made none or was recorded without them."""
    calls = [c for c in (usage or {}).get("per_call") or [] if isinstance(c, dict)]
    if not calls:
        return []

    def figure(call: dict[str, Any], key: str) -> str:
        return fmt_int(call.get(key)) if isinstance(call.get(key), int) else "—"

    rows = [
        SummarizerCall(
            label=str(n),
            input_tokens=figure(call, "input_tokens"),
            cache_write=figure(call, "cache_creation_input_tokens"),
            cache_read=figure(call, "cache_read_input_tokens"),
            output_tokens=figure(call, "output_tokens"),
            cost=_usd(call.get("cost_usd")),
            latency=fmt_duration(call.get("ms")) if isinstance(call.get("ms"), int) else "—",
            stop_reason=str(call.get("stop_reason") or "—"),
            shown=_shown(call),
        )
        for n, call in enumerate(calls, start=1)
    ]
    if len(rows) > 1:
        total = {key: sum(c.get(key) or 0 for c in calls) for key in ("input_tokens", "output_tokens", "ms")}
        total |= {
            k: sum(c.get(k) or 0 for c in calls) for k in ("cache_creation_input_tokens", "cache_read_input_tokens")
        }
        rows.append(
            SummarizerCall(
                label="Total",
                input_tokens=figure(total, "input_tokens"),
                cache_write=figure(total, "cache_creation_input_tokens"),
                cache_read=figure(total, "cache_read_input_tokens"),
                output_tokens=figure(total, "output_tokens"),
                cost=_usd((usage or {}).get("cost_usd")),
                latency=fmt_duration(total["ms"]),
                stop_reason="",
                shown="",
            )
        )
    return rows


# --- fidelity ---------------------------------------------------------------------------

FIDELITY_LABELS = {
    "instructions": "User instructions",
    "errors": "Errors",
    "files": "Files",
    "commands": "Commands",
    "decisions": "Decisions",
    "focus": "Requested focus",
}


@dataclass
class FidelityCategory:
    name: str
    kept: int
    total: int
    missed: list[str]


@dataclass
class FidelityView:
    """compaction.core.ledger's report, shaped for the detail and review pages."""

    score: float  # 0..1, after repair
    score_before_repair: float | None
    kept: int
    total: int
    repaired: int  # items the repair step appended verbatim
    categories: list[FidelityCategory]
    error: str = ""  # why there is no score (the check itself failed)

    @property
    def percent(self) -> str:
        return f"{self.score * 100:.0f} %"

    @property
    def percent_before_repair(self) -> str:
        return "" if self.score_before_repair is None else f"{float(self.score_before_repair) * 100:.0f} %"

    @property
    def missed_count(self) -> int:
        return sum(len(c.missed) for c in self.categories)


def fidelity_view(fidelity: dict[str, Any] | None) -> FidelityView | None:
    """None without a report (no summary); a view with `error` set if the check failed."""
    if not fidelity:
        return None
    if "score" not in fidelity:
        error = str(fidelity.get("error") or "no fidelity score recorded")
        return FidelityView(0.0, None, 0, 0, 0, [], error=error)
    after = (fidelity.get("after_repair") or {}).get("categories") or {}
    categories = [
        FidelityCategory(
            name=FIDELITY_LABELS.get(name, name.replace("_", " ").capitalize()),
            kept=int(figures.get("kept", 0)),
            total=int(figures.get("total", 0)),
            missed=[str(item) for item in figures.get("missed") or []],
        )
        for name, figures in after.items()
        if figures.get("total")
    ]
    repaired = fidelity.get("repaired") or {}
    return FidelityView(
        score=float(fidelity["score"]),
        score_before_repair=fidelity.get("score_before_repair"),
        kept=int((fidelity.get("after_repair") or {}).get("kept", sum(c.kept for c in categories))),
        total=int((fidelity.get("after_repair") or {}).get("total", sum(c.total for c in categories))),
        repaired=sum(int(v) for k, v in repaired.items() if k != "skipped_for_budget" and isinstance(v, int)),
        categories=categories,
    )


# --- compaction history -------------------------------------------------------------------


def collapse_skipped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History rows (newest first) with each run of consecutive "nothing to compact" attempts
    folded into its newest row, which counts the others (`skipped_runs`): a session whose
    agent keeps asking does not bury its real compactions under identical lines."""
    out: list[dict[str, Any]] = []
    for row in rows:
        skipped = row["c"].status == "skipped"
        if skipped and out and out[-1]["c"].status == "skipped":
            out[-1]["skipped_runs"] += 1
            out[-1]["oldest"] = row["c"]
            continue
        out.append({**row, "skipped_runs": 1 if skipped else 0, "oldest": row["c"]})
    return out


# --- message content -------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # text | thinking | tool_use | tool_result | image | other
    text: str = ""
    preview: str = ""
    truncated: bool = False
    size: str = ""
    name: str = ""
    arg: str = ""
    is_error: bool = False
    tool_use_id: str = ""
    children: list[Block] = field(default_factory=list)


def _text_block(kind: str, text: str) -> Block:
    truncated = len(text) > TEXT_PREVIEW_CHARS
    return Block(
        kind=kind,
        text=text,
        preview=text[:TEXT_PREVIEW_CHARS] if truncated else text,
        truncated=truncated,
        size=fmt_size(len(text)),
    )


def _main_arg(tool_input: Any) -> str:
    if not isinstance(tool_input, dict):
        return _clip(str(tool_input))
    for key in MAIN_ARG_KEYS:
        value = tool_input.get(key)
        if value:
            return _clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    for value in tool_input.values():
        if isinstance(value, str) and value:
            return _clip(value)
    return ""


def _clip(text: str, limit: int = TOOL_ARG_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == TEXT:
                parts.append(str(item.get("text", "")))
            elif isinstance(item, dict) and item.get("type") == IMAGE:
                parts.append("[image]")
            else:
                parts.append(json.dumps(item, ensure_ascii=False))
        return "\n".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


def message_blocks(content: Any) -> list[Block]:
    """Display blocks for one message's stored content (a string or Anthropic blocks)."""
    if isinstance(content, str):
        return [_text_block("text", content)]
    if not isinstance(content, list):
        return [_text_block("other", json.dumps(content, ensure_ascii=False, indent=2))]
    blocks: list[Block] = []
    for item in content:
        if not isinstance(item, dict):
            blocks.append(_text_block("text", str(item)))
            continue
        kind = item.get("type")
        if kind == TEXT:
            blocks.append(_text_block("text", block_text(item)))
        elif kind in THINKING_KINDS:
            blocks.append(_text_block("thinking", block_text(item)))
        elif kind == TOOL_USE:
            raw = json.dumps(item.get("input", {}), ensure_ascii=False, indent=2)
            block = _text_block(TOOL_USE, raw)
            block.name = str(item.get("name", "tool"))
            block.arg = _main_arg(item.get("input"))
            block.tool_use_id = str(item.get("id", ""))
            blocks.append(block)
        elif kind == TOOL_RESULT:
            block = _text_block(TOOL_RESULT, _result_text(item.get("content")))
            block.is_error = bool(item.get("is_error"))
            block.tool_use_id = str(item.get("tool_use_id", ""))
            blocks.append(block)
        elif kind == IMAGE:
            source = item.get("source") or {}
            blocks.append(Block(kind="image", text=str(source.get("media_type", "image"))))
        else:
            blocks.append(_text_block("other", json.dumps(item, ensure_ascii=False, indent=2)))
    return blocks


# --- markdown --------------------------------------------------------------------------

# html=False: raw HTML in a summary is shown as text, never passed through; nh3 then
# enforces the allow-list on what markdown-it generated (defence in depth).
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_ALLOWED_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "strong", "em", "code",
    "pre", "blockquote", "a", "table", "thead", "tbody", "tr", "th", "td", "del",
}  # fmt: skip


_FILE_TAGS = re.compile(r"<(read-files|modified-files)>.*?</\1>\s*", re.DOTALL)


def strip_file_tags(text: str) -> str:
    """The summary's <read-files>/<modified-files> blocks, which pages list separately."""
    return _FILE_TAGS.sub("", text or "").rstrip()


def render_markdown(text: str) -> SafeString:
    html = _markdown.render(text or "")
    clean = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href", "title"}, "th": {"align"}, "td": {"align"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 — sanitized by nh3 just above


# How each rule of the kept plan (compaction.core.kept) reads on the compaction's page.
KEPT_RULE_WORDS = {
    "same": "repeats message #{ref}: a pointer to it",
    "superseded": "out-of-date read of {path} (changed or read again at #{ref}): head and tail",
    "long": "long search or listing: head and tail",
    "large": "over 8,000 tokens: head and tail",
    "old": "older output: head and tail",
}


@dataclass(frozen=True)
class KeptTrim:
    seq: int
    tool: str
    what: str
    tokens: int  # the output as stored


def kept_trims(stored_plan: Any) -> list[KeptTrim]:
    """The tool results a compaction's kept plan serves trimmed or as pointers, by message."""
    plan = plan_from_json(stored_plan)
    return [
        KeptTrim(seq, edit.tool or "tool", KEPT_RULE_WORDS[edit.kind].format(ref=edit.ref, path=edit.path), edit.tokens)
        for seq, edits in sorted(plan.edits.items())
        for edit in edits
    ]
