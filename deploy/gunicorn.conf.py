"""gunicorn settings for every way Compactor serves HTTP: `make run`, `make serve`, the Procfile and
the systemd unit (`gunicorn -c deploy/gunicorn.conf.py project.wsgi:application`).

Threaded workers (gthread, read whole first: project/web_worker.py): a streaming gateway call (/anthropic/v1/messages with stream=true) or
a `wait` long-poll holds one thread, never a whole worker, so other requests keep being served.
Capacity = WEB_WORKERS × WEB_THREADS concurrent requests, streams included; COMPACTOR_MAX_WAITERS
(4) per process stays well below the threads, so waiters never take them all. The worker heartbeat
runs outside the request threads, so a long stream is not mistaken for a hang. keep-alive 5 s:
above gunicorn's 2 s default for proxies and agents that reuse connections, short enough that idle
ones do not pin threads.

Metrics: with several workers, each keeps its own counters, so /metrics uses prometheus_client's
multiprocess mode: PROMETHEUS_MULTIPROC_DIR (default <COMPACTOR_VAR_DIR>/prometheus, set here
before the workers import the app) holds every process's figures. Give the Celery worker the same
variable (scripts/serve.sh and scripts/run.sh do; systemd: /etc/compactor/env) and its compaction
metrics are served too.
"""

from __future__ import annotations

import os

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
# gthread, with each request read whole by the worker's event loop before a thread takes it, and
# gunicorn's own refusals as JSON (project/web_worker.py): a slow client holds no thread.
# WEB_READ_TIMEOUT (30 s from the first byte) and WEB_READ_IDLE_TIMEOUT (10 s between reads)
# bound a request's arrival; past them it is answered 408.
worker_class = "project.web_worker.BufferedThreadWorker"
workers = int(os.environ.get("WEB_WORKERS") or os.environ.get("WEB_CONCURRENCY") or "2")
threads = int(os.environ.get("WEB_THREADS", "32"))
keepalive = int(os.environ.get("WEB_KEEPALIVE", "5"))
# Seconds a worker may stay silent before it is restarted (heartbeat, not request length).
timeout = int(os.environ.get("WEB_TIMEOUT", "120"))
graceful_timeout = 30
# The request line (method, path and query): gunicorn's maximum (its default is 4,094, and a
# longer one is a 414, as JSON). Long searches and ranges fit; longer parameters go in a body.
limit_request_line = 8190
# X-Forwarded-* are trusted only from the proxy in front (Django reads the scheme from
# SECURE_PROXY_SSL_HEADER; this is gunicorn's own view of it).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-" if os.environ.get("WEB_ACCESS_LOG", "1") == "1" else None
reload = os.environ.get("WEB_RELOAD", "0") == "1"

# Memory bound. A web process past COMPACTOR_WEB_MAX_RSS_MB of resident memory (after the request
# that took it there) stops taking connections, finishes its requests (streams: up to
# graceful_timeout) and is replaced by a fresh one; and every process is replaced after
# WEB_MAX_REQUESTS requests (+ up to 10 % jitter, so they do not all restart at once), a backstop
# for slow growth (fragmentation). Each process's resident memory is in /metrics
# (compactor_web_process_resident_bytes). 0 turns either off.
# What held the memory (bench/faults_bench.py --only memory): glibc's malloc gives each of the 32
# threads that allocate at once an arena of its own (up to 8 per core) and keeps what is freed in
# each, so a process's resident memory stayed near the sum of every arena's high-water mark long
# after the requests were gone (32 threads parsing resent histories: 150 MB held for 19 MB of live
# data; 2 arenas: 81 MB, and 17 MB once the data was freed). The master sets M_ARENA_MAX before
# forking its workers (WEB_MALLOC_ARENA_MAX, 2; 0 leaves glibc's default; MALLOC_ARENA_MAX in the
# environment wins). Python allocates under the GIL: fewer arenas cost no measurable contention.
_ARENAS = int(os.environ.get("WEB_MALLOC_ARENA_MAX", "2"))
if _ARENAS and "MALLOC_ARENA_MAX" not in os.environ:
    try:
        import ctypes
        import ctypes.util

        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt(-8, _ARENAS)  # M_ARENA_MAX
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        pass

max_requests = int(os.environ.get("WEB_MAX_REQUESTS", "20000"))
max_requests_jitter = int(os.environ.get("WEB_MAX_REQUESTS_JITTER", str(max_requests // 10)))
MAX_RSS_BYTES = int(os.environ.get("COMPACTOR_WEB_MAX_RSS_MB", "600")) * 1024 * 1024

_metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.path.join(
    os.environ.get("COMPACTOR_VAR_DIR") or "var", "prometheus"
)
os.makedirs(_metrics_dir, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir


def child_exit(server, worker):
    """A web worker that exited: its live gauges stop counting (its counters stay in the sum)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_request(worker, req, environ, resp):
    """Past the memory bound: this process finishes what it has and is replaced (see MAX_RSS_BYTES)."""
    if not MAX_RSS_BYTES or not worker.alive:
        return
    from ops import metrics

    rss = metrics.resident_bytes()
    if rss is not None and rss > MAX_RSS_BYTES:
        worker.log.warning(
            "Web process %s holds %d MB (COMPACTOR_WEB_MAX_RSS_MB %d): replaced once its requests finish",
            worker.pid,
            rss // 2**20,
            MAX_RSS_BYTES // 2**20,
        )
        metrics.web_process_recycled()
        worker.alive = False
