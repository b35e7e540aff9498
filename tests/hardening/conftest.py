from __future__ import annotations

import pytest

from tests.compaction.conftest import (
    eager_celery,  # noqa: F401 - tasks run in-process
    no_real_llm,  # noqa: F401 - engine tests never reach a real LLM
)
from tests.compaction.factories import append, conversation, make_session
from tests.e2e.conftest import worker_factory  # noqa: F401 - a real Celery worker, as the e2e tests start it


@pytest.fixture
def session(user):
    s = make_session(user)
    append(s, conversation(8))
    return s
