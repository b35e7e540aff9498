"""The fallback chain, the acceptance checks and the truncate fallback."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.summarizers import Draft, SummaryInput, build_chain, check_summary_text, summarize
from compaction.core.summarizers.base import normalize_output
from compaction.core.summarizers.extractive import ExtractiveSummarizer
from compaction.core.summarizers.truncate import TruncateSummarizer, compacted_line
from compaction.core.tokens import count_content, count_text
from compaction.core.types import FileOps, Msg


def _msg(seq: int, role: str, content) -> Msg:
    return Msg(seq, role, content, count_content(content))


def _history() -> list[Msg]:
    return [
        _msg(1, "user", "Rename the `fetch` helper to `load` everywhere. Never edit vendored code."),
        _msg(2, "assistant", [{"type": "tool_use", "id": "a", "name": "Edit", "input": {"file_path": "src/api.py"}}]),
        _msg(3, "user", [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]),
        _msg(4, "assistant", [{"type": "tool_use", "id": "b", "name": "Bash", "input": {"command": "make test"}}]),
        _msg(
            5,
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "b",
                    "content": "NameError: name 'fetch' is not defined",
                    "is_error": True,
                }
            ],
        ),
        _msg(6, "assistant", "Renamed the helper; one test still calls the old name." + " More detail." * 200),
    ]


def _input(**kwargs) -> SummaryInput:
    values = dict(messages=_history(), output_budget=2000, model="m")
    values.update(kwargs)
    return SummaryInput(**values)


class Exploding:
    name = "exploding"

    def summarize(self, inp):
        raise RuntimeError("kaboom")


class Returns:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    def summarize(self, inp):
        return Draft(summary=self.text, model=self.name)


def test_exceptions_and_failed_checks_fall_through_in_order_and_are_recorded():
    chain = [
        Exploding(),
        Returns("chatty", "Sure, I'll continue with the rename."),
        ExtractiveSummarizer(),
        TruncateSummarizer(),
    ]
    result = summarize(_input(), chain)
    assert result.strategy == "extractive"
    assert [f.strategy for f in result.fallbacks] == ["exploding", "chatty"]
    assert result.fallbacks[0].reason == "RuntimeError: kaboom"
    assert "continuation" in result.fallbacks[1].reason


def test_when_everything_fails_the_truncate_text_is_still_served():
    result = summarize(_input(), [Exploding(), Returns("bad", "")])
    assert result.strategy == "truncate"
    assert result.fallbacks[-1].reason.startswith("all strategies failed")
    assert (
        "[Compacted 6 messages: 1 user, 3 assistant, 2 tool calls (Edit ×1, Bash ×1), 1 failed tool calls]"
        in result.summary
    )


def test_empty_chain_never_raises():
    result = summarize(_input(), [])
    assert result.strategy == "truncate" and result.summary


def test_truncate_summary_has_the_sections_counts_and_file_tags():
    result = summarize(
        _input(), build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0, strategy="truncate")
    )
    assert result.strategy == "truncate" and result.fallbacks == []
    assert check_summary_text(result.summary, input_tokens=10_000) is None
    assert "## Goal\n- Rename the `fetch` helper" in result.summary
    assert "<modified-files>\nsrc/api.py\n</modified-files>" in result.summary
    # The ledger repair puts the user's words and the exact error back even here.
    assert "Never edit vendored code." in result.summary
    assert "NameError: name 'fetch' is not defined" in result.summary


def test_truncate_carries_the_previous_summary_over():
    previous = extractive_summary_text()
    result = summarize(
        _input(
            previous_summary=previous + "\n\n<read-files>\nold.py\n</read-files>",
            previous_files=FileOps(read=["old.py"]),
        ),
        [TruncateSummarizer()],
    )
    assert "Keep the CLI flags unchanged" in result.summary
    assert compacted_line(_history()) in result.summary
    assert "old.py" in result.read_files


def extractive_summary_text() -> str:
    return "\n".join(
        [
            "## Goal",
            "Port the CLI",
            "## Constraints & Preferences",
            '- User: "Keep the CLI flags unchanged"',
            "## Progress",
            "### Done",
            "- [x] Parsed args",
            "### In Progress",
            "- (none)",
            "### Blocked",
            "- (none)",
            "## Key Decisions",
            "- (none)",
            "## Next Steps",
            "1. Port subcommands",
            "## Critical Context",
            "- (none)",
        ]
    )


def test_a_turn_cut_inside_is_part_of_the_one_summary():
    turn = [
        _msg(10, "user", "Now migrate the docs."),
        *[_msg(11 + i, "assistant", f"Doc page {i} migrated.") for i in range(7)],
    ]
    result = summarize(_input(messages=turn[:6], kept=turn[6:]), [ExtractiveSummarizer()])
    assert result.strategy == "extractive" and not hasattr(result, "turn_prefix_summary")
    # The extractive summary covers the turn in its one summary, stated as of its end.
    assert '"Now migrate the docs."' in result.summary and "#17" in result.summary


def test_custom_prompt_output_need_not_have_the_default_sections():
    free_form = "Renamed fetch→load in src/api.py; make test fails with NameError in one test."
    result = summarize(_input(custom_prompt="Terse notes:\n{conversation}"), [Returns("model", free_form)])
    assert result.strategy == "model"
    assert result.summary.startswith(free_form)
    # The missing critical items are still appended, in sections created for them.
    assert "## Constraints & Preferences" in result.summary and "Never edit vendored code." in result.summary


def test_check_rejects_bad_summaries():
    good = extractive_summary_text()
    assert check_summary_text(good, input_tokens=5000) is None
    assert check_summary_text("", input_tokens=5000) == "empty summary"
    assert "missing required sections: ## Key Decisions" in check_summary_text(
        good.replace("## Key Decisions", "## Decisions"), input_tokens=5000
    )
    assert "continuation" in check_summary_text("[Assistant]: I'll now run the tests\n" + good, input_tokens=5000)
    assert "continuation" in check_summary_text("Let me look at that file.\n" + good, input_tokens=5000)
    big = good + "\n- more" * 2000
    assert "not smaller than its input" in check_summary_text(big, input_tokens=1000)


def test_check_rejects_a_summary_over_its_output_budget():
    good = extractive_summary_text()
    tokens = count_text(good)
    assert check_summary_text(good, input_tokens=50_000, output_budget=tokens) is None
    reason = check_summary_text(good, input_tokens=50_000, output_budget=tokens - 1)
    assert reason == f"summary ({tokens} tokens) exceeds its output budget ({tokens - 1} tokens)"


def _long_llm_summary(lines: int) -> str:
    return "\n".join(
        [
            "## Goal",
            "Rename fetch to load.",
            "## Constraints & Preferences",
            '- User: "Never edit vendored code."',
            "## Progress",
            "### Done",
            *[f"- [x] Renamed call site {i} in src/module_{i}.py" for i in range(lines)],
            "### In Progress",
            "- [ ] Fixing the last test",
            "### Blocked",
            "- (none)",
            "## Key Decisions",
            "- Keep the old name as a deprecated alias",
            "## Next Steps",
            "1. Run make test",
            "## Critical Context",
            *[f"- Error: NameError in test_{i}" for i in range(lines)],
        ]
    )


def test_an_over_budget_summary_is_trimmed_oldest_bullets_first_and_the_result_fits():
    long = _long_llm_summary(300)
    inp = _input(output_budget=1500, messages=_history() * 20)
    result = summarize(inp, [Returns("model", long), TruncateSummarizer()])
    assert result.strategy == "model", result.fallbacks
    assert count_text(result.summary) <= 1500
    assert result.usage["trimmed_to_budget_lines"] > 0
    # The user's rule, the goal and the newest items survive; the oldest went first.
    assert "Never edit vendored code." in result.summary and "Rename fetch to load." in result.summary
    assert "Run make test" in result.summary and "Renamed call site 299 in" in result.summary
    assert "- Error: NameError in test_0\n" not in result.summary


def test_a_summary_that_cannot_be_trimmed_into_its_budget_is_rejected_and_recorded():
    # Prose has no bullets to drop: a 300-token budget cannot hold it.
    prose = "\n".join(
        ["## Goal", "The user wants the helper renamed everywhere. " * 60, "## Constraints & Preferences"]
        + ["## Progress", "## Key Decisions", "## Next Steps", "## Critical Context", "- (none)"]
    )
    inp = _input(output_budget=300)
    result = summarize(inp, [Returns("model", prose), ExtractiveSummarizer(), TruncateSummarizer()])
    assert "exceeds its output budget (" in result.fallbacks[0].reason
    assert result.strategy == "extractive"
    assert result.fallbacks[0].strategy == "model"
    assert count_text(result.summary) <= 300


def test_the_stored_summary_with_file_tags_fits_the_budget():
    msgs = []
    for i in range(400):
        msgs += [
            _msg(
                2 * i + 1,
                "assistant",
                [
                    {
                        "type": "tool_use",
                        "id": f"r{i}",
                        "name": "Read",
                        "input": {"file_path": f"/repo/src/pkg_{i}/mod.py"},
                    }
                ],
            ),
            _msg(2 * i + 2, "user", [{"type": "tool_result", "tool_use_id": f"r{i}", "content": "x = 1\n" * 50}]),
        ]
    inp = SummaryInput(messages=[_msg(0, "user", "Audit every module."), *msgs], output_budget=2000)
    result = summarize(inp, build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0))
    assert result.strategy == "extractive", result.fallbacks
    assert count_text(result.summary) <= 2000
    # The full list is kept with the compaction; the text lists the newest reads.
    assert len(result.read_files) == 400
    # Listed relative to the project's directory, which the summary names.
    assert "\nsrc/pkg_399/mod.py\n" in result.summary and "/repo/src/pkg_0/mod.py" in result.read_files
    assert "Paths in this summary are relative to `/repo`" in result.summary


def test_normalize_output_strips_fences_and_preamble():
    good = extractive_summary_text()
    assert normalize_output("```markdown\n" + good + "\n```") == good
    assert normalize_output("Here is the updated summary:\n\n" + good) == good
    assert normalize_output(good) == good


# Arbitrary (even malformed) content: the chain must still answer with a summary.
_text = st.text(max_size=60)
_block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(_text, st.none())}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": _text}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.sampled_from(["a", "b"]),
            "name": st.sampled_from(["Bash", "Edit", "Read", "weird"]),
            "input": st.one_of(
                st.fixed_dictionaries({"command": _text}),
                st.fixed_dictionaries({"file_path": _text}),
                st.none(),
                _text,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": st.sampled_from(["a", "b", "zz"]),
            "content": st.one_of(
                _text, st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}), max_size=2)
            ),
            "is_error": st.booleans(),
        }
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "document", "mystery"])}),
)
_content = st.one_of(_text, st.lists(_block, max_size=4))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    contents=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), _content), max_size=8),
    previous=st.one_of(st.none(), _text, st.just(extractive_summary_text())),
    split=st.integers(min_value=0, max_value=8),
)
def test_summarize_never_raises_on_arbitrary_content(contents, previous, split):
    msgs = [Msg(i + 1, role, content, 10) for i, (role, content) in enumerate(contents)]
    inp = SummaryInput(messages=msgs[:split], kept=msgs[split:], previous_summary=previous, output_budget=500)
    result = summarize(inp, build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0))
    assert result.summary.strip()
    assert result.strategy in ("extractive", "truncate")
    assert not result.fidelity.error and result.fidelity.score is not None


def test_the_work_state_is_folded_once_per_summary(monkeypatch):
    """The chain folds each message into the work state once; the extractive summary, the
    ledger and the file lists all read that state instead of reading every tool call again."""
    from compaction.core import fileops
    from compaction.core.summarizers import chain

    folded: list[int] = []
    real_fold = chain.fold

    def counting(messages, state=None):
        folded.append(len(messages))
        return real_fold(messages, state)

    extracted: list[int] = []
    monkeypatch.setattr(chain, "fold", counting)
    monkeypatch.setattr(chain, "extract_file_ops", lambda m: extracted.append(len(m)) or fileops.extract_file_ops(m))
    result = summarize(_input(), [ExtractiveSummarizer()])
    assert result.strategy == "extractive"
    assert sum(folded) == len(_history()) and extracted == []
    assert result.modified_files == ["src/api.py"]


def test_a_file_read_in_scratch_space_is_stored_but_not_listed_or_repaired_into_the_summary():
    read = [
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "src/util.py"}},
        {"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": "/tmp/claude-1000/tasks/b1.output"}},
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "r1", "content": "def load(): ..."},
        {"type": "tool_result", "tool_use_id": "r2", "content": "49 tests, 0 failures"},
    ]
    history = [*_history()[:5], _msg(6, "assistant", read), _msg(7, "user", results), _history()[5]]
    result = summarize(_input(messages=history), [ExtractiveSummarizer()])
    assert "src/util.py" in result.summary
    assert "/tmp/claude-1000" not in result.summary  # neither in <read-files> nor repaired back in
    assert "/tmp/claude-1000/tasks/b1.output" in result.read_files  # the compaction still records it


def test_truncate_carries_a_long_first_request_whole_and_cuts_a_longer_one_at_a_line():
    criteria = "SUCCESS CRITERIA:\nGenerated system must pass yamllint and shellcheck."
    request = (
        "Evaluate the simulation below.\n" + "\n".join(f"- point {i}: " + "x" * 60 for i in range(8)) + "\n" + criteria
    )
    assert len(request) > 400
    text = TruncateSummarizer().summarize(_input(messages=[_msg(1, "user", request)])).summary
    # Whole within the budget: nothing after the old 400-character cut is lost.
    assert "Generated system must pass yamllint and shellcheck." in text and "…" not in text.split("## Constraints")[0]
    longer = "Evaluate this.\n" + "\n".join(f"- rubric line {i}: " + "y" * 70 for i in range(80))
    text = TruncateSummarizer().summarize(_input(messages=[_msg(1, "user", longer)])).summary
    goal = text.split("## Constraints")[0]
    # Cut at a line (no line is cut in its middle), saying how much is left out and where.
    assert "more characters in #1)" in goal
    shown = [line.strip() for line in goal.splitlines() if "rubric line" in line]
    assert shown and all(line.endswith("y" * 70) for line in shown)


def test_a_commands_expansion_is_carried_with_the_first_request_and_its_cut_sections_named():
    command = "<command-name>/review</command-name>\n<command-args>the parser module</command-args>"
    body = (
        "Review code without changing it.\n\n> **SCOPE**: This command ONLY writes a review. Do NOT edit files.\n\n"
        "## Steps\n\n### Step 1: Read\nRead the module.\n\n```\n## Example heading inside a code block\n```\n\n"
        + "\n".join(f"Detail line {i} " + "z" * 80 for i in range(60))
        + "\n\n### Step 2: Report findings\nWrite the findings.\n\n### Step 3: Ask for approval\nWait."
    )
    messages = [
        _msg(1, "user", [{"type": "text", "text": command}, {"type": "text", "text": body}]),
        _msg(2, "assistant", "I'll read the parser module first."),
    ]
    text = ExtractiveSummarizer().summarize(_input(messages=messages, output_budget=4000)).summary
    goal = text.split("## Goal")[1]
    assert "the parser module" in goal
    # The command's scope and steps come with the request, as the harness's text.
    assert "ONLY writes a review. Do NOT edit files." in goal and "the harness's text" in goal
    assert "more characters in #1)" in goal
    # The sections cut off are named; a heading in a code block is an example's, not a section.
    assert '"Step 2: Report findings"' in goal and '"Step 3: Ask for approval"' in goal
    assert "Example heading inside a code block" not in goal.split("Its later sections")[1]


def test_lines_the_fidelity_repair_adds_are_paid_for_by_the_file_tags(monkeypatch):
    """The repair may add lines to a summary whose body and tags already fill MAX_SUMMARY_CHARS:
    the served summary still stays under it (the oldest read files leave the tags), so the
    message with its preamble stays under 12,000 characters."""
    from compaction.core.summarizers import chain

    reads = []
    for i in range(60):
        call = {"type": "tool_use", "id": f"r{i}", "name": "Read", "input": {"file_path": f"/repo/src/module_{i}.py"}}
        reads += [
            _msg(2 * i + 1, "assistant", [call]),
            _msg(2 * i + 2, "user", [{"type": "tool_result", "tool_use_id": f"r{i}", "content": "x = 1\n"}]),
        ]
    inp = SummaryInput(messages=[_msg(0, "user", "Read every module."), *reads], output_budget=4000)
    plain = summarize(inp, build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0))
    assert "\nsrc/module_0.py\n" in plain.summary  # every read listed when there is room

    def repair_before_the_tags(summary, inp):
        body, _, tags = summary.partition("\n\n<read-files>")
        added = "\n- also seen: " + ", ".join(f"src/extra_{i}.py" for i in range(40))
        return f"{body}{added}\n\n<read-files>{tags}", chain.Fidelity()

    monkeypatch.setattr(chain, "_fidelity", repair_before_the_tags)
    monkeypatch.setattr(chain, "MAX_SUMMARY_CHARS", len(plain.summary) + 50)  # room for the tags, not the repair
    result = summarize(inp, build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0))
    assert "also seen: src/extra_0.py" in result.summary  # the repair's lines are served
    assert len(result.summary) <= len(plain.summary) + 50
    assert "\nsrc/module_59.py\n" in result.summary  # the newest reads stay
    assert "\nsrc/module_0.py\n" not in result.summary
