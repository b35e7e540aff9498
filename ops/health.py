"""Readiness: can this deployment serve and run compactions right now? (GET /readyz)

Three checks, each answering ok or what is wrong, in words that name no host, user or password
(the endpoint needs no credentials; the full error goes to the log):
  database  a `SELECT 1` on the default connection;
  broker    a connection to the Celery broker (Redis), or the filesystem broker's folders;
  worker    a heartbeat (ops.heartbeat) seen within COMPACTOR_WORKER_HEARTBEAT_MAX_AGE.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection

from .heartbeat import heartbeats_read

logger = logging.getLogger("ops.health")


@dataclass(frozen=True)
class Check:
    ok: bool
    error: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, **self.data}
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class Readiness:
    checks: dict[str, Check]

    @property
    def down(self) -> list[str]:
        return [name for name, check in self.checks.items() if not check.ok]

    @property
    def ready(self) -> bool:
        return not self.down

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "ok" if self.ready else "unavailable"}
        if not self.ready:
            body["down"] = self.down
        body["checks"] = {name: check.as_json() for name, check in self.checks.items()}
        return body


def database_check() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        logger.warning("Readiness: database unreachable: %s", exc)
        # A failed connection stays unusable in this thread until closed.
        connection.close_if_unusable_or_obsolete()
        return Check(False, f"database unreachable ({type(exc).__name__})")
    return Check(True)


def _filesystem_broker_check(options: dict[str, Any]) -> Check:
    """The embedded broker is a folder shared by web and worker: it must be there and writable."""
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        folder = options.get(key)
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            return Check(False, f"broker folder {key} is missing or not writable", {"transport": "filesystem"})
    return Check(True, data={"transport": "filesystem"})


def broker_check() -> Check:
    app = current_app
    try:
        with app.connection_for_write(connect_timeout=settings.READINESS_BROKER_TIMEOUT) as conn:
            transport = conn.transport_cls
            if transport == "filesystem":
                return _filesystem_broker_check(conn.transport_options or {})
            conn.ensure_connection(max_retries=0, timeout=settings.READINESS_BROKER_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        logger.warning("Readiness: broker unreachable: %s", exc)
        return Check(False, f"broker unreachable ({type(exc).__name__})")
    return Check(True, data={"transport": str(transport)})


def worker_check(*, now: datetime, database_ok: bool) -> Check:
    max_age = float(settings.WORKER_HEARTBEAT_MAX_AGE)
    if current_app.conf.task_always_eager:
        return Check(True, data={"eager": True})  # tasks run in the web process: no worker to wait for
    if not database_ok:
        return Check(False, "unknown: heartbeats are in the database, which is unreachable")
    try:
        beats = heartbeats_read(now=now, max_age_seconds=max_age)
    except Exception as exc:  # noqa: BLE001 - e.g. the table is missing (migrations not run)
        logger.warning("Readiness: worker heartbeats unreadable: %s", exc)
        return Check(False, f"worker heartbeats unreadable ({type(exc).__name__})")
    data: dict[str, Any] = {
        "alive": beats.alive,
        "heartbeat_age_seconds": round(beats.age_seconds, 1) if beats.age_seconds is not None else None,
        "max_age_seconds": max_age,
    }
    if beats.fresh():
        return Check(True, data=data)
    if beats.age_seconds is None:
        return Check(False, "no worker heartbeat recorded yet: is a Celery worker running?", data)
    return Check(
        False,
        f"no worker heartbeat in the last {max_age:g} s (the latest is {beats.age_seconds:.0f} s old): "
        "is a Celery worker running?",
        data,
    )


def readiness(*, now: datetime) -> Readiness:
    database = database_check()
    return Readiness(
        {
            "database": database,
            "broker": broker_check(),
            "worker": worker_check(now=now, database_ok=database.ok),
        }
    )
