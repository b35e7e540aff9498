"""Extractive summarizer and ledger: synthetic cases and a real Claude Code session."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from compaction.core.ledger import build_ledger, check_summary, parse_summary_sections, repair_summary
from compaction.core.prompts import SECTION_HEADINGS
from compaction.core.summarizers import SummaryInput, build_chain, summarize
from compaction.core.summarizers.base import check_summary_text
from compaction.core.summarizers.extractive import extractive_summary, extractive_turn_prefix
from compaction.core.tokens import count_content, count_text
from compaction.core.types import FileOps, Msg
from tests import services

TRANSCRIPTS = services.TRANSCRIPTS / "claude-code"
TRANSCRIPT = TRANSCRIPTS / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
OTHER_TRANSCRIPT = TRANSCRIPTS / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _msg(seq: int, role: str, content) -> Msg:
    return Msg(seq, role, content, count_content(content))


def _session() -> list[Msg]:
    return [
        _msg(
            1, "user", "Add a CSV export to the reports page. Always use UTF-8 with a BOM. Never change the public API."
        ),
        _msg(
            2,
            "assistant",
            [
                {"type": "text", "text": "I'll use the csv module instead of pandas because pandas is not installed."},
                {"type": "tool_use", "id": "a", "name": "Read", "input": {"file_path": "reports/views.py"}},
            ],
        ),
        _msg(
            3, "user", [{"type": "tool_result", "tool_use_id": "a", "content": "def report(request):\n    raise Error"}]
        ),
        _msg(
            4,
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "b",
                    "name": "Edit",
                    "input": {"file_path": "reports/export.py", "old_string": "", "new_string": "x"},
                }
            ],
        ),
        _msg(5, "user", [{"type": "tool_result", "tool_use_id": "b", "content": "ok"}]),
        _msg(
            6,
            "assistant",
            [{"type": "tool_use", "id": "c", "name": "Bash", "input": {"command": "pytest tests/test_export.py"}}],
        ),
        _msg(
            7,
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "c",
                    "content": "Exit code 1\nE   UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9'\n1 failed, 3 passed",
                    "is_error": True,
                }
            ],
        ),
        _msg(8, "user", "Don't use the ascii codec anywhere. Use reports/encoding.py helpers."),
        _msg(
            9,
            "assistant",
            [{"type": "tool_use", "id": "d", "name": "Bash", "input": {"command": "pytest tests/test_export.py"}}],
        ),
        _msg(10, "user", [{"type": "tool_result", "tool_use_id": "d", "content": "4 passed in 0.3s"}]),
        _msg(
            11, "assistant", "Fixed the encoding: all 4 tests pass. Next, I'll add the download button to the template."
        ),
    ]


def test_extractive_summary_has_every_section_and_keeps_the_users_words():
    summary = extractive_summary(_session())
    assert check_summary_text(summary, input_tokens=10_000) is None
    for heading in SECTION_HEADINGS:
        assert heading in summary
    # Goal from the first request; every user instruction verbatim.
    goal = summary.split("## Goal\n")[1].split("\n\n")[0]
    assert goal.startswith("Add a CSV export to the reports page.")
    # The first request's rules are in the Goal's words; Constraints does not repeat them.
    assert "Add a CSV export to the reports page. Always use UTF-8 with a BOM. Never change the public API." in goal
    assert summary.count("Never change the public API.") == 1
    assert '"Don\'t use the ascii codec anywhere. Use reports/encoding.py helpers."' in summary
    # Progress from tool activity with outcomes, files with what was done to them.
    assert "`reports/export.py` was edited once" in summary
    assert "`pytest tests/test_export.py` → 4 passed in 0.3s" in summary
    assert "Fixed the encoding: all 4 tests pass." in summary
    # The failure is reported with its exact line and how it was fixed.
    errors = summary.split("### Errors and Fixes")[1].split("###")[0]
    assert "UnicodeEncodeError" in errors and "fixed:" in errors
    # Decisions, next steps and exact error lines.
    assert "I'll use the csv module instead of pandas because pandas is not installed." in summary
    assert "Next, I'll add the download button to the template." in summary.split("## Next Steps")[1]
    assert "E   UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9'" in summary
    assert "reports/encoding.py" in summary.split("## Critical Context")[1]
    # A source line read from a file is not an error line.
    assert "raise Error" not in summary


def test_a_failure_fixed_later_is_not_blocked_but_an_open_one_is():
    summary = extractive_summary(_session())
    blocked = summary.split("### Blocked")[1].split("## Key Decisions")[0]
    assert "(none)" in blocked
    still_failing = [
        *_session()[:7],
    ]
    blocked = extractive_summary(still_failing).split("### Blocked")[1].split("## Key Decisions")[0]
    assert "`pytest tests/test_export.py` failed: E   UnicodeEncodeError: 'ascii' codec" in blocked


def test_extractive_is_deterministic():
    assert extractive_summary(_session()) == extractive_summary(_session())


def test_previous_summary_is_merged_item_by_item():
    first = extractive_summary(_session()[:7])
    second = extractive_summary(_session()[7:], previous_summary=first + "\n\n<read-files>\nx.py\n</read-files>")
    # Nothing of the first summary's user rules or done items was dropped.
    assert "Always use UTF-8 with a BOM." in second
    assert "Don't use the ascii codec anywhere." in second
    assert "`reports/export.py` was edited once" in second
    assert second.split("## Goal\n")[1].startswith("Add a CSV export")
    assert "<read-files>" not in second  # file tags are re-appended by the chain, not merged as text
    # No duplicates after merging.
    sections = parse_summary_sections(second)
    assert len(sections["constraints"]) == len(set(sections["constraints"]))


def test_in_progress_item_completed_later_moves_to_done():
    previous = "\n".join(
        [
            "## Goal",
            "Ship the export",
            "## Constraints & Preferences",
            "- (none)",
            "## Progress",
            "### Done",
            "- [x] Wrote the exporter",
            "### In Progress",
            "- [ ] Fix the encoding of the export tests",
            "### Blocked",
            "- (none)",
            "## Key Decisions",
            "- (none)",
            "## Next Steps",
            "1. Add the button",
            "## Critical Context",
            "- (none)",
        ]
    )
    summary = extractive_summary(_session()[8:], previous_summary=previous)
    done = summary.split("### Done")[1].split("### In Progress")[0]
    in_progress = summary.split("### In Progress")[1].split("### Blocked")[0]
    assert "Fix the encoding of the export tests" in done
    assert "Fix the encoding" not in in_progress
    assert "Wrote the exporter" in done


def test_budget_trims_least_important_items_but_never_the_users_instructions():
    msgs = [_msg(1, "user", "Keep every public name stable. Never delete data files.")]
    for i in range(300):
        msgs.append(
            _msg(
                2 + 2 * i,
                "assistant",
                [
                    {"type": "text", "text": f"Updated module_{i} and fixed the import order in package_{i}."},
                    {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"./build.sh dir_{i}"}},
                ],
            )
        )
        msgs.append(
            _msg(
                3 + 2 * i,
                "user",
                [
                    {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"error: cannot open dir_{i}"},
                ],
            )
        )
    big = extractive_summary(msgs, budget=50_000)
    small = extractive_summary(msgs, budget=400)
    assert count_text(small) <= 400 < count_text(big)
    assert "Keep every public name stable. Never delete data files." in small
    for heading in SECTION_HEADINGS:
        assert heading in small
    # The newest error survives trimming before older ones.
    assert "error: cannot open dir_299" in small
    assert "error: cannot open dir_0" not in small


def test_split_first_turn_without_history_still_gets_a_real_summary():
    result = summarize(
        SummaryInput(messages=[], turn_prefix=_session()[7:], output_budget=2000),
        build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0),
    )
    assert result.strategy == "extractive", result.fallbacks
    assert "Don't use the ascii codec anywhere." in result.summary.split("## Progress")[0]
    assert result.turn_prefix_summary.startswith("## Turn Request")


def test_large_history_is_fast():
    msgs = []
    for i in range(1500):
        msgs.append(
            _msg(
                2 * i + 1,
                "assistant",
                [
                    {"type": "text", "text": f"Checking module {i}. " + "Some reasoning about the code. " * 30},
                    {
                        "type": "tool_use",
                        "id": f"t{i}",
                        "name": "Bash",
                        "input": {"command": f"pytest tests/test_{i}.py"},
                    },
                ],
            )
        )
        msgs.append(
            _msg(
                2 * i + 2,
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{i}",
                        "content": "collected 3 items\n" + "ok line\n" * 200 + "3 passed",
                    },
                ],
            )
        )
    assert sum(m.tokens for m in msgs) > 300_000
    started = time.monotonic()
    result = summarize(
        SummaryInput(messages=msgs, output_budget=8000),
        build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0),
    )
    assert time.monotonic() - started < 10
    assert result.strategy == "extractive"
    assert count_text(result.summary) < 9000


def test_hundreds_of_long_requests_fit_and_become_a_short_list():
    msgs = [
        _msg(i + 1, "user", f"Request {i}: please refactor handler_{i} so that it " + "keeps the old behaviour " * 20)
        for i in range(120)
    ]
    summary = extractive_summary(msgs, budget=6000)
    assert count_text(summary) <= 6000
    goal = summary.split("## Constraints")[0]
    # The first request is the goal, the latest is named, the ones between are a short list.
    assert goal.split("## Goal\n")[1].startswith("Request 0: please refactor handler_0")
    assert 'Latest request: "Request 119: please refactor handler_119' in goal
    # The newest requests are listed, the oldest between are counted, not quoted.
    assert '"Request 118: please refactor handler_118' in goal
    assert (
        '"Request 5: please refactor handler_5 ' not in goal
        and "of the user's messages in this range are not shown here" in goal
    )
    # Requests are not standing rules.
    constraints = summary.split("## Constraints & Preferences")[1].split("## Progress")[0]
    assert constraints.strip() == "- (none stated by the user)"


def _chatty_exchanges(n: int, *, start: int = 1, rule_every: int = 0, tag: str = "") -> list[Msg]:
    """n user/assistant exchanges as people really type them: mostly short replies."""
    chatter = ["ok", "thanks", "did you push?", "ok, continue", "yes please", "looks good", "now the tests"]
    msgs: list[Msg] = []
    seq = start
    for i in range(n):
        if i == 0:
            text = f"Port the billing service{' ' + tag if tag else ''} to the new queue API."
        elif rule_every and i % rule_every == 0:
            text = f"Never touch the legacy_{tag}{i} module; always run make check_{tag}{i} before committing."
        elif i % 3 == 0:
            text = f"now look at handler_{tag}{i} in the worker and tell me what it returns for an empty batch"
        else:
            text = chatter[i % len(chatter)]
        msgs.append(_msg(seq, "user", text))
        msgs.append(
            _msg(
                seq + 1,
                "assistant",
                f"Done with step {tag}{i}: updated `billing/queue_{tag}{i}.py` and ran the suite again. " * 3,
            )
        )
        seq += 2
    return msgs


def _constraints(summary: str) -> str:
    return summary.split("## Constraints & Preferences")[1].split("## Progress")[0]


def test_thousands_of_exchanges_stay_within_the_budget_through_the_chain():
    msgs = _chatty_exchanges(1500, rule_every=100)
    result = summarize(
        SummaryInput(messages=msgs, output_budget=13_107),
        build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0),
    )
    assert result.strategy == "extractive", result.fallbacks
    # The stored summary (file tags and fidelity repair included) fits the budget.
    assert count_text(result.summary) <= 13_107
    constraints = _constraints(result.summary)
    assert 'User: "ok"' not in result.summary and '"thanks"' not in constraints
    assert "did you push?" not in constraints
    # Every rule the user gave is still there, verbatim.
    for i in range(100, 1500, 100):
        assert f"Never touch the legacy_{i} module; always run make check_{i} before committing." in constraints


def test_acknowledgements_never_become_constraints():
    summary = extractive_summary(_chatty_exchanges(400), budget=13_107)
    constraints = _constraints(summary)
    assert constraints.strip() == "- (none stated by the user)"
    assert summary.count('"ok"') <= 30  # in the list of recent user messages only
    assert "Port the billing service to the new queue API." in summary.split("## Goal\n")[1].split("\n")[0]


def test_a_chain_of_compactions_stays_within_budget_and_keeps_the_newest_rules():
    budget = 2500
    chain = build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0)
    previous = None
    seq = 1
    sizes = []
    for round_ in range(12):
        msgs = _chatty_exchanges(150, start=seq, rule_every=10, tag=f"r{round_}_")
        seq += 300
        result = summarize(SummaryInput(messages=msgs, previous_summary=previous, output_budget=budget), chain)
        assert result.strategy == "extractive", result.fallbacks
        sizes.append(count_text(result.summary))
        previous = result.summary
    assert max(sizes) <= budget, sizes
    constraints = _constraints(previous)
    # The goal of the very first range survives every merge.
    assert previous.split("## Goal\n")[1].startswith("Port the billing service r0_")
    # Newest rules are kept; under pressure the oldest carried-forward ones went first.
    assert "Never touch the legacy_r11_140 module" in constraints
    assert "Never touch the legacy_r10_10 module" in constraints
    assert "Never touch the legacy_r0_10 module" not in constraints
    assert 'User: "ok"' not in previous
    sections = parse_summary_sections(previous)
    assert len(sections["constraints"]) == len(set(sections["constraints"]))


def _tool_session() -> list[Msg]:
    """A turn with chatter, thinking, a todo list, a rejection and background noise."""
    return [
        _msg(1, "user", "Add rate limiting to the /api/upload endpoint."),
        _msg(
            2,
            "assistant",
            [
                {"type": "thinking", "thinking": "This is getting complicated, so I should reconsider the approach."},
                {"type": "text", "text": "I've already done extensive exploration of the codebase."},
                {
                    "type": "tool_use",
                    "id": "todo1",
                    "name": "TodoWrite",
                    "input": {
                        "todos": [
                            {"content": "Add limiter middleware", "status": "completed", "activeForm": "Adding"},
                            {"content": "Wire limiter into upload view", "status": "in_progress", "activeForm": "W"},
                            {"content": "Document RATE_LIMIT in README", "status": "pending", "activeForm": "D"},
                        ]
                    },
                },
            ],
        ),
        _msg(3, "user", [{"type": "tool_result", "tool_use_id": "todo1", "content": "Todos have been modified"}]),
        _msg(
            4,
            "assistant",
            [
                {"type": "text", "text": "That line is already fixed."},
                {
                    "type": "text",
                    "text": "I'll use a token bucket instead of a fixed window because bursts must be allowed.",
                },
                {
                    "type": "tool_use",
                    "id": "e1",
                    "name": "Edit",
                    "input": {
                        "file_path": "/srv/app/api/middleware.py",
                        "old_string": "MIDDLEWARE = []",
                        "new_string": "MIDDLEWARE = [RateLimitMiddleware]\nRATE_LIMIT_PER_MIN = 60",
                    },
                },
            ],
        ),
        _msg(5, "user", [{"type": "tool_result", "tool_use_id": "e1", "content": "The file was updated."}]),
        _msg(
            6,
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "e2",
                    "name": "Edit",
                    "input": {"file_path": "/srv/app/api/views.py", "old_string": "a", "new_string": "b"},
                }
            ],
        ),
        _msg(
            7,
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "e2",
                    "is_error": True,
                    "content": "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. "
                    "if it was a file edit, the new_string was NOT written to the file). STOP what you are doing "
                    "and wait for the user to tell you how to proceed.",
                }
            ],
        ),
        _msg(8, "user", "ok"),
        _msg(
            9,
            "assistant",
            [
                {
                    "type": "text",
                    "text": "Actually I'll keep the fixed window rather than a token bucket because the proxy "
                    "already smooths bursts.",
                },
                {
                    "type": "tool_use",
                    "id": "b1",
                    "name": "Bash",
                    "input": {"command": "pytest tests/api -q 2>&1 | tail -5", "description": "Run API tests"},
                },
            ],
        ),
        _msg(10, "user", [{"type": "tool_result", "tool_use_id": "b1", "content": "12 passed in 1.1s"}]),
        _msg(
            11,
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "b2",
                    "name": "Bash",
                    "input": {"command": "git commit -am 'Rate limit uploads'"},
                }
            ],
        ),
        _msg(
            12, "user", [{"type": "tool_result", "tool_use_id": "b2", "content": "[main 1a2b3c4] Rate limit uploads"}]
        ),
        _msg(13, "assistant", "Now run tests. Let me wait for it to finish. Let me wait more."),
    ]


def test_done_lists_concrete_work_with_evidence_not_chatter():
    summary = extractive_summary(_tool_session())
    done = summary.split("### Done")[1].split("### In Progress")[0]
    assert "already" not in done
    assert "extensive exploration" not in summary
    # Which file changed and what it gained, tests with outcome, the commit with its message.
    files = summary.split("### Files")[1]
    assert "`api/middleware.py` was edited once" in files
    assert "`pytest tests/api -q` → 12 passed in 1.1s" in done
    assert 'Committed `1a2b3c4` "Rate limit uploads"' in done
    assert re.search(r"Todos completed: .*Add limiter middleware", done)


def test_decisions_come_from_stated_replies_and_the_latest_wins():
    summary = extractive_summary(_tool_session())
    decisions = summary.split("## Key Decisions")[1].split("## Next Steps")[0]
    assert "reconsider the approach" not in summary  # thinking is not a decision
    assert "keep the fixed window rather than a token bucket" in decisions
    assert "I'll use a token bucket instead of a fixed window" not in decisions


def test_next_steps_come_from_the_todo_list_not_narration():
    summary = extractive_summary(_tool_session())
    in_progress = summary.split("### In Progress")[1].split("### Blocked")[0]
    next_steps = summary.split("## Next Steps")[1].split("## Critical Context")[0]
    assert "Todo in progress: Wire limiter into upload view" in in_progress
    assert "1. Todo: Document RATE_LIMIT in README" in next_steps
    for junk in ("Now run tests.", "Let me wait for it to finish.", "Let me wait more."):
        assert junk not in summary


def test_a_tool_rejection_is_a_past_event_not_a_standing_order():
    summary = extractive_summary(_tool_session())
    critical = summary.split("## Critical Context")[1]
    assert "STOP what you are doing" not in summary
    assert "The user rejected the Edit of `api/views.py`" in critical and "it did not run" in critical
    assert "rejected" not in summary.split("## Constraints & Preferences")[1].split("## Progress")[0]
    ledger = build_ledger(_tool_session())
    assert not any("STOP what you are doing" in e for e in ledger.items["errors"])


def test_commands_are_listed_once():
    msgs = []
    for i in range(30):
        msgs += [
            _msg(
                2 * i + 1,
                "assistant",
                [
                    {
                        "type": "tool_use",
                        "id": f"c{i}",
                        "name": "Bash",
                        "input": {"command": f"mix test 2>&1 | tail -{i}"},
                    }
                ],
            ),
            _msg(
                2 * i + 2, "user", [{"type": "tool_result", "tool_use_id": f"c{i}", "content": "5 tests, 0 failures"}]
            ),
            _msg(
                2 * i + 61,
                "assistant",
                [{"type": "tool_use", "id": f"g{i}", "name": "Bash", "input": {"command": f"git show HEAD~{i}"}}],
            ),
            _msg(2 * i + 62, "user", [{"type": "tool_result", "tool_use_id": f"g{i}", "content": "commit"}]),
        ]
    msgs.sort(key=lambda m: m.seq)
    summary = extractive_summary([_msg(0, "user", "Fix the tests."), *msgs])
    assert summary.count("`mix test`") == 1
    assert "Command run:" not in summary
    # The latest of each kind, once (In Progress names it as the latest call), not thirty variants.
    assert summary.count("git show") == 1 and "`git show HEAD~29`" in summary


def test_focus_instructions_decide_what_survives_trimming():
    msgs = [_msg(1, "user", "Clean up the service.")]
    for i in range(60):
        topic = "encoding" if i % 10 == 0 else "logging"
        msgs += [
            _msg(
                2 * i + 2,
                "assistant",
                [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"run_{topic}_{i}"}}],
            ),
            _msg(
                2 * i + 3,
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{i}",
                        "is_error": True,
                        "content": f"error: {topic} mismatch #{i} in module_{i} " + "x" * 80,
                    }
                ],
            ),
        ]
    plain = extractive_summary(msgs, budget=700)
    focused = extractive_summary(msgs, budget=700, instructions="focus on the encoding errors")
    assert count_text(focused) <= 700
    assert "error: encoding mismatch #0 in" not in plain
    for i in range(0, 60, 10):
        assert f"error: encoding mismatch #{i} in module_{i}" in focused
    critical = focused.split("## Critical Context")[1]
    assert "Compaction focus requested: focus on the encoding errors (items about it are listed first" in critical
    # Focus items come first in their section.
    blocked = focused.split("### Blocked")[1].split("## Key Decisions")[0]
    first_error = next(line for line in blocked.splitlines() if "mismatch" in line)
    assert "encoding" in first_error


def test_focus_instructions_are_recorded_and_boost_matching_items():
    summary = extractive_summary(_session(), instructions="focus on the encoding work")
    assert "Compaction focus requested: focus on the encoding work" in summary


def test_turn_prefix_summary_lists_attempts_and_results():
    text = extractive_turn_prefix(_session()[7:], budget=1000)
    assert text.startswith("## Turn Request\nUser: \"Don't use the ascii codec anywhere.")
    assert "`pytest tests/test_export.py` → ok: 4 passed in 0.3s" in text
    assert "## Context for the Kept Part" in text


def test_turn_prefix_says_what_the_part_really_began_with():
    notification = (
        "<task-notification>\n<task-id>b0be39e</task-id>\n<status>completed</status>\n"
        '<summary>Background command "Force recompile deps" completed (exit code 0)</summary>\n</task-notification>'
    )
    prefix = [_msg(20, "user", notification), *_session()[1:7]]
    text = extractive_turn_prefix(prefix, budget=1000)
    request = text.split("## Attempted So Far")[0]
    assert "background-task notification" in request and "Force recompile deps" in request
    assert "the request precedes this part" not in request
    interrupted = [_msg(20, "user", "[Request interrupted by user for tool use]"), *_session()[1:7]]
    assert "interrupted" in extractive_turn_prefix(interrupted, budget=1000).split("## Attempted So Far")[0]


def test_ledger_instructions_are_rules_and_requests_not_chatter():
    msgs = [
        _msg(1, "user", "Migrate the cron jobs to Celery beat."),
        _msg(2, "assistant", "Working on it."),
        _msg(3, "user", "ok"),
        _msg(4, "user", "thanks"),
        _msg(5, "user", "did you push?"),
        _msg(6, "user", "No, don't push to main; use a feature branch."),
        _msg(7, "user", "Make sure the beat schedule stays in settings.py."),
        _msg(8, "user", "what's next?"),
    ]
    items = build_ledger(msgs).items["instructions"]
    assert items == [
        "Migrate the cron jobs to Celery beat.",
        "No, don't push to main; use a feature branch.",
        "Make sure the beat schedule stays in settings.py.",
        "what's next?",
    ]


def test_repair_never_exceeds_its_budget():
    ledger = build_ledger(_session())
    poor = "## Goal\nCSV export\n\n## Constraints & Preferences\n- (none)\n\n## Critical Context\n- (none)\n"
    budget = count_text(poor) + 40
    repaired, added = repair_summary(poor, ledger, budget=budget)
    assert count_text(repaired) <= budget
    assert added["instructions"] >= 1 and added["skipped_for_budget"] >= 1


def test_ledger_lists_what_the_range_held():
    ledger = build_ledger(_session())
    items = ledger.items
    assert items["instructions"][0].startswith("Add a CSV export")
    assert len(items["instructions"]) == 2
    assert "reports/export.py" in items["files"] and "reports/views.py" in items["files"]
    assert "reports/encoding.py" in items["files"]
    assert items["commands"] == ["pytest tests/test_export.py"]
    # The test failure was fixed later in the range: history, not a must-keep error.
    line = "E   UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9'"
    assert items["errors"] == [] and line in ledger.resolved_errors
    assert line in build_ledger(_session()[:7]).items["errors"]  # while still failing, it is current
    assert not any("raise Error" in e for e in items["errors"] + ledger.resolved_errors)
    assert any("Never change the public API." in d for d in items["decisions"])


def test_fidelity_check_and_repair():
    ledger = build_ledger(_session()[:8])  # ends with the test still failing
    poor = "## Goal\nCSV export\n\n## Constraints & Preferences\n- (none)\n\n## Critical Context\n- (none)\n"
    report = check_summary(poor, ledger)
    assert report["categories"]["errors"]["kept"] == 0
    assert report["categories"]["instructions"]["kept"] == 0
    assert report["score"] < 0.2
    repaired, added = repair_summary(poor, ledger)
    assert added["instructions"] == 2 and added["errors"] >= 1 and added["files"] >= 3
    after = check_summary(repaired, ledger)
    for category in ("instructions", "errors", "files"):
        assert after["categories"][category]["kept"] == after["categories"][category]["total"]
    constraints = repaired.split("## Constraints & Preferences")[1].split("## Critical Context")[0]
    assert "(none)" not in constraints and "Always use UTF-8 with a BOM." in constraints
    # Repairing a complete summary changes nothing.
    assert repair_summary(repaired, ledger)[0] == repaired


def test_chain_without_key_runs_extractive_and_fills_fidelity():
    inp = SummaryInput(
        messages=_session(),
        turn_prefix=[],
        previous_summary=None,
        previous_files=FileOps(read=["docs/old.md"], modified=[]),
        instructions=None,
        custom_prompt=None,
        output_budget=4000,
        model="claude-haiku-4-5",
    )
    result = summarize(inp, build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0))
    assert result.strategy == "extractive" and result.fallbacks == []
    assert "reports/export.py" in result.modified_files
    assert "docs/old.md" in result.read_files and "reports/views.py" in result.read_files
    assert "<modified-files>\nreports/export.py\n</modified-files>" in result.summary
    after = result.fidelity["after_repair"]["categories"]
    assert after["instructions"]["kept"] == 2 and after["errors"]["kept"] == after["errors"]["total"]


# ---------------------------------------------------------------------------- real data


def _read_pre_compaction(path: Path) -> tuple[list[Msg], str]:
    """Messages before Claude Code's own compact_boundary, and the summary it wrote there."""
    try:
        from compaction.core.transcripts.claude_code import read_claude_code
    except ImportError:  # B1's reader not available: parse the few fields needed here
        read_claude_code = None
    if read_claude_code is not None:
        transcript = read_claude_code(path)
        if transcript.compactions:
            first = transcript.compactions[0]
            msgs = transcript.messages[: first["before_message_index"]]
            return [_msg(i + 1, m["role"], m["content"]) for i, m in enumerate(msgs)], first["summary"]
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    boundary = next(i for i, d in enumerate(lines) if d.get("subtype") == "compact_boundary")
    merged: list[dict] = []
    last_id = None
    for d in lines[:boundary]:
        if d.get("type") not in ("user", "assistant") or d.get("isMeta") or d.get("isSidechain"):
            continue
        message = d["message"]
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if d["type"] == "assistant" and merged and merged[-1]["role"] == "assistant" and message.get("id") == last_id:
            merged[-1]["content"].extend(content)
        else:
            merged.append({"role": message["role"], "content": content})
        last_id = message.get("id")
    summary_line = next(d for d in lines[boundary:] if d.get("isCompactSummary"))
    summary = summary_line["message"]["content"]
    if isinstance(summary, list):
        summary = "".join(b.get("text", "") for b in summary)
    return [_msg(i + 1, m["role"], m["content"]) for i, m in enumerate(merged)], summary


