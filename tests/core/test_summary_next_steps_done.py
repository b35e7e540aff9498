"""A step the agent planned ("I will then open the file and fix it") is no next step once the
calls after it carried it out: the file it names opened or edited, the command it names run.
A plan whose step is still ahead stays."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.tool_vocabulary import is_modify_tool, path_argument, tool_input
from compaction.core.types import Msg
from tests.core.test_summary_mid_turn import TRANSCRIPTS, _messages, _section

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _session(word: str, *, edited: bool, answered: bool, named: bool) -> tuple[list[dict], str]:
    file = f"/repo/src/{word}.py"
    target = f"`{word}.py`" if named else "the file"
    plan = f"I will then open {target} and fix the {word} bug."
    calls = [
        ("Glob", {"pattern": f"**/{word}.py"}, file, f"I will first search for `{word}.py`. {plan}"),
        ("Read", {"file_path": file}, "1:def parse():\n2:    return None", "Found it; reading it now."),
    ]
    if edited:
        edit = {"file_path": file, "old_string": "return None", "new_string": "return parse_all()"}
        calls.append(("Edit", edit, "Updated.", "The parser returns nothing; it should parse everything."))
    raw: list[dict] = [{"role": "user", "content": f"The {word} parser is broken, please fix it."}]
    for n, (name, args, output, text) in enumerate(calls):
        use = {"type": "tool_use", "id": f"t{n}", "name": name, "input": args}
        raw.append({"role": "assistant", "content": [{"type": "text", "text": text}, use]})
        if n < len(calls) - 1 or answered:
            raw.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": output}]}
            )
    return raw, plan


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.booleans(), st.booleans(), st.booleans())
def test_a_planned_step_the_later_calls_carried_out_is_not_a_next_step(word, edited, answered, named):
    raw, plan = _session(word, edited=edited, answered=answered, named=named)
    next_steps = _section(extractive_summary(se.as_msgs(raw)), "## Next Steps", "## Critical Context")
    if edited:
        assert plan not in next_steps
    else:
        # Opened, not yet fixed: the step is still ahead.
        assert plan in next_steps


# ---------------------------------------------------------------------------- shared transcripts

CUTS_PER_TRANSCRIPT = 12
_CHANGE_VERB_RE = re.compile(r"(?i)\b(edit|fix|correct|change|update|modify)\b")
_FILE_RE = re.compile(r"[\w-]+\.[A-Za-z]{1,5}\b")


def _edits_after(msgs: list[Msg], start: int, cut: int) -> list[str]:
    """Paths of the edits the assistant made in msgs[start:cut] (the call made, whatever came
    back); a text-format editor's `edit` works on the file opened last."""
    paths, opened = [], ""
    for index, msg in enumerate(msgs[:cut]):
        for block in msg.blocks if msg.role == "assistant" else []:
            if block.get("type") not in ("tool_use", "toolCall"):
                continue
            args = tool_input(block)
            args = args if isinstance(args, dict) else {}
            if block.get("name") in ("open", "open_file"):
                opened = path_argument(args) or str(args.get("command", "")).split(" ")[-1]
            elif is_modify_tool(block.get("name")) and args.get("command") != "view" and index >= start:
                paths.append(path_argument(args) or opened)
    return paths


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem[:30]}")
def test_no_next_step_asks_to_change_a_file_the_agent_changed_since(path: Path) -> None:
    msgs = _messages(path)
    cuts = [i + 1 for i, m in enumerate(msgs) if m.role == "assistant"]
    for cut in cuts[:: max(1, len(cuts) // CUTS_PER_TRANSCRIPT)]:
        next_steps = _section(extractive_summary(msgs[:cut]), "## Next Steps", "## Critical Context")
        for line in re.findall(r"(?m)^\d+\. (.+)$", next_steps):
            said = [i for i in range(cut) if msgs[i].role == "assistant" and line[:60] in _text(msgs[i])]
            if not said or not _CHANGE_VERB_RE.search(line.split(" then ", 1)[-1]):
                continue
            step = line.split(" then ", 1)[-1]
            files = _FILE_RE.findall(step) or _FILE_RE.findall(_text(msgs[said[-1]]))
            edited = " ".join(_edits_after(msgs, said[-1], cut))
            assert not any(f in edited for f in files), (path.name, cut, line)


def _text(msg: Msg) -> str:
    return " ".join(re.sub(r"\s+", " ", b.get("text", "")) for b in msg.blocks if b.get("type") == "text")
