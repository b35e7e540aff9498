"""Django setup shared by the bench scripts that drive the whole stack in one process.

    from _django import api_user, bench_database, django_setup

    django_setup(prefix="compactor-x-bench-")
    with bench_database(celery_eager=True):
        user, key, client = api_user(username="x-bench")
        ...

The database is a throwaway one: with DATABASE_URL (PostgreSQL), a `test_<name>` database on that
server, created (clobbering a leftover) and dropped at the end; else the SQLite file of a temporary
COMPACTOR_VAR_DIR, migrated from scratch.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def django_setup(*, prefix: str, secret_key: str | None = None) -> None:
    """django.setup() on the project's settings, its var dir a fresh temporary one (unless set).

    A `secret_key` lets the bench run with DEBUG off, as in production (without one the settings
    demand DEBUG=1). Any host is allowed: the test clients send `testserver`.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("COMPACTOR_VAR_DIR", tempfile.mkdtemp(prefix=prefix))
    if secret_key is not None:
        os.environ.setdefault("SECRET_KEY", secret_key)
    import django

    django.setup()
    from django.conf import settings

    settings.ALLOWED_HOSTS = ["*"]


@contextmanager
def bench_database(*, celery_eager: bool | None = None) -> Iterator[None]:
    """A migrated throwaway database for the block; on PostgreSQL it is dropped afterwards.

    `celery_eager` sets Celery's task_always_eager for the block (None leaves the settings' value).
    """
    from django.core.management import call_command
    from django.db import connection

    throwaway = connection.vendor != "sqlite"
    old_name = connection.settings_dict["NAME"]
    if throwaway:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    else:
        call_command("migrate", verbosity=0)
    try:
        if celery_eager is not None:
            from project.celery import app as celery_app

            celery_app.conf.task_always_eager = celery_eager
        yield
    finally:
        if throwaway:
            connection.creation.destroy_test_db(old_name, verbosity=0)


def bench_database_until_exit(*, celery_eager: bool | None = None) -> None:
    """`bench_database()` for the rest of the process, dropped when it exits: for the scripts
    whose main() is one long body. Never the DATABASE_URL database itself."""
    block = bench_database(celery_eager=celery_eager)
    block.__enter__()
    atexit.register(block.__exit__, None, None, None)


def api_user(*, username: str) -> tuple[Any, str, Any]:
    """A user, a fresh API key of theirs and an APIClient that sends it: (user, key, client)."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from sessions.models import ApiKey

    user, _ = get_user_model().objects.get_or_create(username=username)
    _, key = ApiKey.objects.create_key(owner=user, name="bench")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return user, key, client
