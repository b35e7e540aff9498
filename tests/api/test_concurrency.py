"""16 clients appending to one session at once: seq stays unique and gap-free, nothing is lost."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from django.conf import settings
from django.db import close_old_connections, connection

from sessions import services
from sessions.models import Message, Session, ToolCall
from tests.services import require_postgres

WRITERS = 16
PER_WRITER = 12


def _hammer(session_id, writer: int, errors: list[BaseException], start: threading.Barrier) -> None:
    try:
        start.wait()
        for i in range(PER_WRITER):
            session = Session.objects.get(pk=session_id)
            if i % 3 == 2:
                # A tool exchange in one batch: its pair must stay adjacent and both seqs unique.
                tool_id = f"toolu_{writer}_{i}"
                services.messages_append(
                    session=session,
                    messages=[
                        {
                            "role": "assistant",
                            "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}],
                        },
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}]},
                    ],
                )
            else:
                services.messages_append(
                    session=session, messages=[{"role": "user", "content": f"w{writer} m{i}"}], single=True
                )
    except BaseException as exc:  # noqa: BLE001 - reported by the main thread
        errors.append(exc)
    finally:
        close_old_connections()
        connection.close()


def _run(user) -> None:
    session = services.session_create(owner=user, title="busy")
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)
    threads = [threading.Thread(target=_hammer, args=(session.pk, w, errors, start)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert errors == []

    batches = PER_WRITER // 3
    total = WRITERS * (PER_WRITER - batches + 2 * batches)
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))
    session.refresh_from_db()
    assert session.last_seq == session.message_count == total
    assert session.total_message_tokens == sum(
        Message.objects.filter(session=session).values_list("token_count", flat=True)
    )
    assert session.context_tokens == session.total_message_tokens
    for call in ToolCall.objects.filter(session=session):
        assert call.result_seq == call.use_seq + 1
    # Each writer's messages are in its own order.
    for writer in range(WRITERS):
        texts = [
            c
            for c in Message.objects.filter(session=session, role="user")
            .order_by("seq")
            .values_list("content", flat=True)
            if isinstance(c, str) and c.startswith(f"w{writer} ")
        ]
        assert texts == [f"w{writer} m{i}" for i in range(PER_WRITER) if i % 3 != 2]


@pytest.mark.django_db(transaction=True)
def test_concurrent_appenders_on_postgresql(user):
    require_postgres()
    _run(user)


SQLITE_SCRIPT = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests.api.test_concurrency import _run
_run(get_user_model().objects.create_user("alice"))
print("ok")
"""


def test_concurrent_appenders_on_sqlite(tmp_path):
    """The embedded default: a SQLite file, writers serialized by IMMEDIATE transactions.

    Runs in a fresh interpreter on a file database: the test database pytest-django makes for
    SQLite is in memory with a shared cache, whose table locks ignore the busy timeout.
    """
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings_test",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'concurrency.sqlite3'}",
        "COMPACTOR_VAR_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-c", SQLITE_SCRIPT],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
