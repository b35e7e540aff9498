"""The Celery worker's heartbeat: a bootstep (registered in project/celery.py) that runs a thread
in the worker's main process, recording ops.heartbeat every COMPACTOR_WORKER_HEARTBEAT_SECONDS.

A thread of its own, not Celery's timer or a beat task: the timer shares the event loop that a
solo-pool worker blocks while it runs a task, and a beat task waits behind queued compactions and
needs beat alive, so either would call a busy worker dead. A killed worker (SIGKILL, OOM) takes
the thread with it: its heartbeat stops and its age grows until /readyz reports it. A worker
stopping cleanly deletes its row at once.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime

from celery import bootsteps
from django.conf import settings
from django.db import connection
from django.utils import timezone

from .heartbeat import heartbeat_forget, heartbeat_record, heartbeats_prune

logger = logging.getLogger("ops.worker")

# When this process loaded its steps, before it consumed anything: the heartbeat's `started_at`.
# Every job this process claims is claimed later, so a claim under this worker's name older than
# its heartbeat's start is a dead process's (compaction.services.compaction_sweep_stuck).
PROCESS_STARTED_AT = datetime.now(UTC)


class HeartbeatThread(threading.Thread):
    def __init__(self, *, worker: str, interval: float):
        super().__init__(name="compactor-heartbeat", daemon=True)
        self.worker = worker
        self.interval = interval
        self.pid = os.getpid()
        self.started_at = PROCESS_STARTED_AT
        self._stop_event = threading.Event()
        self._failing = False

    def run(self) -> None:
        try:
            self._safely(lambda: heartbeats_prune(now=timezone.now()))
            while True:
                self._safely(self.beat)
                if self._stop_event.wait(self.interval):
                    break
            self._safely(lambda: heartbeat_forget(worker=self.worker, pid=self.pid))
        finally:
            connection.close()  # this thread's own connection

    def beat(self) -> None:
        heartbeat_record(worker=self.worker, pid=self.pid, started_at=self.started_at, now=timezone.now())

    def _safely(self, action) -> None:
        """Database trouble is logged once per outage, and the next beat tries again."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - the heartbeat must outlive a database outage
            if not self._failing:
                logger.warning("Worker heartbeat not recorded: %s", type(exc).__name__)
            self._failing = True
            connection.close()  # a broken connection is reopened on the next beat
        else:
            if self._failing:
                logger.info("Worker heartbeat recorded again")
            self._failing = False

    def stop(self, timeout: float = 5.0) -> None:
        self._stop_event.set()
        self.join(timeout)


class WorkerHeartbeatStep(bootsteps.StartStopStep):
    """Starts the heartbeat once the pool is up (so the pool's forks never copy the thread) and
    stops it, removing the row, when the worker shuts down."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.thread: HeartbeatThread | None = None

    def start(self, worker) -> None:
        self.thread = HeartbeatThread(worker=worker.hostname, interval=settings.WORKER_HEARTBEAT_SECONDS)
        self.thread.start()
        logger.info("Worker heartbeat every %g s as %s", self.thread.interval, worker.hostname)

    def stop(self, worker) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    terminate = stop
