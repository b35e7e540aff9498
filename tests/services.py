"""Real external services for tests: skip when missing, fail when REQUIRE_SERVICES=1 (CI)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES", "").lower() in {"1", "true", "yes"}
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


def missing(reason: str) -> None:
    """Skip (or fail under REQUIRE_SERVICES=1) with a message that says what is missing."""
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_postgres() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        missing("this test needs PostgreSQL: set DATABASE_URL=postgres://root@127.0.0.1:5432/test")


def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        missing("this test needs Redis: set REDIS_URL=redis://127.0.0.1:6379/0")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        missing(f"Redis at {url} is not reachable: {exc}")
    return url


def require_chromium() -> str:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        missing(f"this test needs Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing("this test needs the playwright Python package")
    return CHROMIUM
