"""gunicorn settings for `make run` and production: `gunicorn -c project/gunicorn.conf.py project.wsgi`.

Threaded workers (gthread): a streaming gateway call (/anthropic/v1/messages with stream=true)
holds one thread for as long as the model writes, never a whole worker, so other requests keep
being served. Capacity = WEB_WORKERS × WEB_THREADS concurrent requests, streams included; the
worker heartbeat runs outside the request threads, so a long stream is not mistaken for a hang.
"""

from __future__ import annotations

import os

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
worker_class = "gthread"
workers = int(os.environ.get("WEB_WORKERS", "2"))
threads = int(os.environ.get("WEB_THREADS", "32"))
# Seconds a worker may stay silent before it is restarted (heartbeat, not request length).
timeout = int(os.environ.get("WEB_TIMEOUT", "120"))
graceful_timeout = 30
keepalive = 5
accesslog = "-" if os.environ.get("WEB_ACCESS_LOG", "1") == "1" else None
reload = os.environ.get("WEB_RELOAD", "0") == "1"
