"""compaction.core.kept: the kept part served lean, with plain data (no database).

One test per rule: a repeated output is served as a pointer, a file read made out of date is
trimmed, a long listing is trimmed, old output is trimmed; and what the rules never touch: tool
pairs (only a result's text shrinks), the newest turn, the stored messages. The served counts
the plan records are the counts of what is served.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.core.kept import (
    LARGE,
    LONG,
    OLD,
    SAME,
    SUPERSEDED,
    KeptPlan,
    plan_from_json,
    plan_kept,
    served_kept,
)
from compaction.core.prune import tool_names
from compaction.core.tokens import count_content, get_tokenizer
from compaction.core.types import Msg

TOKENIZER = get_tokenizer()
DIALYZER = "\n".join(
    ["Compiling 3 files (.ex)", "Finding suitable PLTs"]
    + [f"lib/spotter/transcripts.ex:{40 + i}:no_return Function render/{i} has no local return." for i in range(30)]
    + ["done (warnings were emitted)", "Halting VM with exit status 2"]
)


def file_text(name: str, lines: int = 120) -> str:
    return "\n".join(f"{n:>6}\tdef {name}_{n}(x): return x + {n}  # line {n} of {name}" for n in range(1, lines + 1))


class Conversation:
    """Messages built turn by turn: a tool call and its result are one step."""

    def __init__(self) -> None:
        self.contents: list[tuple[str, Any]] = []
        self.calls = 0

    def say(self, role: str, text: str) -> Conversation:
        self.contents.append((role, text))
        return self

    def step(self, name: str, inp: dict[str, Any], output: str, *, is_error: bool = False) -> Conversation:
        self.calls += 1
        tool_id = f"toolu_{self.calls:03d}"
        use = {"type": "tool_use", "id": tool_id, "name": name, "input": inp}
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": output}
        if is_error:
            result["is_error"] = True
        self.contents.append(("assistant", [{"type": "text", "text": f"Calling {name}."}, use]))
        self.contents.append(("user", [result]))
        return self

    def messages(self, first_seq: int = 1) -> list[Msg]:
        return [
            Msg(first_seq + i, role, content, count_content(content, TOKENIZER))
            for i, (role, content) in enumerate(self.contents)
        ]


def plan_of(messages: list[Msg], **kwargs: Any) -> KeptPlan:
    return plan_kept(messages, names=tool_names(messages), tokenizer=TOKENIZER, **kwargs)


def served(messages: list[Msg], plan: KeptPlan) -> dict[int, Any]:
    return {m.seq: m.content for m in served_kept(messages, plan)}


def result_text(content: Any) -> str:
    return content[0]["content"]


def edit_kinds(plan: KeptPlan) -> dict[int, list[str]]:
    return {seq: [e.kind for e in edits] for seq, edits in plan.edits.items()}


def finish(c: Conversation) -> Conversation:
    """A newest turn that touches nothing earlier: the rules' subjects are older than it."""
    return c.step("Bash", {"command": "git status --short"}, "M lib/a.ex").say("assistant", "Next: the docs.")


# --- the rules ---------------------------------------------------------------------------


def test_a_repeated_output_is_kept_once_and_its_copies_point_to_it():
    c = Conversation().say("user", "commit the fix")
    for attempt in range(4):
        c.step("Bash", {"command": f"git commit -m 'fix {attempt}'"}, DIALYZER, is_error=True)
    messages = finish(c).messages()
    plan = plan_of(messages, protect_tokens=100_000)  # nothing is old: only the copies shrink
    out = served(messages, plan)
    first = 3  # the first result
    assert result_text(out[first]) == DIALYZER
    for seq in (5, 7, 9):
        text = result_text(out[seq])
        assert (
            text
            == f"[same Bash output as in message #{first}: {messages[seq - 1].tokens - 12:,} tokens, repeated verbatim]"
        )
        assert plan.edits[seq][0].kind == SAME and plan.edits[seq][0].ref == first
    assert plan.counts()[SAME] == 3


