"""The meter against real clients: replaying the shared Claude Code sessions through
the API with their recorded usage, honestly and as a client that drops the cache figures.

- Honest: the meter read before each call (the previous append's `usage.tokens`) predicts that
  call's reported prompt within 2 % median and 5 % p90; no report is flagged.
- Cache-dropping (forwards `input_tokens` only): every such report is stored but flagged
  `below_served`, the meter never shows less than 90 % of what is served, so the list's "Over
  trigger" filter, the preview and auto-compaction still work.
- One scale: a compaction's "after" is above 0 and equals the meter right after it (replaying
  258c7280 without --trigger, then Compact now, must not report "77,410 → 0 tokens").
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from django.urls import reverse

from compaction import importing
from compaction import services as engine
from compaction.core.calibration import BELOW_SERVED
from compaction.core.transcripts.claude_code import read_claude_code
from sessions import services
from sessions.dashboard import queries
from sessions.dashboard.chart import context_series
from sessions.models import Message, UsageSample
from tests.api.helpers import url
from tests.corpus import TRANSCRIPTS, corpus

pytestmark = [corpus, pytest.mark.django_db, pytest.mark.slow]

CLAUDE_CODE = sorted((TRANSCRIPTS / "claude-code").glob("*.jsonl"))
SESSION_258 = TRANSCRIPTS / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def recorded(path: Path) -> tuple[str, list[dict]]:
    """(model, messages as an agent sends them, up to the agent's own first compaction: after it
    the recorded usage describes Claude Code's compacted context, not what Compactor serves)."""
    transcript = read_claude_code(path)
    messages = engine.transcript_messages_for_api(transcript.messages)
    if transcript.compactions:
        messages = messages[: transcript.compactions[0]["before_message_index"]]
    return transcript.model or "", messages


def append(api, session, message: dict) -> dict:
    response = api.post(
        url(session, "messages/"), {"role": message["role"], "content": message["content"]}, format="json"
    )
    assert response.status_code == 201, response.json()
    return response.json()


def report(api, session, usage: dict, seq: int, *, drop_cache: bool = False) -> dict:
    body = {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "message_seq": seq,
    }
    if not drop_cache:
        body["cache_read_input_tokens"] = int(usage.get("cache_read_input_tokens") or 0)
        body["cache_creation_input_tokens"] = int(usage.get("cache_creation_input_tokens") or 0)
    response = api.post(url(session, "usage/"), body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["usage"]


def test_the_meter_before_each_call_predicts_its_reported_prompt(api, user):
    errors: list[float] = []
    flagged: list[str] = []
    for path in CLAUDE_CODE:
        model, messages = recorded(path)
        session = services.session_create(owner=user, title=path.stem, model=model)
        meter = None
        first = True
        for message in messages:
            reported = engine.reported_prompt_tokens(message.get("usage")) if message["role"] == "assistant" else None
            out = append(api, session, message)
            if reported is None:
                meter = out["usage"]["tokens"]
                continue
            # Each session's first report has nothing to be predicted from (no calibration yet).
            if not first:
                errors.append(abs(meter - reported) / reported)
            first = False
            usage = report(api, session, message["usage"], out["messages"][-1]["seq"])
            if usage["implausible"] is not None:
                flagged.append(f"{path.stem}: {usage['implausible']['reason']}")
            meter = usage["tokens"]
    errors.sort()
    median, p90 = statistics.median(errors), errors[int(0.9 * len(errors))]
    print(f"\n{len(errors)} reports of {len(CLAUDE_CODE)} sessions: median {median:.2%}, p90 {p90:.2%}")
    assert len(errors) > 250
    assert median < 0.02 and p90 < 0.05, (median, p90)
    assert flagged == []


def test_a_cache_dropping_client_never_drives_the_meter_below_what_is_served(api, user, client):
    model, messages = recorded(SESSION_258)
    session = services.session_create(
        owner=user,
        title="cache dropper",
        model=model,
        context_window=200_000,
        compaction_settings={"auto_compact": False, "auto_compact_token_limit": 60_000},
    )
    reports = []
    for message in messages[:180]:
        out = append(api, session, message)
        usage = out["usage"]
        assert usage["tokens"] >= 0.9 * usage["estimated_tokens"], usage
        if message["role"] == "assistant" and message.get("usage"):
            usage = report(api, session, message["usage"], out["messages"][-1]["seq"], drop_cache=True)
            assert usage["tokens"] >= 0.9 * usage["estimated_tokens"], usage
            reports.append(usage)
    assert len(reports) > 50
    # Every report is stored, flagged with a machine-readable code and a reason.
    assert all(r["implausible"] and r["implausible"]["code"] == BELOW_SERVED for r in reports)
    assert "cache_read_input_tokens" in reports[-1]["implausible"]["reason"]
    session.refresh_from_db()
    assert session.last_usage["implausible"]["code"] == BELOW_SERVED and session.last_usage["calibrated"] is False
    stored = Message.objects.get(session=session, seq=session.last_usage["message_seq"]).provider_usage
    assert stored["implausible"]["code"] == BELOW_SERVED
    assert UsageSample.objects.filter(session=session, kind="report", flagged=True).count() == len(reports)
    assert session.calibration.get("pairs") == []  # nothing calibrated on them

    meter = services.session_usage(session).as_dict()
    assert meter["tokens"] > 60_000 and meter["tokens"] >= 0.9 * meter["estimated_tokens"]
    assert session.usage_level == "over"

    client.force_login(user)
    body = client.get(reverse("dashboard:session-list"), {"status": "over"}).content.decode()
    assert "cache dropper" in body

    preview = api.post(url(session, "compactions/"), {"dry_run": True}, format="json").json()
    assert preview["would_compact"] and preview["tokens_before"] == meter["tokens"]
    assert 0 < preview["estimated_tokens_after"] < preview["tokens_before"]

    # Auto-compaction fires on the next append once it is on, and lands where the meter says.
    api.patch(url(session), {"compaction_settings": {"auto_compact": True}}, format="json")
    out = append(api, session, messages[180])
    assert out["compaction"] is not None, out["usage"]
    job = engine.compaction_run(compaction_id=out["compaction"]["id"])
    assert job.status == "succeeded", (job.error, job.detail)
    session.refresh_from_db()
    after = services.session_usage(session).as_dict()
    assert job.tokens_after == after["tokens"] == session.usage_tokens > 0
    assert after["tokens"] >= 0.9 * after["estimated_tokens"]


def test_a_compaction_after_a_replay_without_trigger_lands_where_the_meter_says(user, api):
    """README: replay 258c7280 without --trigger, then Compact now: was "77,410 → 0 tokens" with
    the gauge at 0 while 24,301 tokens were served (the reports after Claude Code's own compaction
    describe its compacted context; they pulled the calibration to a negative offset)."""
    result = importing.transcript_import(owner=user, path=SESSION_258, replay=True, window=200_000, subagents=False)
    session = result.session
    # Claude Code's reports after its own compaction are far below what Compactor serves: flagged.
    flagged = UsageSample.objects.filter(session=session, kind="report", flagged=True)
    assert flagged.exists()
    # The provider's real peak is in the history: where Claude Code compacted (166,759 reported).
    reports = UsageSample.objects.filter(session=session, kind="report", flagged=False)
    assert max(reports.values_list("reported_tokens", flat=True)) == 166_759
    # ... and on the chart (which drew 79,517 from message sizes alone).
    points, _drops = context_series(
        messages=queries.message_token_series(session=session),
        compactions=queries.effective_compactions(
            session=session, compactions=queries.compaction_history(session=session)
        ),
        base_tokens=session.system_prompt_tokens,
        reports=queries.usage_history(session=session, compactions=[]).reports,
    )
    assert max(t for _s, t in points) >= 166_759

    response = api.post(url(session, "compactions/"), {"strategy": "extractive"}, format="json")
    assert response.status_code in (200, 201, 202), response.json()
    job = engine.compaction_run(compaction_id=response.json()["id"])
    session.refresh_from_db()
    usage = services.session_usage(session).as_dict()
    assert job.status == "succeeded", (job.error, job.detail)
    assert job.tokens_after > 0
    assert job.tokens_after == usage["tokens"] == session.usage_tokens
    assert usage["tokens"] >= 0.9 * usage["estimated_tokens"]
    samples = list(UsageSample.objects.filter(session=session, compaction=job).order_by("id"))
    assert [s.tokens for s in samples] == [job.tokens_before, job.tokens_after]
