"""The heartbeat thread and its bootstep in this process (the real worker's are exercised through
subprocesses by test_worker_heartbeat, which the coverage of this process does not see): it records
the worker's row every interval, survives a database error (logged once per outage, recorded again
after it), and removes its own row when stopped."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from ops import worker as ops_worker
from ops.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_the_thread_records_its_row_every_interval_and_removes_it_when_stopped():
    thread = ops_worker.HeartbeatThread(worker="celery@in-process", interval=0.05)
    thread.start()
    try:
        wait_for(lambda: WorkerHeartbeat.objects.filter(worker="celery@in-process").exists())
        first = WorkerHeartbeat.objects.get(worker="celery@in-process").seen_at
        wait_for(lambda: WorkerHeartbeat.objects.get(worker="celery@in-process").seen_at > first)
        row = WorkerHeartbeat.objects.get(worker="celery@in-process")
        assert row.pid == thread.pid and row.started_at == ops_worker.PROCESS_STARTED_AT
    finally:
        thread.stop()
    assert not thread.is_alive()
    assert not WorkerHeartbeat.objects.filter(worker="celery@in-process").exists()


def test_a_database_error_is_logged_once_per_outage_and_the_next_beat_records_again(monkeypatch, caplog):
    calls = {"n": 0}
    real_record = ops_worker.heartbeat_record

    def flaky_record(**kwargs):
        calls["n"] += 1
        if calls["n"] <= 3:  # an outage of three beats
            raise ConnectionError("database unreachable")
        real_record(**kwargs)

    monkeypatch.setattr(ops_worker, "heartbeat_record", flaky_record)
    caplog.set_level(logging.INFO, logger="ops.worker")
    thread = ops_worker.HeartbeatThread(worker="celery@flaky", interval=0.02)
    thread.start()
    try:
        wait_for(lambda: WorkerHeartbeat.objects.filter(worker="celery@flaky").exists())
    finally:
        thread.stop()
    messages = [record.getMessage() for record in caplog.records if record.name == "ops.worker"]
    assert messages.count("Worker heartbeat not recorded: ConnectionError") == 1, messages
    assert messages.count("Worker heartbeat recorded again") == 1, messages


def test_the_bootstep_starts_the_thread_under_the_workers_name_and_stops_it(settings):
    settings.WORKER_HEARTBEAT_SECONDS = 0.05
    worker = SimpleNamespace(hostname="celery@bootstep")
    step = ops_worker.WorkerHeartbeatStep.__new__(ops_worker.WorkerHeartbeatStep)
    step.thread = None
    step.start(worker)
    try:
        assert step.thread is not None and step.thread.interval == 0.05
        wait_for(lambda: WorkerHeartbeat.objects.filter(worker="celery@bootstep").exists())
    finally:
        step.stop(worker)
    assert step.thread is None
    assert not WorkerHeartbeat.objects.filter(worker="celery@bootstep").exists()
    step.terminate(worker)  # a second stop (terminate after stop) is harmless