def test_a_copy_in_the_newest_turn_is_the_one_kept_whole():
    c = Conversation().say("user", "commit the fix")
    c.step("Bash", {"command": "git commit -m a"}, DIALYZER, is_error=True)
    c.step("Bash", {"command": "mix test"}, "42 tests, 0 failures")
    c.step("Bash", {"command": "git commit -m b"}, DIALYZER, is_error=True)
    messages = c.messages()
    plan = plan_of(messages, protect_tokens=100_000)
    out = served(messages, plan)
    assert result_text(out[7]) == DIALYZER  # the newest turn, verbatim
    assert (
        result_text(out[3])
        == "[same Bash output as in message #7: " + f"{messages[2].tokens - 12:,} tokens, repeated verbatim]"
    )


def test_a_file_read_made_out_of_date_by_an_edit_is_trimmed_to_head_and_tail():
    path = "/repo/lib/spotter/transcripts.ex"
    content = file_text("render", 218)
    c = Conversation().say("user", "add the filter")
    c.step("Read", {"file_path": path}, content)
    c.step("Edit", {"file_path": path, "old_string": "x + 1", "new_string": "x + 2"}, "The file has been updated.")
    messages = finish(c).messages()
    plan = plan_of(messages, protect_tokens=100_000)
    text = result_text(served(messages, plan)[3])
    assert plan.edits[3][0].kind == SUPERSEDED and plan.edits[3][0].ref == 4
    lines = content.splitlines()
    assert text.startswith("\n".join(lines[:6]))
    assert text.endswith("\n".join(lines[-3:]))
    assert f"209 more lines of {path}: out of date" in text
    assert "the file was changed at message #4; message #3 holds this read whole" in text


def test_a_read_of_another_part_of_the_file_supersedes_nothing_and_the_same_part_does():
    path = "src/app.py"
    c = Conversation().say("user", "look at app.py")
    c.step("Read", {"file_path": path, "offset": 1, "limit": 100}, file_text("head", 100))
    c.step("Read", {"file_path": path, "offset": 200, "limit": 100}, file_text("tail", 100))
    c.step("Read", {"file_path": "src/other.py"}, file_text("other", 100))
    c.step("Read", {"file_path": "src/other.py"}, file_text("other_changed", 100))
    messages = finish(c).messages()
    plan = plan_of(messages, protect_tokens=100_000)
    assert 3 not in plan.edits and 5 not in plan.edits  # two parts of one file: both current
    assert plan.edits[7][0].kind == SUPERSEDED and plan.edits[7][0].ref == 8  # the whole file read again
    assert "the file was read again at message #8" in result_text(served(messages, plan)[7])


def test_the_same_file_read_twice_unchanged_is_a_copy_not_out_of_date():
    c = Conversation().say("user", "look at app.py")
    c.step("Read", {"file_path": "src/app.py"}, file_text("app", 100))
    c.step("Bash", {"command": "mix compile"}, "Compiled 1 file")
    c.step("Read", {"file_path": "src/app.py"}, file_text("app", 100))
    messages = finish(c).messages()
    plan = plan_of(messages, protect_tokens=100_000)
    assert edit_kinds(plan) == {7: [SAME]}  # the first read stays whole; the second points to it
    assert result_text(served(messages, plan)[3]) == file_text("app", 100)


def test_a_long_search_output_is_trimmed_even_when_recent():
    hits = "\n".join(f"node_modules/pkg{i}/lib/index.js:12: export function parse()" for i in range(100))
    c = Conversation().say("user", "where is parse defined?")
    c.step("Bash", {"command": "grep -rn 'function parse' ."}, hits)
    c.step("Bash", {"command": "python -m pytest -q"}, "\n".join(f"test_{i} PASSED" for i in range(100)))
    messages = finish(c).messages()
    plan = plan_of(messages)  # both outputs are inside the newest 2,000 tokens of output
    text = result_text(served(messages, plan)[3])
    assert edit_kinds(plan) == {3: [LONG]}  # the test run is no listing: whole
    assert text.startswith("node_modules/pkg0/lib/index.js")
    assert "100 lines of Bash output" in text and "message #3 holds them all" in text
    assert text.endswith("node_modules/pkg99/lib/index.js:12: export function parse()")


def test_old_output_beyond_the_protected_budget_is_trimmed_and_recent_output_is_not():
    c = Conversation().say("user", "run everything")
    for n in range(4):
        c.step("Bash", {"command": f"make check-{n}"}, "\n".join(f"check {n}.{i}: ok" for i in range(200)))
    messages = finish(c).messages()
    plan = plan_of(messages, protect_tokens=2_000)
    assert edit_kinds(plan) == {3: [OLD], 5: [OLD]}  # the newest output crossing the budget stays whole
    assert "message #3 holds it all" in result_text(served(messages, plan)[3])


