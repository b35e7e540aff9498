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
