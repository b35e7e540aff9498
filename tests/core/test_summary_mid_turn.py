"""A range that ends inside a turn, right after work went through: on every shared transcript
(Claude Code, pi, SWE-agent) the handoff reports that work as done, with what it did, and its
Next Steps do not ask for it again — the project's top complaint was "our next steps were
already done". Plus generated turns for the rules a reader relies on: a request that looks
finished says so (and "then stop" is honoured), a file created empty is the next thing to
write, a harness's task prompt is never quoted as the next step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.text_heuristics import classify_user_text, tool_result_text, user_texts
from compaction.core.tool_vocabulary import is_modify_tool, path_argument, tool_input
from compaction.core.transcripts.detect import read_transcript
from compaction.core.types import Msg
from tests import services

TRANSCRIPTS = sorted(
    path
    for agent in ("claude-code", "pi", "swe-agent")
    for path in (services.TRANSCRIPTS / agent).glob("*")
    if path.suffix in (".jsonl", ".traj")
)
CUTS_PER_TRANSCRIPT = 8


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def _messages(path: Path) -> list[Msg]:
    transcript = read_transcript(str(path))
    raw = [
        {
            "role": m["role"] if isinstance(m, dict) else m.role,
            "content": m["content"] if isinstance(m, dict) else m.content,
        }
        for m in transcript.messages
    ]
    return se.as_msgs(raw)


def _edit_cuts(msgs: list[Msg]) -> list[tuple[int, str]]:
    """(cut, file edited) where the range would end on the successful result
    of an edit made since the latest typed request, the turn still open."""
    calls: dict[str, str] = {}
    latest = ""
    cuts = []
    for index, msg in enumerate(msgs):
        for text in user_texts(msg) if msg.role == "user" else []:
            if classify_user_text(text) != "chatter":
                latest = text
        for block in msg.blocks:
            kind = block.get("type")
            if kind in ("tool_use", "toolCall"):
                args = tool_input(block)
                path = path_argument(args) if isinstance(args, dict) else None
                viewing = isinstance(args, dict) and args.get("command") == "view"
                if is_modify_tool(block.get("name")) and not viewing:
                    calls[block.get("id", "")] = path or ""
            elif kind == "tool_result" and block.get("tool_use_id") in calls and not block.get("is_error"):
                output = tool_result_text(block.get("content"))
                # A text-format editor (SWE-agent's `edit 9:9`) names its file in the observation.
                shown = re.search(r"\[File: (\S+?)(?: \(\d+ lines total\))?\]", output)
                calls[block["tool_use_id"]] = calls[block["tool_use_id"]] or (shown.group(1) if shown else "")
                if not calls[block["tool_use_id"]] or re.search(r"\(1 lines total\)\]\n1:\s*\n", output):
                    continue  # no file to look for, or one just created empty (Next Steps' business)
                if latest and not re.search(r"(?i)not (?:been )?applied|introduced new syntax|rejected", output):
                    cuts.append((index + 1, calls[block["tool_use_id"]]))
    step = max(1, len(cuts) // CUTS_PER_TRANSCRIPT)
    return cuts[::step][:CUTS_PER_TRANSCRIPT]


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: f"{p.parent.name}/{p.stem[:30]}")
def test_work_that_went_through_is_done_and_not_asked_for_again(path: Path) -> None:
    msgs = _messages(path)
    for cut, edited in _edit_cuts(msgs):
        summary = extractive_summary(msgs[:cut])
        done = _section(summary, "### Done", "### In Progress")
        next_steps = _section(summary, "## Next Steps", "## Critical Context")
        name = edited.rsplit("/", 1)[-1]
        # The edit just applied is reported as done, with its file.
        assert name in done, (path.name, cut, name)
        # The latest request is not handed over as a step still to take.
        assert "Continue with the user's latest request" not in next_steps, (path.name, cut)
        first = next((t for m in msgs for t in user_texts(m) if m.role == "user"), "")
        if len(first) > 200:
            # A harness's long task prompt is quoted under Goal, never as a next step.
            assert first[:120] not in next_steps, (path.name, cut)


# ---------------------------------------------------------------------------- generated turns

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _turn(request: str, file: str, check: str | None, check_ok: bool = True) -> list[dict]:
    raw: list[dict] = [{"role": "user", "content": request}]
    raw.append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"The `{file}` handler drops the retry flag. Let me fix this:"},
                {
                    "type": "tool_use",
                    "id": "e1",
                    "name": "Edit",
                    "input": {
                        "file_path": f"/repo/src/{file}",
                        "old_string": "return call()",
                        "new_string": "# Retry once when the flag asks for it\nreturn call(retry=flag)",
                    },
                },
            ],
        }
    )
    raw.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "e1", "content": "Updated."}]})
    if check:
        use = {"type": "tool_use", "id": "c1", "name": "Bash", "input": {"command": check}}
        raw.append({"role": "assistant", "content": [use]})
        output = "12 passed in 0.4s" if check_ok else "1 failed, 11 passed in 0.4s\nExit code 1"
        result = {"type": "tool_result", "tool_use_id": "c1", "content": output, "is_error": not check_ok}
        raw.append({"role": "user", "content": [result]})
    return raw


def _summary(raw: list[dict]) -> str:
    return extractive_summary(se.as_msgs(raw))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.sampled_from([None, "pytest -q", "npm run build"]), st.booleans())
def test_a_turn_cut_after_its_work_went_through_says_what_it_did(word, check, stop):
    file = f"{word}.py"
    request = f"Make the {word} client retry once." + (" Then stop." if stop else "")
    summary = _summary(_turn(request, file, check))
    done = _section(summary, "### Done", "### In Progress")
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    # What the edit did, in its own words (the comment it added), and the check that passed.
    assert f"src/{file}` edited" in done and "Retry once when the flag asks for it" in done
    if check:
        assert re.search(rf"`{re.escape(check)}`(?: passed| → 12 passed)", done)
    assert "appears finished" in next_steps and "Continue with" not in next_steps
    assert ('"Then stop."' in next_steps) == stop
    assert "Let me fix this" not in _section(summary, "### In Progress", "### Blocked")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS)
def test_a_failing_check_after_the_edit_keeps_the_request_open(word):
    summary = _summary(_turn(f"Make the {word} client retry once.", f"{word}.py", "pytest -q", check_ok=False))
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    assert "appears finished" not in next_steps
    assert "pytest -q" in next_steps


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS)
def test_a_request_to_commit_is_not_finished_before_the_commit(word):
    summary = _summary(_turn(f"Make the {word} client retry once and commit it.", f"{word}.py", None))
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    assert "appears finished" not in next_steps and next_steps.strip().startswith("1. Commit the changes")


def test_a_file_created_empty_is_the_next_thing_to_write_and_the_task_prompt_is_not_quoted() -> None:
    task = (
        "We're currently solving the following challenge. " + "It is described at length here. " * 12 + "\n"
        "INSTRUCTIONS:\nWhen you think you have found the flag, you can submit your solution by simply running "
        "the submit command."
    )
    raw: list[dict] = [{"role": "user", "content": task}]
    for n, (thought, command, observation) in enumerate(
        [
            ("Let's compute the seed.", "python get_seed.py", "125379498\n(Open file: n/a)\nbash-$"),
            ("Let's create a python script for the inverse hash.", "create recover.py", "[File: recover.py]\n1:\n"),
        ]
    ):
        use = {"type": "tool_use", "id": f"a{n}", "name": command.split()[0], "input": {"command": command}}
        raw.append({"role": "assistant", "content": [{"type": "text", "text": thought}, use]})
        raw.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"a{n}", "content": observation}]}
        )
    summary = _summary(raw)
    next_steps = _section(summary, "## Next Steps", "## Critical Context")
    assert "`recover.py`" in next_steps and "empty" in next_steps
    assert "We're currently solving" not in next_steps
    assert "`python get_seed.py` succeeded: 125379498" in _section(summary, "### Done", "### In Progress")
