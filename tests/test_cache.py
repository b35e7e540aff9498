"""project.cache.ForgivingRedisCache with nothing listening: misses and no-ops, one warning."""

from __future__ import annotations

import logging
import socket

import pytest

from project import cache as forgiving


def _dead_redis_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"  # closed again: connections are refused


@pytest.fixture
def dead_cache():
    return forgiving.ForgivingRedisCache(_dead_redis_url(), {})


def test_reads_are_misses_and_writes_are_dropped(dead_cache):
    assert dead_cache.get("k") is None
    assert dead_cache.get("k", "fallback") == "fallback"
    assert dead_cache.get_many(["a", "b"]) == {}
    assert dead_cache.has_key("k") is False
    assert dead_cache.add("gate", 1) is False  # a once-per-period gate skips its work
    dead_cache.set("k", 1)
    dead_cache.set_many({"a": 1})
    assert dead_cache.delete("k") is False
    with pytest.raises(ValueError):
        dead_cache.incr("counter")  # as for a missing key


def test_an_outage_is_logged_once_and_not_retried_on_every_call(dead_cache, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="project.cache")
    attempts = []
    original = forgiving.RedisCache.get

    def counting(self, *args, **kwargs):
        attempts.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(forgiving.RedisCache, "get", counting)
    for _ in range(50):
        assert dead_cache.get("k") is None
    assert len(attempts) == 1  # then skipped for DOWN_SECONDS
    monkeypatch.setattr(dead_cache.health, "down_until", 0.0)  # the down window passed
    assert dead_cache.get("k") is None
    assert len(attempts) == 2
    assert len([r for r in caplog.records if r.name == "project.cache"]) == 1  # once a minute


def test_the_threads_of_a_process_share_one_outage_record():
    url = _dead_redis_url()
    first, second = forgiving.ForgivingRedisCache(url, {}), forgiving.ForgivingRedisCache(url, {})
    assert first.health is second.health
    first.get("k")
    assert second.health.is_down()  # the second thread's cache does not try again at once
