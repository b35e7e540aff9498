"""What a web process does once, when it starts, instead of on its first request.

Loaded lazily, each of these cost the first request a worker served: the tokenizers' BPE ranks
(tiktoken's cl100k and the packaged o200k), the URL resolver, which imports every view module the
first time it resolves or reverses, and the pooled upstream client. Under gunicorn (a worker per
process, each with its first request) that was the slowest call of a conversation: ~280 ms on a
quiet machine, several times that on a loaded one. `project.wsgi` calls `warm_up` as the worker
imports the application, before it accepts a connection.
"""

from __future__ import annotations

import logging
import time

from django.urls import get_resolver, reverse

from compaction.core import tokens

from . import upstream

logger = logging.getLogger(__name__)


def warm_up() -> float:
    """Load what the first request would; the seconds it took."""
    started = time.perf_counter()
    for name in ("cl100k_base", "o200k_base"):
        tokens.get_tokenizer(name).count("warm up")
    get_resolver().resolve("/anthropic/v1/messages")  # populates the resolver: every URL module imported
    reverse("gateway-messages")
    upstream.client()
    seconds = time.perf_counter() - started
    logger.info("Web process warmed up in %.0f ms", seconds * 1000)
    return seconds
