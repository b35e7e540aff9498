"""A cold reader's complaints about how a handoff reports work left half done: the latest edit
reads as what the agent said it was doing, not as a list of the names it added; the next step
says what the agent's practice and the issue still ask for. Generated sessions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers.extractive import extractive_summary
from compaction.core.tokens import count_content
from compaction.core.types import Msg

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)


def _msgs(raw: list[dict]) -> list[Msg]:
    return [Msg(i + 1, m["role"], m["content"], count_content(m["content"])) for i, m in enumerate(raw)]


def _section(summary: str, start: str, end: str) -> str:
    return summary.split(start, 1)[1].split(end, 1)[0] if start in summary else ""


def _tool(raw: list[dict], name: str, inputs: dict, output: str, *, error: bool = False, text: str = "") -> None:
    tool_id = f"toolu_{len(raw):04d}"
    said = [{"type": "text", "text": text}] if text else []
    use = {"type": "tool_use", "id": tool_id, "name": name, "input": inputs}
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": output, "is_error": error}
    raw.append({"role": "assistant", "content": [*said, use]})
    raw.append({"role": "user", "content": [result]})


def _hook_code(word: str) -> str:
    """A change too long to quote: the summary can only name what it added, or say what it is for."""
    return (
        f"Hooks.{word.title()}Highlighter = {{\n"
        f"  mounted() {{ highlight{word.title()}(this.el) }},\n"
        f"  updated() {{ highlight{word.title()}(this.el) }},\n"
        f"}}\n"
        f"function highlight{word.title()}(root) {{\n"
        f"  root.querySelectorAll('pre code').forEach((block) => hljs.highlightElement(block))\n"
        f"}}\n"
    )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORDS, st.integers(min_value=1, max_value=3), st.sampled_from(["app.js", "`app.js`"]))
def test_the_latest_edit_reads_as_what_the_agent_said_it_was_doing(word, edits, named):
    """"Now update app.js to add the highlighter hook" then an edit, and the range ends: the
    work since the request leads with those words, and the names the edit added follow."""
    path = "/repo/assets/js/app.js"
    raw: list[dict] = [{"role": "user", "content": f"Add {word} highlighting to the transcript."}]
    for number in range(edits - 1):
        _tool(raw, "Edit", {"file_path": path, "old_string": "x", "new_string": f"import hljs{number}"}, "ok")
    said = f"Now update {named} to add the {word} highlighter hook."
    _tool(raw, "Edit", {"file_path": path, "old_string": "let Hooks = {}", "new_string": _hook_code(word)}, "ok", text=said)
    summary = extractive_summary(_msgs(raw))
    line = next(line for line in _section(summary, "### Done", "###").splitlines() if "app.js` edited" in line)
    told = f"update {named} to add the {word} highlighter hook"
    assert told in line, summary
    # The names come after the reason, not instead of it.
    assert f"Hooks.{word.title()}Highlighter" in line.split(told, 1)[1], line
