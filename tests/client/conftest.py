from __future__ import annotations

import pytest

from compactor_client import Compactor
from tests.gateway.conftest import eager_celery, server_threads_close_their_connections, upstream  # noqa: F401 - shared fixtures


@pytest.fixture
def cx(live_server, api_key):
    with Compactor(live_server.url, api_key) as client:
        yield client


def conversation(turns: int) -> list[dict]:
    """user/assistant turns with a tool exchange, ~120 tokens each: enough to compact."""
    messages: list[dict] = []
    for i in range(turns):
        messages.append(
            {"role": "user", "content": f"Step {i}: refactor src/mod_{i}.py " + "keep the API stable " * 20}
        )
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Reading mod_{i}."},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"path": f"src/mod_{i}.py"}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "def f(): pass\n" * 10}],
            }
        )
        messages.append({"role": "assistant", "content": f"Refactored mod_{i}."})
    return messages
