"""Done's "Since the latest request (…)" and Goal's "Latest request" name the same message,
also when the latest was typed while the assistant was working (a queued message)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.text_heuristics import user_messages
from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages

# Cuts at every eighth assistant message after a queued one: Done lists the work of the turn
# only once some of it is past the last commit.
CUTS_AFTER_QUEUED = 5
CUT_STRIDE = 8


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem[:30]}")
def test_done_names_the_latest_request_goal_names(path: Path) -> None:
    msgs = _messages(path)
    queued = [i for i, m in enumerate(msgs) if m.role == "user" and any(q for _t, q in user_messages(m))]
    for index in queued:
        after = [i + 1 for i in range(index + 1, len(msgs)) if msgs[i].role == "assistant"]
        after = after[::CUT_STRIDE][:CUTS_AFTER_QUEUED]
        for cut in after:
            summary = extractive_summary(msgs[:cut])
            goal = re.search(r'(?m)^- Latest request[^:]*: "(.{20})', summary)
            since = re.search(r'(?m)^- Since the latest request \("(.{20})', summary)
            if goal and since:
                assert since.group(1) == goal.group(1), (path.name, cut)
