"""Codex (pinned) through /openai/v1 with the Responses wire API, as the README sets it up
(`~/.codex/config.toml`: a `compactor` model provider, `wire_api = "responses"`; Codex 0.171
refuses "chat"), run headless with `codex exec`.

The stand-in model makes it write step files with its shell tool (exec_command) for enough turns
to cross a small trigger, read the last one back with `cat`, and finish."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction.core.transcripts import read_codex
from tests.agents import harness
from tests.agents.checks import check_compacted_upstream, check_stored_like_transcript
from tests.gateway.openai_upstream import FakeOpenAI, OpenAIReply
from tests.gateway.openai_upstream import Recorded as OpenAIRecorded
from tests.gateway.upstream import FakeUpstream

pytestmark = [pytest.mark.slow, pytest.mark.agents]

PACKAGE = "@openai/codex"
TASK = "Write the step files with the shell, then check the last one."
# Codex's instructions, developer messages and tools are ~4.2k tokens as the stand-in counts; each
# step adds ~1,000: the trigger is crossed at the sixth, when the part to summarize is several times
# what its summary costs, with steps left after it.
SETTINGS = {"COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT": "10000", "COMPACTOR_KEEP_RECENT_TOKENS": "1500"}
STEPS = 12


def config_toml(url: str) -> str:
    """The README's Codex setup (README.md, "Use it with any agent"), with the server's URL."""
    return f"""model = "gpt-5.1-codex"
model_provider = "compactor"

[model_providers.compactor]
name = "Compactor"
base_url = "{url}/openai/v1"
env_key = "COMPACTOR_API_KEY"
wire_api = "responses"
"""


def last_call(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    calls = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call"]
    return calls[-1] if calls else None


def model(script: harness.Script):
    def reply(rec: OpenAIRecorded) -> OpenAIReply:
        body = rec.body
        if not any(t.get("name") == "exec_command" for t in body.get("tools") or []):
            return OpenAIReply(text="Step files")
        last = last_call(body.get("input") or [])
        arguments = str(last.get("arguments")) if last else ""
        action, step = script.next_action(arguments, read="cat step_" in arguments)
        if action == "shell":
            return OpenAIReply(text="", tool_call=("exec_command", {"cmd": script.command(step)}))
        if action == "read":
            return OpenAIReply(text="", tool_call=("exec_command", {"cmd": f"cat step_{step}.txt | tail -n 5"}))
        return OpenAIReply(text=harness.DONE)

    return reply


@pytest.fixture(scope="module")
def codex(tmp_path_factory):
    binary = harness.cli(PACKAGE)
    tmp = tmp_path_factory.mktemp("codex")
    workdir, home = tmp / "work", tmp / "home"
    workdir.mkdir()
    (home / ".codex").mkdir(parents=True)
    script = harness.Script(steps=STEPS)
    openai = FakeOpenAI(reply=model(script)).start()
    anthropic = FakeUpstream().start()
    try:
        with harness.gunicorn(
            tmp / "server", anthropic_url=anthropic.url, openai_url=openai.url, settings=SETTINGS
        ) as server:
            (home / ".codex" / "config.toml").write_text(config_toml(server.url))
            env = harness.offline_env(home, COMPACTOR_API_KEY=server.key)
            argv = [str(binary), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", TASK]
            run = harness.run_cli(argv, cwd=workdir, env=env)
            harness.record_bodies("codex", main_calls(openai))
            yield {"run": run, "server": server, "upstream": openai, "home": home, "workdir": workdir}
    finally:
        openai.stop()
        anthropic.stop()


def main_calls(upstream: FakeOpenAI) -> list[OpenAIRecorded]:
    return [
        r
        for r in upstream.calls("/v1/responses")
        if any(t.get("name") == "exec_command" for t in r.body.get("tools") or [])
    ]


def test_the_task_completes(codex):
    run = codex["run"]
    assert run.returncode == 0, f"stdout: {run.stdout[-2000:]}\nstderr: {run.stderr[-3000:]}"
    assert harness.DONE in run.stdout
    assert (codex["workdir"] / f"step_{STEPS}.txt").exists()
    log = codex["server"].log.read_text()
    assert " 404 " not in log and " 301 " not in log and '" 400 ' not in log, log[-3000:]


def test_one_session_titled_from_the_request(codex):
    sessions = codex["server"].sessions()
    assert len(sessions) == 1, [s["title"] for s in sessions]
    assert sessions[0]["title"] == TASK  # not "<environment_context> <cwd>…"
    assert sessions[0]["agent"].startswith("codex_exec")


def test_codexs_own_headers_reach_the_upstream(codex):
    sent = main_calls(codex["upstream"])[0].headers
    assert sent["originator"] == "codex_exec" and sent["session-id"] and "x-codex-turn-metadata" in sent
    assert sent["authorization"] == "Bearer sk-upstream-openai"


def test_compaction_reaches_upstream_on_time_and_codex_continues(codex):
    server = codex["server"]
    session = server.sessions()[0]
    calls = main_calls(codex["upstream"])
    check_compacted_upstream(
        server,
        session["id"],
        [r.body for r in calls],
        trigger=int(SETTINGS["COMPACTOR_AUTO_COMPACT_TOKEN_LIMIT"]),
        tokens=[r.prompt_tokens for r in calls],
        system=lambda body: (body.get("instructions"), [i for i in body["input"] if i.get("role") == "developer"][:2]),
        pairs_whole=lambda body: harness.items_pairs_whole(body["input"]),
    )


def test_every_message_is_stored_as_its_rollout_imports(codex):
    server = codex["server"]
    session = server.sessions()[0]
    rollouts = list((codex["home"] / ".codex" / "sessions").rglob("rollout-*.jsonl"))
    assert len(rollouts) == 1, rollouts
    imported = read_codex(rollouts[0])
    stored = server.messages(session["id"])
    check_stored_like_transcript(stored, imported.messages)
    assert json.dumps(TASK)[1:-1] in json.dumps([m["content"] for m in stored])
