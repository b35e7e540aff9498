"""The official anthropic SDK with Claude Code's metadata.user_id on a live server: the
conversation is one session, its side calls are recorded beside it."""

from __future__ import annotations

import uuid

import anthropic
import pytest

from sessions.models import Session
from tests.gateway.sdk_clients import closing, settled_http_client
from tests.gateway.test_side_calls import MAIN_SYSTEM, SMALL_MODEL, TOOLS, user_id

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"


def test_the_anthropic_sdk_with_claude_codes_metadata_keeps_one_session(live_server, api_key, upstream):
    client = closing(
        anthropic.Anthropic(
            base_url=f"{live_server.url}/anthropic",
            api_key=api_key,
            max_retries=0,
            http_client=settled_http_client(),
        )
    )
    meta = {"user_id": user_id(str(uuid.uuid4()))}
    history: list[dict] = []
    for turn in range(3):
        history.append({"role": "user", "content": f"Step {turn} of the refactor."})
        reply = client.messages.create(
            model=MODEL, max_tokens=256, system=MAIN_SYSTEM, tools=TOOLS, metadata=meta, messages=history
        )
        history.append({"role": "assistant", "content": reply.content})
        title = client.messages.create(
            model=SMALL_MODEL,
            max_tokens=64,
            system="Write a 3-word title for this conversation.",
            metadata=meta,
            messages=[{"role": "user", "content": f"Step {turn} of the refactor."}],
        )
        assert title.content[0].type == "text"
    session = Session.objects.get()
    assert session.message_count == 6 and session.side_call_count == 3
