"""Gateway benchmark: the latency the gateway adds to a call, the overhead of one agent turn
through /anthropic/v1/messages vs the same turn done by a REST client, and when auto-compaction
reaches upstream in a paced conversation.

    DEBUG=1 .venv/bin/python bench/gateway_bench.py [--messages N] [--turns N] [--pace S] [--only PART]
    DEBUG=1 .venv/bin/python bench/gateway_bench.py --only added [--sizes 10,2000] [--turns N]

Added latency (`--only added`): per size, a session seeded with that many stored messages through
the gateway, then calls of the history + one new message through /anthropic/v1/messages and
/openai/v1/chat/completions (Django's test client in process) and the same bodies straight to the
stand-in upstreams over HTTP; p50 of each and their difference (the target: 15 ms at 2,000).

Temporary database (SQLite file under a temporary COMPACTOR_VAR_DIR, or a throwaway test database
with DATABASE_URL), a local fake upstream (tests/gateway/upstream.py) answering instantly.
Two sessions get the same synthetic history of N messages (user turns and tool pairs, as in
bench/context_bench.py), without a compaction (the whole history is served: the worst case for
the gateway, which fingerprints and merges it every call). Then, per turn:
- gateway: the client POSTs its whole history + one new message (the SDK's way);
- REST baseline: append the message, GET the context, call the same upstream with it, append
  the reply, report the usage (four API calls + the model call).
Prints the median per turn of both, their ratio, and what the gateway spends on digesting the
resent history and finding its session.

Paced conversation (`--pace` seconds between turns: the agent's model and tool time): a real
Celery worker (`celery -A project worker`, a subprocess on the same database and broker, the
offline summarizer) and a session with auto_compact_token_limit 20,000 and keep_recent_tokens
6,000, driven through the gateway with ~1,600-token turns; the stand-in upstream reports usage
counted on what it received. Prints the first turn whose recorded usage is past the trigger, the
turn during which the threshold compaction was queued, the turn whose upstream request first
carried the summary, and the worker's timings (queued → started → active). With `--pace 0`
(instant turns, as no real model answers) the worker's latency spans several turns.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


PACED_MODEL = "claude-sonnet-4-5"  # a 200,000-token window: only the token limit triggers
PACED_TRIGGER = 20_000
PACED_SETTINGS = {"auto_compact": True, "auto_compact_token_limit": PACED_TRIGGER, "keep_recent_tokens": 6_000}
PACED_MAX_TURNS = 40


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--pace", type=float, default=2.0, help="seconds between turns of the paced conversation")
    parser.add_argument("--only", choices=("overhead", "paced", "added"), help="run one part only")
    parser.add_argument("--sizes", default="10,2000", help="stored messages for the added-latency part")
    args = parser.parse_args()

    django_setup(prefix="compactor-gateway-bench-")
    from django.conf import settings

    from tests.gateway.upstream import FakeUpstream

    # The fake upstream stops before the throwaway database goes (the stack unwinds first).
    with bench_database(celery_eager=False), contextlib.ExitStack() as stack:
        fake = FakeUpstream().start()
        stack.callback(fake.stop)
        settings.GATEWAY_UPSTREAM_URL = fake.url
        settings.GATEWAY_UPSTREAM_API_KEY = "upstream-secret"
        if args.only in (None, "added"):
            added_latency(args, fake)
        if args.only in (None, "overhead"):
            overhead(args, fake)
        if args.only in (None, "paced"):
            paced(args, fake)
    return 0


def rest_baseline(rest, history: list[dict], *, upstream_url: str, model: str):
    """A REST session holding `history`; returns one REST agent turn on it (a function of the new message)."""
    import httpx2 as httpx

    sid = rest.post("/api/v1/sessions/", {"title": "rest", "model": model}, format="json").json()["id"]
    for start in range(0, len(history), 500):
        batch = {"messages": history[start : start + 500]}
        assert rest.post(f"/api/v1/sessions/{sid}/messages/", batch, format="json").status_code == 201
    upstream = httpx.Client(base_url=upstream_url, headers={"x-api-key": "upstream-secret"}, timeout=120)

    def rest_turn(message: dict) -> None:
        rest.post(f"/api/v1/sessions/{sid}/messages/", message, format="json")
        context = rest.get(f"/api/v1/sessions/{sid}/context/").json()
        reply = upstream.post(
            "/v1/messages", json={"model": model, "max_tokens": 256, "messages": context["messages"]}
        ).json()
        rest.post(
            f"/api/v1/sessions/{sid}/messages/", {"role": "assistant", "content": reply["content"]}, format="json"
        )
        usage = reply["usage"]
        rest.post(f"/api/v1/sessions/{sid}/usage/", {**usage, "stop_reason": reply["stop_reason"]}, format="json")

    return rest_turn


def overhead(args: argparse.Namespace, fake) -> None:
    from context_bench import synthetic_messages
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from gateway.history import chain_digests
    from gateway.services import _find_conversation
    from tests.gateway.upstream import Reply

    fake.reply = lambda rec: Reply(text="Done.")
    fake.counter = lambda body: len(json.dumps(body)) // 4  # cheap: the provider's time is not measured
    previous = settings.COMPACTOR
    settings.COMPACTOR = {**settings.COMPACTOR, "AUTO_COMPACT": False}
    user, key, rest = api_user(username="gateway-bench")
    history = [{"role": m["role"], "content": m["content"]} for m in synthetic_messages(args.messages)]
    if history[-1]["role"] != "user":
        history.append({"role": "user", "content": "continue"})
    model = "claude-sonnet-4-5"
    gateway = Client()

    def gateway_call(messages: list[dict]) -> dict:
        body = {"model": model, "max_tokens": 256, "messages": messages}
        response = gateway.post(
            "/anthropic/v1/messages", data=json.dumps(body), content_type="application/json", HTTP_X_API_KEY=key
        )
        assert response.status_code == 200, response.content[:300]
        return response.json()

    # First: the first call carries the whole history (one batched append).
    first = gateway_call(history)
    history.append({"role": "assistant", "content": first["content"]})

    rest_turn = rest_baseline(rest, history, upstream_url=fake.url, model=model)

    gateway_times: list[float] = []
    rest_times: list[float] = []
    digest_times: list[float] = []
    lookup_times: list[float] = []
    for turn in range(args.turns):
        message = {"role": "user", "content": f"Bench turn {turn}: next step please."}
        history.append(message)
        started = time.perf_counter()
        reply = gateway_call(history)
        gateway_times.append(time.perf_counter() - started)
        history.append({"role": "assistant", "content": reply["content"]})
        started = time.perf_counter()
        rest_turn(message)
        rest_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        digests = chain_digests(history)
        digest_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert _find_conversation(user=user, digests=digests) is not None
        lookup_times.append(time.perf_counter() - started)

    g, r = median_ms(gateway_times), median_ms(rest_times)
    print(f"database: {connection.vendor}; history {len(history):,} messages, whole history served")
    print(f"gateway turn (POST /anthropic/v1/messages)      {g:8.1f} ms median")
    print(f"REST turn (append, context, model, append, usage) {r:8.1f} ms median")
    print(f"ratio gateway / REST                              {g / r:8.2f}x")
    print(f"  digest of the resent history                  {median_ms(digest_times):8.1f} ms median")
    print(f"  session lookup by digest                      {median_ms(lookup_times):8.1f} ms median")
    settings.COMPACTOR = previous


# --- added latency per call: the gateway vs the stand-in called directly ----------------------


def _history(size: int) -> list[dict]:
    """`size` messages of a coding conversation (user turns, replies, tool pairs), ending with a user turn."""
    from context_bench import synthetic_messages

    history = [{"role": m["role"], "content": m["content"]} for m in synthetic_messages(size)][:size]
    if history[-1]["role"] != "user":
        history[-1] = {"role": "user", "content": "continue"}
    return history


def _as_chat(history: list[dict]) -> list[dict]:
    """The same conversation as Chat Completions messages (tool pairs as tool_calls / tool messages)."""
    from gateway.openai.chat_map import to_chat

    out: list[dict] = [{"role": "system", "content": "You are a careful coding agent."}]
    for message in history:
        out += to_chat(message)
    return out


def _stand_in_elsewhere(make) -> tuple[str, multiprocessing.Process]:
    """A stand-in upstream served by a child process (forked: it inherits `make`): a real
    provider is another machine, so its parsing, its memory and its collector's pauses are not
    the gateway's. It keeps no record of the requests it answered."""
    receive, send = multiprocessing.Pipe(duplex=False)

    def serve() -> None:
        fake = make().start()
        send.send(fake.url)
        while True:
            time.sleep(0.2)
            with fake._lock:
                fake.requests.clear()

    process = multiprocessing.get_context("fork").Process(target=serve, daemon=True)
    process.start()
    return receive.recv(), process


