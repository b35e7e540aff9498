"""SDK clients the gateway's tests open against the live server.

Closed when each test ends (tests/gateway/conftest.py): a live-server thread still holding a
client's keep-alive connection would close its database connection during a later test.

Their calls return once the server has finished the request: a whole answer's reply and usage
are stored after its last byte went out (gateway.views.AnswerThenRecord), and a test reads the
database right after the call returns.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx2 as httpx
from django.core.signals import request_finished, request_started

OPEN: list[Any] = []
SETTLE_SECONDS = 30

_in_flight = 0
_changed = threading.Condition()


def _started(**_: Any) -> None:
    global _in_flight
    with _changed:
        _in_flight += 1


def _finished(**_: Any) -> None:
    global _in_flight
    with _changed:
        _in_flight = max(0, _in_flight - 1)
        _changed.notify_all()


request_started.connect(_started, dispatch_uid="tests.gateway.sdk_clients.started")
request_finished.connect(_finished, dispatch_uid="tests.gateway.sdk_clients.finished")


def server_settled() -> None:
    """Wait until no request is being handled (in this process: the live server's threads)."""
    with _changed:
        if not _changed.wait_for(lambda: _in_flight == 0, timeout=SETTLE_SECONDS):
            raise AssertionError(f"the server still handles {_in_flight} request(s) after {SETTLE_SECONDS} s")


class _SettledStream(httpx.SyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream) -> None:
        self._stream = stream

    def __iter__(self):
        yield from self._stream

    def close(self) -> None:
        self._stream.close()
        server_settled()


class _SettledTransport(httpx.HTTPTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.stream = _SettledStream(response.stream)
        return response


def settled_http_client() -> httpx.Client:
    """An httpx client (for an SDK's `http_client`) whose responses, once read and closed,
    wait for the server to finish the request."""
    return httpx.Client(transport=_SettledTransport(), timeout=60)


def closing(client: Any) -> Any:
    """The client, closed at the end of the test."""
    OPEN.append(client)
    return client


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()
