"""The real-transcript corpus (shared/data/transcripts: Claude Code, pi, SWE-agent, Codex...) and
the helpers that turn its sessions into what the service stores and compacts.

The corpus is not part of the repository. It is found through `COMPACTOR_TRANSCRIPTS_DIR`, else
in `shared/data/transcripts` beside the clone (where CI lays it). A test that reads it carries the
`corpus` marker (`@corpus`, or `pytestmark = corpus` when every test of a module does): without
the corpus it is skipped with a message saying where it was looked for, and under
`REQUIRE_SERVICES=1` (CI) it fails instead. Everything else builds its own fixtures.

bench/ uses the same helpers (its evaluators run the same core path over more cuts); tests import
nothing from bench/.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from compaction.core import policy
from compaction.core.config import resolve_config
from compaction.core.cutpoint import plan_cut
from compaction.core.kept import plan_kept
from compaction.core.prune import tool_names
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content, count_text, get_tokenizer
from compaction.core.transcripts.claude_code import read_claude_code
from compaction.core.types import Msg
from compaction.core.work import fold, work_start
from tests.services import ROOT, missing

ENV = "COMPACTOR_TRANSCRIPTS_DIR"


def _locate() -> Path:
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    return ROOT.parent / "shared" / "data" / "transcripts"


# Where the corpus is, or where it was looked for: a path that need not exist, so that a module
# may name its files at import (collection finds nothing to parametrize over when it is absent).
TRANSCRIPTS = _locate()
PRESENT = TRANSCRIPTS.is_dir()
ABSENT = f"the real-transcript corpus is absent: no folder {TRANSCRIPTS} (set {ENV}, or lay shared/ beside the clone)"

corpus = pytest.mark.corpus


def require(item: pytest.Item) -> None:
    """pytest_runtest_setup: skip (fail under REQUIRE_SERVICES=1) a `corpus` test without it."""
    if item.get_closest_marker("corpus") is not None and not PRESENT:
        missing(ABSENT)


def shared_dir() -> Path:
    """shared/ itself: `COMPACTOR_SHARED_DIR`, else the folder that holds the corpus (data/transcripts)."""
    return Path(os.environ.get("COMPACTOR_SHARED_DIR") or TRANSCRIPTS.parent.parent)


def load_fidelity() -> ModuleType:
    """shared/tools/fidelity.py (the shared ledger-recall scorer; a script, not a package),
    beside the corpus (`COMPACTOR_SHARED_DIR` to name shared/ itself)."""
    path = shared_dir() / "tools" / "fidelity.py"
    if not path.is_file():
        missing(f"the shared scorer is absent: no file {path} (set COMPACTOR_SHARED_DIR)")
    spec = importlib.util.spec_from_file_location("shared_fidelity", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the corpus's sessions as the service stores and compacts them --------------------------

# The shared Claude Code sessions that hold a Claude Code compaction (its summary, and for these
# two the compaction call Claude Code made: subagents/agent-acompact-*.jsonl).
SESSIONS = ("258c7280-ae70-4798-800f-63464d01a85d", "8463c716-a2ea-4c14-9efa-87158ebd9f20")
WINDOW = 200_000
FORMATS = (".jsonl", ".traj", ".json")


def transcripts(folder: Path) -> list[Path]:
    """Every transcript file under `folder` (Claude Code's compaction calls left out)."""
    return sorted(p for p in folder.rglob("*") if p.suffix in FORMATS and p.is_file() and "acompact" not in p.name)


def messages_for_api(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded messages as the service stores them on import or replay (the same rule as
    compaction.services.transcript_messages_for_api, kept here so this runs without Django):
    whitespace-only text blocks dropped, a message left empty skipped."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [b for b in content if not (b.get("type") == "text" and not str(b.get("text", "")).strip())]
        if not (content.strip() if isinstance(content, str) else content):
            continue
        out.append({**message, "content": content})
    return out


def history_before_compaction(path: Path) -> tuple[list[dict[str, Any]], str]:
    """A Claude Code session's messages before its first compaction boundary, as the service
    stores them, and the summary Claude Code made of them."""
    transcript = read_claude_code(path)
    boundary = transcript.compactions[0]
    return messages_for_api(transcript.messages[: boundary["before_message_index"]]), boundary["summary"]


def as_msgs(history: list[dict[str, Any]], first_seq: int = 1) -> list[Any]:
    """API-shaped messages as the core's Msg, with stored-style token counts."""
    return [
        Msg(first_seq + i, m["role"], m["content"], count_content(m["content"]), provenance=m.get("provenance", ""))
        for i, m in enumerate(history)
    ]


def compact_once(
    history: list[dict[str, Any]],
    *,
    instructions: str | None = None,
    previous_state: Any = None,
    previous_summary: str | None = None,
    first_seq: int = 1,
    keep: int | None = None,
) -> tuple[Any, Any]:
    """(cut, summary result) of one compaction with default settings through the core path a
    job takes: the policy's plan (its keep budget and cut), the summarizer chain with its checks
    and repair (no API key: the offline summarizer). `previous_state`: the work state an earlier
    compaction stored (this one continues it); `keep`: an explicit keep budget."""
    config = resolve_config(context_window=WINDOW, defaults={})
    if keep is not None:
        config = dataclasses.replace(config, keep_recent_tokens=keep)
    msgs = as_msgs(history, first_seq)
    total = sum(m.tokens for m in msgs)
    plan = policy.plan(
        policy.PolicyInputs(
            config=config,
            tokens_before=total,
            messages=msgs,
            served_messages=msgs,
            estimated_before=total,
            calibration=None,
            system_prompt_tokens=0,
            summary_framing_tokens=count_content(render_summary_message("")),
            keep_explicit=keep is not None,
            strategy="extractive",
            instructions=instructions or "",
            work_start_seq=work_start(fold(msgs, previous_state)),
        )
    )
    cut = plan.cut or plan_cut(msgs, keep_recent_tokens=config.keep_recent_tokens, context_window=WINDOW)
    chain = build_chain(
        api_key=None, base_url=None, model=config.summarizer_model, timeout=30, max_retries=0, strategy="auto"
    )
    inp = SummaryInput(
        messages=list(cut.summarized),
        instructions=instructions,
        output_budget=config.summary_budget,
        model=config.summarizer_model,
        kept=list(cut.kept),
        previous_state=previous_state,
        previous_summary=previous_summary,
    )
    return cut, summarize(inp, chain)


def served_text(result: Any) -> str:
    """The summary message as the service serves it."""
    return render_summary_message(result.summary)


def served_tokens(cut: Any, result: Any, history: list[dict[str, Any]]) -> int:
    """Tokens served right after the compaction: the summary message and the kept messages,
    served lean as the service serves them (compaction.core.kept)."""
    plan = plan_kept(list(cut.kept), names=tool_names(as_msgs(history)), tokenizer=get_tokenizer())
    return count_text(served_text(result)) + plan.kept_tokens
