"""A real Celery worker subprocess on real Redis and the PostgreSQL test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from project.celery import app as celery_app
from tests.services import redis_url, require_postgres

ROOT = Path(__file__).resolve().parents[2]
VALID_SUMMARY = """## Goal
- Make every step of the parser pass, one module at a time (src/module_0.py onwards).

## Constraints & Preferences
- Read each module before changing it.

## Progress
### Done
- [x] The early steps were updated and their tool output checked.

### In Progress
- [ ] The remaining steps.

### Blocked
- (none)

## Key Decisions
- **Read before edit**: every change starts from the file's current content.

## Next Steps
1. Continue with the next step of the parser.

## Critical Context
- Sources live under /repo/src.
"""


def _database_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{s['NAME']}"


class Worker:
    """`celery -A project worker --pool=solo` on its own queue, pointed at the test database."""

    def __init__(self, queue: str, env: dict[str, str], log_dir: Path, name: str):
        self.log_path = log_dir / f"{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "project",
                "worker",
                "--pool=solo",
                "--concurrency=1",
                "-Q",
                queue,
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.log_path.read_text()[-3000:]}")
            if " ready." in self.log_path.read_text():
                return
            time.sleep(0.2)
        raise AssertionError(f"worker not ready after {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def worker_factory(transactional_db, tmp_path):
    """Start workers that share this test's queue; each sees DATABASE_URL of the test DB."""
    require_postgres()
    url = redis_url()
    queue = f"e2e-{uuid.uuid4().hex[:8]}"
    previous_queue = celery_app.conf.task_default_queue
    celery_app.conf.task_default_queue = queue
    base_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings_test",
        "DATABASE_URL": _database_url(),
        "REDIS_URL": url,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "COMPACTOR_CELERY_QUEUE": queue,  # what the worker itself sends (a re-queued job) goes there too
        "PYTHONUNBUFFERED": "1",
    }
    workers: list[Worker] = []

    def start(name: str = "w1", **extra_env: str) -> Worker:
        worker = Worker(queue, {**base_env, **extra_env}, tmp_path, name)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in workers:
        worker.stop()
    celery_app.conf.task_default_queue = previous_queue
    # Drop whatever is left on this test's queue.
    import redis

    client = redis.Redis.from_url(url)
    client.delete(queue)
    client.close()
