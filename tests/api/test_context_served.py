"""The served context is exactly what the straightforward construction gives (prune_content and a
full recount of every changed message), whatever the fast path caches or derives."""

from __future__ import annotations

import json

import pytest

from compaction.core.orphans import ORPHAN_RESULT_HEADER, results_as_text
from compaction.core.prune import prune_content, tool_names
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content, count_text, get_tokenizer
from compaction.core.types import Msg
from sessions import services
from sessions.models import Message

from .helpers import tool_result, tool_use, url
from .test_context import BIG_OUTPUT, activate, append

pytestmark = pytest.mark.django_db

OTHER_OUTPUT = "\n".join(f"row {i}: SELECT * FROM items WHERE id = {i}; -- {i * 7}" for i in range(250))


def parallel(ids: list[str], names: list[str]) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": "Checking both"}]
        + [
            {"type": "tool_use", "id": i, "name": n, "input": {"path": f"{i}.py"}}
            for i, n in zip(ids, names, strict=True)
        ],
    }


def reference(session) -> tuple[list[dict], int, int]:
    """(messages, estimated tokens, pruned savings) built the slow, obvious way."""
    tokenizer = get_tokenizer()
    active = session.active_compaction
    rows = list(
        Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content", "token_count")
    )
    names = tool_names(Msg(*row) for row in rows)  # every use in the history (some are before the cut)
    served: list[dict] = []
    tokens = session.system_prompt_tokens
    saved = 0
    if active.summary:
        text = render_summary_message(active.summary, active.turn_prefix_summary)
        served.append({"role": "user", "content": text})
        tokens += count_content(text, tokenizer)
    used: set[str] = set()
    for seq, role, content, stored in rows:
        if seq < active.first_kept_seq:
            continue
        out = content
        if seq < active.prune_before_seq and role == "user" and isinstance(content, list):
            out = prune_content(content, tool_names=names, tokenizer=tokenizer, seq=seq)
        if role == "assistant" and isinstance(content, list):
            used.update(b["id"] for b in content if b.get("type") == "tool_use")
        results = {b["tool_use_id"] for b in out if b.get("type") == "tool_result"} if isinstance(out, list) else set()
        orphaned = results - used
        if orphaned:  # its tool_use is in the summary: served as text
            out = results_as_text(out, orphaned)
        count = count_content(out, tokenizer) if out != content else stored
        saved += stored - count
        tokens += count
        served.append({"role": role, "content": out})
    return served, tokens, saved


def test_pruned_and_summarized_context_is_byte_identical_to_the_reference(api, session):
    services.session_update(session=session, system_prompt="Be terse.")
    append(
        api,
        session,
        {"role": "user", "content": "Audit the sources"},
        tool_use("t0", "Read"),  # before the cut: its name comes from the tool-call index
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t0", "content": OTHER_OUTPUT},  # after the cut
                {"type": "text", "text": "and the queries"},
            ],
        },
        tool_use("t1", "Read", text="Reading"),
        tool_result("t1", BIG_OUTPUT),
        parallel(["t2", "t3"], ["Read", "Grep"]),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": BIG_OUTPUT},
                {"type": "tool_result", "tool_use_id": "t3", "content": [{"type": "text", "text": OTHER_OUTPUT}]},
                {"type": "text", "text": "Also look at the migrations."},
            ],
        },
        parallel(["t4", "t5", "t6"], ["skill", "Bash", "Read"]),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t4", "content": BIG_OUTPUT},  # protected tool
                {"type": "tool_result", "tool_use_id": "t5", "content": OTHER_OUTPUT, "is_error": True},
                {"type": "tool_result", "tool_use_id": "t6", "content": "tiny"},
            ],
        },
        tool_use("t7", "Read"),
        tool_result("t7", BIG_OUTPUT),  # at the boundary: served as stored
    )
    activate(
        session,
        summary="## Goal\nAudit the sources.\n\n<read-files>\na.py\n</read-files>",
        turn_prefix_summary="Started reading the queries.",
        first_kept_seq=3,
        prune_before_seq=11,
    )
    session.refresh_from_db()
    messages, tokens, saved = reference(session)
    services.context.PRUNE_OUTPUTS.data.clear()  # a cold process first, then a warm one
    cold = api.get(url(session, "context/"))
    warm = api.get(url(session, "context/"))
    assert cold.status_code == warm.status_code == 200
    assert cold.content == warm.content
    body = cold.json()
    assert json.dumps(body["messages"]) == json.dumps(messages)  # same blocks, same key order
    pruned = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert (
        sum(isinstance(b.get("content"), str) and "output trimmed: " in b["content"] for b in pruned)
        == 4  # t1, t2, t3 and the large error t5
    )
    # t0's tool_use is before the cut: its (pruned) result is served as text, not as an orphan.
    header = ORPHAN_RESULT_HEADER.format(tool_use_id="t0", error="")
    assert any(
        b.get("type") == "text" and b["text"].startswith(header) and "output trimmed: " in b["text"] for b in pruned
    )
    assert body["estimated_tokens"] == tokens == session.context_tokens
    assert body["breakdown"]["pruned_tool_results_saved"] == saved > 0
    assert body["breakdown"]["system"] == count_text("Be terse.")
    summary = render_summary_message(session.active_compaction.summary, "Started reading the queries.")
    assert body["breakdown"]["summary"] == count_content(summary)
    served = services.context_messages(session, served=True)
    assert [{"role": m.role, "content": m.content} for m in served] == messages[1:]
