"""Issue #7's done-when targets on the two shared real Claude Code sessions, measured by
bench/summary_eval.py: history before Claude Code's compaction, one compaction with default
settings through the offline path a job takes. Properties only — never one session's wording."""

from __future__ import annotations

import re

import pytest

from bench import summary_eval as se
from tests.services import TRANSCRIPTS

MAX_CHARS = 16_000
ANSI_RE = re.compile(r"\x1b\[|\[\d{1,3}(?:;\d{1,3})*m")
# A heredoc command cut after its opener: `cat <<'EOF'` with no text of the message after it.
CUT_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?EOF['\"]?\s*\)?\"?`?\s*(?:→|$)", re.M)


@pytest.fixture(scope="module", params=se.SESSIONS, ids=lambda name: name[:8])
def evaluation(request):
    return se.evaluate_session(TRANSCRIPTS / "claude-code" / f"{request.param}.jsonl", se.load_fidelity())


def test_target_recall_as_served(evaluation):
    assert evaluation.ours.recall >= 0.90, evaluation.ours.recall


def test_target_prose_recall_above_claude_codes(evaluation):
    assert evaluation.ours.prose_recall > evaluation.claude.prose_recall, (
        evaluation.ours.prose_recall,
        evaluation.claude.prose_recall,
    )


def test_target_nothing_resolved_reported_open(evaluation):
    assert evaluation.ours.open_items == []
    assert evaluation.focus.open_items == []


def test_target_size(evaluation):
    assert evaluation.ours.chars <= MAX_CHARS
    assert evaluation.focus.chars <= MAX_CHARS


def test_target_no_terminal_noise_or_cut_heredoc(evaluation):
    text = evaluation.ours.text
    assert not ANSI_RE.search(text), ANSI_RE.search(text)
    assert not CUT_HEREDOC_RE.search(text), CUT_HEREDOC_RE.search(text)


def test_target_focus_on_commit_hashes_keeps_them(evaluation):
    kept, total = evaluation.focus.hashes
    assert total > 0  # the range holds commits: the target is measurable here
    assert kept >= 0.8 * total, (kept, total)