def added_latency(args: argparse.Namespace, fake) -> None:
    """Per size: one session seeded with the history through the gateway, then `turns` calls of
    the history + one new message, through the gateway (its WSGI handler in process: no HTTP hop
    to the gateway itself) and straight to the stand-in over HTTP; p50 of each and the difference.
    The stand-ins run in a child process of their own."""
    import httpx2 as httpx
    from django.conf import settings
    from django.db import connection

    from tests.gateway.openai_upstream import KEY, FakeOpenAI
    from tests.gateway.upstream import FakeUpstream, Reply

    anthropic_url, anthropic_process = _stand_in_elsewhere(
        lambda: FakeUpstream(reply=lambda rec: Reply(text="Done."), counter=lambda body: 1000)
    )
    openai_url, openai_process = _stand_in_elsewhere(lambda: FakeOpenAI(counter=lambda body: 1000))
    previous = (settings.GATEWAY_UPSTREAM_URL, settings.OPENAI_GATEWAY_UPSTREAM_URL, settings.COMPACTOR)
    settings.GATEWAY_UPSTREAM_URL = anthropic_url
    settings.OPENAI_GATEWAY_UPSTREAM_URL, settings.OPENAI_GATEWAY_UPSTREAM_API_KEY = openai_url, KEY
    settings.COMPACTOR = {**settings.COMPACTOR, "AUTO_COMPACT": False}
    print(f"added latency per call (database {connection.vendor}; p50 of {args.turns} calls; whole history served)")
    try:
        for size in [int(n) for n in args.sizes.split(",")]:
            user, key, _ = api_user(username=f"gateway-bench-added-{size}")
            history = _history(size)
            anthropic_direct = httpx.Client(
                base_url=anthropic_url, headers={"x-api-key": "upstream-secret"}, timeout=120
            )
            openai_direct = httpx.Client(base_url=openai_url, headers={"authorization": f"Bearer {KEY}"}, timeout=120)
            for api, direct, path, to_body in (
                ("anthropic", anthropic_direct, "/v1/messages", _anthropic_body),
                ("openai chat", openai_direct, "/chat/completions", _chat_body),
            ):
                gateway_ms, direct_ms = _measure(args, key, history, direct, path, to_body)
                print(
                    f"  {api:12s} {size:6,d} stored messages: direct {direct_ms:7.1f} ms, "
                    f"through the gateway {gateway_ms:7.1f} ms, added {gateway_ms - direct_ms:6.1f} ms"
                )
    finally:
        anthropic_process.terminate()
        openai_process.terminate()
        settings.GATEWAY_UPSTREAM_URL, settings.OPENAI_GATEWAY_UPSTREAM_URL, settings.COMPACTOR = previous