@pytest.fixture(scope="module", params=[TRANSCRIPT, OTHER_TRANSCRIPT], ids=["8463c716", "258c7280"])
def real_session(request):
    return request.param, *_read_pre_compaction(request.param)


def test_real_session_extractive_beats_claude_codes_own_summary(real_session):
    path, messages, claude_summary = real_session
    input_tokens = sum(m.tokens for m in messages)
    assert input_tokens > 50_000

    started = time.monotonic()
    result = summarize(
        SummaryInput(messages=messages, output_budget=13_107),
        build_chain(api_key=None, base_url=None, model="claude-haiku-4-5", timeout=1, max_retries=0),
    )
    elapsed = time.monotonic() - started
    assert result.strategy == "extractive", result.fallbacks
    assert elapsed < 5

    ledger = build_ledger(messages)
    ours = check_summary(result.summary, ledger)["categories"]
    # Before any repair, the extractive summary itself already keeps them.
    raw = result.fidelity["before_repair"]["categories"]
    theirs = check_summary(claude_summary, ledger)["categories"]

    # Errors fixed later in the range are history: kept with their fix, not must-keep items.
    resolved = ledger.resolved_errors
    assert len(resolved) >= 2, "the session has exact error lines"
    assert raw["errors"]["kept"] == raw["errors"]["total"]
    assert ours["errors"]["kept"] == ours["errors"]["total"]
    kept_resolved = sum(1 for line in resolved if line[:120] in result.summary)
    assert kept_resolved > sum(1 for line in resolved if line[:120] in claude_summary)
    assert raw["instructions"]["kept"] == raw["instructions"]["total"] >= 1
    assert raw["files"]["kept"] == raw["files"]["total"] > theirs["files"]["kept"]
    assert raw["commands"]["kept"] > theirs["commands"]["kept"]
    assert result.fidelity["errors"] == {
        "kept": ours["errors"]["total"],
        "total": ours["errors"]["total"],
        "kept_before_repair": raw["errors"]["kept"],
    }

    summary_tokens = count_text(result.summary)
    assert summary_tokens < input_tokens / 20
    for heading in SECTION_HEADINGS:
        assert heading in result.summary
    assert "<modified-files>" in result.summary
    assert summary_tokens <= 13_107
    # What an agent continues from: concrete progress, live state, no narration or boilerplate.
    done = result.summary.split("### Done")[1].split("### In Progress")[0]
    commits = re.findall(r"^\[[\w./-]+ ([0-9a-f]{7,40})\] ", _tool_outputs(messages), re.M)
    assert commits and all(f"Committed `{sha}`" in done for sha in commits), "every commit, with its hash"
    assert "Command run:" not in result.summary
    assert "STOP what you are doing" not in result.summary
    assert "Let me wait" not in result.summary
    in_progress = result.summary.split("### In Progress")[1].split("### Blocked")[0]
    next_steps = result.summary.split("## Next Steps")[1].split("## Critical Context")[0]
    started, closed = _tracker_states(messages)
    still_open = [i for i in started if i not in closed]
    assert still_open and all(f"`{i}`" in in_progress and f"`{i}`" in next_steps for i in still_open)
    for issue in closed:
        # A closed issue is never in progress or a next step (its id may appear as a prefix).
        assert not re.search(rf"`{re.escape(issue)}`", in_progress + next_steps), issue


