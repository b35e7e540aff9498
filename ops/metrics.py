"""The Prometheus metrics every process records: web requests, compactions, the gateway's upstream.

Pure instrumentation (prometheus_client only, no Django): the compaction services, the gateway
and the web middleware record here; `ops.scrape` adds the figures read from the database at
scrape time and `ops.views.metrics` serves them.

Under gunicorn and Celery's prefork pool every process keeps its own values. With
PROMETHEUS_MULTIPROC_DIR set (scripts/serve.sh, scripts/run.sh and deploy/gunicorn.conf.py set
it), prometheus_client writes them to files in that directory and a scrape sums them over every
process, the Celery workers' included; the variable must be set before this module is imported
(prometheus_client picks its storage then). Unset: one process's values, for tests and
single-process servers.

Labels take bounded values only (views, strategies, outcomes, status codes, error classes),
never a session id or anything a client chooses: each label value is a new series to store.
"""

from __future__ import annotations

import os

_multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _multiproc_dir:
    # prometheus_client opens its files in there as soon as a series is created.
    os.makedirs(_multiproc_dir, exist_ok=True)

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402 - after the directory exists

MULTIPROCESS = bool(_multiproc_dir)

# --- web requests (ops.middleware) -------------------------------------------------------------

HTTP_REQUESTS = Counter(
    "compactor_http_requests",
    "HTTP requests answered, by view (URL name), method and status code.",
    ["view", "method", "status"],
)
HTTP_DURATION = Histogram(
    "compactor_http_request_duration_seconds",
    "Time to the response headers (a stream's body is not included), by view, method and status class.",
    ["view", "method", "status_class"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

# Each web process's resident memory, as it last measured it (ops.middleware, at most once a
# second while it answers requests): one series per live process (the `pid` label prometheus_client
# adds in multiprocess mode; a process that exited drops out), and the largest one. gunicorn restarts a
# process past COMPACTOR_WEB_MAX_RSS_MB (deploy/gunicorn.conf.py).
WEB_PROCESS_MEMORY = Gauge(
    "compactor_web_process_resident_bytes",
    "Resident memory (RSS) of each web process, measured as it answers requests.",
    multiprocess_mode="liveall",
)
WEB_PROCESS_MEMORY_MAX = Gauge(
    "compactor_web_process_resident_max_bytes",
    "The largest resident memory (RSS) among the live web processes.",
    multiprocess_mode="livemax",
)
WEB_PROCESS_RECYCLED = Counter(
    "compactor_web_process_recycled",
    "Web processes restarted by gunicorn once past COMPACTOR_WEB_MAX_RSS_MB (their requests finished first).",
)

# --- compactions (compaction.services) ---------------------------------------------------------

COMPACTIONS = Counter(
    "compactor_compactions",
    "Compactions finished, by the strategy that produced the result (the requested one when none did), "
    "outcome (succeeded, skipped, failed) and reason (manual, threshold, overflow, import).",
    ["strategy", "outcome", "reason"],
)
COMPACTION_DURATION = Histogram(
    "compactor_compaction_duration_seconds",
    "Run time of a compaction (snapshot, summary, activation), by strategy and outcome.",
    ["strategy", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
TOKENS_BEFORE = Counter(
    "compactor_compaction_tokens_before",
    "Context tokens before each successful compaction, summed, by strategy.",
    ["strategy"],
)
TOKENS_AFTER = Counter(
    "compactor_compaction_tokens_after",
    "Context tokens after each successful compaction, summed, by strategy.",
    ["strategy"],
)
TOKENS_SAVED = Counter(
    "compactor_compaction_tokens_saved",
    "Context tokens saved by successful compactions (before − after, 0 when a compaction grew the context).",
    ["strategy"],
)
COMPACTIONS_GREW = Counter(
    "compactor_compactions_grew",
    "Successful compactions whose context was larger after than before, by strategy.",
    ["strategy"],
)
FALLBACKS = Counter(
    "compactor_compaction_fallbacks",
    "Summarizers that gave no summary, so the chain went on to the next one, by the summarizer that fell back.",
    ["strategy"],
)

# --- the gateway's upstream (gateway.upstream) -------------------------------------------------

UPSTREAM_DURATION = Histogram(
    "compactor_gateway_upstream_duration_seconds",
    "Time from sending a gateway call upstream to its response headers, by endpoint.",
    ["endpoint"],
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)
UPSTREAM_RESPONSES = Counter(
    "compactor_gateway_upstream_responses",
    "Responses of the upstream Messages API, by endpoint and status code.",
    ["endpoint", "status"],
)
UPSTREAM_ERRORS = Counter(
    "compactor_gateway_upstream_errors",
    "Gateway calls upstream that failed without a complete answer, by endpoint and error "
    "(the transport error's class, stream_interrupted, or http_5xx / http_429 for refusals).",
    ["endpoint", "error"],
)


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else "other"


def request_observe(*, view: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(view, method, str(status)).inc()
    HTTP_DURATION.labels(view, method, status_class(status)).observe(seconds)


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int | None:
    """This process's resident memory (RSS), from /proc (Linux); None where there is none."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def web_memory_observe(resident_bytes: int) -> None:
    WEB_PROCESS_MEMORY.set(resident_bytes)
    WEB_PROCESS_MEMORY_MAX.set(resident_bytes)


def web_process_recycled() -> None:
    WEB_PROCESS_RECYCLED.inc()


def compaction_observe(
    *,
    strategy: str,
    outcome: str,
    reason: str,
    seconds: float | None,
    tokens_before: int | None,
    tokens_after: int | None,
    fallbacks: tuple[str, ...] = (),
) -> None:
    """One finished compaction; labels already bounded by the caller (compaction.services.common)."""
    COMPACTIONS.labels(strategy, outcome, reason).inc()
    if seconds is not None:
        COMPACTION_DURATION.labels(strategy, outcome).observe(seconds)
    if outcome == "succeeded" and tokens_before is not None and tokens_after is not None:
        TOKENS_BEFORE.labels(strategy).inc(tokens_before)
        TOKENS_AFTER.labels(strategy).inc(tokens_after)
        TOKENS_SAVED.labels(strategy).inc(max(0, tokens_before - tokens_after))
        if tokens_after > tokens_before:
            COMPACTIONS_GREW.labels(strategy).inc()
    for fallback in fallbacks:
        FALLBACKS.labels(fallback).inc()


def upstream_observe(*, endpoint: str, seconds: float, status: int | None = None, error: str | None = None) -> None:
    """One call upstream: its response status, or the transport error that prevented one."""
    UPSTREAM_DURATION.labels(endpoint).observe(seconds)
    if status is not None:
        UPSTREAM_RESPONSES.labels(endpoint, str(status)).inc()
        if status >= 500 or status == 429:
            UPSTREAM_ERRORS.labels(endpoint, "http_5xx" if status >= 500 else "http_429").inc()
    if error is not None:
        UPSTREAM_ERRORS.labels(endpoint, error).inc()


def upstream_stream_interrupted(*, endpoint: str) -> None:
    UPSTREAM_ERRORS.labels(endpoint, "stream_interrupted").inc()
