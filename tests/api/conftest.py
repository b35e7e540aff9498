from __future__ import annotations

import pytest

from sessions import services
from sessions.models import Session


@pytest.fixture
def session(user) -> Session:
    return services.session_create(owner=user, title="Fix the parser", agent="claude-code", model="claude-sonnet-4-5")


@pytest.fixture
def other_session(other_user) -> Session:
    return services.session_create(owner=other_user, title="Mallory's")
