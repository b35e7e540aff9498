"""Gateway overhead benchmark: one agent turn through /anthropic/v1/messages vs the same turn
done by a REST client, on a long conversation.

    DEBUG=1 .venv/bin/python bench/gateway_bench.py [--messages N] [--turns N]

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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=9)
    args = parser.parse_args()

    django_setup(prefix="compactor-gateway-bench-")
    import httpx2 as httpx
    from context_bench import synthetic_messages
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from gateway.history import chain_digests
    from gateway.services import _find_conversation
    from tests.gateway.upstream import FakeUpstream, Reply

    # The fake upstream stops before the throwaway database goes (the stack unwinds first).
    with bench_database(), contextlib.ExitStack() as stack:
        fake = FakeUpstream().start()
        stack.callback(fake.stop)
        fake.reply = lambda rec: Reply(text="Done.")
        fake.counter = lambda body: len(json.dumps(body)) // 4  # cheap: the provider's time is not measured
        settings.GATEWAY_UPSTREAM_URL = fake.url
        settings.GATEWAY_UPSTREAM_API_KEY = "upstream-secret"
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

        # Seed: the first call carries the whole history (one batched append).
        first = gateway_call(history)
        history.append({"role": "assistant", "content": first["content"]})

        sid = rest.post("/api/v1/sessions/", {"title": "rest", "model": model}, format="json").json()["id"]
        for start in range(0, len(history), 500):
            assert (
                rest.post(
                    f"/api/v1/sessions/{sid}/messages/", {"messages": history[start : start + 500]}, format="json"
                ).status_code
                == 201
            )
        upstream = httpx.Client(base_url=fake.url, headers={"x-api-key": "upstream-secret"}, timeout=120)

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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
