from __future__ import annotations

import pytest

from compaction.core.prune import trimmed
from compaction.core.summary_message import render_summary_message
from compaction.core.tokens import count_content, count_text
from compaction.models import Compaction
from sessions import services
from sessions.models import Message
from sessions.selectors import context_build

from .helpers import tool_result, tool_use, url

pytestmark = pytest.mark.django_db

BIG_OUTPUT = "\n".join(f"line {i}: def function_{i}(x): return x * {i}  # padding padding" for i in range(400))


def activate(session, **fields) -> Compaction:
    compaction = Compaction.objects.create(session=session, reason="manual", status="succeeded", **fields)
    session.active_compaction = compaction
    session.save(update_fields=["active_compaction"])
    services.session_recompute_usage(session=session)
    return compaction


def append(api, session, *messages):
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_context_without_compaction_serves_everything(api, session):
    services.session_update(session=session, system_prompt="Be terse.")
    append(api, session, {"role": "user", "content": "ls"}, tool_use("t1"), tool_result("t1", "a.py"))
    body = api.get(url(session, "context/")).json()
    assert body["system"] == "Be terse."
    assert body["messages"] == [
        {"role": "user", "content": "ls"},
        tool_use("t1"),
        tool_result("t1", "a.py"),
    ]
    assert body["seqs"] == [1, 2, 3]
    assert body["active_compaction"] is None
    stored = sum(Message.objects.filter(session=session).values_list("token_count", flat=True))
    assert body["estimated_tokens"] == count_text("Be terse.") + stored
    assert body["tokens"] == body["usage"]["tokens"] == body["estimated_tokens"]
    assert body["breakdown"] == {
        "system": count_text("Be terse."),
        "summary": 0,
        "messages": stored,
        "pruned_tool_results_saved": 0,
    }
    assert body["context_window"] == 200_000
    assert body["usage_ratio"] == round(body["tokens"] / 200_000, 4)
    assert body["trigger_tokens"] == 200_000 - 16_384
    assert body["usage"]["tokenizer"] == "cl100k_base"
    assert body["usage"]["exact"] is True


