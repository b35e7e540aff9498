"""The real `anthropic` SDK against a local server speaking the Messages API."""

from __future__ import annotations

import re

import pytest

from compaction.core.prompts import SYSTEM_PROMPT
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.summarizers.anthropic import AnthropicSummarizer, cost_usd
from compaction.core.summarizers.extractive import ExtractiveSummarizer
from compaction.core.summarizers.truncate import TruncateSummarizer
from compaction.core.tokens import count_content, count_text
from compaction.core.types import Fallback, FileOps, Msg
from tests.fake_anthropic import FakeAnthropic, Recorded, Step

VALID = """## Goal
Fix the failing slug test in app/models.py.

## Constraints & Preferences
- Never touch migrations.

## Progress
### Done
- [x] Ran `pytest -q` and found the failure.

### In Progress
- [ ] Fixing the slug field.

### Blocked
- (none)

## Key Decisions
- **Fix in the model**: the migration must not change.

## Next Steps
1. Re-run `pytest -q`.

## Critical Context
- E   AssertionError: slug mismatch"""


def _msg(seq: int, role: str, content) -> Msg:
    return Msg(seq, role, content, count_content(content))


def _history(turns: int = 6, pad: int = 300) -> list[Msg]:
    msgs = [_msg(1, "user", "Fix the failing test in app/models.py. Never touch migrations.")]
    seq = 2
    for i in range(turns):
        msgs.append(
            _msg(
                seq,
                "assistant",
                [
                    {"type": "text", "text": f"Step {i}: running the tests again. " + "detail " * pad},
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"pytest -q -k case{i}"}},
                ],
            )
        )
        msgs.append(
            _msg(
                seq + 1,
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{i}",
                        "content": f"E   AssertionError: slug mismatch in case{i}\n1 failed",
                        "is_error": True,
                    }
                ],
            )
        )
        seq += 2
    return msgs


def _input(**kwargs) -> SummaryInput:
    defaults = dict(
        messages=_history(),
        previous_summary=None,
        previous_files=FileOps(),
        instructions=None,
        custom_prompt=None,
        output_budget=2048,
        model="claude-haiku-4-5",
    )
    defaults.update(kwargs)
    return SummaryInput(**defaults)


@pytest.fixture
def server():
    fake = FakeAnthropic().start()
    yield fake
    fake.stop()


def _chain(server: FakeAnthropic, **kwargs):
    options = dict(
        api_key="sk-ant-test-key",
        base_url=server.base_url,
        model="claude-haiku-4-5",
        timeout=5.0,
        max_retries=2,
    )
    options.update(kwargs)
    return build_chain(**options)


def test_success_uses_the_sdk_and_records_usage(server):
    server.push(Step.success(VALID))
    inp = _input()
    result = summarize(inp, _chain(server))

    assert result.strategy == "anthropic"
    assert result.fallbacks == []
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.api_key == "sk-ant-test-key"
    assert request.headers["anthropic-version"]
    assert request.system_text == SYSTEM_PROMPT
    assert request.body["max_tokens"] == inp.output_budget
    assert request.body["model"] == "claude-haiku-4-5"
    assert request.prompt.startswith("<conversation>\n#1 [User]: Fix the failing test")
    # Prompt caching: the system prompt and the transcript block (the stable prefix) are
    # marked; the task, rules and ledger after the transcript are not.
    assert request.cache_breakpoints == ["system[0]", "messages[0].content[0]"]
    assert request.cached_prefix().endswith("</conversation>")
    assert "## Critical Context" not in request.cached_prefix()
    assert result.usage["cache_creation_input_tokens"] > 0 and result.usage["cache_read_input_tokens"] == 0
    # The reply had no "Where Things Stand": the work state's is put first, and that is recorded.
    where, reply = result.summary.split("\n\n## Goal", 1)
    assert where.startswith("## Where Things Stand\n- ") and VALID.startswith("## Goal" + reply[:200])
    assert result.fidelity.agreement == ("added Where Things Stand, computed from the work state",)
    assert result.model == "claude-haiku-4-5"
    assert result.usage["calls"] == 1
    assert result.usage["input_tokens"] > 0 and result.usage["output_tokens"] > 0
    assert result.usage["cost_usd"] == cost_usd(
        "claude-haiku-4-5",
        result.usage["input_tokens"],
        result.usage["output_tokens"],
        cache_write_tokens=result.usage["cache_creation_input_tokens"],
    )
    assert result.usage["request_ids"][0].startswith("req_")
    # The ledger kept the user's instruction; the repair added what the model dropped.
    assert result.fidelity.after.categories["instructions"].kept == 1
    assert "E   AssertionError: slug mismatch in case5" in result.summary


