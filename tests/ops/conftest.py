from __future__ import annotations

import pytest

from tests.gateway.conftest import upstream  # noqa: F401 - the fake Messages API, as the gateway tests use it

from .helpers import TOKEN


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN
