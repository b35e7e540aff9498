"""How well the meter predicts what the provider counts, for an honest and a cache-dropping client.

    DEBUG=1 .venv/bin/python bench/meter_eval.py [--transcript PATH ...]

Every shared Claude Code session is replayed through the REST API (up to Claude Code's own first
compaction: after it the recorded usage describes Claude Code's compacted context, not what
Compactor serves), in a throwaway database (bench/_django.py), three times:

- honest: each assistant reply's recorded usage reported whole (input + cache read + cache write);
- cache-dropping: only `input_tokens` and `output_tokens` forwarded (a common client bug with
  prompt caching: the reported prompt is then a tiny fraction of what was served);
- baseline: no usage reported at all (the meter is our raw estimate of the served context).

For each call the meter read before it (the previous request's `usage.tokens`) is compared with
the prompt the provider really counted (the recorded input + cache figures). Printed: median and
p90 of |meter − real| / real (each session's first call left out: nothing predicts it), the share
of reports flagged implausible, and the lowest meter / served-estimate ratio seen (the meter's
floor is 0.9). Then the session page (gauge, chart, history) of a 10,000-message session with
a usage report every second message, beside a 100-message one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.corpus import TRANSCRIPTS as CORPUS  # noqa: E402  (COMPACTOR_TRANSCRIPTS_DIR or ../shared)

sys.path.insert(0, str(Path(__file__).resolve().parent))
SHARED = CORPUS / "claude-code"

CLIENTS = ("honest", "cache-dropping", "baseline (no reports)")


@dataclass
class Figures:
    errors: list[float] = field(default_factory=list)
    reports: int = 0
    flagged: int = 0
    lowest_floor_ratio: float = float("inf")

    def line(self, name: str) -> str:
        errors = sorted(self.errors)
        median = statistics.median(errors)
        p90 = errors[int(0.9 * len(errors))]
        flagged = f"{self.flagged}/{self.reports} flagged" if self.reports else "no reports"
        return (
            f"{name:<22} median {median:7.2%}  p90 {p90:7.2%}  over {len(errors)} calls; {flagged}; "
            f"lowest meter / served {self.lowest_floor_ratio:.3f}"
        )


def recorded(path: Path) -> list[dict]:
    from compaction import services as engine
    from compaction.core.transcripts.claude_code import read_claude_code

    transcript = read_claude_code(path)
    messages = engine.transcript_messages_for_api(transcript.messages)
    if transcript.compactions:
        messages = messages[: transcript.compactions[0]["before_message_index"]]
    return messages


def replay(client, user, path: Path, messages: list[dict], mode: str, figures: Figures) -> None:
    from compaction import services as engine
    from sessions import services

    session = services.session_create(
        owner=user, title=f"{path.stem} {mode}", compaction_settings={"auto_compact": False}
    )
    base = f"/api/v1/sessions/{session.pk}/"
    meter = None
    first = True
    for message in messages:
        real = engine.reported_prompt_tokens(message.get("usage")) if message["role"] == "assistant" else None
        response = client.post(
            base + "messages/", {"role": message["role"], "content": message["content"]}, format="json"
        )
        assert response.status_code == 201, response.content
        out = response.json()
        usage = out["usage"]
        figures.lowest_floor_ratio = min(
            figures.lowest_floor_ratio, usage["tokens"] / max(1, usage["estimated_tokens"])
        )
        if real is None:
            meter = usage["tokens"]
            continue
        if not first and meter is not None:
            figures.errors.append(abs(meter - real) / real)
        first = False
        if mode == CLIENTS[2]:
            meter = usage["tokens"]
            continue
        recorded_usage = message["usage"]
        body = {
            "input_tokens": int(recorded_usage.get("input_tokens") or 0),
            "output_tokens": int(recorded_usage.get("output_tokens") or 0),
            "message_seq": out["messages"][-1]["seq"],
        }
        if mode == CLIENTS[0]:
            body["cache_read_input_tokens"] = int(recorded_usage.get("cache_read_input_tokens") or 0)
            body["cache_creation_input_tokens"] = int(recorded_usage.get("cache_creation_input_tokens") or 0)
        response = client.post(base + "usage/", body, format="json")
        assert response.status_code == 200, response.content
        usage = response.json()["usage"]
        figures.reports += 1
        figures.flagged += usage["implausible"] is not None
        figures.lowest_floor_ratio = min(
            figures.lowest_floor_ratio, usage["tokens"] / max(1, usage["estimated_tokens"])
        )
        meter = usage["tokens"]


def chart_cost(client, user, messages: int, repeat: int = 7) -> tuple[float, int]:
    """(median ms of the session page, rows the chart's usage history returned) for a session
    of `messages` messages with a usage report every second message (the history bulk-loaded)."""
    from django.urls import reverse
    from django.utils import timezone

    from sessions import services
    from sessions.dashboard import queries
    from sessions.models import UsageSample

    session = services.session_create(owner=user, title=f"chart {messages}", model="claude-sonnet-4-5")
    text = "Looked at the parser again; the failing case is the nested quote. " * 3
    for start in range(0, messages, services.MAX_BATCH):
        batch = [
            {"role": "user" if (start + i) % 2 == 0 else "assistant", "content": f"{start + i}: {text}"}
            for i in range(min(services.MAX_BATCH, messages - start))
        ]
        services.messages_append(session=session, messages=batch)
    now = timezone.now()
    UsageSample.objects.bulk_create(
        (
            UsageSample(
                session=session,
                seq=seq,
                kind="report",
                tokens=26_000 + 40 * seq,
                estimated_tokens=30 * seq,
                created_at=now,
            )
            for seq in range(1, messages + 1, 2)
        ),
        batch_size=2000,
    )
    rows = len(queries.usage_history(session=session, compactions=[]).reports)
    client.force_login(user)
    url = reverse("dashboard:session-detail", args=[session.pk])
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(times[1:]), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transcript", action="append", type=Path, help="Claude Code JSONL (default: all shared)")
    args = parser.parse_args()
    paths = args.transcript or sorted(SHARED.glob("*.jsonl"))

    from _django import api_user, bench_database, django_setup

    # A replay is thousands of requests a minute from one key: not what the API throttle is for.
    os.environ.setdefault("COMPACTOR_API_THROTTLE_RATE", "1000000/min")
    django_setup(prefix="compactor-meter-bench-")
    with bench_database(celery_eager=True):
        user, _key, client = api_user(username="meter-bench")
        figures = {name: Figures() for name in CLIENTS}
        for path in paths:
            messages = recorded(path)
            for mode in CLIENTS:
                replay(client, user, path, messages, mode, figures[mode])
        print(f"Meter read before each call vs the prompt the provider counted ({len(paths)} Claude Code sessions):")
        for name in CLIENTS:
            print("  " + figures[name].line(name))
        from django.test import Client

        page = Client()
        small, small_rows = chart_cost(page, user, 100)
        large, large_rows = chart_cost(page, user, 10_000)
        print(
            f"Session page with its chart: 10,000 messages / 5,000 reports {large:.1f} ms ({large_rows} history rows) "
            f"vs 100 / 50 {small:.1f} ms ({small_rows} rows): {large / small:.2f}×"
        )
        honest, baseline = figures[CLIENTS[0]], figures[CLIENTS[2]]
        print(
            f"  honest median error is {statistics.median(honest.errors) / statistics.median(baseline.errors):.3f}× "
            "the raw estimate's; a cache-dropping client's meter is never under 0.9× what is served"
        )


if __name__ == "__main__":
    main()
