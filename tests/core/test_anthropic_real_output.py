"""The Anthropic summarizer on real model output.

The shared Claude Code sessions hold the compaction calls Claude Code made
(`subagents/agent-acompact-*.jsonl`: the instructions it sent and the summary the model
returned). The local Messages-API server answers our summarizer with those real replies, so
the whole path runs on what a model really writes: the prompt is built (Claude Code's own
instructions as the session's custom prompt, the must-keep ledger, prompt caching), the reply
is parsed (`<analysis>` dropped, `<summary>` unwrapped), checked against the ledger and
repaired, and on a second compaction merged with the previous summary by the update prompt.
"""

from __future__ import annotations

import re

import pytest

from compaction.core.cutpoint import valid_cut_indices
from compaction.core.ledger import build_ledger, check_summary
from compaction.core.prompts import strip_file_tags
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.tokens import count_text
from compaction.core.types import FileOps
from compaction.core.work import WorkState, fold, from_json
from tests.corpus import SESSIONS, TRANSCRIPTS, as_msgs, corpus, history_before_compaction, load_fidelity
from tests.fake_anthropic import FakeAnthropic, Recorded, Step, recorded_compaction

pytestmark = corpus

OUTPUT_BUDGET = 13_107  # the default summary budget on a 200k window
CRITICAL = ("instructions", "errors", "files")


@pytest.fixture(scope="module", params=SESSIONS, ids=lambda name: name[:8])
def session(request):
    path = TRANSCRIPTS / "claude-code" / f"{request.param}.jsonl"
    history, _claude_summary = history_before_compaction(path)
    (call,) = sorted((TRANSCRIPTS / "claude-code" / request.param / "subagents").glob("agent-acompact-*.jsonl"))
    return {"name": request.param, "history": history, "call": recorded_compaction(call)}


@pytest.fixture
def server():
    fake = FakeAnthropic().start()
    yield fake
    fake.stop()


def claude_codes_prompt(call) -> str:
    """Claude Code's compaction instructions as a custom prompt: the transcript, then its words."""
    return "{conversation}\n\n" + call.prompt.replace("{", "{{").replace("}", "}}")


def real_reply(call, calls: list[Recorded]):
    def respond(record: Recorded) -> Step:
        calls.append(record)
        return Step.success(call.response)

    return respond


def chain_for(server: FakeAnthropic):
    return build_chain(
        api_key="sk-ant-fake-real-output",
        base_url=server.base_url,
        model="claude-haiku-4-5",
        timeout=30,
        max_retries=0,
    )


def summary_inside(response: str) -> str:
    return response.split("<summary>", 1)[1].split("</summary>", 1)[0].strip()


def test_a_real_reply_is_parsed_checked_and_repaired(session, server):
    call = session["call"]
    messages = as_msgs(session["history"])
    calls: list[Recorded] = []
    server.default = real_reply(call, calls)
    inp = SummaryInput(messages=messages, custom_prompt=claude_codes_prompt(call), output_budget=OUTPUT_BUDGET)
    result = summarize(inp, chain_for(server))

    # The real reply passed the checks: no fallback.
    assert result.strategy == "anthropic", result.fallbacks
    assert len(calls) == 1

    # The prompt: Claude Code's instructions, the transcript, the must-keep ledger, caching.
    request = calls[0]
    prompt = request.prompt
    assert call.prompt.split("\n", 1)[0] in prompt and call.prompt.strip()[-200:] in prompt
    first_user = next(m for m in messages if m.role == "user")
    assert first_user.blocks[0]["text"][:60] in prompt
    assert request.cache_breakpoints == ["system[0]", "messages[0].content[0]"]
    cached = request.body["messages"][0]["content"][0]["text"]
    assert cached.startswith("<conversation>") and cached.endswith("</conversation>")
    rest = request.body["messages"][0]["content"][1]["text"]
    must_keep = rest.split("<must-keep>", 1)[1].split("</must-keep>", 1)[0]
    ledger = build_ledger(fold(messages))
    # The work state as of the newest message, as facts the summary must agree with.
    facts = rest.split("<work-state>", 1)[1].split("</work-state>", 1)[0]
    assert "Where things stand:" in facts and "Next steps:" in facts
    assert first_user.blocks[0]["text"][:60] in facts  # the person's words, as the person's
    assert any(ledger.items[c] for c in CRITICAL)
    for category in CRITICAL:
        if ledger.items[category]:  # the newest item of each category is listed
            assert " ".join(ledger.items[category][-1].splitlines())[:80] in must_keep, category

    # The reply: its analysis is scratch work and goes; the summary inside stays.
    inside = summary_inside(call.response)
    assert "<analysis>" not in result.summary and "<summary>" not in result.summary
    assert result.summary.startswith(inside[:400])
    analysis = call.response.split("<analysis>", 1)[1].split("</analysis>", 1)[0]
    unique_to_analysis = next(line for line in analysis.splitlines() if len(line) > 40 and line not in inside)
    assert unique_to_analysis not in result.summary

    # Checked against the ledger and repaired: nothing critical missed unless over the budget.
    assert result.fidelity.score >= result.fidelity.score_before_repair
    before, after, repaired = result.fidelity.before, result.fidelity.after, result.fidelity.repaired
    missed_before = sum(before.categories[c].total - before.categories[c].kept for c in CRITICAL)
    if missed_before:  # what the reply dropped was added, or did not fit the budget
        assert sum(getattr(repaired, c) for c in CRITICAL) + repaired.skipped_for_budget > 0
    for category in CRITICAL:
        still_missed = after.categories[category].total - after.categories[category].kept
        assert still_missed == 0 or repaired.skipped_for_budget > 0, (category, still_missed)
    assert count_text(result.summary) <= max(OUTPUT_BUDGET, count_text(inside)) + 50

    # Recall by the shared scorer: the repaired summary keeps at least what the model's did.
    fid = load_fidelity()
    scored = [{"role": m["role"], "content": m["content"]} for m in session["history"]]
    assert fid.score(scored, result.summary)["recall"] >= fid.score(scored, inside)["recall"]
    assert result.usage["cache_creation_input_tokens"] > 0


