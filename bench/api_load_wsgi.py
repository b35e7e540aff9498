"""WSGI entry of bench/api_load.py's gunicorn: the project's application, profiled on request.

With API_LOAD_PROFILE_DIR set (`api_load.py --profile DIR`), each worker runs cProfile over
the requests (after each worker's first 50) whose path contains API_LOAD_PROFILE_PATH (default "/messages/": the append) and
writes its stats to DIR/worker-<pid>.prof every 25 profiled requests, so the file is there
whatever way the worker ends. The clock is the worker's CPU time (time.process_time): under load
the cores are the limit, and wall time would mostly show waiting for them and for PostgreSQL.
Without it, this is project.wsgi.application unchanged.
"""

from __future__ import annotations

import cProfile
import os
import time

from project.wsgi import application as project_application

PROFILE_DIR = os.environ.get("API_LOAD_PROFILE_DIR")
PROFILE_PATH = os.environ.get("API_LOAD_PROFILE_PATH", "/messages/")
DUMP_EVERY = 25
SKIP_FIRST = 50


def _profiled(app):
    profiler = cProfile.Profile(time.process_time)
    seen = 0

    def wrapped(environ, start_response):
        nonlocal seen
        if PROFILE_PATH not in environ.get("PATH_INFO", ""):
            return app(environ, start_response)
        seen += 1
        if seen <= SKIP_FIRST:  # warm-up: the tokenizer's load, first queries, caches
            return app(environ, start_response)
        profiler.enable()
        try:
            # The body is built inside: the response is a list (Django's HttpResponse), no
            # streaming work is left for after the profiler stops.
            return list(app(environ, start_response))
        finally:
            profiler.disable()
            if (seen - SKIP_FIRST) % DUMP_EVERY == 0:
                profiler.dump_stats(os.path.join(PROFILE_DIR, f"worker-{os.getpid()}.prof"))

    return wrapped


application = _profiled(project_application) if PROFILE_DIR else project_application
