"""Summarizers (anthropic, extractive, truncate) and the fallback chain that runs them."""

from __future__ import annotations

from compaction.core.summarizers.base import (
    Draft,
    Summarizer,
    SummarizerError,
    SummaryInput,
    SummaryResult,
    check_summary_text,
)
from compaction.core.summarizers.chain import STRATEGIES, build_chain, summarize
from compaction.core.summarizers.extractive import ExtractiveSummarizer
from compaction.core.summarizers.truncate import TruncateSummarizer

__all__ = [
    "STRATEGIES",
    "Draft",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummaryInput",
    "SummaryResult",
    "TruncateSummarizer",
    "build_chain",
    "check_summary_text",
    "summarize",
]
