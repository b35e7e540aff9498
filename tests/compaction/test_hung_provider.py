"""Issue #9 D3: a hung provider gets the extractive fallback before the job's soft time limit.

The Celery soft limit used to fire inside the SDK's retry loop (which treats any exception
from the transport as a connection error and retries), so the fallback never ran and the job
was killed at its hard limit with no summary. Now one deadline bounds the whole LLM attempt,
retries included, and leaves room for the extractive summarizer before the soft limit.
"""

from __future__ import annotations

import pytest

from compaction import services
from compaction.models import Status
from compaction.services import planning
from tests.fake_anthropic import FakeAnthropic, Step

from .factories import append, conversation, make_session
from .test_concurrency import run_in_thread

pytestmark = pytest.mark.django_db(transaction=True)

SOFT_LIMIT = 6  # seconds: small, so the test is bounded


@pytest.fixture
def hung_provider(settings):
    # A worker imports the SDK once per process; a cold import takes seconds on a loaded box and
    # is not what this test measures.
    import anthropic  # noqa: F401

    with FakeAnthropic(default=Step.hang()) as server:
        settings.ANTHROPIC_API_KEY = "sk-ant-fake-hung"
        settings.ANTHROPIC_BASE_URL = server.base_url
        # Defaults that used to add up past the soft limit: 4 attempts × 120 s.
        settings.ANTHROPIC_TIMEOUT = 120.0
        settings.ANTHROPIC_MAX_RETRIES = 3
        settings.COMPACTION_SOFT_TIME_LIMIT = SOFT_LIMIT
        yield server


def test_a_hung_provider_hands_over_to_the_extractive_summarizer_before_the_soft_limit(user, hung_provider):
    session = make_session(user)
    append(session, conversation(8))
    job = services.compaction_request(session=session, reason="manual", instructions="keep the module names")

    thread, box = run_in_thread(lambda: services.compaction_run(compaction_id=job.pk))
    thread.join(SOFT_LIMIT)
    assert not thread.is_alive(), f"no summary within the job's soft time limit of {SOFT_LIMIT} s"
    assert "error" not in box, box.get("error")

    job.refresh_from_db()
    assert job.status == Status.SUCCEEDED, job.error
    assert job.strategy == "extractive"
    assert job.summary.strip() and "## Goal" in job.summary
    (llm, *_rest) = job.fallbacks
    assert llm["strategy"] == "anthropic"
    assert "LLM time budget" in llm["reason"], llm["reason"]
    assert len(hung_provider.requests) >= 1  # the provider was tried first
    session.refresh_from_db()
    assert session.active_compaction_id == job.pk


def test_the_llm_budget_follows_the_soft_limit_setting(user, hung_provider, settings, monkeypatch):
    budgets = []
    real = planning.build_summarizer_chain

    def spy(**kwargs):
        budgets.append(kwargs["timeout"])
        return real(**kwargs)

    monkeypatch.setattr(planning, "build_summarizer_chain", spy)
    settings.ANTHROPIC_TIMEOUT = 2.0  # below the soft limit's share: the configured value wins
    session = make_session(user)
    append(session, conversation(8))
    job = services.compaction_request(session=session, reason="manual")
    done = services.compaction_run(compaction_id=job.pk)
    assert done.status == Status.SUCCEEDED and done.strategy == "extractive"
    assert budgets == [2.0]
    assert "LLM time budget of 2 s" in done.fallbacks[0]["reason"]
