"""Provenance through the REST API: stated per message and per text block, validated, stored,
returned with the message, carried to the engine, and left out of what is served."""

from __future__ import annotations

import pytest

from compaction.core.provenance import user_words
from sessions import services
from sessions.models import Message

from .helpers import snapshot, tool_result, tool_use, url

pytestmark = pytest.mark.django_db

REMINDER = "<system-reminder>\nThe file src/app.py was modified.\n</system-reminder>"
SKILL = "Create beads with a structured preview.\n\n> Prefer local/cached results."


def test_provenance_is_stored_and_returned_per_message_and_block(api, session):
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Rename the module."},
                {"type": "text", "text": REMINDER, "provenance": "harness"},
            ],
            "provenance": "person",
        },
        {"role": "assistant", "content": "Renamed."},
        {"role": "user", "content": SKILL, "provenance": "harness"},
        {"role": "assistant", "content": "Following the skill."},
        {"role": "user", "content": "thanks", "provenance": ""},
    ]
    response = api.post(url(session, "messages/"), {"messages": messages}, format="json")
    assert response.status_code == 201, response.json()
    answered = response.json()["messages"]
    assert [m["provenance"] for m in answered] == ["person", "", "harness", "", ""]
    assert answered[0]["content"][1] == {"type": "text", "text": REMINDER, "provenance": "harness"}
    rows = Message.objects.filter(session=session).order_by("seq")
    assert [m.provenance for m in rows] == ["person", "", "harness", "", ""]
    listed = api.get(url(session, "messages/")).json()["results"]
    assert [m["provenance"] for m in listed] == ["person", "", "harness", "", ""]
    assert listed[0]["content"] == messages[0]["content"]


def test_the_served_context_leaves_block_provenance_out(api, session):
    content = [
        {"type": "text", "text": "Rename the module."},
        {"type": "text", "text": REMINDER, "provenance": "harness", "cache_control": {"type": "ephemeral"}},
    ]
    api.post(url(session, "messages/"), {"role": "user", "content": content, "provenance": "person"}, format="json")
    served = api.get(url(session, "context/")).json()["messages"]
    assert served == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Rename the module."},
                {"type": "text", "text": REMINDER, "cache_control": {"type": "ephemeral"}},
            ],
        }
    ]
    # Stored as sent: only what is served leaves the field out.
    assert Message.objects.get(session=session).content == content


def test_the_engine_reads_what_was_stated(api, session):
    api.post(
        url(session, "messages/"),
        {
            "messages": [
                {"role": "user", "content": "Set up the linters.", "provenance": "person"},
                tool_use("toolu_1", text="Reading the skill."),
                {
                    "role": "user",
                    "content": [
                        *tool_result("toolu_1")["content"],
                        {"type": "text", "text": SKILL, "provenance": "harness"},
                    ],
                },
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": SKILL, "provenance": "harness"},
            ]
        },
        format="json",
    )
    stored = services.context_messages(session)
    assert [m.provenance for m in stored] == ["person", "", "", "", "harness"]
    # Only the person's words are the user's: the skill, stated as the harness's, is not.
    assert [w for m in stored for w in user_words(m)] == [("Set up the linters.", "")]
    served = services.context_messages(session, served=True)
    assert all("provenance" not in b for m in served if isinstance(m.content, list) for b in m.content)


BAD = [
    ({"role": "user", "content": "hi", "provenance": "user"}, "provenance"),
    ({"role": "user", "content": "hi", "provenance": None}, "provenance"),
    ({"role": "user", "content": "hi", "provenance": ["person"]}, "provenance"),
    ({"role": "user", "content": [{"type": "text", "text": "hi", "provenance": "agent"}]}, "content[0].provenance"),
    (
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x", "provenance": "person"}],
        },
        "content[0].provenance",
    ),
    (
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "text", "text": "x", "provenance": "harness"}],
                }
            ],
        },
        "content[0].content[0].provenance",
    ),
]


@pytest.mark.parametrize(("body", "field"), BAD, ids=[f for _b, f in BAD])
def test_it_rejects_a_bad_provenance_naming_the_field(api, session, body, field):
    api.post(url(session, "messages/"), {"role": "user", "content": "keep me"}, format="json")
    before = snapshot(session)
    response = api.post(url(session, "messages/"), {"messages": [body]}, format="json")
    assert response.status_code == 400
    error = response.json()
    assert error["error"].startswith(f"messages[0].{field}: "), error
    assert snapshot(session) == before


def test_a_single_message_names_its_provenance_field(api, session):
    response = api.post(
        url(session, "messages/"), {"role": "user", "content": "hi", "provenance": "bot"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == (
        "provenance: must be 'person' (typed by the user) or 'harness' (injected by the agent harness), or ''"
    )
