"""The kept part served lean through the context API: what a compaction decided is what every
later call gets, byte for byte, and nothing stored changes.

(compaction.core.kept's rules one by one: tests/core/test_kept.py.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from compaction import services as compaction_services
from compaction.models import Status
from sessions import services
from sessions.models import Message

from .helpers import url

pytestmark = pytest.mark.django_db

HOOK = "\n".join(
    ["Running pre-commit hook: mix dialyzer", "Finding suitable PLTs"]
    + [f"lib/render.ex:{40 + i}:no_return Function render/{i} has no local return." for i in range(40)]
    + ["Halting VM with exit status 2"]
)
FILE = "\n".join(f"{n:>6}\tdef render_{n}(x), do: x + {n}" for n in range(1, 219))
LISTING = "\n".join(f"node_modules/pkg{i}/lib/index.js" for i in range(100))


def call(tool_id: str, name: str, inp: dict[str, Any], output: str, *, is_error: bool = False) -> list[dict]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": output}
    if is_error:
        result["is_error"] = True
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": inp}]},
        {"role": "user", "content": [result]},
    ]


def work() -> list[dict]:
    """The history: early chat (summarized), then a kept part that repeats itself."""
    early = []
    for n in range(3):
        early += [
            {"role": "user", "content": f"Question {n}: " + "how does the parser treat nested input? " * 40},
            {"role": "assistant", "content": f"Answer {n}: " + "it recurses once per level of nesting. " * 40},
        ]
    kept = [{"role": "user", "content": "Fix render/1 and commit it."}]
    kept += call("t1", "Read", {"file_path": "lib/render.ex"}, FILE)
    kept += call("t2", "Bash", {"command": "find . -name '*.js'"}, LISTING)
    kept += call("t3", "Edit", {"file_path": "lib/render.ex", "old_string": "x + 1", "new_string": "x"}, "Updated.")
    for n in range(4):
        kept += call(f"t{4 + n}", "Bash", {"command": f"git commit -m 'render: fix {n}'"}, HOOK, is_error=True)
    kept += call("t8", "Bash", {"command": "git status --short"}, " M lib/render.ex")
    kept.append({"role": "assistant", "content": "The hook rejects every commit; the PLT needs rebuilding."})
    return early + kept


def append(api, session, messages: list[dict]) -> None:
    response = api.post(url(session, "messages/"), {"messages": messages}, format="json")
    assert response.status_code == 201, response.json()


def compact(session) -> Any:
    """A manual compaction keeping everything from the request "Fix render/1" on."""
    first = Message.objects.get(session=session, content="Fix render/1 and commit it.").seq
    keep = sum(Message.objects.filter(session=session, seq__gte=first).values_list("token_count", flat=True))
    job = compaction_services.compaction_request(
        session=session, reason="manual", strategy="extractive", overrides={"keep_recent_tokens": keep}
    )
    job = compaction_services.compaction_run(compaction_id=job.pk)
    assert job.status == Status.SUCCEEDED, job.error or job.detail
    assert job.first_kept_seq == first
    return job


def served_by_seq(body: dict) -> dict[int, dict]:
    return {seq: m for seq, m in zip(body["seqs"], body["messages"], strict=True) if seq is not None}


def output(message: dict) -> str:
    return message["content"][0]["content"]


def test_the_context_serves_the_kept_part_lean(api, session):
    append(api, session, work())
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content"))
    job = compact(session)
    body = api.get(url(session, "context/")).json()
    served = served_by_seq(body)
    first = job.first_kept_seq
    read, listing, hooks = first + 2, first + 4, [first + 8, first + 10, first + 12, first + 14]
    assert "out of date" in output(served[read]) and f"message #{read} holds this read whole" in output(served[read])
    assert f"message #{listing} holds them all" in output(served[listing])
    # The first hook failure is served whole (a short error), the others point to it.
    assert output(served[hooks[0]]) == HOOK
    for seq in hooks[1:]:
        assert output(served[seq]).startswith(f"[same Bash output as in message #{hooks[0]}")
        assert served[seq]["content"][0]["is_error"] is True  # every other key as stored
    # Tool calls and the newest turn as stored; nothing stored changed.
    rows = {seq: (role, content) for seq, role, content in stored}
    for seq, message in served.items():
        if message["role"] == "assistant":
            assert message["content"] == rows[seq][1]
    assert output(served[first + 16]) == " M lib/render.ex"
    assert list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content")) == stored
    # The figures count what is served.
    saved = body["breakdown"]["pruned_tool_results_saved"]
    assert saved > 3_000
    assert body["breakdown"]["messages"] == sum(t for seq, t in _stored_tokens(session).items() if seq >= first) - saved


def _stored_tokens(session) -> dict[int, int]:
    return dict(Message.objects.filter(session=session).values_list("seq", "token_count"))


def test_the_served_prefix_stays_byte_identical_until_the_next_compaction(api, session):
    """Prompt caching: what the compaction trimmed is frozen with it. Messages appended later —
    a read of a kept file, the same hook failure again — are served verbatim and change no
    earlier message, so every call sends the previous call's prompt as its prefix."""
    append(api, session, work())
    compact(session)
    before = api.get(url(session, "context/")).json()["messages"]
    later = [{"role": "user", "content": "Try once more."}]
    later += call("t20", "Read", {"file_path": "lib/render.ex"}, FILE)  # would make the kept read a copy
    later += call("t21", "Bash", {"command": "git commit -m again"}, HOOK, is_error=True)  # a fifth copy
    later += call("t22", "Bash", {"command": "find . -name '*.js'"}, LISTING)
    append(api, session, later)
    response = api.post(url(session, "usage/"), {"input_tokens": 9_000, "output_tokens": 10}, format="json")
    assert response.status_code in (200, 201), response.json()
    after = api.get(url(session, "context/")).json()["messages"]
    assert json.dumps(after[: len(before)]) == json.dumps(before)
    assert after[len(before) :] == later  # appended after the compaction: verbatim
    again = api.get(url(session, "context/")).json()["messages"]
    assert json.dumps(again) == json.dumps(after)


