"""A management command run against a database that was never migrated fails with one line that
says what to run (no traceback), and leaves no empty SQLite file behind.

Without this, `manage.py create_api_key` on a fresh or wrong database (another COMPACTOR_VAR_DIR
than the server's, say) printed a traceback whose last line a shell pipeline could take for the key.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor


def sqlite_file() -> Path | None:
    """The default database's SQLite file, None for another engine or an in-memory database."""
    db = connections.databases[DEFAULT_DB_ALIAS]
    name = str(db.get("NAME") or "")
    if "sqlite" not in db.get("ENGINE", "") or not name or name == ":memory:" or name.startswith("file:"):
        return None
    return Path(name)


def _holds_no_table(path: Path) -> bool:
    """An empty file, or a database without a table (what connecting created: with
    journal_mode=WAL the connection writes the file's header)."""
    if path.stat().st_size == 0:
        return True
    try:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    except sqlite3.DatabaseError:
        return False


def _pending_migrations() -> int | None:
    """How many migrations are not applied; None when the database cannot even say."""
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        executor = MigrationExecutor(connection)
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except DatabaseError:
        return None


def _where(path: Path | None) -> str:
    if path is not None:
        return f"the SQLite database {path}"
    settings = connections.databases[DEFAULT_DB_ALIAS]
    return f"database {settings.get('NAME')!r} on {settings.get('HOST') or 'localhost'}"


# Commands that handle migrations themselves: their database errors are theirs to show.
MIGRATION_COMMANDS = frozenset({"migrate", "makemigrations", "squashmigrations", "sqlmigrate", "showmigrations"})


def unmigrated_line(command: str, *, sqlite_path: Path | None, existed: bool) -> str | None:
    """The line to exit with when `command` failed because the database is not migrated, else None.
    An SQLite file that this very command created (it did not exist before) is removed again."""
    if command in MIGRATION_COMMANDS:
        return None
    pending = _pending_migrations()
    if not pending:
        return None
    problem = f"{_where(sqlite_path)} is not migrated ({pending} migrations to apply)"
    if sqlite_path is not None and not existed:
        connections[DEFAULT_DB_ALIAS].close()
        if sqlite_path.exists() and _holds_no_table(sqlite_path):
            # Its write-ahead log and shared-memory files too (the connection set journal_mode=WAL).
            for path in (sqlite_path, Path(f"{sqlite_path}-wal"), Path(f"{sqlite_path}-shm")):
                path.unlink(missing_ok=True)
        problem = f"there is no database at {sqlite_path} yet"
    return (
        f"manage.py {command}: {problem}. Run "
        "`manage.py migrate` with the same environment first (DATABASE_URL, COMPACTOR_VAR_DIR), or point "
        "DATABASE_URL / COMPACTOR_VAR_DIR at the server's database."
    )
