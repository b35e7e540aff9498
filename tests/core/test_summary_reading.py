"""How the offline handoff reads to an engineer continuing the work (issue #7's blind read),
as properties on generated sessions: each file is one sentence saying what was done to it,
where it stands (committed where, or not yet) and what it was for, in plain words."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench import summary_eval as se
from compaction.core.summarizers.extractive import extractive_summary

PURPOSES = ["add the retry helper", "extract the parser into a module", "rewrite the date handling", "fix the import"]
ORDER_WORDS = ["", " first", " now", " too"]
FILES = ["src/render.py", "lib/app/parser.ex", "assets/js/app.js", "src/lib.rs"]


def _tool(messages: list[dict], name: str, inputs: dict, output: str, say: str = "") -> None:
    tool_id = f"toolu_{len(messages):04d}"
    blocks = ([{"type": "text", "text": say}] if say else []) + [
        {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
    ]
    messages.append({"role": "assistant", "content": blocks})
    messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}]})


@st.composite
def edit_sessions(draw) -> tuple[list[dict], dict[str, str], dict[str, str | None]]:
    """Files edited with a stated purpose, some committed (hash), the rest left uncommitted."""
    messages: list[dict] = [{"role": "user", "content": "Clean up the rendering code and commit as you go."}]
    paths = draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=4, unique=True))
    purposes: dict[str, str] = {}
    committed: dict[str, str | None] = {}
    for n, path in enumerate(paths):
        purpose = draw(st.sampled_from(PURPOSES))
        order = draw(st.sampled_from(ORDER_WORDS))
        purposes[path] = purpose
        edit = {"file_path": f"/home/dev/app/{path}", "old_string": "a", "new_string": "b"}
        _tool(messages, "Edit", edit, "The file was updated.", say=f"Now {purpose} in {path}{order}.")
        committed[path] = None
        if draw(st.booleans()):  # `commit -a` takes every file edited since the last commit
            digest = f"c0ffe{n:02x}"
            _tool(messages, "Bash", {"command": f"git commit -am 'step {n}'"}, f"[main {digest}] step {n}")
            committed.update({p: digest for p, h in committed.items() if h is None})
    return messages, purposes, committed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=edit_sessions())
def test_each_changed_file_is_one_sentence_with_its_state_and_purpose(session) -> None:
    messages, purposes, committed = session
    summary = extractive_summary(se.as_msgs(messages))
    files = summary.split("### Files", 1)[1]
    assert "the agent's purpose" not in files  # machine phrasing the reader has to decode
    for path, purpose in purposes.items():
        # Paths are shown relative to the project root the summarizer infers.
        (line,) = [
            ln for ln in files.splitlines() if re.match(rf"- `[\w/]*{re.escape(path.rsplit('/', 1)[-1])}` was ", ln)
        ]
        assert f"to {purpose}" in line, line
        assert not re.search(r"\b(first|now|too)$", line), line  # the moment's order word is gone
        if committed[path]:
            assert f"committed in `{committed[path]}`" in line, line
        elif any(committed.values()):
            assert "not committed yet" in line, line
