from __future__ import annotations

import pytest

from project.celery import app as celery_app


@pytest.fixture
def eager_celery():
    """Run enqueued tasks in-process (no broker): the engine tests' stand-in for a worker.

    on_commit callbacks still decide when a task is enqueued, so tests either use
    transaction=True or django_capture_on_commit_callbacks(execute=True).
    """
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield celery_app
    celery_app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def no_real_llm(settings):
    """Engine tests never reach the real Anthropic API, even if the developer's shell has a key:
    the chain is extractive → truncate unless a test points it at tests/fake_anthropic.py."""
    settings.ANTHROPIC_API_KEY = None
    settings.ANTHROPIC_BASE_URL = None
