"""Django's Redis cache, made optional: while Redis is unreachable every read is a miss and every
write is dropped, so API-key authentication, throttling and login checks fall back to the
database (or let the request through) instead of answering 500.

The cache only ever holds what can be recomputed (a verified key for a few seconds, throttle
counters), so losing it costs speed, never correctness. After a failure the cache is skipped
for DOWN_SECONDS, so an outage does not add a connection attempt to every call; the failure is
logged at most once per LOG_EVERY_SECONDS per process (not per thread: see _health_of).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

DOWN_SECONDS = 2.0
LOG_EVERY_SECONDS = 60.0
# Redis answers in well under a millisecond; this bounds a hung server, not a busy one.
DEFAULT_OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 1.0}

T = TypeVar("T")


class _Health:
    """When the cache failed last, shared by the threads of a process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_until = 0.0
        self.logged_at = -LOG_EVERY_SECONDS

    def failed(self, operation: str, exc: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            self.down_until = now + DOWN_SECONDS
            if now - self.logged_at < LOG_EVERY_SECONDS:
                return
            self.logged_at = now
        logger.warning(
            "Cache unavailable (%s on %s): serving without it; repeats are not logged for %d s",
            type(exc).__name__,
            operation,
            LOG_EVERY_SECONDS,
        )

    def is_down(self) -> bool:
        return time.monotonic() < self.down_until


_HEALTH: dict[str, _Health] = {}
_HEALTH_LOCK = threading.Lock()


def _health_of(server: str) -> _Health:
    """One record per Redis server and process: Django builds a cache object per thread, and
    an outage is logged (and waited out) once for all of a process's threads."""
    with _HEALTH_LOCK:
        return _HEALTH.setdefault(server, _Health())


class ForgivingRedisCache(RedisCache):
    """RedisCache whose errors are misses (reads) and no-ops (writes)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        params = {**params, "OPTIONS": {**DEFAULT_OPTIONS, **params.get("OPTIONS", {})}}
        super().__init__(server, params)
        self.health = _health_of(str(server))

    def _guard(self, operation: str, call: Callable[[], T], fallback: T) -> T:
        if self.health.is_down():
            return fallback
        try:
            return call()
        except (RedisError, OSError) as exc:
            self.health.failed(operation, exc)
            return fallback

    def get(self, key, default=None, version=None):
        return self._guard("get", lambda: super(ForgivingRedisCache, self).get(key, default, version), default)

    def get_many(self, keys, version=None):
        return self._guard("get_many", lambda: super(ForgivingRedisCache, self).get_many(keys, version), {})

    def has_key(self, key, version=None):
        return self._guard("has_key", lambda: super(ForgivingRedisCache, self).has_key(key, version), False)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        # Not added: a caller using add() as a once-per-period gate skips its work this time.
        return self._guard("add", lambda: super(ForgivingRedisCache, self).add(key, value, timeout, version), False)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        self._guard("set", lambda: super(ForgivingRedisCache, self).set(key, value, timeout, version), None)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._guard("set_many", lambda: super(ForgivingRedisCache, self).set_many(data, timeout, version), [])

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._guard("touch", lambda: super(ForgivingRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key, version=None):
        return self._guard("delete", lambda: super(ForgivingRedisCache, self).delete(key, version), False)

    def delete_many(self, keys, version=None):
        self._guard("delete_many", lambda: super(ForgivingRedisCache, self).delete_many(keys, version), None)

    def incr(self, key, delta=1, version=None):
        # A counter that cannot be read is not there: ValueError, as for a missing key.
        value = self._guard("incr", lambda: super(ForgivingRedisCache, self).incr(key, delta, version), None)
        if value is None:
            raise ValueError(f"Key '{key}' not found (cache unavailable)")
        return value

    def clear(self):
        return self._guard("clear", lambda: super(ForgivingRedisCache, self).clear(), False)
