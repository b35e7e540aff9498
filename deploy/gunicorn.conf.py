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

_metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.path.join(
    os.environ.get("COMPACTOR_VAR_DIR") or "var", "prometheus"
)
os.makedirs(_metrics_dir, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = _metrics_dir


def child_exit(server, worker):
    """A web worker that exited: its live gauges stop counting (its counters stay in the sum)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