def _anthropic_body(history: list[dict]) -> tuple[str, dict, dict]:
    return "/anthropic/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 256, "messages": history}, {}


def _chat_body(history: list[dict]) -> tuple[str, dict, dict]:
    return "/openai/v1/chat/completions", {"model": "gpt-4o", "messages": _as_chat(history)}, {}


def _measure(args, key: str, history: list[dict], direct, path: str, to_body) -> tuple[float, float]:
    """p50 of the gateway (until the client has the whole answer) and of the stand-in called
    directly, in ms.

    The gateway is called as a WSGI server calls it (Django's WSGI handler, no HTTP hop): the
    answer's bytes are timed, then the response is closed untimed, as a server closes it after
    writing them; the reply's bookkeeping runs there (gateway.views.AnswerThenRecord), before the
    next call, as it does before a kept-alive connection's next request."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import RequestFactory

    handler, factory = WSGIHandler(), RequestFactory()
    history = list(history)
    gateway: list[float] = []

    def through_gateway(turn: int) -> None:
        url, body, _ = to_body(history)
        payload = json.dumps(body)  # encoded before the clock starts, as for the direct call
        started = time.perf_counter()
        request = factory.post(url, data=payload, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
        status: list[str] = []
        response = handler(request.environ, lambda s, headers, exc_info=None: status.append(s))
        answer = b"".join(response)
        gateway.append(time.perf_counter() - started)
        response.close()
        assert status[0].startswith("200"), answer[:300]
        history.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
        history.append({"role": "user", "content": f"Bench turn {turn}: next step please."})

    plain: list[float] = []

    def straight() -> None:
        _, body, _ = to_body(history)
        payload = json.dumps(body)  # the same bytes the gateway gets, encoded before the clock starts
        started = time.perf_counter()
        response = direct.post(path, content=payload, headers={"content-type": "application/json"})
        plain.append(time.perf_counter() - started)
        assert response.status_code == 200

    through_gateway(-1)  # seeds the session with the whole history
    gateway.clear()
    # Interleaved: on a shared machine a burst of load then slows both sides alike.
    for turn in range(args.turns):
        through_gateway(turn)
        straight()
    return median_ms(gateway), median_ms(plain)


# --- paced conversation with a real worker ----------------------------------------------------


def paced_user_text(turn: int) -> str:
    """About 1,550 tokens of a distinct request (cl100k, what the stand-in counts)."""
    return f"Step {turn}: refactor src/module_{turn}.py. " + " ".join(
        f"Function f{turn}_{j} must handle nested input." for j in range(150)
    )


def worker_database_url() -> str:
    """The bench's own (throwaway) database, for the worker subprocess."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = quote(s["USER"] or "") + (":" + quote(s["PASSWORD"]) if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


