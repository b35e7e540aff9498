from __future__ import annotations

import pytest

from project.celery import app as celery_app
from tests.e2e.conftest import worker_factory  # noqa: F401 - a real Celery worker, as the e2e tests start it
from tests.gateway.conftest import upstream  # noqa: F401 - the fake Messages API, as the gateway tests use it

from .helpers import TOKEN


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


@pytest.fixture
def not_eager():
    """Readiness asks for a worker only when tasks do not run eagerly in the web process."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = False
    yield
    celery_app.conf.task_always_eager = previous