def test_the_same_range_again_reads_the_transcript_from_the_cache(server):
    server.push(Step.success(VALID), Step.success(VALID))
    chain = _chain(server)
    first = summarize(_input(), chain)
    again = summarize(_input(instructions="keep the error lines"), chain)  # another focus, same transcript
    assert first.usage["cache_creation_input_tokens"] > 0
    assert again.usage["cache_read_input_tokens"] == first.usage["cache_creation_input_tokens"]
    assert again.usage["cache_creation_input_tokens"] == 0
    assert again.usage["cost_usd"] < first.usage["cost_usd"]


def test_the_prompt_carries_the_must_keep_ledger_and_the_focus(server):
    from compaction.core.ledger import build_ledger
    from compaction.core.work import fold

    server.push(Step.success(VALID))
    inp = _input(instructions="Keep every pytest command and its exit status.")
    summarize(inp, _chain(server))
    request = server.requests[0]
    ledger = build_ledger(fold(inp.messages))
    rest = request.body["messages"][0]["content"][1]["text"]  # after the cached transcript
    assert "<must-keep>" in rest
    must_keep = rest.split("<must-keep>")[1].split("</must-keep>")[0]
    for category in ("instructions", "errors", "files"):
        assert ledger.items[category], category  # the range has some of each
        for item in ledger.items[category]:
            assert item in must_keep, (category, item)
    # The focus comes right after the task, before format and rules, and closes the prompt.
    focus = rest.index("Keep every pytest command")
    assert focus < rest.index("## Goal") < rest.index("Rules:")
    assert rest.rstrip().endswith("Keep every pytest command and its exit status.")


@pytest.mark.parametrize("status", [429, 500, 503, 529])
def test_the_sdk_retries_a_transient_error_then_succeeds(server, status):
    server.push(Step.error(status, "try again"), Step.error(status, "try again"), Step.success(VALID))
    result = summarize(_input(), _chain(server, max_retries=2))
    assert len(server.requests) == 3
    assert result.strategy == "anthropic" and result.fallbacks == []
    # The SDK's own retry loop: it counts its retries in a header of every attempt.
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1", "2"]
    assert result.usage["calls"] == 1  # one answered call; the failed attempts cost nothing


def test_retry_after_is_honoured(server):
    import time

    throttled = Step.error(429, "slow down", retry_after_ms=None)
    throttled.headers["retry-after"] = "1"
    server.push(throttled, Step.success(VALID))
    started = time.monotonic()
    result = summarize(_input(), _chain(server))
    assert result.strategy == "anthropic" and len(server.requests) == 2
    assert time.monotonic() - started >= 1.0


def test_persistent_529_is_retried_then_falls_back_to_extractive(server):
    server.default = Step.overloaded()
    result = summarize(_input(), _chain(server, max_retries=2))
    # The SDK retried 529 twice before giving up.
    assert len(server.requests) == 3
    assert result.strategy == "extractive"
    assert result.fallbacks[0].strategy == "anthropic"
    assert "529" in result.fallbacks[0].reason and "Overloaded" in result.fallbacks[0].reason
    assert "## Critical Context" in result.summary
    assert "Never touch migrations." in result.summary


def test_timeout_falls_back_with_the_reason(server):
    server.push(Step.slow(3.0, VALID))
    result = summarize(_input(), _chain(server, timeout=0.3, max_retries=0))
    assert result.strategy == "extractive"
    assert result.fallbacks[0].strategy == "anthropic"
    assert "Timeout" in result.fallbacks[0].reason
    assert "## Goal" in result.summary