def test_context_serves_the_active_summary_then_the_kept_messages(api, session):
    append(api, session, *[{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(8)])
    compaction = activate(
        session,
        summary="## Goal\nFix the parser.",
        turn_prefix_summary="",
        first_kept_seq=5,
        summary_tokens=20,
    )
    body = api.get(url(session, "context/")).json()
    summary = render_summary_message("## Goal\nFix the parser.", "")
    assert body["messages"][0] == {"role": "user", "content": summary}
    assert [m["content"] for m in body["messages"][1:]] == ["m4", "m5", "m6", "m7"]
    assert body["seqs"] == [None, 5, 6, 7, 8]
    assert body["active_compaction"]["id"] == str(compaction.pk)
    assert body["active_compaction"]["first_kept_seq"] == 5
    kept = sum(Message.objects.filter(session=session, seq__gte=5).values_list("token_count", flat=True))
    assert body["breakdown"]["summary"] == count_content(summary)
    assert body["estimated_tokens"] == count_content(summary) + kept
    session.refresh_from_db()
    assert session.context_tokens == body["estimated_tokens"]
    # Full history is intact.
    assert Message.objects.filter(session=session).count() == 8


def test_appends_after_a_compaction_keep_the_cached_usage_exact(api, session):
    append(api, session, *[{"role": "user", "content": f"m{i}"} for i in range(6)])
    activate(session, summary="Summary", first_kept_seq=4)
    append(api, session, tool_use("t9", text="Checking"), tool_result("t9", "done"))
    append(api, session, {"role": "user", "content": "next"})
    session.refresh_from_db()
    body = api.get(url(session, "context/")).json()
    assert session.context_tokens == body["estimated_tokens"] == body["usage"]["estimated_tokens"]


def test_prune_overlay_serves_placeholders_and_keeps_stored_messages(api, session):
    append(
        api,
        session,
        {"role": "user", "content": "Read the sources"},
        tool_use("t1", "Read", text="Reading"),
        tool_result("t1", BIG_OUTPUT),
        tool_use("t2", "Bash"),
        tool_result("t2", BIG_OUTPUT, is_error=True),
        tool_use("t3", "skill"),
        tool_result("t3", BIG_OUTPUT),
        tool_use("t4", "Grep"),
        tool_result("t4", "short"),
        tool_use("t5", "Read"),
        tool_result("t5", BIG_OUTPUT),
    )
    session.refresh_from_db()
    before = session.context_tokens
    activate(session, prune_before_seq=10)
    body = api.get(url(session, "context/")).json()
    served = body["messages"]
    output_tokens = count_text(BIG_OUTPUT)
    # Served trimmed: its first and last lines around a note saying what was cut and where it is.
    assert served[2]["content"][0]["content"] == trimmed(BIG_OUTPUT, "Read", output_tokens, 3)
    assert served[2]["content"][0]["content"].startswith("line 0: def function_0(x)")
    assert served[2]["content"][0]["content"].endswith(
        "line 399: def function_399(x): return x * 399  # padding padding"
    )
    assert "[… Read output trimmed: " in served[2]["content"][0]["content"]
    assert served[2]["content"][0]["tool_use_id"] == "t1"
    assert served[4]["content"][0]["content"] == trimmed(BIG_OUTPUT, "Bash", output_tokens, 5)  # a large error too
    assert served[6]["content"][0]["content"] == BIG_OUTPUT  # a protected tool's output is kept
    assert served[8]["content"][0]["content"] == "short"  # too small to be worth pruning
    assert served[10]["content"][0]["content"] == BIG_OUTPUT  # at/after the boundary
    # Stored messages are untouched.
    assert Message.objects.get(session=session, seq=3).content[0]["content"] == BIG_OUTPUT
    assert api.get(url(session, "messages/")).json()["results"][2]["content"][0]["content"] == BIG_OUTPUT
    saved = body["breakdown"]["pruned_tool_results_saved"]
    assert saved > output_tokens - 40
    session.refresh_from_db()
    assert session.context_tokens == before - saved == body["estimated_tokens"]


def test_recompute_resets_the_stale_provider_figure_but_keeps_its_calibration(api, session):
    append(api, session, *[{"role": "user", "content": f"m{i}"} for i in range(4)])
    api.post(url(session, "usage/"), {"input_tokens": 5000}, format="json")
    session.refresh_from_db()
    assert session.reported_input_tokens == 5000
    offset = 5000 - session.context_tokens  # the provider saw everything stored
    assert session.calibration_offset == offset
    activate(session, summary="Summary", first_kept_seq=3)
    session.refresh_from_db()
    assert session.reported_input_tokens is None and session.reported_at_seq is None
    usage = api.get(url(session, "context/")).json()["usage"]
    assert usage["source"] == "estimate+calibration"
    assert usage["calibration_offset"] == offset
    assert usage["tokens"] == usage["estimated_tokens"] + offset


def test_context_messages_for_the_engine(api, session):
    append(api, session, {"role": "user", "content": "a"}, tool_use("t1"), tool_result("t1", BIG_OUTPUT))
    activate(session, prune_before_seq=4)
    stored = services.context_messages(session)
    served = services.context_messages(session, served=True)
    assert [m.seq for m in stored] == [m.seq for m in served] == [1, 2, 3]
    assert stored[2].content[0]["content"] == BIG_OUTPUT
    assert "[… Bash output trimmed: " in served[2].content[0]["content"]
    assert served[2].tokens < stored[2].tokens


def test_the_context_answer_is_the_documented_shape_in_every_state(api, session):
    """The view answers context_build's dict as it is: it must be what ContextOutSerializer
    (the OpenAPI schema) makes of it, field for field, whatever the session's state."""
    from sessions.api.serializers import ContextOutSerializer

    def check() -> None:
        session.refresh_from_db()
        answered = api.get(url(session, "context/")).json()
        assert answered == ContextOutSerializer(context_build(session=session).as_dict()).data
        assert set(answered["usage"]) == set(ContextOutSerializer().fields["usage"].fields)

    services.session_update(session=session, system_prompt="Be terse.")
    check()
    append(api, session, {"role": "user", "content": "ls"}, tool_use("t1"), tool_result("t1", BIG_OUTPUT))
    append(api, session, {"role": "assistant", "content": [{"type": "text", "text": "  "}]})  # served without it
    check()
    assert api.post(url(session, "usage/"), {"input_tokens": 5_000}, format="json").status_code == 200
    check()
    assert api.post(url(session, "usage/"), {"input_tokens": 3}, format="json").status_code == 200  # implausible
    check()
    activate(session, summary="Listed the files.", summary_tokens=12, first_kept_seq=3, prune_before_seq=4)
    check()
    assert api.get(url(session, "context/")).json()["active_compaction"]["first_kept_seq"] == 3