def test_an_output_over_the_large_size_is_trimmed_even_in_the_newest_turn():
    page = "\n".join(
        f"<p>Hooks section {i}: the hook runs before the tool call and may block it.</p>" for i in range(900)
    )
    c = Conversation().say("user", "read the hooks docs")
    c.step("WebFetch", {"url": "https://example.com/hooks"}, page)
    messages = c.messages()
    plan = plan_of(messages)
    assert messages[-1].tokens > 8_000
    assert edit_kinds(plan) == {3: [LARGE]}
    text = result_text(served(messages, plan)[3])
    assert text.startswith("<p>Hooks section 0:") and "message #3 holds it all" in text
    assert plan.tokens[3] < 1_000


# --- what is never trimmed -----------------------------------------------------------------


def lean_history() -> list[Msg]:
    """Every rule at work: copies, a superseded read, a long listing, old output."""
    c = Conversation().say("user", "fix the transcript renderer")
    c.step("Read", {"file_path": "lib/render.ex"}, file_text("render", 150))
    c.step("Bash", {"command": "find . -name '*.ex'"}, "\n".join(f"./lib/m{i}.ex" for i in range(90)))
    c.step("Edit", {"file_path": "lib/render.ex", "old_string": "a", "new_string": "b"}, "Updated.")
    for attempt in range(3):
        c.step("Bash", {"command": f"git commit -m 'try {attempt}'"}, DIALYZER, is_error=True)
    c.step("Bash", {"command": "mix test"}, "\n".join(f"test {i} ok" for i in range(300)))
    c.say("user", "also check the docs")
    c.step("Read", {"file_path": "lib/render.ex"}, file_text("render_new", 150))
    return c.messages(first_seq=40)


def test_lean_history_uses_every_rule():
    plan = plan_of(lean_history())
    assert all(plan.counts()[kind] for kind in (SAME, SUPERSEDED, LONG, OLD)), plan.counts()


def test_tool_pairs_stay_whole_only_the_results_text_shrinks():
    messages = lean_history()
    plan = plan_of(messages)
    out = served(messages, plan)
    assert plan.edits
    for m in messages:
        if m.role == "assistant":
            assert out[m.seq] is m.content  # tool_use blocks (and every assistant word) as stored
            continue
        blocks = m.blocks
        assert len(out[m.seq] if isinstance(out[m.seq], list) else [out[m.seq]]) == len(blocks)
        for stored, shown in zip(blocks, out[m.seq] if isinstance(out[m.seq], list) else blocks, strict=True):
            assert {k: v for k, v in shown.items() if k != "content"} == {
                k: v for k, v in stored.items() if k != "content"
            }
    served_ids = [tid for m in served_kept(messages, plan) for tid in (*m.tool_use_ids, *m.tool_result_ids)]
    assert served_ids == [tid for m in messages for tid in (*m.tool_use_ids, *m.tool_result_ids)]


def test_the_newest_turn_is_served_verbatim():
    messages = lean_history()
    plan = plan_of(messages)
    newest = messages[-2:]  # the last tool call and its result (a re-read, a long output)
    assert all(m.seq not in plan.edits for m in newest)
    # The earlier read of the same file is the one trimmed, and so is an earlier long output.
    assert plan.edits[42][0].kind == SUPERSEDED
    assert newest[1].tokens > 2_000  # large, and whole


def test_nothing_stored_changes():
    messages = lean_history()
    before = copy.deepcopy([m.content for m in messages])
    plan = plan_of(messages)
    served_kept(messages, plan)
    assert [m.content for m in messages] == before


def test_the_plan_counts_what_is_served_and_survives_its_json():
    messages = lean_history()
    plan = plan_of(messages)
    for m in served_kept(messages, plan):
        if m.seq in plan.edits:
            assert m.tokens == count_content(m.content, TOKENIZER) < messages[m.seq - 40].tokens
    assert plan.kept_tokens == sum(count_content(m.content, TOKENIZER) for m in served_kept(messages, plan))
    stored = json.loads(json.dumps(plan.as_json()))
    again = plan_from_json(stored)
    assert again.edits == plan.edits and again.tokens == plan.tokens and again.tokenizer == TOKENIZER.name
    assert served(messages, again) == served(messages, plan)  # byte for byte, from what is stored