def _tool_outputs(messages: list[Msg]) -> str:
    out = []
    for m in messages:
        for b in m.blocks:
            if b.get("type") == "tool_result":
                c = b.get("content")
                out.append(c if isinstance(c, str) else "\n".join(x.get("text", "") for x in c or []))
    return "\n".join(out)


def _tracker_states(messages: list[Msg]) -> tuple[list[str], set[str]]:
    """Issues set in progress and issues closed by the tracker commands of the range."""
    started: list[str] = []
    closed: set[str] = set()
    for m in messages:
        for b in m.blocks:
            if b.get("type") == "tool_use" and isinstance((b.get("input") or {}).get("command"), str):
                command = b["input"]["command"]
                started += re.findall(r"\bbd update ([\w.-]+) --status[= ]in_progress", command)
                for ids in re.findall(r"\bbd close ((?:[\w.-]+ ?)+)", command):
                    closed.update(i for i in ids.split() if not i.startswith("-"))
    return list(dict.fromkeys(started)), closed


def test_real_session_successive_compactions_stay_bounded_and_current():
    messages, _claude = _read_pre_compaction(OTHER_TRANSCRIPT)
    chain = build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0)
    previous, files = None, FileOps()
    step = len(messages) // 3
    for k in range(3):
        part = messages[k * step : (k + 1) * step] if k < 2 else messages[2 * step :]
        result = summarize(
            SummaryInput(messages=part, previous_summary=previous, previous_files=files, output_budget=4000), chain
        )
        assert result.strategy == "extractive", result.fallbacks
        assert count_text(result.summary) <= 4000
        previous, files = result.summary, FileOps(read=result.read_files, modified=result.modified_files)
    in_progress = previous.split("### In Progress")[1].split("### Blocked")[0]
    # Issues closed in a later range are no longer "in progress"; the goal is the first request.
    assert "`spotter-gqc.1`" not in in_progress and "`spotter-gqc.6`" in in_progress
    assert previous.split("## Goal\n")[1].startswith("Implement spotter-gqc")
    assert previous.count("Issue states at the end of this range:") == 1


