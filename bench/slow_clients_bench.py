"""Slow clients against gunicorn as deployed: ordinary requests while N connections stall mid-body.

    [DATABASE_URL=postgres://…] .venv/bin/python bench/slow_clients_bench.py [--slow 70] [--requests 100]
        [--worker-class gthread]

A throwaway database (see _django.bench_database), then `gunicorn -c deploy/gunicorn.conf.py
project.wsgi:application` on a free port (its defaults: 2 workers x 32 threads). Times R ordinary
requests (GET /api/v1/sessions/ and /healthz, alternating, one connection each) alone, then while N
connections have sent headers with `Content-Length: 100` and 10 bytes and nothing more; prints
p50 / p99 / max and failures (timeouts at 10 s), then how long each slow one waited for its answer
and what it was. `--worker-class gthread` runs gunicorn's stock worker instead of the deployed one
(project.web_worker.BufferedThreadWorker), for the before and after. The bound: p99 under 1 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _django import api_user, bench_database, django_setup

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BOUND_S = 1.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return 0
        data += chunk
    return int(data.split(b" ", 2)[1])


def _ordinary(port: int, path: str, key: str) -> tuple[float, int]:
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n".encode()
            )
            status = _status(sock)
    except OSError:
        status = 0  # timed out or refused
    return time.monotonic() - started, status


def _round(port: int, key: str, count: int) -> tuple[list[float], int]:
    timings, failures = [], 0
    for index in range(count):
        elapsed, status = _ordinary(port, "/healthz" if index % 2 else "/api/v1/sessions/", key)
        timings.append(elapsed)
        failures += status != 200
    return timings, failures


def _show(label: str, timings: list[float], failures: int) -> float:
    ordered = sorted(timings)
    p99 = ordered[min(len(ordered) - 1, round(len(ordered) * 0.99) - 1)]
    print(
        f"{label:<34} p50 {statistics.median(timings) * 1000:8.1f} ms  p99 {p99 * 1000:8.1f} ms  "
        f"max {ordered[-1] * 1000:8.1f} ms  failed {failures}/{len(timings)}"
    )
    return p99


def slow_body_round(port: int, key: str, *, slow: int, requests: int, idle_timeout: float) -> float:
    """Against a running server (an API key `key`): R ordinary requests alone, then while `slow`
    connections hold a request body (headers with `Content-Length: 100`, 10 bytes sent); prints
    both rounds, what the slow ones got, and the verdict. Returns the p99 (s) with the slow bodies.
    Also run by bench/faults_bench.py (--only slowclients)."""
    _round(port, key, 20)  # both workers warm
    _show("alone", *_round(port, key, requests))
    held = []
    for _ in range(slow):
        sock = socket.create_connection(("127.0.0.1", port), timeout=idle_timeout + 60)
        sock.sendall(
            b"POST /api/v1/sessions/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + b'{"title": '
        )  # fmt: skip
        held.append((sock, time.monotonic()))
    time.sleep(0.5)
    p99 = _show(f"with {slow} slow bodies", *_round(port, key, requests))
    answers = []
    give_up = time.monotonic() + idle_timeout + 15
    for sock, opened in held:
        try:
            sock.settimeout(max(0.1, give_up - time.monotonic()))
            status = _status(sock)
        except OSError:
            status = 0
        answers.append((status, time.monotonic() - opened))
        sock.close()
    statuses = sorted({status for status, _ in answers})
    waited = [seconds for _, seconds in answers]
    print(
        f"slow ones answered: statuses {statuses} (0: none within the idle timeout + 15 s), after "
        f"{min(waited):.1f}-{max(waited):.1f} s"
    )
    verdict = "OK" if p99 < BOUND_S else "FAILED"
    print(f"bound: ordinary requests p99 < {BOUND_S:.0f} s with {slow} slow bodies: {verdict}")
    return p99


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor != "postgresql":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", type=int, default=70, help="slow-body connections")
    parser.add_argument(
        "--requests", type=int, default=100, help="ordinary requests per round (each gives up after 10 s)"
    )
    parser.add_argument("--worker-class", default="", help="gunicorn worker class (default: deploy/gunicorn.conf.py's)")
    parser.add_argument("--idle-timeout", type=float, default=10, help="WEB_READ_IDLE_TIMEOUT for the server")
    args = parser.parse_args()

    django_setup(prefix="compactor-slow-bench-", secret_key="slow-clients-bench-only")
    with bench_database(celery_eager=True):
        _, key, _ = api_user(username="slow-bench")
        port = _free_port()
        var_dir = tempfile.mkdtemp(prefix="compactor-slow-bench-var-")
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "DEBUG": "0",
            "SECRET_KEY": "slow-clients-bench-only-" + "x" * 40,
            "ALLOWED_HOSTS": "127.0.0.1",
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "COMPACTOR_VAR_DIR": var_dir,
            "WEB_ACCESS_LOG": "0",
            "WEB_READ_IDLE_TIMEOUT": str(args.idle_timeout),
        }
        command = [sys.executable, "-m", "gunicorn", "-c", "deploy/gunicorn.conf.py"]
        if args.worker_class:
            command += ["-k", args.worker_class]
        log = open(Path(var_dir) / "gunicorn.log", "w")  # noqa: SIM115 - closed below
        server = subprocess.Popen(
            [*command, "project.wsgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + 60
            while _ordinary(port, "/healthz", key)[1] != 200:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"gunicorn did not answer; log: {log.name}")
                time.sleep(0.3)
            print(f"gunicorn {' '.join(command[3:])} ({args.worker_class or 'deployed worker class'}), port {port}")
            p99 = slow_body_round(port, key, slow=args.slow, requests=args.requests, idle_timeout=args.idle_timeout)
        finally:
            server.kill()  # stock gthread would wait its graceful timeout for the held threads
            server.wait(30)
            log.close()
    return 0 if p99 < BOUND_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
