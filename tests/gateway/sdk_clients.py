"""SDK clients the gateway's tests open against the live server, closed when each test ends
(tests/gateway/conftest.py): a live-server thread still holding a client's keep-alive connection
would close its database connection during a later test."""

from __future__ import annotations

from typing import Any

OPEN: list[Any] = []


def closing(client: Any) -> Any:
    """The client, closed at the end of the test."""
    OPEN.append(client)
    return client


def close_all() -> None:
    while OPEN:
        OPEN.pop().close()
