"""Readers for other agents' transcripts (Claude Code, pi, SWE-agent) → Anthropic messages."""

from __future__ import annotations

from compaction.core.transcripts.base import ImportedTranscript
from compaction.core.transcripts.claude_code import parse_claude_code, read_claude_code
from compaction.core.transcripts.pi import read_pi
from compaction.core.transcripts.swe_agent import read_swe_agent

__all__ = ["ImportedTranscript", "parse_claude_code", "read_claude_code", "read_pi", "read_swe_agent"]
