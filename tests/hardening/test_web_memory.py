"""A web process's memory is bounded and reported: gunicorn as deployed (deploy/gunicorn.conf.py)
replaces a process past COMPACTOR_WEB_MAX_RSS_MB once its request is answered, recycles every
process after WEB_MAX_REQUESTS (+ jitter), and /metrics reports each live process's resident
memory and how many were replaced.

The server runs on an SQLite file nobody migrated: /healthz and /metrics need no table."""

from __future__ import annotations

import http.client
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .servers import ROOT, free_port, start_gunicorn, stop

TOKEN = "memory-metrics-token-0123456789"


def _get(port: int, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _workers(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children")
    return [int(pid) for pid in children.read_text().split()]


def _gunicorn(tmp_path, port: int, **env: str) -> subprocess.Popen:
    import os

    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS_MODULE"))},
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "SECRET_KEY": "memory-test-secret-key-" + "x" * 40,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}",
        "COMPACTOR_VAR_DIR": str(tmp_path / "var"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "COMPACTOR_METRICS_TOKEN": TOKEN,
        "PORT": str(port),
        "WEB_WORKERS": "1",
        "WEB_THREADS": "4",
        "WEB_ACCESS_LOG": "0",
        **env,
    }
    environ.pop("REDIS_URL", None)
    log = tmp_path / "gunicorn.log"
    return start_gunicorn(environ, log, timeout=120)


def _wait_for_worker(process: subprocess.Popen, other_than: set[int], timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fresh = [pid for pid in _workers(process.pid) if pid not in other_than]
        if fresh:
            return fresh[0]
        time.sleep(0.1)
    raise AssertionError(f"no new web process within {timeout} s")


def _metrics(port: int) -> dict[str, list]:
    status, body = _get(port, "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200, body[:300]
    return {family.name: family.samples for family in text_string_to_metric_families(body.decode())}


@pytest.mark.slow
def test_a_process_past_the_memory_bound_answers_then_is_replaced_and_metrics_say_so(tmp_path):
    port = free_port()
    process = _gunicorn(tmp_path, port, COMPACTOR_WEB_MAX_RSS_MB="1")  # below any process: every one is over
    try:
        first = _wait_for_worker(process, set())
        assert _get(port, "/healthz")[0] == 200  # answered, then the process is replaced
        second = _wait_for_worker(process, {first})
        assert first not in _workers(process.pid)
        # The replacement answers; /metrics counts the recycled process and shows the live one's memory.
        families = _metrics(port)
        recycled = sum(s.value for s in families["compactor_web_process_recycled"] if s.name.endswith("_total"))
        assert recycled >= 1
        resident = families["compactor_web_process_resident_bytes"]
        assert resident and all(s.value > 10 * 2**20 for s in resident)
        assert {s.labels["pid"] for s in resident} <= {str(pid) for pid in _workers(process.pid)} | {str(second)}
        assert families["compactor_web_process_resident_max_bytes"][0].value > 10 * 2**20
    finally:
        stop(process)


@pytest.mark.slow
def test_processes_are_recycled_after_max_requests_and_kept_below_the_bound(tmp_path):
    port = free_port()
    process = _gunicorn(tmp_path, port, WEB_MAX_REQUESTS="5", WEB_MAX_REQUESTS_JITTER="0")
    try:
        first = _wait_for_worker(process, set())
        for _ in range(4):
            assert _get(port, "/healthz")[0] == 200
        assert _workers(process.pid) == [first]  # the default memory bound is far above a fresh process
        assert _get(port, "/healthz")[0] == 200  # the fifth
        _wait_for_worker(process, {first})
    finally:
        stop(process)


def test_the_web_server_limits_malloc_arenas_before_forking_its_workers(monkeypatch, tmp_path):
    """32 threads, each with a glibc arena of its own, held several times the live data (the bench:
    150 MB for 19 MB); the master sets M_ARENA_MAX (-8) to 2 when it reads its config."""
    import ctypes
    import runpy

    calls: list[tuple[int, int]] = []

    class FakeLibc:
        def mallopt(self, option: int, value: int) -> int:
            calls.append((option, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv("WEB_MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the config sets it: undone after the test
    runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert calls == [(-8, 2)]
    calls.clear()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # the operator's own choice wins
    runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert calls == []
