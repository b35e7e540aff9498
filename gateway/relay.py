"""Relaying an upstream answer so that a broken one never looks whole.

Shared by every wire format the gateway speaks: the caller says how its API ends a stream
properly (`complete`) and how it spells an error event (`error_event`); this module decides
when the upstream failed and makes sure the client is told before the connection closes.

- A stream is forwarded event by event (gateway.sse frames it): when the upstream
  resets, stalls past the read timeout (COMPACTOR_UPSTREAM_TIMEOUT) or just stops before its
  last event, the half-sent event is dropped and an error event goes out instead, so an SDK
  raises rather than returning the fragment as the final message.
- A whole (non-streamed) body that breaks after the headers is an `UpstreamFault` with the
  status a proxy would answer (504 for a timeout, 502 otherwise).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx2 as httpx

from .sse import Event, EventFramer

logger = logging.getLogger(__name__)


@dataclass
class UpstreamFault(Exception):
    """The upstream failed after its headers: what to tell the client, in any API's words."""

    status: int  # for a whole answer: 504 (timeout) or 502
    error_type: str  # the Messages API's names: "overloaded_error" (stalled), "api_error"
    message: str

    def __str__(self) -> str:
        return self.message


def fault_of(exc: httpx.HTTPError, timeout: float) -> UpstreamFault:
    """The client-facing description of a transport failure (never the URL: it may hold credentials)."""
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamFault(
            504, "overloaded_error", f"upstream sent nothing for {timeout:g} s (COMPACTOR_UPSTREAM_TIMEOUT); retry"
        )
    return UpstreamFault(502, "api_error", f"upstream connection broke mid-answer ({type(exc).__name__}); retry")


def read_whole(response: httpx.Response, *, timeout: float) -> bytes:
    """The whole body, or raises UpstreamFault if it broke or stalled after the headers."""
    try:
        return response.read()
    except httpx.HTTPError as exc:
        logger.warning("Gateway: upstream body broke after the headers (%s)", type(exc).__name__)
        raise fault_of(exc, timeout) from None
    finally:
        response.close()


def relay_events(
    response: httpx.Response,
    *,
    on_event: Callable[[Event], bool],
    complete: Callable[[], bool],
    error_event: Callable[[UpstreamFault], bytes],
    timeout: float,
    label: str = "",
    on_fault: Callable[[UpstreamFault], None] | None = None,
) -> Iterator[bytes]:
    """Yield the upstream's events as they complete (framed by gateway.sse); end with
    `error_event` if it did not finish.

    `on_event` sees each whole event and says whether it goes to the client (False: the
    gateway's own, e.g. a usage chunk it asked for); `complete()` says, at the end, whether the
    stream ended as its API ends a finished (or upstream-reported failed) answer; `on_fault`
    hears of a stream that did not (metrics).
    """
    framer = EventFramer()
    fault: UpstreamFault | None = None
    try:
        for chunk in response.iter_raw():
            ready = b"".join(event.raw for event in framer.feed(chunk) if on_event(event))
            if ready:
                yield ready
    except httpx.HTTPError as exc:
        fault = fault_of(exc, timeout)
        logger.warning("Gateway: upstream stream %s broke: %s", label, type(exc).__name__)
    finally:
        response.close()
    last = framer.finish() if fault is None else None  # a last event without its blank line: EOF ends it
    if last is not None:
        keep = on_event(last)
        if complete():
            if keep:
                yield last.raw
            return
    if fault is None and not complete():
        fault = UpstreamFault(502, "api_error", "upstream stream ended before the answer was complete; retry")
        logger.warning("Gateway: upstream stream %s ended early", label)
    if fault is not None:
        if on_fault is not None:
            on_fault(fault)
        yield error_event(fault)