def test_undoing_the_compaction_serves_every_message_as_stored(api, session):
    append(api, session, work())
    job = compact(session)
    assert job.kept_plan
    compaction_services.compaction_revert(compaction=job)
    body = api.get(url(session, "context/")).json()
    assert body["messages"] == work()
    assert body["breakdown"]["pruned_tool_results_saved"] == 0


def test_the_breakdown_says_what_the_kept_part_trims(api, session):
    append(api, session, work())
    compact(session)
    body = api.get(url(session, "context/breakdown/")).json()
    pruned = body["pruned"]
    assert pruned["prune_before_seq"] is None
    assert pruned["kept_trimmed"] == {"same": 3, "superseded": 1, "long": 1}
    assert pruned["tool_results_pruned"] == 5 and pruned["saved_estimated_tokens"] > 3_000
    messages = next(s for s in body["segments"] if s["key"] == "messages")
    assert "3 repeated outputs served as a pointer to the copy kept" in messages["note"]
    session.refresh_from_db()
    assert services.session_usage(session).tokens == body["tokens"]


def test_search_says_which_hits_are_served_trimmed_and_reads_them_back_whole(api, session):
    append(api, session, work())
    job = compact(session)
    hooks = [job.first_kept_seq + n for n in (8, 10, 12, 14)]
    hits = api.get(url(session, "search/"), {"q": "Halting", "limit": 20}).json()["hits"]
    status = {hit["seq"]: hit["status"] for hit in hits}
    assert status == {hooks[0]: "verbatim", **dict.fromkeys(hooks[1:], "pruned")}
    # The pointer's message number reads the whole output back.
    page = api.get(url(session, "messages/"), {"from_seq": hooks[1], "to_seq": hooks[1]}).json()
    read = next(m for m in page["results"] if m["seq"] == hooks[1])
    assert read["content"][0]["content"] == HOOK