def test_one_deadline_bounds_every_retry_of_a_hung_provider(server):
    """The timeout is the whole call's budget: retries share it instead of each getting their own
    so a hung provider hands over to the extractive summarizer in time."""
    import time

    server.default = Step.hang()
    started = time.monotonic()
    result = summarize(_input(), _chain(server, timeout=1.0, max_retries=3))
    elapsed = time.monotonic() - started
    assert result.strategy == "extractive"
    reason = result.fallbacks[0].reason
    assert "LLM time budget of 1 s" in reason and "Timeout" in reason
    # One attempt used the whole budget; no retry could have finished, so none was sent.
    assert len(server.requests) == 1
    assert elapsed < 1.0 + 1.0 + 1.5  # budget + grace + the extractive summary, not 4 × timeout


def test_retries_stop_when_the_next_wait_would_pass_the_deadline(server):
    server.default = Step.error(529, "Overloaded", retry_after_ms=20_000)  # "come back in 20 s"
    result = summarize(_input(), _chain(server, timeout=2.0, max_retries=5))
    assert result.strategy == "extractive"
    assert len(server.requests) == 1
    assert "LLM time budget of 2 s" in result.fallbacks[0].reason
    assert "Overloaded" in result.fallbacks[0].reason


def test_x_should_retry_false_is_obeyed(server):
    step = Step.error(500, "boom")
    step.headers["x-should-retry"] = "false"
    server.default = step
    summarize(_input(), _chain(server, max_retries=3))
    assert len(server.requests) == 1


def test_llm_time_budget_leaves_the_fallback_time_before_the_soft_limit():
    from compaction.core.summarizers.anthropic import llm_time_budget

    assert llm_time_budget(configured=120, soft_limit=300) == 120
    assert llm_time_budget(configured=600, soft_limit=300) == 180  # 40 % left for the fallback
    assert llm_time_budget(configured=120, soft_limit=60) == 30  # 30 s left
    assert llm_time_budget(configured=120, soft_limit=5) == 2.5
    for soft in (5, 10, 30, 60, 120, 300, 900, 3600):
        for configured in (0.5, 10, 120, 3600):
            budget = llm_time_budget(configured=configured, soft_limit=soft)
            assert 0 < budget <= configured and soft - budget >= min(30, soft / 2)


def test_persistent_500_falls_back(server):
    server.default = Step.error(500, "boom")
    result = summarize(_input(), _chain(server, max_retries=1))
    assert len(server.requests) == 2
    assert result.strategy == "extractive"
    assert "500" in result.fallbacks[0].reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Sure! I'll keep fixing the slug test now. Running pytest again.", "continuation"),
        (VALID + "\n\n#15 [Assistant]: Running pytest again.", "continuation"),  # the transcript's own format
        ("The tests failed a few times and then the assistant kept going.", "missing required sections"),
        ("", "empty"),
        (
            "## Goal\n\n## Constraints & Preferences\n## Progress\n## Key Decisions\n## Next Steps\n## Critical Context",
            "no content",
        ),
    ],
)
def test_garbage_output_fails_the_check_and_falls_back(server, text, reason):
    server.push(Step.success(text))
    result = summarize(_input(), _chain(server))
    assert result.strategy == "extractive"
    assert result.fallbacks[0].strategy == "anthropic"
    assert reason in result.fallbacks[0].reason
    assert "## Progress" in result.summary
    # The rejected call was still paid for.
    (spent,) = result.usage["failed_attempts"]
    assert spent["strategy"] == "anthropic" and spent["calls"] == 1 and spent["input_tokens"] > 0


def test_summary_larger_than_its_input_is_rejected(server):
    small = [_msg(1, "user", "hi"), _msg(2, "assistant", "hello")]
    server.push(Step.success(VALID + "\n- filler" * 800))
    result = summarize(_input(messages=small), _chain(server))
    assert result.strategy != "anthropic"
    assert "not smaller than its input" in result.fallbacks[0].reason


def test_markdown_fence_and_short_preamble_are_stripped(server):
    server.push(Step.success("Here is the summary:\n\n```markdown\n" + VALID + "\n```"))
    result = summarize(_input(), _chain(server))
    assert result.strategy == "anthropic"
    assert "```" not in result.summary and "Here is the summary" not in result.summary
    assert result.summary.index("## Where Things Stand") < result.summary.index("## Goal")


