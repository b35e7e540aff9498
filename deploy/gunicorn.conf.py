"""gunicorn settings for Compactor (used by `make serve`, the Procfile and the systemd unit).

gthread workers: a `wait` long-poll holds a thread, not a process, and COMPACTOR_MAX_WAITERS
(4) per process stays below `threads` (8), so waiters never take every thread. keep-alive 5 s:
above gunicorn's 2 s default for proxies and agents that reuse connections, short enough that
idle ones do not pin threads. The timeout covers the longest request (overflow recovery's 30 s
budget, `wait` at most 30 s) with room.
"""

import os

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("GUNICORN_THREADS", "8"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "5"))
timeout = 120
graceful_timeout = 30
# X-Forwarded-* are trusted only from the proxy in front (Django reads the scheme from
# SECURE_PROXY_SSL_HEADER; this is gunicorn's own view of it).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = "-"
