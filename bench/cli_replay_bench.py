"""What the gateway adds to the real CLIs' calls, through gunicorn as deployed.

    .venv/bin/python bench/cli_replay_bench.py [--messages 2000] [--calls 40] [--clients claude-code,codex,pi]
    .venv/bin/python bench/cli_replay_bench.py --baseline main      # before and after, call by call
    DATABASE_URL=postgres://root@127.0.0.1:5432/NAME .venv/bin/python bench/cli_replay_bench.py

The request bodies Claude Code, Codex and pi sent in tests/agents (recorded there with
COMPACTOR_AGENTS_RECORD=bench/data/cli_requests: their system prompts, tools, metadata and tool
turns as each CLI writes them, 40-255 KB a call) are replayed through Compactor served by gunicorn
with deploy/gunicorn.conf.py (2 workers × 32 threads unless WEB_WORKERS/WEB_THREADS say otherwise),
and the same bytes sent straight to the stand-in provider, interleaved call by call. The stand-ins
run in a process of their own (a provider is another machine) and answer at once, streamed as the
CLIs ask.

Per CLI: the recorded conversation is extended with copies of its own tool turns to `--messages`
stored messages (one call seeds them), then `--calls` calls each add the model's reply (as the
gateway streamed it back) and a tool result, as the CLI's loop does. Reported, per CLI:
- added time to first byte (gateway − direct, each call against the direct call next to it):
  p50, p99, max (targets at 2,000 messages: p50 ≤ 15 ms, p99 ≤ 50 ms);
- how long the response stays open after its last event (from the bytes holding the stream's
  last event to the body's end), through the gateway and direct: p50, max;
- the CPU time the gunicorn workers spent per call, the reply's record after the close included
  (from /proc: what a call costs the gateway however loaded the machine is; on a quiet machine the
  added time to first byte is about this, less the record, plus the database's round trips).

The database is a throwaway one: a new PostgreSQL database beside DATABASE_URL's (dropped at the
end), or a SQLite file in a temporary folder.

Before and after, in one run (wall-clock figures move with the machine's load; ratios of the same
calls made side by side do much less): `--baseline main` also serves the code of that git revision
(`git archive` into the temporary folder, its own gunicorn and database), and every call goes
through both, the first one alternating; each CLI's line is followed by this tree / baseline for
the CPU per call and the added time to first byte.

Where the time goes: `--profile DIR` serves this tree with bench/profile_gunicorn.conf.py, which
profiles the calls after the seeding (cProfile, per worker: DIR/<pid>.prof; wall time, or thread
CPU time with COMPACTOR_PROFILE_CPU=1), or with COMPACTOR_PROFILE_FUNCS="module.function
module.Class.method ..." times only those (thread CPU, no profiler overhead) and each garbage
collection pause: DIR/<pid>.funcs.json.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gzip
import json
import multiprocessing
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RECORDED = ROOT / "bench" / "data" / "cli_requests"
UPSTREAM_KEY, OPENAI_KEY = "upstream-secret", "sk-upstream-openai"
LAST_EVENT = {"anthropic": b"message_stop", "responses": b"response.completed"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the stand-ins, in a process of their own ------------------------------------------------


def _serve_stand_ins(send) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    from tests.gateway.openai_upstream import FakeOpenAI, OpenAIReply
    from tests.gateway.upstream import FakeUpstream, Reply

    # Every call asks for a tool, as a model in an agent's loop does; the count is cheap (a
    # provider's own time is not what is measured).
    anthropic = FakeUpstream(reply=lambda rec: Reply(text="", tool_use=("bash", {"command": "ls"})))
    anthropic.counter = lambda body: 1000
    openai = FakeOpenAI(reply=lambda rec: OpenAIReply(text="", tool_call=("exec_command", {"cmd": "ls"})))
    openai.counter = lambda body: 1000
    anthropic.start(), openai.start()
    send.send((anthropic.url, openai.url))
    while True:
        time.sleep(0.2)
        for fake in (anthropic, openai):
            with fake._lock:
                fake.requests.clear()


@contextlib.contextmanager
def stand_ins() -> Iterator[tuple[str, str]]:
    receive, send = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(target=_serve_stand_ins, args=(send,), daemon=True)
    process.start()
    try:
        yield receive.recv()
    finally:
        process.terminate()


# --- Compactor under gunicorn, as deployed ---------------------------------------------------


@contextlib.contextmanager
def database(tmp: Path) -> Iterator[str]:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        yield f"sqlite:///{tmp / 'db.sqlite3'}"
        return
    import psycopg

    base, _, _ = url.rpartition("/")
    name = f"cli_replay_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def gunicorn(
    tmp: Path, db: str, anthropic_url: str, openai_url: str, *, root: Path = ROOT, profile: Path | None = None
) -> Iterator[tuple[str, str, int]]:
    """Compactor from the code tree `root`, served by gunicorn: (its URL, an API key, the master's pid)."""
    import httpx2 as httpx

    port = _port()
    env = {
        **os.environ,
        "SECRET_KEY": "cli-replay-bench",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": db,
        "COMPACTOR_VAR_DIR": str(tmp),
        "COMPACTOR_UPSTREAM_URL": anthropic_url,
        "COMPACTOR_UPSTREAM_API_KEY": UPSTREAM_KEY,
        "COMPACTOR_OPENAI_UPSTREAM_URL": openai_url,
        "COMPACTOR_OPENAI_UPSTREAM_API_KEY": OPENAI_KEY,
        "COMPACTOR_AUTO_COMPACT": "0",  # the whole history served every call: the gateway's worst case
        "ANTHROPIC_API_KEY": "",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_ACCESS_LOG": "0",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    config = str(ROOT / "deploy" / "gunicorn.conf.py") if root == ROOT else "deploy/gunicorn.conf.py"
    if profile is not None:
        env["COMPACTOR_PROFILE_DIR"] = str(profile)
        config = str(ROOT / "bench" / "profile_gunicorn.conf.py")
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=root, env=env, check=True)
    subprocess.run([*manage, "ensure_admin"], cwd=root, env=env, check=True, capture_output=True)
    key = subprocess.run(
        [*manage, "create_api_key", "admin", "--name", "bench", "--key-only"],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    log = open(tmp / "gunicorn.log", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", config, "project.wsgi"],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.head(f"{url}/anthropic", timeout=1)
                break
            except httpx.HTTPError:
                if process.poll() is not None:
                    raise RuntimeError((tmp / "gunicorn.log").read_text()) from None
                time.sleep(0.1)
        yield url, key, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        log.close()


# --- the CLIs' conversations -----------------------------------------------------------------


def recorded(name: str) -> list[dict[str, Any]]:
    with gzip.open(RECORDED / f"{name}.jsonl.gz", "rb") as lines:
        return [json.loads(line) for line in lines if line.strip()]


class Conversation:
    """A recorded CLI conversation carried on: its last recorded body, its tool turns copied to
    the size asked, then a reply and a tool result per call."""

    def __init__(self, name: str, size: int) -> None:
        bodies = recorded(name)
        self.body = copy.deepcopy(bodies[-1])
        self.wire = "responses" if "input" in self.body else "anthropic"
        self.key = "input" if self.wire == "responses" else "messages"
        self.items: list[dict[str, Any]] = self.body[self.key]
        self.turn = self._turn_template()
        self.count = 0
        while self._stored() < size:
            self.items += self._turn_copy()
        # A conversation of its own: Claude Code's and Codex's ids name it.
        fresh = str(uuid.uuid4())
        if isinstance(self.body.get("metadata"), dict) and "user_id" in self.body["metadata"]:
            self.body["metadata"]["user_id"] = re.sub(
                r'"session_id":"[^"]+"', f'"session_id":"{fresh}"', self.body["metadata"]["user_id"]
            )
        if "prompt_cache_key" in self.body:
            self.body["prompt_cache_key"] = fresh

    def _stored(self) -> int:
        if self.wire == "anthropic":
            return len(self.items)
        # Responses items: a run of the model's items is one stored message, a run of outputs another.
        return sum(1 for i, item in enumerate(self.items) if i == 0 or _side(item) != _side(self.items[i - 1]))

    def _turn_template(self) -> list[dict[str, Any]]:
        """The last tool turn of the recording: the call and its result, as the CLI wrote them."""
        items = self.items
        if self.wire == "anthropic":
            start = max(
                i
                for i, m in enumerate(items[:-1])
                if m.get("role") == "assistant" and "tool_use" in json.dumps(m.get("content"))
            )
            return copy.deepcopy(items[start : start + 2])
        start = max(i for i, item in enumerate(items) if item.get("type") == "function_call")
        while start > 0 and _side(items[start - 1]) == "assistant":
            start -= 1
        return copy.deepcopy(items[start:])

    def _turn_copy(self) -> list[dict[str, Any]]:
        self.count += 1
        text = json.dumps(self.turn)
        for old in set(re.findall(r'"(?:id|tool_use_id|call_id)": "([^"]+)"', text)):
            text = text.replace(f'"{old}"', f'"{old}-{self.count}"')
        return json.loads(text)

    def request(self) -> bytes:
        return json.dumps({**self.body, self.key: self.items}, separators=(",", ":")).encode()

    def answered(self, raw: bytes) -> None:
        """The model's reply the client got (streamed) and the tool result the CLI sends next."""
        if self.wire == "anthropic":
            from gateway.sse import StreamAssembler

            assembler = StreamAssembler()
            assembler.feed(raw)
            reply = assembler.assistant_message()
            assert reply is not None, raw[-300:]
            use = next(b for b in reply["content"] if b["type"] == "tool_use")
            self.items += [reply, {"role": "user", "content": [_result(use["id"])]}]
            return
        from gateway.sse import EventFramer

        done = next(e.json() for e in EventFramer().feed(raw) if e.name == "response.completed")
        output = done["response"]["output"]
        call = next(item for item in output if item["type"] == "function_call")
        self.items += output + [{"type": "function_call_output", "call_id": call["call_id"], "output": "ok\n"}]


def _side(item: dict[str, Any]) -> str:
    kind = item.get("type") or "message"
    if kind == "message":
        return "user" if item.get("role") in ("user", "developer", "system") else "assistant"
    return "tool" if kind.endswith("_output") else "assistant"


def _result(tool_use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": "bench.txt\nsrc\n"}


# --- timing ----------------------------------------------------------------------------------


def timed_stream(client, url: str, payload: bytes, headers: dict[str, str], last: bytes) -> tuple[float, float, bytes]:
    """(time to the first byte, time from the bytes holding the last event to the body's end,
    the body), in seconds."""
    started = time.perf_counter()
    chunks: list[bytes] = []
    first = last_seen = 0.0
    with client.stream("POST", url, content=payload, headers=headers) as response:
        assert response.status_code == 200, response.read()[:300]
        for chunk in response.iter_raw():
            now = time.perf_counter()
            first = first or now
            chunks.append(chunk)
            if last in chunk:
                last_seen = now
        ended = time.perf_counter()
    return first - started, ended - (last_seen or ended), b"".join(chunks)


def cpu_seconds(master: int) -> float:
    """CPU time (user + system) the gunicorn workers under `master` used so far (Linux /proc):
    what a call costs the gateway whatever else loads the machine (the database's is not in it)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclasses.dataclass
class Target:
    """One Compactor served by gunicorn: `label` names its code (this tree, or a baseline)."""

    label: str
    url: str
    key: str
    master: int
    profile: Path | None = None


def replay(name: str, *, targets: list[Target], direct: str, size: int, calls: int) -> list[dict[str, Any]]:
    """Each call through every target (in turn, the first one alternating) and straight to the
    stand-in: per target, what it added to the direct call's time to first byte."""
    import httpx2 as httpx

    conversations = [Conversation(name, size) for _ in targets]
    wire = conversations[0].wire
    path = "/v1/responses" if wire == "responses" else "/v1/messages"
    mine = {"content-type": "application/json"}
    if wire == "responses":
        direct_headers = {**mine, "authorization": f"Bearer {OPENAI_KEY}"}
        direct_url = f"{direct}/responses"
    else:
        direct_headers = {**mine, "x-api-key": UPSTREAM_KEY, "anthropic-version": "2023-06-01"}
        direct_url = f"{direct}{path}?beta=true"

    def through(target: Target) -> tuple[str, dict[str, str]]:
        if wire == "responses":
            headers = {**mine, "authorization": f"Bearer {target.key}", "originator": "codex_exec"}
            return f"{target.url}/openai{path}", headers
        return f"{target.url}/anthropic{path}?beta=true", {
            **mine,
            "x-api-key": target.key,
            "anthropic-version": "2023-06-01",
        }

    last = LAST_EVENT[wire]
    results = []
    with contextlib.ExitStack() as stack:
        direct_client = stack.enter_context(httpx.Client(timeout=120))
        clients = [stack.enter_context(httpx.Client(timeout=120)) for _ in targets]
        for target, conversation, client in zip(targets, conversations, clients, strict=True):
            seeded = time.perf_counter()
            url, headers = through(target)
            _, _, raw = timed_stream(client, url, conversation.request(), headers, last)
            results.append({"name": name, "label": target.label, "seed_s": time.perf_counter() - seeded})
            conversation.answered(raw)
            for r in ("added", "held", "held_direct", "sizes"):
                results[-1][r] = []
        for target in targets:
            if target.profile is not None:
                (target.profile / "on").touch()
        cpu = [cpu_seconds(target.master) for target in targets]
        for call in range(calls):
            order = list(range(len(targets)))
            if call % 2:
                order.reverse()  # neither side always goes first (a warm cache, a busy core)
            timings = {}
            for i in order:
                payload = conversations[i].request()
                results[i]["sizes"].append(len(payload))
                url, headers = through(targets[i])
                timings[i] = timed_stream(clients[i], url, payload, headers, last)
            direct_ttfb, direct_after, _ = timed_stream(direct_client, direct_url, payload, direct_headers, last)
            for i, (ttfb, after_last, raw) in timings.items():
                results[i]["added"].append(ttfb - direct_ttfb)
                results[i]["held"].append(after_last)
                results[i]["held_direct"].append(direct_after)
                conversations[i].answered(raw)
        time.sleep(0.5)  # the last call's record, after its close
        for i, target in enumerate(targets):
            results[i]["cpu_ms"] = (cpu_seconds(target.master) - cpu[i]) / calls * 1000
            results[i]["stored"] = conversations[i]._stored()
            results[i]["kb"] = statistics.median(results[i]["sizes"]) / 1024
            if target.profile is not None:
                (target.profile / "on").unlink(missing_ok=True)
    return results


@contextlib.contextmanager
def code_tree(ref: str, tmp: Path) -> Iterator[Path]:
    """The project's files at git revision `ref`, in a folder of their own (git archive)."""
    folder = tmp / "baseline"
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    yield folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--clients", default="claude-code,codex,pi")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also serve the code at this git revision (e.g. main), call by call beside this tree's: "
        "before and after in one run, as ratios",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        help="profile this tree's calls (cProfile in the gunicorn workers, the seeding calls left out); "
        "DIR/<pid>.prof per worker, read with python -m pstats",
    )
    args = parser.parse_args()
    ms = 1000
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cli-replay-bench-")))
        anthropic, openai = stack.enter_context(stand_ins())
        trees = [("this tree", ROOT)]
        if args.baseline:
            trees.append((args.baseline, stack.enter_context(code_tree(args.baseline, tmp))))
        targets = []
        for n, (label, root) in enumerate(trees):
            (tmp / str(n)).mkdir()
            db = stack.enter_context(database(tmp / str(n)))
            profile = args.profile if n == 0 else None
            if profile is not None:
                profile.mkdir(parents=True, exist_ok=True)
            url, key, master = stack.enter_context(
                gunicorn(tmp / str(n), db, anthropic, openai, root=root, profile=profile)
            )
            targets.append(Target(label, url, key, master, profile))
        vendor = "PostgreSQL" if db.startswith("postgres") else "SQLite"
        workers = os.environ.get("WEB_WORKERS") or os.environ.get("WEB_CONCURRENCY") or "2"
        print(
            f"gunicorn (deploy/gunicorn.conf.py, {workers} workers), {vendor}; {args.calls} calls per CLI "
            f"after one seeding {args.messages:,} stored messages; no compaction (whole history served)"
            + (f"; this tree and {args.baseline} call by call" if args.baseline else "")
        )
        for name in args.clients.split(","):
            direct = openai if name == "codex" else anthropic
            results = replay(name, targets=targets, direct=direct, size=args.messages, calls=args.calls)
            for r in results:
                a, h, d = r["added"], r["held"], r["held_direct"]
                label = f" [{r['label']}]" if args.baseline else ""
                print(
                    f"  {name:12s} {r['stored']:5,d} msgs, {r['kb']:6.0f} KB/call (seed {r['seed_s']:.1f} s): "
                    f"added TTFB p50 {statistics.median(a) * ms:5.1f} ms, p99 {percentile(a, 0.99) * ms:5.1f} ms, "
                    f"max {max(a) * ms:5.1f} ms | open after the last event: gateway p50 "
                    f"{statistics.median(h) * ms:4.1f} ms, max {max(h) * ms:4.1f} ms; direct p50 "
                    f"{statistics.median(d) * ms:4.1f} ms | gateway CPU {r['cpu_ms']:5.1f} ms/call{label}"
                )
            if args.baseline:
                new, old = results
                print(
                    f"  {name:12s} this tree / {args.baseline}: CPU per call "
                    f"{new['cpu_ms'] / old['cpu_ms']:.2f}, added TTFB p50 "
                    f"{statistics.median(new['added']) / statistics.median(old['added']):.2f}, p99 "
                    f"{percentile(new['added'], 0.99) / percentile(old['added'], 0.99):.2f}"
                )
        print(f"  (machine load average now: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    if args.profile:  # the workers wrote their figures as they exited
        profile_summary(args.profile)
    return 0


def profile_summary(folder: Path) -> None:
    """What bench/profile_gunicorn.conf.py's workers wrote: the functions' thread CPU per call."""
    spent: dict[str, list[float]] = {}
    for path in folder.glob("*.funcs.json"):
        for name, (seconds, count) in json.loads(path.read_text()).items():
            entry = spent.setdefault(name, [0.0, 0])
            entry[0] = max(entry[0], seconds) if "longest" in name else entry[0] + seconds
            entry[1] += count
    calls = spent.pop("request (gunicorn's pre_request to post_request)", [0.0, 0])
    if calls[1]:
        print(f"profiled calls: {calls[1]}, thread CPU {calls[0] / calls[1] * 1000:.2f} ms per call, of which:")
        for name, (seconds, count) in sorted(spent.items(), key=lambda item: -item[1][0]):
            if "longest" in name:
                print(f"  {name}: {seconds * 1000:.1f}")
            else:
                print(f"  {seconds / calls[1] * 1000:7.2f} ms per call ({count:4d} runs)  {name}")
    profiles = sorted(folder.glob("*.prof"))
    if profiles:
        print(f"cProfile: {' '.join(map(str, profiles))} (python -m pstats FILE)")


if __name__ == "__main__":
    sys.exit(main())