@contextlib.contextmanager
def celery_worker(log_path: Path) -> Iterator[None]:
    """`celery -A project worker` (as `make run` starts it) on the bench's database and broker,
    consuming a queue of its own, with the offline summarizer (no key reaches a real LLM)."""
    from django.conf import settings

    from project.celery import app as celery_app

    queue = f"gateway-bench-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": worker_database_url(), "ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}
    command = [sys.executable, "-m", "celery", "-A", "project", "worker", "--concurrency=1", "-Q", queue]
    command += ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
    previous = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while " ready." not in log_path.read_text():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start:\n{log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            yield
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
            celery_app.conf.task_default_queue = previous
            if str(settings.CELERY_BROKER_URL).startswith("redis"):
                import redis

                client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
                client.delete(queue)  # a job queued after the last turn
                client.close()


@dataclass
class PacedRun:
    meters: list[int]  # the meter after each turn (the stand-in's report + the reply)
    prompts: list[int]  # what the stand-in counted for each turn's request
    queued_turn: int | None = None
    summary_turn: int | None = None  # the first turn whose upstream request carried the summary
    job: object | None = None


def paced_turns(*, key: str, session, fake, pace: float) -> PacedRun:
    from django.test import Client

    from compaction.models import Compaction, Reason

    run = PacedRun(meters=[], prompts=[])
    history: list[dict] = []
    client = Client()
    for turn in range(1, PACED_MAX_TURNS + 1):
        history.append({"role": "user", "content": paced_user_text(turn)})
        body = {"model": PACED_MODEL, "max_tokens": 256, "messages": history}
        before = len(fake.message_calls)
        response = client.post(
            "/anthropic/v1/messages",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_X_API_KEY=key,
            HTTP_X_COMPACTOR_SESSION=str(session.pk),
        )
        assert response.status_code == 200, response.content[:300]
        history.append({"role": "assistant", "content": response.json()["content"]})
        sent = fake.message_calls[before]
        run.prompts.append(sent.prompt_tokens)
        session.refresh_from_db()
        run.meters.append(session.usage_tokens)
        if run.summary_turn is None and "<summary>" in json.dumps(sent.body["messages"][0]):
            run.summary_turn = turn
            break
        if run.queued_turn is None:
            run.job = Compaction.objects.filter(session=session, reason=Reason.THRESHOLD).first()
            run.queued_turn = turn if run.job is not None else None
        time.sleep(pace)
    if run.job is not None:
        run.job.refresh_from_db()
    return run


def paced(args: argparse.Namespace, fake) -> None:
    from django.conf import settings
    from django.db import connection

    from sessions.services import session_create
    from tests.gateway.upstream import Reply, prompt_tokens

    fake.reply = lambda rec: Reply(text="Done: the module is refactored and its tests pass.")
    fake.counter = prompt_tokens
    user, key, _ = api_user(username="gateway-bench-paced")
    session = session_create(owner=user, model=PACED_MODEL, compaction_settings=PACED_SETTINGS)
    with celery_worker(Path(settings.VAR_DIR) / "gateway-bench-worker.log"):
        run = paced_turns(key=key, session=session, fake=fake, pace=args.pace)

    broker = str(settings.CELERY_BROKER_URL).split(":", 1)[0]
    print(
        f"paced conversation through the gateway: a turn every {args.pace:g} s, ~1,600 tokens each; "
        f"database {connection.vendor}, broker {broker}, a Celery worker, offline summarizer"
    )
    first_over = next((i for i, tokens in enumerate(run.meters, 1) if tokens > PACED_TRIGGER), None)
    if first_over is not None:
        print(f"  first turn whose recorded usage is past the trigger {PACED_TRIGGER:,}   turn {first_over:3d}", end="")
        print(f"  ({run.meters[first_over - 1]:,} tokens)")
    print(f"  threshold compaction queued during                     turn {run.queued_turn or 0:3d}")
    if run.summary_turn is None:
        print(f"  upstream never received the compacted context in {len(run.meters)} turns")
    else:
        turn = run.summary_turn
        print(f"  upstream first received the compacted context       turn {turn:3d}", end="")
        print(f"  (prompt {run.prompts[turn - 1]:,} tokens; {run.prompts[turn - 2]:,} the turn before)")
    job = run.job
    if job is not None and job.first_started_at is not None:
        started = (job.first_started_at - job.created_at).total_seconds()
        active = (job.activated_at - job.first_started_at).total_seconds() if job.activated_at else float("nan")
        print(f"  worker: queued → started {started:.2f} s, started → active {active:.2f} s", end="")
        print(f" (tokens_before {job.tokens_before:,}: the meter when the worker took its snapshot)")


if __name__ == "__main__":
    raise SystemExit(main())
