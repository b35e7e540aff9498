"""The real CLIs (Claude Code, Codex, pi) through Compactor, as a user runs them: gunicorn as
deployed (deploy/gunicorn.conf.py) on its own SQLite file, the gateway's upstreams replaced by the
stand-ins of tests/gateway (a scripted model that makes the agent call its tools), each CLI headless
under a temporary HOME, talking to loopback only.

Where the CLIs come from: `scripts/agents_cli.sh` installs the pinned versions from npm into
`var/agents-cli/pinned/` (.ci/run calls it; reruns find them there).
Without them the tests skip saying so, and fail under REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

from compaction.core.summary_message import SUMMARY_PREFIX
from tests.services import missing

SUMMARY_MARK = json.dumps(SUMMARY_PREFIX[:80])[1:-1]  # how the served summary opens, as JSON text

ROOT = Path(__file__).resolve().parents[2]
# Pinned: what .ci/run installs (scripts/agents_cli.sh reads the same file) and the README's setup is written for.
PINNED = dict(
    line.strip().rsplit("@", 1)
    for line in (Path(__file__).parent / "versions.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
)
BINARIES = {"@anthropic-ai/claude-code": "claude", "@openai/codex": "codex", "@mariozechner/pi-coding-agent": "pi"}
STEP_RE = re.compile(r"step_(\d+)\.txt")
DONE = "All done: every step file is written and checked."


def cli_dir() -> Path:
    """Where scripts/agents_cli.sh put the CLIs: var/agents-cli/<pinned|latest> in the project
    (COMPACTOR_AGENTS_CLI_DIR overrides the folder, COMPACTOR_AGENTS_CLI=latest picks the newest)."""
    base = Path(os.environ.get("COMPACTOR_AGENTS_CLI_DIR") or ROOT / "var" / "agents-cli")
    return base / os.environ.get("COMPACTOR_AGENTS_CLI", "pinned")


def cli(package: str) -> Path:
    """The pinned CLI's executable, or skip (fail under REQUIRE_SERVICES=1) saying how to get it."""
    path = cli_dir() / "node_modules" / ".bin" / BINARIES[package]
    if not path.exists():
        missing(
            f"{package}@{PINNED[package]} is not installed under {cli_dir()}: run scripts/agents_cli.sh "
            "(needs npm and the npm registry)"
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    key: str
    var: Path
    log: Path

    def api(self, path: str, **params: Any) -> Any:
        response = httpx.get(
            f"{self.url}/api/v1/{path}", params=params, headers={"Authorization": f"Bearer {self.key}"}, timeout=30
        )
        response.raise_for_status()
        return response.json()

    def all(self, path: str, **params: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        page = self.api(path, **params)
        while True:
            out += page["results"]
            if not page.get("next"):
                return out
            page = httpx.get(page["next"], headers={"Authorization": f"Bearer {self.key}"}, timeout=30).json()

    def sessions(self, **params: Any) -> list[dict[str, Any]]:
        return self.all("sessions/", **params)

    def messages(self, session_id: str) -> list[dict[str, Any]]:
        return self.all(f"sessions/{session_id}/messages/")

    def compactions(self, session_id: str) -> list[dict[str, Any]]:
        return self.all(f"sessions/{session_id}/compactions/")


@contextlib.contextmanager
def gunicorn(tmp: Path, *, anthropic_url: str, openai_url: str, settings: dict[str, str]) -> Iterator[Server]:
    """Compactor served by gunicorn as deployed, on its own SQLite file, compaction jobs run in the
    web process (no broker), the upstreams the stand-ins."""
    port = free_port()
    env = {
        **os.environ,
        "SECRET_KEY": "agents-suite",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "COMPACTOR_VAR_DIR": str(tmp),
        "COMPACTOR_UPSTREAM_URL": anthropic_url,
        "COMPACTOR_UPSTREAM_API_KEY": "upstream-secret",
        "COMPACTOR_OPENAI_UPSTREAM_URL": openai_url,
        "COMPACTOR_OPENAI_UPSTREAM_API_KEY": "sk-upstream-openai",
        "ANTHROPIC_API_KEY": "",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_WORKERS": "1",
        "WEB_THREADS": "8",
        "WEB_ACCESS_LOG": "1",
        **settings,
    }
    env.pop("REDIS_URL", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "ensure_admin"], cwd=ROOT, env=env, check=True, capture_output=True)
    made = subprocess.run(
        [*manage, "create_api_key", "admin", "--name", "agents", "--key-only"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    log = tmp / "gunicorn.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py", "project.wsgi"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    httpx.head(f"{url}/anthropic", timeout=1)
                    break
                except httpx.HTTPError:
                    if process.poll() is not None:
                        raise RuntimeError(log.read_text()) from None
                    time.sleep(0.1)
            yield Server(url=url, key=made.stdout.strip(), var=tmp, log=log)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def offline_env(home: Path, **extra: str) -> dict[str, str]:
    """A CLI's environment: a temporary HOME, no proxy, nothing of the developer's; the CLIs'
    own switches for update checks, telemetry and error reports off (only loopback is called)."""
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR")}
    return {
        **keep,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "NO_PROXY": "127.0.0.1,localhost",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CODEX_DISABLE_UPDATE_CHECK": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_OFFLINE": "1",
        "NODE_OPTIONS": "",
        **extra,
    }


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_cli(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 240) -> Run:
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


# --- the scripted model ------------------------------------------------------------------------


@dataclass
class Script:
    """What the stand-in model does: `steps` shell calls, each writing step_<k>.txt with a few
    hundred tokens of output (the context grows past a small trigger), then reading the last one
    back, then the final answer. The next move follows from the agent's newest tool call, which
    every request holds (the newest messages are never compacted away)."""

    steps: int = 8
    lines: int = 150  # lines of output a step prints (~7 tokens each): ~1,000 tokens a step

    def command(self, step: int) -> str:
        return f"seq -f 'line %g of step {step}' 1 {self.lines} | tee step_{step}.txt"

    def next_action(self, last_call: str | None, *, read: bool) -> tuple[str, int]:
        """('shell', k) | ('read', k) | ('done', k), from the newest tool call's arguments (as
        text; None before the first) and whether it was the read."""
        if read:
            return "done", self.steps
        found = [int(n) for n in STEP_RE.findall(last_call or "")]
        step = max(found) + 1 if found else 1
        return ("shell", step) if step <= self.steps else ("read", self.steps)


def record_bodies(name: str, records: list[Any]) -> None:
    """With COMPACTOR_AGENTS_RECORD=<dir>, keep the request bodies a CLI sent (as the upstream got
    them, before any compaction: the client's own bytes) as <dir>/<name>.jsonl.gz, one body a
    line: bench/cli_replay_bench.py replays them (bench/data/cli_requests/ holds a recording)."""
    folder = os.environ.get("COMPACTOR_AGENTS_RECORD")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    with gzip.open(Path(folder) / f"{name}.jsonl.gz", "wb") as out:
        for record in records:
            if SUMMARY_MARK in record.raw.decode("utf-8", "replace"):
                break  # compacted from here on: no longer the client's bytes
            out.write(json.dumps(json.loads(record.raw), separators=(",", ":")).encode() + b"\n")


def tool_pairs_whole(messages: list[dict[str, Any]]) -> bool:
    """Messages API: every tool_use answered in the next message, every tool_result answering one
    in the message before it."""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message.get("content"), list) else []
        uses = {b["id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_use"}
        if uses:
            after = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {b.get("tool_use_id") for b in after if isinstance(b, dict) and b.get("type") == "tool_result"}
            if not uses <= answered:
                return False
        results = {b.get("tool_use_id") for b in content if isinstance(b, dict) and b.get("type") == "tool_result"}
        if results:
            before = messages[i - 1]["content"] if i else []
            asked = {b.get("id") for b in before if isinstance(b, dict) and b.get("type") == "tool_use"}
            if not results <= asked:
                return False
    return True


def items_pairs_whole(items: list[dict[str, Any]]) -> bool:
    """Responses API: every function call's output in the input, and no output without its call."""
    calls = {i.get("call_id") for i in items if isinstance(i, dict) and i.get("type", "").endswith("_call")}
    outputs = {i.get("call_id") for i in items if isinstance(i, dict) and i.get("type", "").endswith("_call_output")}
    return calls == outputs
