from __future__ import annotations

import pytest

from tests.compaction.conftest import no_real_llm  # noqa: F401 - engine tests never reach a real LLM
from tests.compaction.factories import append, conversation, make_session


@pytest.fixture
def session(user):
    s = make_session(user)
    append(s, conversation(8))
    return s
