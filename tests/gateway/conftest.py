from __future__ import annotations

import pytest

from project.celery import app as celery_app
from tests.gateway.sdk_clients import close_all, reset_settled
from tests.gateway.upstream import FakeUpstream

UPSTREAM_KEY = "upstream-secret"


@pytest.fixture
def upstream(settings):
    """The fake Messages API, wired in as the gateway's upstream (with the server's own key)."""
    fake = FakeUpstream().start()
    settings.GATEWAY_UPSTREAM_URL = fake.url
    settings.GATEWAY_UPSTREAM_API_KEY = UPSTREAM_KEY
    # Summaries use the offline summarizer: no test reaches a real LLM.
    settings.ANTHROPIC_API_KEY = None
    settings.ANTHROPIC_BASE_URL = None
    yield fake
    fake.stop()


@pytest.fixture
def eager_celery():
    """Compaction jobs run in-process when their transaction commits (the worker's stand-in)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield celery_app
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def small_window(settings):
    """Sessions of models the registry does not know get an 8k window and compact from 3k tokens."""
    settings.COMPACTOR = {
        **settings.COMPACTOR,
        "DEFAULT_CONTEXT_WINDOW": 8000,
        "AUTO_COMPACT_TOKEN_LIMIT": 3000,
        "KEEP_RECENT_TOKENS": 1200,
    }


@pytest.fixture(autouse=True)
def server_threads_close_their_connections():
    """Live-server request threads close their database connection when the request ends
    (CONN_MAX_AGE=0), so PostgreSQL's test database can be dropped at teardown."""
    from django.db import connections

    settings_dict = connections["default"].settings_dict  # shared with connections made in other threads
    previous = settings_dict.get("CONN_MAX_AGE")
    settings_dict["CONN_MAX_AGE"] = 0
    yield
    settings_dict["CONN_MAX_AGE"] = previous


@pytest.fixture
def openai_upstream(settings):
    """The OpenAI stand-in, wired in as the gateway's OpenAI upstream (with the server's own key)."""
    from tests.gateway.openai_upstream import KEY, FakeOpenAI

    fake = FakeOpenAI().start()
    settings.OPENAI_GATEWAY_UPSTREAM_URL = fake.url
    settings.OPENAI_GATEWAY_UPSTREAM_API_KEY = KEY
    settings.ANTHROPIC_API_KEY = None
    settings.ANTHROPIC_BASE_URL = None
    yield fake
    fake.stop()


@pytest.fixture(autouse=True)
def sdk_clients_closed():
    """SDK clients opened with tests.gateway.sdk_clients.closing are closed when the test ends;
    the count of the live server's requests in flight starts from zero."""
    reset_settled()
    yield
    close_all()
