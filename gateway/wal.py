"""The SQLite write-ahead log copied back into the database after a call's record, in a thread of
its own: off the path of every call's first byte.

SQLite copies the log back into the database (a checkpoint: writing the pages and syncing the
file) in whichever commit finds the log over 1,000 pages (`wal_autocheckpoint`). A gateway call
writes ~80 pages at 2,000 stored messages (Claude Code's: the message and its indexes, the
session's row and its indexes, the usage), so one call in a dozen paid for a checkpoint of
~1,000 pages, and in a third of those it was the commit made before the request goes upstream:
one slow first byte in ~40 calls. After each record the gateway asks for a checkpoint of what
the log holds (a few dozen pages), so the log never grows to where a commit has to. It runs in
one thread per process, not in the request's: gunicorn reads the next request of a kept-alive
connection only once the previous one's close returned, and a checkpoint waits for the disk.
PASSIVE: it waits for no reader or writer; requests asked while one runs share the next.
"""

from __future__ import annotations

import logging
import threading

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

logger = logging.getLogger(__name__)

_wanted = threading.Event()
_started: set[str] = set()  # the databases (by file) whose log a thread of this process checkpoints
_lock = threading.Lock()


def checkpoint_soon() -> None:
    """Have the write-ahead log copied back soon (SQLite in WAL mode; nothing elsewhere)."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "sqlite" or connection.connection is None:
        return
    name = str(connection.settings_dict["NAME"])
    if name not in _started:
        if not _in_wal_mode(connection):
            return
        with _lock:
            if name not in _started:
                _started.add(name)
                threading.Thread(target=_checkpoints, name="sqlite-checkpoint", daemon=True).start()
    _wanted.set()


_modes: dict[str, bool] = {}


def _in_wal_mode(connection) -> bool:
    name = str(connection.settings_dict["NAME"])
    if name not in _modes:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            _modes[name] = str(cursor.fetchone()[0]).lower() == "wal"
    return _modes[name]


def _checkpoints() -> None:
    connection = connections[DEFAULT_DB_ALIAS]  # this thread's own
    while True:
        _wanted.wait()
        _wanted.clear()
        try:
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except DatabaseError as exc:  # the next commit's automatic checkpoint does it then
            logger.debug("Gateway: checkpoint of the write-ahead log skipped (%s)", exc)
            connection.close()
