"""Readers for other agents' transcripts (Claude Code, pi, Codex, SWE-agent, Anthropic / OpenAI chat JSON) → Anthropic messages."""

from __future__ import annotations

from compaction.core.transcripts.anthropic_json import parse_anthropic_messages
from compaction.core.transcripts.base import ImportedTranscript, TranscriptError
from compaction.core.transcripts.claude_code import parse_claude_code, read_claude_code
from compaction.core.transcripts.codex import parse_codex, read_codex
from compaction.core.transcripts.detect import FORMATS, detect_format, read_transcript
from compaction.core.transcripts.openai_chat import parse_openai_chat
from compaction.core.transcripts.pi import read_pi
from compaction.core.transcripts.swe_agent import parse_swe_agent, read_swe_agent

__all__ = [
    "FORMATS",
    "ImportedTranscript",
    "TranscriptError",
    "detect_format",
    "parse_anthropic_messages",
    "parse_claude_code",
    "parse_codex",
    "parse_openai_chat",
    "parse_swe_agent",
    "read_claude_code",
    "read_codex",
    "read_pi",
    "read_swe_agent",
    "read_transcript",
]