@pytest.mark.parametrize("stored", [None, {}, [], {"version": 99, "messages": []}, {"version": 1, "messages": [{}]}])
def test_an_unreadable_stored_plan_serves_everything_whole(stored):
    assert plan_from_json(stored).empty


def test_outputs_that_are_not_text_and_protected_tools_are_never_trimmed():
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]
    c = Conversation().say("user", "look")
    c.step("screenshot", {}, image)  # type: ignore[arg-type]
    c.step("Skill", {"name": "review"}, "\n".join(f"rule {i}: be strict" for i in range(400)))
    c.step("screenshot", {}, image)  # type: ignore[arg-type]
    c.step("Skill", {"name": "review"}, "\n".join(f"rule {i}: be strict" for i in range(400)))
    messages = finish(c).messages()
    assert plan_of(messages, protect_tokens=0).empty


# --- property: any history ----------------------------------------------------------------

OUTPUTS = [DIALYZER, file_text("a", 60), "ok", "\n".join(f"./src/f{i}.py" for i in range(70)), "x" * 3000]
CALLS = [
    ("Read", {"file_path": "src/a.py"}),
    ("Read", {"file_path": "src/b.py", "offset": 10, "limit": 20}),
    ("Edit", {"file_path": "src/a.py", "old_string": "1", "new_string": "2"}),
    ("Bash", {"command": "find src -name '*.py'"}),
    ("Bash", {"command": "cat src/b.py"}),
    ("Grep", {"pattern": "def ", "path": "src"}),
    ("Bash", {"command": "make test"}),
]


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(range(len(CALLS))), st.sampled_from(range(len(OUTPUTS))), st.booleans()),
        min_size=1,
        max_size=14,
    ),
    protect=st.sampled_from([0, 500, 2_000, 100_000]),
)
def test_any_history_is_served_smaller_with_its_pairs_and_its_newest_turn_whole(steps, protect):
    c = Conversation().say("user", "work")
    for call, output, error in steps:
        name, inp = CALLS[call]
        c.step(name, inp, OUTPUTS[output], is_error=error)
    c.say("assistant", "done")
    messages = c.messages()
    plan = plan_of(messages, protect_tokens=protect)
    lean = served_kept(messages, plan)
    newest = max(m.seq for m in messages if m.role == "assistant" and m.tool_use_ids)
    for stored, shown in zip(messages, lean, strict=True):
        assert (stored.tool_use_ids, stored.tool_result_ids) == (shown.tool_use_ids, shown.tool_result_ids)
        if stored.seq >= newest or stored.role == "assistant":
            assert shown.content is stored.content
        if stored.seq in plan.edits:
            assert shown.tokens == count_content(shown.content, TOKENIZER) < stored.tokens
        for edit in plan.edits.get(stored.seq, ()):
            if edit.kind == SAME:  # the copy kept is served there (maybe trimmed by another rule)
                assert edit.ref in {m.seq for m in messages}
            if edit.kind == SUPERSEDED:
                assert edit.ref is not None and edit.ref > stored.seq


def test_the_newest_turns_largest_outputs_are_trimmed_until_the_rest_fit():
    c = Conversation().say("user", "read the module")
    sizes = {"a.ex": 40, "b.ex": 500, "c.ex": 200, "d.ex": 60}  # ~1,000, ~12,000, ~4,800, ~1,400 tokens
    calls = [{"type": "text", "text": "Reading them."}]
    results = []
    for n, (name, lines) in enumerate(sizes.items()):
        calls.append({"type": "tool_use", "id": f"r{n}", "name": "Read", "input": {"file_path": name}})
        results.append({"type": "tool_result", "tool_use_id": f"r{n}", "content": file_text(name, lines)})
    c.contents += [("assistant", calls), ("user", results)]
    messages = c.messages()
    plan = plan_of(messages)
    assert [(e.block, e.kind) for e in plan.edits[3]] == [(1, LARGE)]  # b.ex alone; the rest fit in 8,000
    assert sum(count_content([b], TOKENIZER) for i, b in enumerate(messages[2].content) if i != 1) < 8_000
