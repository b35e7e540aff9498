"""Claude Code (pinned, its default model) through /anthropic, as the README sets it up:
ANTHROPIC_BASE_URL=<server>/anthropic ANTHROPIC_API_KEY=<Compactor key> claude -p …

The stand-in model makes it spawn a subagent (the Agent tool), then write step files with Bash
for enough turns to cross a small trigger, read one back with Read, and finish. Claude Code 2.1.197
puts a {"role": "system"} message inside `messages` (mid-conversation-system beta): the gateway
answered 400 until it became a transparent proxy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compaction.core.transcripts import read_claude_code
from gateway.identity import system_text
from tests.agents import harness
from tests.agents.checks import check_compacted_upstream, check_stored_like_transcript
from tests.gateway.openai_upstream import FakeOpenAI
from tests.gateway.upstream import FakeUpstream, Recorded, Reply

pytestmark = [pytest.mark.slow, pytest.mark.agents]

PACKAGE = "@anthropic-ai/claude-code"
TASK = "Write the step files with Bash, then check the last one with Read."
SUBTASK = "SUBAGENT TASK: write sub.txt with Bash and report back."
# Claude Code's own system prompt and tools are ~18.7k tokens (cl100k, what the stand-in counts; 2.1.332's
# ~11.6k); each step adds ~1,250: the trigger is crossed at the fifth step (2.1.332: the eleventh), when
# the part to summarize is several times what its summary costs, with steps left after it.
SETTINGS = {"COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT": "25000", "COMPACTOR_KEEP_RECENT_TOKENS": "1500"}
STEPS = 16


def first_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    return json.dumps(messages[0]) if messages else ""


def last_call(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in reversed(messages):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            calls = [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
            if calls:
                return calls[-1]
    return None


def model(script: harness.Script, workdir: Path):
    def reply(rec: Recorded) -> Reply:
        body = rec.body
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if "Bash" not in tools:
            return Reply(text="Step files")  # a side call: the title, a topic check
        results = [
            b
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        if SUBTASK in first_user_text(body):  # the subagent's own conversation
            if not results:
                return Reply(text="", tool_use=("Bash", {"command": "echo sub > sub.txt", "description": "sub"}))
            return Reply(text="Subagent finished: sub.txt written.")
        if not results:
            return Reply(text="", tool_use=("Agent", {"description": "write sub.txt", "prompt": SUBTASK}))
        last = last_call(body["messages"])
        action, step = script.next_action(json.dumps(last), read=bool(last and last.get("name") == "Read"))
        if action == "shell":
            command = {"command": script.command(step), "description": f"step {step}"}
            return Reply(text="", tool_use=("Bash", command))
        if action == "read":
            return Reply(text="", tool_use=("Read", {"file_path": str(workdir / f"step_{step}.txt")}))
        return Reply(text=harness.DONE)

    return reply


@pytest.fixture(scope="module")
def claude(tmp_path_factory):
    binary = harness.cli(PACKAGE)
    tmp = tmp_path_factory.mktemp("claude-code")
    workdir, home = tmp / "work", tmp / "home"
    workdir.mkdir()
    home.mkdir()
    script = harness.Script(steps=STEPS)
    anthropic = FakeUpstream(reply=model(script, workdir)).start()
    openai = FakeOpenAI().start()
    try:
        with harness.gunicorn(
            tmp / "server", anthropic_url=anthropic.url, openai_url=openai.url, settings=SETTINGS
        ) as server:
            # The README's setup, word for word.
            env = harness.offline_env(home, ANTHROPIC_BASE_URL=f"{server.url}/anthropic", ANTHROPIC_API_KEY=server.key)
            argv = [str(binary), "-p", TASK, "--allowedTools", "Bash,Read,Write,Agent"]
            run = harness.run_cli(argv, cwd=workdir, env=env)
            harness.record_bodies(
                "claude-code",
                [r for r in anthropic.message_calls if r.body.get("tools") and SUBTASK not in first_user_text(r.body)],
            )
            yield {"run": run, "server": server, "upstream": anthropic, "home": home, "workdir": workdir}
    finally:
        anthropic.stop()
        openai.stop()


def test_the_task_completes(claude):
    run = claude["run"]
    assert run.returncode == 0, f"stdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-2000:]}"
    assert harness.DONE in run.stdout
    assert (claude["workdir"] / f"step_{STEPS}.txt").exists() and (claude["workdir"] / "sub.txt").exists()
    assert "Bad Request" not in run.stdout + run.stderr
    log = claude["server"].log.read_text()
    assert " 404 " not in log and " 301 " not in log, log[-3000:]  # start-up probes of the base URL included


def test_one_session_titled_from_the_request_with_its_side_calls_and_the_subagent_under_it(claude):
    server = claude["server"]
    sessions = server.sessions()
    roots = [s for s in sessions if not s.get("parent")]
    assert len(roots) == 1, [(s["title"], s.get("parent")) for s in sessions]
    root = roots[0]
    assert root["title"] == TASK
    # Its calls without tools (a title, a topic check: as many as this version makes) are side calls.
    side = [r for r in claude["upstream"].message_calls if not r.body.get("tools")]
    assert root["side_call_count"] == len(side)
    children = [s for s in sessions if s.get("parent") == root["id"]]
    assert len(children) == 1 and children[0]["title"] == SUBTASK
    assert children[0]["side_call_count"] == 0


def test_compaction_reaches_upstream_on_time_and_claude_code_continues(claude):
    server, upstream = claude["server"], claude["upstream"]
    root = next(s for s in server.sessions() if not s.get("parent"))
    main = [r for r in upstream.message_calls if any(t.get("name") == "Bash" for t in r.body.get("tools") or [])]
    main = [r for r in main if SUBTASK not in first_user_text(r.body)]
    check_compacted_upstream(
        server,
        root["id"],
        [r.body for r in main],
        trigger=int(SETTINGS["COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT"]),
        tokens=[r.prompt_tokens for r in main],
        system=lambda body: system_text(body.get("system")),
        pairs_whole=lambda body: harness.tool_pairs_whole(body["messages"]),
    )


def test_every_message_is_stored_as_its_transcript_imports(claude):
    server = claude["server"]
    root = next(s for s in server.sessions() if not s.get("parent"))
    projects = claude["home"] / ".claude" / "projects"
    transcripts = [p for p in projects.rglob("*.jsonl") if "subagents" not in p.parts]
    assert transcripts, f"no transcript under {projects}"
    imported = read_claude_code(max(transcripts, key=lambda p: p.stat().st_size))
    check_stored_like_transcript(server.messages(root["id"]), imported.messages)
