"""GET /api/v1/sessions/{id}/context/breakdown/: the meter's figure explained, part by part."""

from __future__ import annotations

import pytest

from compaction import services as engine
from sessions import services

from .helpers import tool_result, tool_use, url

pytestmark = pytest.mark.django_db

USED = ("system", "fixed", "summary", "messages")


def append(api, session, *messages):
    response = api.post(url(session, "messages/"), {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def breakdown(api, session) -> dict:
    response = api.get(url(session, "context/breakdown/"))
    assert response.status_code == 200, response.json()
    return response.json()


def parts(body: dict) -> dict[str, dict]:
    return {s["key"]: s for s in body["segments"]}


def assert_adds_up(body: dict, session) -> None:
    session.refresh_from_db()
    usage = services.session_usage(session)
    segments = parts(body)
    assert list(segments) == [*USED, "free", "reserve"]
    assert body["tokens"] == usage.tokens == sum(segments[k]["tokens"] for k in USED)
    assert sum(s["tokens"] for s in body["segments"]) == max(usage.context_window, usage.tokens)
    assert body["tokens_left_before_compact"] == usage.trigger_tokens - usage.tokens
    assert all(s["tokens"] >= 0 for s in body["segments"])


def test_before_any_report_the_parts_are_compactors_own_counts(api, session):
    services.session_update(session=session, system_prompt="You are a careful engineer. " * 20)
    append(api, session, {"role": "user", "content": "Fix the parser"}, tool_use("t1"), tool_result("t1", "a.py"))
    body = breakdown(api, session)
    assert_adds_up(body, session)
    segments = parts(body)
    assert segments["system"]["tokens"] == session.system_prompt_tokens > 0
    assert segments["fixed"]["tokens"] == 0 and not segments["fixed"]["inferred"]
    assert "Not known until the agent reports" in segments["fixed"]["note"]
    assert segments["messages"]["tokens"] == session.context_tokens - session.system_prompt_tokens
    assert body["last_report"] is None and body["calibrated_estimate_tokens"] is None
    assert body["scale"] == 1.0 and body["pruned"] is None and body["warning"] == ""


def test_after_a_report_the_fixed_part_is_what_only_the_provider_counted(api, session):
    append(api, session, {"role": "user", "content": "Fix the parser"}, tool_use("t1"), tool_result("t1", "a.py"))
    session.refresh_from_db()
    seen = services.session_usage(session).estimated_tokens
    report = {"input_tokens": 900, "cache_read_input_tokens": 30_000, "cache_creation_input_tokens": 100}
    assert api.post(url(session, "usage/"), report, format="json").status_code == 200
    body = breakdown(api, session)
    assert_adds_up(body, session)
    segments = parts(body)
    # One report: ratio 1, so the provider's extra over Compactor's count is the fixed part.
    assert segments["fixed"]["tokens"] == 31_000 - seen and segments["fixed"]["inferred"]
    assert "Inferred from 1 provider report" in segments["fixed"]["note"]
    last = body["last_report"]
    assert last["prompt_tokens"] == 31_000 and last["cache_read_input_tokens"] == 30_000
    assert last["current"] and last["calibrated"] and last["reported_at"]
    assert body["calibrated_estimate_tokens"] == body["tokens"] == 31_000
    assert body["source"] == "provider+estimate" and body["calibration_reports"] == 1

    # A reply after the report counts on top of it, in the kept messages.
    added = append(api, session, tool_use("t2", text="Next"), tool_result("t2", "b.py"))
    after = breakdown(api, session)
    assert_adds_up(after, session)
    assert parts(after)["fixed"]["tokens"] == segments["fixed"]["tokens"]
    assert parts(after)["messages"]["tokens"] == segments["messages"]["tokens"] + sum(
        m["token_count"] for m in added["messages"]
    )


def test_after_a_compaction_the_summary_shows_and_the_old_report_is_not_current(api, session):
    for i in range(30):
        append(
            api,
            session,
            {"role": "user", "content": f"Step {i}: " + "look at the parser " * 40},
            tool_use(f"t{i}", command=f"cat f{i}.py"),
            tool_result(f"t{i}", "x = 1\n" * 200),
        )
    assert api.post(url(session, "usage/"), {"input_tokens": 80_000}, format="json").status_code == 200
    job = engine.compaction_request(
        session=session, reason="manual", strategy="extractive", overrides={"keep_recent_tokens": 3_000}
    )
    engine.compaction_run(compaction_id=job.pk)
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk
    body = breakdown(api, session)
    assert_adds_up(body, session)
    segments = parts(body)
    assert segments["summary"]["tokens"] > 0 and "extractive" in segments["summary"]["note"]
    assert segments["messages"]["note"].startswith(f"#{session.active_compaction.first_kept_seq:,}–#90")
    assert body["last_report"]["current"] is False and body["source"] == "estimate+calibration"
    # After the report was dropped the meter is fixed + ratio × estimate: the fixed part is the calibration's.
    assert segments["fixed"]["tokens"] == services.session_usage(session).calibration.fixed


def test_a_plausibility_flag_on_the_last_report_becomes_the_warning(api, session):
    """A report far below what was served (cache figures dropped) is flagged by the meter; the
    breakdown carries its reason as the warning, and a later honest report clears it."""
    append(api, session, {"role": "user", "content": "Fix the parser " * 400})
    served = services.session_usage(session).estimated_tokens
    report = api.post(url(session, "usage/"), {"input_tokens": served // 10}, format="json")
    assert report.status_code == 200
    flag = report.json()["usage"]["implausible"]
    assert flag and flag["code"] == "below_served"
    assert breakdown(api, session)["warning"] == flag["reason"]
    honest = api.post(url(session, "usage/"), {"input_tokens": served + 3_000}, format="json")
    assert honest.json()["usage"]["implausible"] is None
    assert breakdown(api, session)["warning"] == ""


def test_another_owners_session_is_a_404(api, other_session):
    response = api.get(url(other_session, "context/breakdown/"))
    assert response.status_code == 404


def test_the_endpoint_is_in_the_schema(client):
    schema = client.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/sessions/{session_id}/context/breakdown/"]["get"]
    assert operation["operationId"] == "context_breakdown_retrieve"
    out = schema["components"]["schemas"]["ContextBreakdownOut"]["properties"]
    assert {"segments", "tokens", "tokens_left_before_compact", "last_report", "pruned", "warning"} <= set(out)
