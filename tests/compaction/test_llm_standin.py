"""bench/llm_standin.py end to end, as a person runs it: capture the requests of a compaction at
the agent's own compaction boundary, answer them with a scripted reply, replay through the real
summarizer path and read what is served and the job's record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULE = "Never push to main without asking."
TEMPLATE = "feat: <summary> (<task id>)"
OUTPUT = "\n".join(f"  module line {n}: parsed, nothing to report" for n in range(60))


def _line(uuid: str, parent: str | None, kind: str, content, **extra) -> dict:
    entry = {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s1"}
    if kind in ("user", "assistant"):
        message = {"role": kind, "content": content}
        if kind == "assistant":
            message |= {"id": f"msg_{uuid}", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 900}}
        entry["message"] = message
    return entry | extra


def _call(n: int, name: str, args: dict) -> list:
    return [{"type": "text", "text": f"Step {n}."}, {"type": "tool_use", "id": f"t{n}", "name": name, "input": args}]


def _result(n: int, text: str, error: bool = False) -> list:
    return [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text, "is_error": error}]


def _session(path: Path) -> Path:
    """A Claude Code session: a fix and its commit, a rule, then a request that starts a long
    autonomous turn, which Claude Code's own compaction cuts."""
    steps = [
        ("user", f"Add a slugify helper to app/text.py and test it. {RULE}"),
        ("assistant", _call(1, "Bash", {"command": "pytest -q"})),
        ("user", _result(1, "E   AssertionError: slug mismatch\n1 failed in 0.2s\n" + OUTPUT, error=True)),
        ("assistant", _call(2, "Edit", {"file_path": "app/text.py", "old_string": "pass", "new_string": "..."})),
        ("user", _result(2, "The file app/text.py has been updated.")),
        ("assistant", _call(3, "Bash", {"command": "pytest -q"})),
        ("user", _result(3, "3 passed in 0.2s\n" + OUTPUT)),
        ("assistant", _call(4, "Bash", {"command": 'git commit -am "feat: slugify helper (TASK-1)"'})),
        ("user", _result(4, "[main 1a2b3c4] feat: slugify helper (TASK-1)\n 2 files changed, 40 insertions(+)")),
        ("assistant", [{"type": "text", "text": "Committed 1a2b3c4."}]),
        ("user", f"Now add a unicode mode. Commit messages follow `{TEMPLATE}`."),
    ]
    for n in range(5, 17):
        steps.append(("assistant", _call(n, "Read", {"file_path": f"app/unicode_{n}.py"})))
        steps.append(("user", _result(n, f"unicode table {n}\n" + OUTPUT)))
    lines, parent = [], None
    for i, (kind, content) in enumerate(steps):
        lines.append(_line(f"m{i}", parent, kind, content))
        parent = f"m{i}"
    lines.append(
        _line("b1", None, "system", None, subtype="compact_boundary", logicalParentUuid=parent, compactMetadata={})
    )
    lines.append(_line("s1", "b1", "user", "This session is being continued... summary", isCompactSummary=True))
    lines.append(_line("u9", "s1", "user", "continue"))
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


REPLY = f"""<analysis>
The person wants slugify, then a unicode mode; their template is `{TEMPLATE}`, quoted as is.
</analysis>
<summary>
## Goal
Add a slugify helper to app/text.py, then a unicode mode.

## Constraints & Preferences
- Commit messages follow `{TEMPLATE}` (#11).

## Progress
### Done
- [x] Slugify helper in app/text.py: `pytest -q` failed at #3, passed after the edit (3 passed, #7).

### In Progress
- [ ] Unicode mode: reading the unicode tables (#12 onwards).

### Blocked
- (none)

## Key Decisions
- (none)

## Next Steps
1. Finish the unicode mode and run `pytest -q`.

## Critical Context
- The earlier failure: `E   AssertionError: slug mismatch` (#3), fixed by the edit at #4.
</summary>"""


def _run(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "llm_standin.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture
def env(tmp_path):
    # Its own throwaway SQLite database under a temporary var dir: never the tests' database.
    keep = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "ANTHROPIC_API_KEY")}
    return keep | {"DEBUG": "1", "COMPACTOR_VAR_DIR": str(tmp_path / "var"), "PYTHONPATH": str(ROOT)}


def test_capture_then_replay_a_scripted_reply_through_the_summarizer(tmp_path, env):
    transcript = _session(tmp_path / "session.jsonl")
    out = tmp_path / "case"
    printed = _run("capture", str(transcript), str(out), "--keep", "600", env=env)
    assert "cut at the agent's own first compaction boundary (35 messages)" in printed
    (folder,) = sorted(out.glob("request-*"))
    body = json.loads((folder / "request.json").read_text())
    rendered = (folder / "request.txt").read_text()
    # The rendering is what the model reads: the system prompt, then the user message whole.
    assert rendered.startswith("===== SYSTEM PROMPT =====\nYou are a context summarization engine.")
    user = "".join(block["text"] for block in body["messages"][0]["content"])
    assert f"===== MESSAGE 1 (USER) =====\n{user}\n===== END OF REQUEST" in rendered
    assert "#1 [User]: Add a slugify helper" in user and "#11 [User]: Now add a unicode mode" in user
    assert (
        "reply.txt" in (folder / "BRIEF.md").read_text()
        and f"{body['max_tokens']:,} tokens" in (folder / "BRIEF.md").read_text()
    )
    captured = json.loads((out / "capture" / "job.json").read_text())
    assert captured["strategy"] == "extractive"  # no reply yet: the fallback, kept as a baseline
    assert "captured by the stand-in" in captured["fallbacks"][0]["reason"]

    (folder / "reply.txt").write_text(REPLY)
    printed = _run("replay", str(out), env=env)
    assert f"answered from: {folder.name}" in printed and "captured" not in printed.split("strategy")[1]
    job = json.loads((out / "replay" / "job.json").read_text())
    assert job["status"] == "succeeded" and job["strategy"] == "anthropic", job["fallbacks"]
    assert job["usage"]["calls"] == 1 and job["split_turn"]
    summary = (out / "replay" / "summary.txt").read_text()
    # The reply was read (analysis dropped, the quoted template kept), checked and repaired: the
    # commit it left out and the person's rule came back, and the repairs are on record.
    assert "<analysis>" not in summary and f"`{TEMPLATE}`" in summary
    assert "1a2b3c4" in summary and RULE in summary
    assert "added commit 1a2b3c4" in job["fidelity"]["agreement"]["repairs"]
    assert job["fidelity"]["repaired"]["instructions"] >= 1
    served = (out / "replay" / "served.txt").read_text()
    assert served.startswith(summary.rstrip()) and "=== MESSAGES KEPT VERBATIM AFTER THE SUMMARY ===" in served
    assert f"#{job['first_kept_seq']} " in (out / "replay" / "kept.txt").read_text()