def test_real_session_split_turn_prefix_names_what_it_began_with():
    from compaction.core.cutpoint import plan_cut

    messages, _claude = _read_pre_compaction(OTHER_TRANSCRIPT)
    plan = plan_cut(messages, keep_recent_tokens=20_000)
    assert plan.split_turn and plan.turn_prefix
    result = summarize(
        SummaryInput(messages=plan.to_summarize, turn_prefix=plan.turn_prefix, output_budget=13_107),
        build_chain(api_key=None, base_url=None, model="m", timeout=1, max_retries=0),
    )
    request = result.turn_prefix_summary.split("## Attempted So Far")[0]
    assert "interrupted" in request or "notification" in request or 'User: "' in request
    assert "(the user's request precedes this part of the turn)" not in request


def test_probe_commands_are_answers_not_failures_and_their_output_is_not_errors():
    msgs = [
        _msg(1, "user", "Find where the retry limit is set."),
        _msg(
            2,
            "assistant",
            [
                {"type": "tool_use", "id": "g", "name": "Bash", "input": {"command": "grep -n retry_limit src/*.py"}},
                {"type": "tool_use", "id": "c", "name": "Bash", "input": {"command": "cat CHANGELOG.md"}},
            ],
        ),
        _msg(
            3,
            "user",
            [
                {"type": "tool_result", "tool_use_id": "g", "is_error": True, "content": "Command exited with code 1"},
                {"type": "tool_result", "tool_use_id": "c", "content": "- Fixed 400 errors when using the proxy\n"},
            ],
        ),
    ]
    summary = extractive_summary(msgs)
    assert "(none)" in summary.split("### Blocked")[1].split("## Key Decisions")[0]
    assert "Fixed 400 errors" not in summary and "exited with code 1" not in summary
    assert build_ledger(msgs).items["errors"] == []