def test_a_reply_quoting_a_commit_template_is_served_whole(server):
    """The model quoted the session's template `feat: <summary> (<task id>)`: the reply is the
    summary, headings and all (it was cut at the quote and fell back to extractive)."""
    reply = VALID.replace(
        "- Never touch migrations.", "- Never touch migrations.\n- Commits: `feat: <summary> (<task id>)`"
    )
    server.push(Step.success(reply))
    result = summarize(_input(), _chain(server))
    assert result.strategy == "anthropic", result.fallbacks
    assert "- Commits: `feat: <summary> (<task id>)`" in result.summary
    assert (
        result.summary.index("## Goal") < result.summary.index("feat: <summary>") < result.summary.index("## Progress")
    )


def _long_turn(first_seq: int = 20, steps: int = 12) -> list[Msg]:
    """One request, then the agent working alone: a call and its result per step."""
    turn = [_msg(first_seq, "user", "Now port the importer to the new API.")]
    for i in range(steps):
        seq = first_seq + 1 + 2 * i
        use = {"type": "tool_use", "id": f"p{i}", "name": "Edit", "input": {"file_path": f"importer/part{i}.py"}}
        turn.append(_msg(seq, "assistant", [{"type": "text", "text": f"Porting part {i} of the importer."}, use]))
        turn.append(_msg(seq + 1, "user", [{"type": "tool_result", "tool_use_id": f"p{i}", "content": "ok"}]))
    return turn


def test_a_long_autonomous_turn_cut_inside_is_summarized_in_one_call(server):
    """The turn's earlier part is history: one request, one text — never a second layer."""
    turn = _long_turn()
    summarized, kept = [*_history(), *turn[:15]], turn[15:]  # the cut falls inside the turn
    server.push(Step.success(VALID))
    result = summarize(_input(messages=summarized, kept=kept), _chain(server))
    assert result.strategy == "anthropic", result.fallbacks
    assert len(server.requests) == 1 and result.usage["calls"] == 1
    (request,) = server.requests
    transcript = request.prompt.split("</conversation>")[0]
    assert "#1 [User]: Fix the failing test" in transcript and "#20 [User]: Now port the importer" in transcript
    assert "the assistant's work on the request at #20" in request.prompt
    assert "EARLIER PART" not in request.prompt and "## Turn Request" not in request.prompt
    assert not hasattr(result, "turn_prefix_summary")
    # The kept part of the turn is shown after the transcript, so the status is stated as of it.
    shown = request.prompt.split("<kept-messages>")[1].split("</kept-messages>")[0]
    assert shown.startswith(f"\n#{kept[0].seq} ") and f"#{kept[-1].seq} [Tool result]" in shown
    assert f"#{kept[0].seq} " not in transcript


