"""Codex CLI rollouts built from the documented line shapes (openai/codex, codex-rs/protocol:
`RolloutLine {timestamp, type, payload}`, `ResponseItem`, `EventMsg::TokenCount`,
`TurnContextItem`, `CompactedItem`), for the reader's and the import's tests.

`Rollout` writes one line per call, as Codex's recorder does; `long_rollout` is a 30-turn
session with shell function calls, apply_patch, a local shell call, a web search, reasoning
summaries, token counts (with the repeats Codex writes when rate limits change) and one
compaction with its replacement history. The sample under tests/data/codex/ is its output
(`python -m tests.codex_rollouts` rewrites it; a test checks that it still matches).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).parent / "data" / "codex" / "rollout-2025-10-02T09-14-03-0199a1b2-generated.jsonl"
SESSION_ID = "0199a1b2-7c3d-7e41-9f00-4c0de0c0ffee"
MODEL = "gpt-5-codex"
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. Use this to build "
    "on the work that has already been done and avoid duplicating work. Here is the summary produced by the "
    "other language model, use the information in this summary to  assist with your own analysis:"
)
AGENTS_MD = (
    "# AGENTS.md instructions for /home/dev/ledger\n\n<INSTRUCTIONS>\nRun `make test` before you commit.\n"
    "Keep functions short.\n</INSTRUCTIONS>"
)
ENVIRONMENT = (
    "<environment_context>\n  <cwd>/home/dev/ledger</cwd>\n  <approval_policy>on-request</approval_policy>\n"
    "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
    "  <shell>bash</shell>\n</environment_context>"
)
PERMISSIONS = "<permissions instructions>\nFilesystem sandboxing: workspace-write.\n</permissions instructions>"


def usage(input_tokens: int, cached: int, output: int, reasoning: int = 0) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "cached_input_tokens": cached,
        "output_tokens": output,
        "reasoning_output_tokens": reasoning,
        "total_tokens": input_tokens + output,
    }


@dataclass
class Rollout:
    """A rollout being written, line by line."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    clock: datetime = field(default_factory=lambda: datetime(2025, 10, 2, 9, 14, 3, tzinfo=UTC))
    total: dict[str, int] = field(default_factory=lambda: usage(0, 0, 0))

    def add(self, kind: str, payload: Any) -> Rollout:
        self.clock += timedelta(milliseconds=731)
        stamp = self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.lines.append({"timestamp": stamp, "type": kind, "payload": payload})
        return self

    def item(self, payload: dict[str, Any]) -> Rollout:
        return self.add("response_item", payload)

    def event(self, payload: dict[str, Any]) -> Rollout:
        return self.add("event_msg", payload)

    def session_meta(self) -> Rollout:
        return self.add(
            "session_meta",
            {
                "id": SESSION_ID,
                "timestamp": "2025-10-02T09:14:03.112Z",
                "cwd": "/home/dev/ledger",
                "originator": "codex_cli_rs",
                "cli_version": "0.44.0",
                "instructions": None,
                "source": "cli",
                "model_provider": "openai",
                "git": {"commit_hash": "4be1c0d", "branch": "main", "repository_url": "git@example.org:dev/ledger"},
            },
        )

    def turn_context(self, model: str = MODEL) -> Rollout:
        return self.add(
            "turn_context",
            {
                "cwd": "/home/dev/ledger",
                "approval_policy": "on-request",
                "sandbox_policy": {"mode": "workspace-write", "network_access": False},
                "model": model,
                "effort": "medium",
                "summary": "auto",
            },
        )

    def user(self, text: str, *, mirror: bool = True) -> Rollout:
        self.item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
        if mirror:
            self.event({"type": "user_message", "message": text, "images": []})
        return self

    def developer(self, text: str) -> Rollout:
        return self.item({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]})

    def reasoning(self, summary: str) -> Rollout:
        self.item(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": summary}],
                "content": None,
                "encrypted_content": "gAAAAABo" + "x" * 40,
            }
        )
        return self.event({"type": "agent_reasoning", "text": summary})

    def say(self, text: str) -> Rollout:
        self.item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]})
        return self.event({"type": "agent_message", "message": text})

    def shell(self, call_id: str, command: str) -> Rollout:
        arguments = json.dumps(
            {"command": ["bash", "-lc", command], "workdir": "/home/dev/ledger", "timeout_ms": 120000}
        )
        return self.item({"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id})

    def output(self, call_id: str, text: str, exit_code: int = 0) -> Rollout:
        body = json.dumps({"output": text, "metadata": {"exit_code": exit_code, "duration_seconds": 0.4}})
        return self.item({"type": "function_call_output", "call_id": call_id, "output": body})

    def apply_patch(self, call_id: str, patch: str) -> Rollout:
        return self.item(
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": "apply_patch",
                "input": patch,
            }
        )

    def patch_output(self, call_id: str, text: str) -> Rollout:
        body = json.dumps({"output": text, "metadata": {"exit_code": 0, "duration_seconds": 0.0}})
        return self.item({"type": "custom_tool_call_output", "call_id": call_id, "output": body})

    def local_shell(self, call_id: str, argv: list[str]) -> Rollout:
        action = {"type": "exec", "command": argv, "timeout_ms": 10000, "working_directory": None, "env": None}
        return self.item({"type": "local_shell_call", "call_id": call_id, "status": "completed", "action": action})

    def web_search(self, query: str) -> Rollout:
        return self.item(
            {"type": "web_search_call", "status": "completed", "action": {"type": "search", "query": query}}
        )

    def token_count(self, prompt: int, output: int, *, cached: int | None = None) -> Rollout:
        cached = prompt * 3 // 4 if cached is None else cached
        last = usage(prompt, cached, output, output // 3)
        self.total = {key: self.total[key] + value for key, value in last.items()}
        info = {"total_token_usage": dict(self.total), "last_token_usage": last, "model_context_window": 272000}
        return self.event({"type": "token_count", "info": info, "rate_limits": _rate_limits()})

    def repeat_token_count(self) -> Rollout:
        """What Codex writes when only the rate limits changed: the last usage again."""
        last = next(x for x in reversed(self.lines) if x["payload"].get("type") == "token_count")
        return self.event({"type": "token_count", "info": last["payload"]["info"], "rate_limits": _rate_limits(12.0)})

    def compacted(self, summary: str, history: list[dict[str, Any]] | None) -> Rollout:
        return self.add("compacted", {"message": summary, "replacement_history": history})

    def text(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.lines)

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path


def _rate_limits(used: float = 11.0) -> dict[str, Any]:
    return {
        "primary": {"used_percent": used, "window_minutes": 300, "resets_in_seconds": 9000},
        "secondary": {"used_percent": 3.0, "window_minutes": 10080, "resets_in_seconds": 500000},
    }


def _output_text(turn: int) -> str:
    rows = "\n".join(
        f"src/ledger/module_{turn}_{row}.py:{row * 7}: def balance_{row}(account): ..." for row in range(40)
    )
    return f"ran the search for turn {turn}\n{rows}"


def _patch(turn: int) -> str:
    return (
        f"*** Begin Patch\n*** Update File: src/ledger/module_{turn}.py\n@@ def balance(account):\n"
        f"-    return sum(e.amount for e in account.entries)\n"
        f"+    return sum((e.amount for e in account.entries), start=Decimal(0))\n*** End Patch"
    )


def _opening(rollout: Rollout) -> None:
    rollout.session_meta().developer(PERMISSIONS)
    rollout.user(AGENTS_MD, mirror=False).user(ENVIRONMENT, mirror=False)
    rollout.event({"type": "token_count", "info": None, "rate_limits": _rate_limits()})  # before any response


def _turn(rollout: Rollout, turn: int, prompt: int) -> int:
    """One user turn: a shell call, its output, then tools by turn number, then the answer.
    Returns the prompt size the next turn starts from."""
    rollout.turn_context()
    rollout.user(f"Turn {turn}: make balance() in module_{turn} exact with Decimal and keep the tests green")
    rollout.reasoning(f"**Planning turn {turn}**\n\nI need to find where module_{turn} sums floats before patching it.")
    rollout.say(f"Looking for the float sums in module_{turn} first.")
    rollout.shell(f"call_{turn}_rg", f"rg -n 'def balance' src/ledger/module_{turn}.py")
    rollout.token_count(prompt, 180)
    if turn % 5 == 1:
        rollout.repeat_token_count()
    prompt += 1400
    rollout.output(f"call_{turn}_rg", _output_text(turn), exit_code=1 if turn % 9 == 4 else 0)
    if turn % 3 == 0:
        rollout.apply_patch(f"call_{turn}_patch", _patch(turn))
        rollout.token_count(prompt, 240)
        rollout.patch_output(
            f"call_{turn}_patch", f"Success. Updated the following files:\nM src/ledger/module_{turn}.py"
        )
        prompt += 300
    if turn == 7:
        rollout.local_shell(f"call_{turn}_local", ["bash", "-lc", "make test"])
        rollout.token_count(prompt, 90)
        rollout.output(f"call_{turn}_local", "48 passed in 3.10s")
        prompt += 200
    if turn == 11:
        rollout.reasoning("**Checking the Decimal docs**")
        rollout.web_search("python decimal sum start parameter")
    rollout.say(f"module_{turn}: balance() now sums Decimals from Decimal(0); the tests pass for this module.")
    rollout.token_count(prompt, 320)
    return prompt + 700


def _compaction(rollout: Rollout, turn: int, prompt: int) -> int:
    """Codex's auto compaction: the compaction call's usage, then the compacted line."""
    rollout.turn_context()
    rollout.token_count(prompt, 2100)  # the summarization call itself (not recorded as items)
    summary = (
        f"{SUMMARY_PREFIX}\nGoal: make every ledger module's balance() exact with Decimal.\n"
        f"Done: modules 1-{turn} patched (apply_patch), `make test` passed after module 7.\n"
        "Next: continue with the remaining modules; module 4's search exited 1 (no match), re-check it."
    )
    users = [
        f"Turn {n}: make balance() in module_{n} exact with Decimal and keep the tests green"
        for n in range(1, turn + 1)
    ]
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": AGENTS_MD}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENVIRONMENT}]},
        *({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]} for text in users),
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]},
    ]
    rollout.compacted(summary, history)
    rollout.event({"type": "context_compacted"})
    return 4000 + len(summary) // 4


def long_rollout(turns: int = 30, *, compact_after: int = 20) -> Rollout:
    """The 30-turn session (see the module doc); Codex compacts after turn `compact_after`."""
    rollout = Rollout()
    _opening(rollout)
    prompt = 6000
    for turn in range(1, turns + 1):
        prompt = _turn(rollout, turn, prompt)
        if turn == compact_after:
            prompt = _compaction(rollout, turn, prompt)
    return rollout


def legacy_rollout() -> list[dict[str, Any]]:
    """An older rollout: a bare session object first, `record_type` lines, bare items."""
    return [
        {"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-07-01T10:00:00.000Z", "instructions": None},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENVIRONMENT}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the tests"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Listing tests."}]},
        {
            "type": "function_call",
            "id": "fc_1",
            "name": "shell",
            "arguments": '{"command":["ls","tests"]}',
            "call_id": "call_a",
        },
        {"record_type": "state"},
        {"type": "function_call_output", "call_id": "call_a", "output": "test_ledger.py\ntest_money.py"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two test files."}]},
    ]


if __name__ == "__main__":  # pragma: no cover - rewrites the committed sample
    SAMPLE.parent.mkdir(parents=True, exist_ok=True)
    long_rollout().write(SAMPLE)
    print(SAMPLE)