def test_user_messages_are_classified_as_people_write_them():
    from compaction.core.ledger import classify_user_text, instruction_quote

    assert classify_user_text("/mode") == "chatter"
    assert classify_user_text("yeah, do it all") == "request"
    assert classify_user_text("i don't understand, does it capture the theme at creation time?") == "request"
    assert classify_user_text("don't modify the theme, look into the footer sources") == "instruction"
    # A correction that reports what is wrong is a bug report; one that says what to do is a rule.
    assert classify_user_text("actually, it's the background color that doesn't change") == "request"
    assert classify_user_text("no, the block should stay as is") == "instruction"
    report = (
        "my dude, this exploded when i restarted with -r. invalid themes must NEVER explode\n" + "at x (y.ts:1)\n" * 40
    )
    assert instruction_quote(report) == "invalid themes must NEVER explode"


def test_a_short_reply_is_quoted_with_what_it_answers():
    msgs = [
        _msg(1, "user", "Prepare the 0.8.0 release."),
        _msg(2, "assistant", "The changelog is updated. Should I proceed with committing and tagging?"),
        _msg(3, "user", "yeah, do it all"),
    ]
    summary = extractive_summary(msgs)
    expected = (
        'Latest request: "yeah, do it all" (replying to the assistant: "The changelog is updated. '
        'Should I proceed with committing and tagging?")'
    )
    assert expected in summary
    assert 'Answer the user\'s latest message: "yeah, do it all"' in summary.split("## Next Steps")[1]
    # An approval of what the assistant proposed is a decision.
    assert "The user approved" in summary.split("## Key Decisions")[1].split("## Next Steps")[0]
