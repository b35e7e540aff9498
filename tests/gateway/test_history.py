"""gateway.history: fingerprints survive client re-serialization; merging keeps compaction's work."""

from __future__ import annotations

import copy

import pytest

from gateway.history import (
    chain_digests,
    first_user_text,
    merge_served,
    message_fingerprint,
    strip_transport,
    with_provenance,
)

TOOL_TURN = [
    {"role": "user", "content": "List the files"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "ls it", "signature": "sig1"},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\nb.py"}]},
]


def test_it_ignores_how_the_client_re_serializes_a_message():
    as_stored = {"role": "user", "content": "Hello"}
    resent = {"role": "user", "content": [{"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral"}}]}
    assert message_fingerprint(as_stored) == message_fingerprint(resent)
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Hi", "citations": None}]}
    resent_reply = {"role": "assistant", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "\n\n"}]}
    assert message_fingerprint(reply) == message_fingerprint(resent_reply)


def test_it_tells_different_messages_apart():
    assert message_fingerprint({"role": "user", "content": "a"}) != message_fingerprint(
        {"role": "user", "content": "b"}
    )
    assert message_fingerprint({"role": "user", "content": "a"}) != message_fingerprint(
        {"role": "assistant", "content": "a"}
    )
    other_call = copy.deepcopy(TOOL_TURN[1])
    other_call["content"][2]["id"] = "toolu_2"
    assert message_fingerprint(TOOL_TURN[1]) != message_fingerprint(other_call)


def test_cleared_tool_output_and_dropped_thinking_are_the_same_conversation_but_not_the_same_prompt():
    cleared = copy.deepcopy(TOOL_TURN)
    cleared[2]["content"][0]["content"] = "[Old tool result content cleared]"
    del cleared[1]["content"][0]
    assert chain_digests(cleared) == chain_digests(TOOL_TURN)
    assert message_fingerprint(cleared[2], deep=True) != message_fingerprint(TOOL_TURN[2], deep=True)


def test_a_reminder_attached_for_one_call_does_not_change_the_conversation():
    sent = {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nThe todo list is empty.\n</system-reminder>"},
            {"type": "text", "text": "Fix the parser"},
        ],
    }
    resent = {"role": "user", "content": "Fix the parser"}
    assert message_fingerprint(sent) == message_fingerprint(resent)
    assert message_fingerprint(sent, deep=True) != message_fingerprint(resent, deep=True)
    # A message that is only a reminder still counts as a message.
    only = {"role": "user", "content": "<system-reminder>x</system-reminder>"}
    assert chain_digests([resent, only]) != chain_digests([resent])


def test_digests_name_every_prefix_and_continue_a_chain():
    digests = chain_digests(TOOL_TURN)
    assert len(set(digests)) == 3
    assert chain_digests(TOOL_TURN[:2]) == digests[:2]
    assert chain_digests(TOOL_TURN[2:], start=digests[1]) == digests[2:]


def test_strip_transport_copies_and_removes_nested_cache_control():
    message = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}],
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    stripped = strip_transport(message)
    assert "cache_control" not in stripped["content"][0]
    assert "cache_control" not in stripped["content"][0]["content"][0]
    assert "cache_control" in message["content"][0]  # the client's copy is untouched


def test_merge_uses_the_clients_copies_for_the_unchanged_tail_only():
    marker = {"type": "ephemeral"}
    client = [
        {"role": "user", "content": [{"type": "text", "text": "old question", "cache_control": marker}]},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": [{"type": "text", "text": "new question", "cache_control": marker}]},
    ]
    served = [
        {"role": "user", "content": "<summary>old question</summary>"},
        {"role": "assistant", "content": [{"type": "text", "text": "old answer", "cache_control": marker}]},
        {"role": "user", "content": [{"type": "text", "text": "new question"}]},
    ]
    merged = merge_served(served, client)
    assert merged[0] == served[0]
    assert merged[1] is client[1]  # same message: the client's own copy
    assert merged[2] is client[2]  # with its cache_control breakpoint


def test_merge_keeps_a_pruned_tool_result_as_served():
    client = copy.deepcopy(TOOL_TURN) + [{"role": "assistant", "content": "Two files."}]
    served = copy.deepcopy(client)
    served[2]["content"][0]["content"] = "[pruned: 2 lines]"
    merged = merge_served(served, client)
    assert merged[2]["content"][0]["content"] == "[pruned: 2 lines]"
    assert merged[3] is client[3]


def test_title_skips_injected_reminders():
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nAs you answer...\n</system-reminder>"},
                {"type": "text", "text": "Fix   the failing\ntest in parser.py"},
            ],
        }
    ]
    assert first_user_text(messages) == "Fix the failing test in parser.py"
    assert first_user_text([{"role": "user", "content": "x" * 200}]).endswith("…")
    assert len(first_user_text([{"role": "user", "content": "x" * 200}])) == 80


def test_title_skips_codexs_environment_context_message():
    """Codex sends its environment first, in a user message of its own: sessions were titled
    '<environment_context> <cwd>…'."""
    context = "<environment_context>\n  <cwd>/home/me/app</cwd>\n  <shell>bash</shell>\n</environment_context>"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": context}]},
        {"role": "user", "content": [{"type": "text", "text": "Write the step files"}]},
    ]
    assert first_user_text(messages) == "Write the step files"
    assert first_user_text(messages[:1]).startswith("<environment_context>")  # nothing else to go by


def test_title_skips_a_command_caveat_and_a_skill_body():
    command = "<command-name>/create-beads</command-name>\n<command-args>for the linter setup</command-args>"
    caveat = "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands.</local-command-caveat>"
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": caveat},
                {"type": "text", "text": command},
                {"type": "text", "text": "Create beads with a structured preview."},
            ],
        }
    ]
    assert first_user_text(messages) == "/create-beads for the linter setup"


SKILL = "Create beads with a structured preview.\n\n> Prefer local/cached results."
COMMAND = "<command-message>create-beads</command-message>\n<command-name>/create-beads</command-name>"
REMINDER = "<system-reminder>\nThe file src/app.py was modified.\n</system-reminder>"

MARKED = [
    # (client's message, what the gateway stores)
    (
        {"role": "user", "content": "Fix the parser"},
        {"role": "user", "content": "Fix the parser", "provenance": "person"},
    ),
    (
        {"role": "user", "content": [{"type": "text", "text": COMMAND}, {"type": "text", "text": SKILL}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": COMMAND}, {"type": "text", "text": SKILL, "provenance": "harness"}],
            "provenance": "person",
        },
    ),
    (
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": REMINDER, "cache_control": {"type": "ephemeral"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {"type": "text", "text": REMINDER, "cache_control": {"type": "ephemeral"}},
            ],
            "provenance": "harness",
        },
    ),
    ({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}, None),
    ({"role": "assistant", "content": [{"type": "text", "text": SKILL}]}, None),
    ({"role": "user", "content": SKILL, "provenance": "harness"}, None),
    ({"role": "user", "content": 42}, None),
    ("not a message", None),
]


@pytest.mark.parametrize(("message", "stored"), MARKED, ids=range(len(MARKED)))
def test_the_gateway_marks_whose_words_a_user_message_carries(message, stored):
    before = copy.deepcopy(message)
    marked = with_provenance(message)
    if stored is None:
        assert marked is message
    else:
        assert marked == stored
    assert message == before  # the client's copy is not changed
    # The conversation is still recognised as the same one.
    if isinstance(message, dict):
        assert message_fingerprint(marked, deep=True) == message_fingerprint(message, deep=True)