def _audit(sizes: dict[str, int]) -> list[Msg]:
    """One request, then a Bash call per entry whose output is about that many characters; every
    output line names its output and its number, so what the model was shown can be checked."""
    msgs = [_msg(1, "user", "Audit every package and report what you find. Never touch migrations.")]
    for i, (tag, size) in enumerate(sizes.items()):
        lines = [f"{tag} line {n}: package checked, {n * 7} files, nothing to report" for n in range(size // 55 + 1)]
        use = {"type": "tool_use", "id": tag, "name": "Bash", "input": {"command": f"audit {tag}"}}
        msgs.append(_msg(2 + 2 * i, "assistant", [{"type": "text", "text": f"Auditing {tag}."}, use]))
        result = {"type": "tool_result", "tool_use_id": tag, "content": "\n".join(lines)}
        msgs.append(_msg(3 + 2 * i, "user", [result]))
    return msgs


def test_a_100k_token_history_reaches_a_200k_window_model_whole(server):
    msgs = _audit({f"pkg{i}": 16_000 for i in range(24)})
    assert sum(m.tokens for m in msgs) > 100_000
    server.push(Step.success(VALID))
    result = summarize(_input(messages=msgs, output_budget=13_107), _chain(server, model="claude-haiku-4-5"))
    assert result.strategy == "anthropic", result.fallbacks
    (request,) = server.requests
    transcript = request.prompt.split("</conversation>")[0]
    assert "truncated" not in transcript
    for m in msgs[2::2]:  # every output, every line of it
        assert m.content[0]["content"] in transcript
    (call,) = result.usage["per_call"]
    assert call["transcript_tokens"] > 100_000 and call["tool_output_cap"] is None


def test_a_history_above_the_window_is_cut_longest_first_in_one_call(server):
    sizes = {"huge": 90_000, "large": 60_000, "medium": 8_000, **{f"small{i}": 1_200 for i in range(10)}}
    msgs = _audit(sizes)
    window = 40_000  # the history is ~45k tokens: it cannot be shown whole
    assert sum(m.tokens for m in msgs) > window
    server.push(Step.success(VALID))
    result = summarize(_input(messages=msgs, output_budget=2048), _chain(server, context_window=window))
    assert result.strategy == "anthropic", result.fallbacks
    (request,) = server.requests  # one call: cutting the longest outputs made it fit
    assert count_text(SYSTEM_PROMPT) + count_text(request.prompt) + 2048 < window
    transcript = request.prompt.split("</conversation>")[0]
    outputs = {m.content[0]["tool_use_id"]: m.content[0]["content"] for m in msgs[2::2]}
    # The two longest were cut (head and tail kept, the middle's size said); the rest are whole.
    for tag in ("huge", "large"):
        assert outputs[tag] not in transcript
        assert outputs[tag].splitlines()[0] in transcript and outputs[tag].splitlines()[-1] in transcript
    assert transcript.count("truncated") == 2
    for tag in ("medium", *(f"small{i}" for i in range(10))):
        assert outputs[tag] in transcript, tag
    (call,) = result.usage["per_call"]
    assert 8_000 < call["tool_output_cap"] < 60_000


def _merging_responder(record: Recorded) -> Step:
    """Acts like a model that merges: lists every step seen, previous summary included."""
    steps = set(re.findall(r"Step (\d+):", record.prompt.split("<previous-summary>")[0]))
    previous = re.search(r"<previous-summary>(.*?)</previous-summary>", record.prompt, re.DOTALL)
    if previous:
        steps |= set(re.findall(r"- step (\d+) seen", previous.group(1)))
    done = "\n".join(f"- step {n} seen" for n in sorted(steps, key=int))
    return Step.success(VALID.replace("### Done\n", f"### Done\n{done}\n"))


def test_history_larger_than_the_summarizer_window_is_chunked_and_merged(server):
    server.default = _merging_responder
    history = _history(turns=40, pad=300)  # ~40 × 330 tokens
    window = 12_000
    inp = _input(messages=history[:-2], kept=history[-2:], output_budget=1024)
    chain = _chain(server, context_window=window)
    result = summarize(inp, chain)

    assert result.strategy == "anthropic"
    calls = len(server.requests)
    assert calls >= 3
    assert result.usage["calls"] == calls and result.usage["chunks"] == calls
    for index, request in enumerate(server.requests):
        assert count_text(SYSTEM_PROMPT) + count_text(request.prompt) + 1024 < window
        assert ("<previous-summary>" in request.prompt) == (index > 0)
        # The kept messages, the work state and the ledger go with the last chunk only.
        assert ("<kept-messages>" in request.prompt) == (index == calls - 1)
    # Every step of every chunk survived the merges.
    for n in range(40):
        assert f"- step {n} seen" in result.summary


def test_chunking_also_merges_an_existing_previous_summary(server):
    server.default = _merging_responder
    previous = VALID.replace("### Done\n", "### Done\n- step 99 seen\n")
    result = summarize(
        _input(messages=_history(turns=20), previous_summary=previous, output_budget=1024),
        _chain(server, context_window=12_000),
    )
    assert result.strategy == "anthropic"
    assert "<previous-summary>" in server.requests[0].prompt
    assert "- step 99 seen" in result.summary


def test_build_chain_orders_strategies():
    def names(chain):
        return [s.name for s in chain]

    auto_key = build_chain(api_key="k", base_url=None, model="claude-haiku-4-5", timeout=5, max_retries=1)
    assert names(auto_key) == ["anthropic", "extractive", "truncate"]
    assert isinstance(auto_key[0], AnthropicSummarizer)
    no_key = build_chain(api_key=None, base_url=None, model="m", timeout=5, max_retries=1)
    assert names(no_key) == ["extractive", "truncate"]
    assert isinstance(no_key[0], ExtractiveSummarizer) and isinstance(no_key[1], TruncateSummarizer)
    assert names(
        build_chain(api_key="k", base_url=None, model="m", timeout=5, max_retries=1, strategy="extractive")
    ) == [
        "extractive",
        "truncate",
    ]
    assert names(build_chain(api_key="k", base_url=None, model="m", timeout=5, max_retries=1, strategy="truncate")) == [
        "truncate"
    ]
    with pytest.raises(ValueError):
        build_chain(api_key=None, base_url=None, model="m", timeout=5, max_retries=1, strategy="magic")


def test_anthropic_requested_without_key_records_why():
    chain = build_chain(api_key=None, base_url=None, model="m", timeout=5, max_retries=1, strategy="anthropic")
    result = summarize(_input(), chain)
    assert result.strategy == "extractive"
    assert result.fallbacks == [Fallback("anthropic", "SummarizerError: no API key configured")]


def test_cost_table():
    assert cost_usd("claude-haiku-4-5-20251001", 1_000_000, 1_000_000) == 6.0
    assert cost_usd("claude-sonnet-4-5", 1_000_000, 0) == 3.0
    assert cost_usd("gpt-4o", 10, 10) is None
    # Cache writes cost 1.25× the input price, reads 0.1×.
    assert cost_usd("claude-sonnet-4-5", 0, 0, cache_write_tokens=1_000_000) == 3.75
    assert cost_usd("claude-sonnet-4-5", 0, 0, cache_read_tokens=1_000_000) == 0.3


def test_the_turn_note_names_the_persons_request_not_the_harness_text_after_it(server):
    """An interruption notice is a user message of the harness's: the work goes on for the
    person's request before it."""
    notice = _msg(14, "user", "[Request interrupted by user for tool use]")
    turn = [notice, *_long_turn(first_seq=15)[1:]]
    server.push(Step.success(VALID))
    summarize(_input(messages=[*_history(), *turn[:9]], kept=turn[9:]), _chain(server))
    prompt = server.requests[0].prompt
    assert "the assistant's work on the request at #1:" in prompt and "request at #14" not in prompt


def test_a_first_turn_cut_inside_and_nothing_new_after_a_summary(server):
    turn = _long_turn(first_seq=1)
    # The very first request's turn cut inside: it is the whole history, in one call.
    server.push(Step.success(VALID))
    result = summarize(_input(messages=turn[:11], kept=turn[11:]), _chain(server))
    assert result.strategy == "anthropic" and len(server.requests) == 1
    assert "the assistant's work on the request at #1" in server.requests[0].prompt
    # Nothing new to summarize beside a previous summary: it stands as it is, no call.
    result = summarize(_input(messages=[], previous_summary=VALID), [_chain(server)[0]])
    assert result.strategy == "anthropic" and len(server.requests) == 1
    assert result.summary[result.summary.index("## Goal") :].startswith(VALID[:300])


def test_an_update_that_drops_previous_rules_and_errors_is_repaired(server):
    previous = VALID.replace(
        "- Never touch migrations.", '- Never touch migrations.\n- User: "Always run ruff before committing."'
    ).replace("- E   AssertionError: slug mismatch", "- Error (verbatim): KeyError: 'slug_field'")
    server.push(Step.success(VALID))  # the model "forgot" both
    result = summarize(_input(previous_summary=previous), _chain(server))
    assert result.strategy == "anthropic"
    assert "<previous-summary>" in server.requests[0].prompt
    assert '- User said (verbatim): "Always run ruff before committing."' in result.summary
    assert "KeyError: 'slug_field'" in result.summary.split("## Critical Context")[1]
    before, after = result.fidelity.before, result.fidelity.after
    assert before.categories["instructions"].kept < after.categories["instructions"].kept


def test_provider_saying_prompt_too_long_splits_the_history_further(server):
    limit_chars = 30_000  # the "real" window is smaller than our tokenizer believes

    def responder(record: Recorded) -> Step:
        if len(record.prompt) > limit_chars:
            step = Step.error(400, f"prompt is too long: {len(record.prompt)} tokens > 5000 maximum")
            return step
        return _merging_responder(record)

    server.default = responder
    result = summarize(_input(messages=_history(turns=30), output_budget=1024), _chain(server, context_window=40_000))
    assert result.strategy == "anthropic", result.fallbacks
    assert result.usage["overflow_retries"] >= 1
    rejected = [r for r in server.requests if len(r.prompt) > limit_chars]
    assert rejected, "the first attempt was too long for the provider"
    for n in range(30):
        assert f"- step {n} seen" in result.summary
