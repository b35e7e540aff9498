"""pi (pinned) through /anthropic, as the README sets it up: a `compactor` provider in
`~/.pi/agent/models.json` (api "anthropic-messages", baseUrl <server>/anthropic, the Compactor key
from an environment variable), run headless with `pi -p`.

The stand-in model makes it write step files with its bash tool for enough turns to cross a
small trigger, read the last one back with its read tool, and finish."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction.core.transcripts import read_pi
from gateway.identity import system_text
from tests.agents import harness
from tests.agents.checks import check_compacted_upstream, check_stored_like_transcript
from tests.gateway.openai_upstream import FakeOpenAI
from tests.gateway.upstream import FakeUpstream, Recorded, Reply

pytestmark = [pytest.mark.slow, pytest.mark.agents]

PACKAGE = "@mariozechner/pi-coding-agent"
TASK = "Write the step files with bash, then check the last one with read."
MODEL = "claude-sonnet-4-5"
# pi's system prompt and tools are ~1.5k tokens as the stand-in counts; each step adds ~1,000: the
# trigger is crossed at the sixth, when the part to summarize is several times what its summary costs.
SETTINGS = {"COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT": "7000", "COMPACTOR_KEEP_RECENT_TOKENS": "1500"}
STEPS = 12


def models_json(url: str) -> dict[str, Any]:
    """The README's pi setup (README.md, "Use it with any agent"), with the server's URL."""
    return {
        "providers": {
            "compactor": {
                "baseUrl": f"{url}/anthropic",
                "api": "anthropic-messages",
                "apiKey": "COMPACTOR_API_KEY",
                "models": [{"id": MODEL, "contextWindow": 200000, "maxTokens": 32000}],
            }
        }
    }


def last_call(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in reversed(messages):
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            calls = [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
            if calls:
                return calls[-1]
    return None


def model(script: harness.Script, workdir):
    def reply(rec: Recorded) -> Reply:
        body = rec.body
        if not any(t.get("name") == "bash" for t in body.get("tools") or []):
            return Reply(text="Step files")
        last = last_call(body["messages"])
        action, step = script.next_action(json.dumps(last), read=bool(last and last.get("name") == "read"))
        if action == "shell":
            return Reply(text="", tool_use=("bash", {"command": script.command(step)}))
        if action == "read":
            return Reply(text="", tool_use=("read", {"path": str(workdir / f"step_{step}.txt")}))
        return Reply(text=harness.DONE)

    return reply


@pytest.fixture(scope="module")
def pi(tmp_path_factory):
    binary = harness.cli(PACKAGE)
    tmp = tmp_path_factory.mktemp("pi")
    workdir, home = tmp / "work", tmp / "home"
    workdir.mkdir()
    (home / ".pi" / "agent").mkdir(parents=True)
    script = harness.Script(steps=STEPS)
    anthropic = FakeUpstream(reply=model(script, workdir)).start()
    openai = FakeOpenAI().start()
    try:
        with harness.gunicorn(
            tmp / "server", anthropic_url=anthropic.url, openai_url=openai.url, settings=SETTINGS
        ) as server:
            (home / ".pi" / "agent" / "models.json").write_text(json.dumps(models_json(server.url), indent=2))
            env = harness.offline_env(home, COMPACTOR_API_KEY=server.key)
            argv = [str(binary), "-p", "--provider", "compactor", "--model", MODEL, TASK]
            run = harness.run_cli(argv, cwd=workdir, env=env)
            harness.record_bodies("pi", main_calls(anthropic))
            yield {"run": run, "server": server, "upstream": anthropic, "home": home, "workdir": workdir}
    finally:
        anthropic.stop()
        openai.stop()


def main_calls(upstream: FakeUpstream) -> list[Recorded]:
    return [r for r in upstream.message_calls if any(t.get("name") == "bash" for t in r.body.get("tools") or [])]


def test_the_task_completes(pi):
    run = pi["run"]
    assert run.returncode == 0, f"stdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-3000:]}"
    assert harness.DONE in run.stdout
    assert (pi["workdir"] / f"step_{STEPS}.txt").exists()
    log = pi["server"].log.read_text()
    assert " 404 " not in log and " 301 " not in log and '" 400 ' not in log, log[-3000:]


def test_one_session_titled_from_the_request(pi):
    sessions = pi["server"].sessions()
    assert len(sessions) == 1, [s["title"] for s in sessions]
    assert sessions[0]["title"] == TASK


def test_compaction_reaches_upstream_on_time_and_pi_continues(pi):
    server = pi["server"]
    calls = main_calls(pi["upstream"])
    check_compacted_upstream(
        server,
        server.sessions()[0]["id"],
        [r.body for r in calls],
        trigger=int(SETTINGS["COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT"]),
        tokens=[r.prompt_tokens for r in calls],
        system=lambda body: system_text(body.get("system")),
        pairs_whole=lambda body: harness.tool_pairs_whole(body["messages"]),
    )


def test_every_message_is_stored_as_its_session_file_imports(pi):
    server = pi["server"]
    files = list((pi["home"] / ".pi" / "agent" / "sessions").rglob("*.jsonl"))
    assert len(files) == 1, files
    check_stored_like_transcript(server.messages(server.sessions()[0]["id"]), read_pi(files[0]).messages)