def test_a_real_reply_in_another_format_than_asked_falls_back(session, server):
    """Our default prompt asks for our sections; Claude Code's reply has its own numbered ones.
    The check rejects it, says why, and the extractive summary is served; the call is billed."""
    call = session["call"]
    calls: list[Recorded] = []
    server.default = real_reply(call, calls)
    inp = SummaryInput(messages=as_msgs(session["history"][:60]), output_budget=OUTPUT_BUDGET)
    result = summarize(inp, chain_for(server))
    assert len(calls) == 1
    assert result.strategy == "extractive"
    assert result.fallbacks[0].strategy == "anthropic"
    assert "missing required sections" in result.fallbacks[0].reason
    assert result.usage["failed_attempts"][0]["calls"] == 1


def test_a_second_compaction_merges_the_previous_summary(session, server):
    """Compaction 1 covers the first part of the range; compaction 2 the rest, with the update
    prompt. The real reply (the model's summary of the whole range) stands for the merged one."""
    call = session["call"]
    history = session["history"]
    messages = as_msgs(history)
    # Cut about half-way where a cut is valid (never between a tool call and its result).
    half = next(i for i in valid_cut_indices(messages) if i >= len(messages) // 2)
    calls: list[Recorded] = []
    server.default = real_reply(call, calls)
    custom = claude_codes_prompt(call)
    first = summarize(
        SummaryInput(messages=messages[:half], custom_prompt=custom, output_budget=OUTPUT_BUDGET), chain_for(server)
    )
    assert first.strategy == "anthropic", first.fallbacks
    # What the first summary carries forward (its Constraints / Critical Context items, e.g.
    # error lines the repair added) must survive the second.
    carried = build_ledger(WorkState(), previous_summary=first.summary)

    second = summarize(
        SummaryInput(
            messages=messages[half:],
            previous_summary=first.summary,
            previous_files=FileOps(read=list(first.read_files), modified=list(first.modified_files)),
            previous_state=from_json(first.work_state),
            custom_prompt=custom,
            output_budget=OUTPUT_BUDGET,
        ),
        chain_for(server),
    )
    assert second.strategy == "anthropic", second.fallbacks
    update = calls[-1]
    # The update prompt: the previous summary (without its file lists) after the cached transcript.
    rest = update.body["messages"][0]["content"][1]["text"]
    previous_block = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", rest, re.S)
    assert previous_block and strip_file_tags(first.summary)[:300] in previous_block.group(1)
    assert "<read-files>" not in previous_block.group(1)
    assert "never silently drop" in rest
    assert "<previous-summary>" not in update.body["messages"][0]["content"][0]["text"]
    # Nothing the first summary carried was silently dropped by the second.
    kept = check_summary(second.summary, carried)
    for category in ("instructions", "errors"):
        report = kept.categories[category]
        assert report.kept == report.total or second.fidelity.repaired.skipped_for_budget, report
    assert set(first.modified_files) <= set(second.modified_files)
    assert set(first.read_files) - set(second.modified_files) <= set(second.read_files)
