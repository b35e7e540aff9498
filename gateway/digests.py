"""Chain digests of a resent history without digesting again the prefix the last call digested.

An agent resends its whole history on every call: all of the previous call's messages, then the
reply and the new message. Digesting each message (its fingerprint as canonical JSON, then a
hash) costs milliseconds at a few thousand messages; comparing the parsed messages with the
previous call's is a fraction of that. So each process keeps the last few histories it digested
(keyed by the key's owner and the first message's digest): a request that starts with one of them
only digests its new messages, continuing the chain from the last known digest.

The digests are the same as gateway.history.chain_digests gives: equal messages have equal
fingerprints, and the comparison is of the whole parsed prefix, not a sample. (Python's equality
takes 1 and 1.0 for the same, as JSON numbers are; a client re-spelling an id that way between
two calls keeps the digest of its first spelling.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .history import chain_digests

# Histories kept per process: the conversations being driven right now. Each holds references
# to a parsed request (no copy); the message budget bounds the memory to that of a few long
# requests (some tens of MB), however many conversations there are.
MAX_HISTORIES = 16
MAX_MESSAGES = 20_000

_known: OrderedDict[tuple[Any, str], tuple[list[Any], list[str]]] = OrderedDict()
_kept = 0  # messages held by _known
_lock = threading.Lock()


def request_digests(owner: Any, messages: list[Any]) -> list[str]:
    """chain_digests(messages), reusing the digests of the longest known history it starts with."""
    if not messages:
        return []
    key = (owner, chain_digests(messages[:1])[0])
    with _lock:
        known = _known.get(key)
    digests = None
    if known is not None:
        prefix, prefix_digests = known
        n = len(prefix)
        if n <= len(messages) and messages[:n] == prefix:
            digests = prefix_digests + chain_digests(messages[n:], start=prefix_digests[-1])
    if digests is None:
        digests = chain_digests(messages)
    _remember(key, list(messages), digests)
    return digests


def _remember(key: tuple[Any, str], messages: list[Any], digests: list[str]) -> None:
    global _kept
    if len(messages) > MAX_MESSAGES:
        return
    with _lock:
        previous = _known.pop(key, None)
        _kept -= len(previous[0]) if previous else 0
        _known[key] = (messages, digests)
        _kept += len(messages)
        while len(_known) > MAX_HISTORIES or _kept > MAX_MESSAGES:
            _, (dropped, _) = _known.popitem(last=False)
            _kept -= len(dropped)
