"""The append path's statements, compiled once per process.

Every agent appends on every turn. Through the ORM, building those few statements (compiling
the query, resolving its columns and their converters, preparing each value through a chain
of field methods) cost the web process more CPU than the database spent running them. These
helpers write the fixed-text statements of that path once per database vendor and keep the
ORM's own pieces where they decide something: table and column names from the model's meta,
values prepared by each field (`pre_save`, `get_db_prep_save`), results converted by the
converters the ORM would apply and turned into instances by `Model.from_db`. Everything goes
through Django's cursor, so the statements show in `connection.queries` and
`CaptureQueriesContext` like any other. The database connection is looked up once per
statement and handed to the fields as is: through `django.db.connection` (a proxy to the
current thread's connection), every field's `connection.ops` was a thread-local lookup.

The writes that follow the locked read (`execute_together`) go to PostgreSQL as one query: under
load every round trip costs both processes a wake-up, and the append's writes need nothing back
but the new messages' ids. There each statement is also prepared once per connection (`PREPARE`,
then `EXECUTE` with the values; settings.COMPACTOR_DB_PREPARE): planning the session's UPDATE
against its nine indexes and the message INSERT cost PostgreSQL more than running them. The
queries log shows the `EXECUTE`s (`statement_text` gives back what one runs).
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.db.transaction import TransactionManagementError
from psycopg.pq import ExecStatus


class RowReader:
    """A one-row read compiled from a QuerySet once: its SQL, the attribute names of its
    columns and the converters the ORM applies to them (JSON decoding, time zones, ...).

    `read(params)` runs it with `params` in place of the compiled query's own and returns the
    model instance (only the selected fields loaded, as `.only()` gives), or None. The query
    must select the model's own columns (no annotations, no select_related).
    """

    def __init__(self, queryset: models.QuerySet, param_count: int) -> None:
        compiler = queryset.query.get_compiler(connection=connections[DEFAULT_DB_ALIAS])
        sql, params = compiler.as_sql()
        if len(params) != param_count:  # pragma: no cover - a Django upgrade changed the shape
            raise RuntimeError(f"unexpected parameters in a compiled read: {params!r}")
        columns = [expression for expression, _sql, _alias in compiler.select]
        self.model = queryset.model
        self.sql = sql
        self.attnames = [column.target.attname for column in columns]
        self.converters = [
            (index, functions, expression)
            for index, (functions, expression) in compiler.get_converters(columns).items()
        ]

    def read(self, params: Sequence[Any], *, opening: Transaction | None = None) -> models.Model | None:
        """With `opening`, the read also opens that transaction when it is not open yet."""
        connection = connections[DEFAULT_DB_ALIAS]
        with connection.cursor() as cursor:
            sql = prepared(connection, cursor, self.sql)
            cursor.execute(opening.opened(sql) if opening is not None else sql, params)
            while not returns_rows(cursor) and cursor.nextset():  # past a BEGIN sent with it
                pass
            row = cursor.fetchone()
        if row is None:
            return None
        values = list(row)
        for index, functions, expression in self.converters:
            value = values[index]
            for convert in functions:
                value = convert(value, expression, connection)
            values[index] = value
        return self.model.from_db(connection.alias, self.attnames, values)


class RowInserter:
    """INSERT of model instances, the way bulk_create writes them (each field's `pre_save`,
    so auto_now_add is set, and `get_db_prep_save`; in batches the database accepts), with
    the statement text kept for the small row counts an append has. With `returning_pk`, sets
    each instance's primary key from RETURNING, like bulk_create does where the database
    returns rows (else falls back to bulk_create)."""

    KEPT_STATEMENTS = 16  # statements kept for 1..16 rows; a larger batch writes its own

    def __init__(
        self,
        model: type[models.Model],
        field_names: Iterable[str],
        *,
        returning_pk: bool,
        computed: dict[str, Callable[[models.Model], Any]] | None = None,
    ) -> None:
        """`computed`: columns the model does not map, each with the function giving its value."""
        self.model = model
        self.fields = [model._meta.get_field(name) for name in field_names]
        self.returning_pk = returning_pk
        self.computed = list((computed or {}).items())
        self._sql: dict[int, str] = {}

    def _statement(self, rows: int, connection) -> str:
        sql = self._sql.get(rows)
        if sql is None:
            quote = connection.ops.quote_name
            names = [field.column for field in self.fields] + [name for name, _ in self.computed]
            columns = ", ".join(quote(name) for name in names)
            values = ", ".join(["(" + ", ".join(["%s"] * len(names)) + ")"] * rows)
            sql = f"INSERT INTO {quote(self.model._meta.db_table)} ({columns}) VALUES {values}"
            if self.returning_pk:
                sql += f" RETURNING {quote(self.model._meta.pk.column)}"
            if rows <= self.KEPT_STATEMENTS:
                self._sql[rows] = sql
        return sql

    def batches(self, objs: Sequence[models.Model]) -> list[tuple[str, list[Any]]]:
        """(sql, params) of the INSERTs of `objs`, each field's value prepared as bulk_create does."""
        connection = connections[DEFAULT_DB_ALIAS]
        # As bulk_create: SQLite takes at most 999/32766 parameters per statement.
        size = max(1, connection.ops.bulk_batch_size([*self.fields, *self.computed], objs))
        out = []
        for start in range(0, len(objs), size):
            batch = objs[start : start + size]
            params = []
            for obj in batch:
                params += [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in self.fields]
                params += [value(obj) for _, value in self.computed]
            out.append((self._statement(len(batch), connection), params))
        return out

    def inserted(self, objs: Sequence[models.Model], pks: Sequence[Any] | None) -> None:
        """Mark `objs` as stored (with the primary keys RETURNING gave, in order)."""
        connection = connections[DEFAULT_DB_ALIAS]
        if pks is not None:
            pk_attname = self.model._meta.pk.attname
            for obj, pk in zip(objs, pks, strict=True):
                setattr(obj, pk_attname, pk)
        for obj in objs:
            obj._state.adding = False
            obj._state.db = connection.alias

    def insert(self, objs: Sequence[models.Model]) -> None:
        if not objs:
            return
        connection = connections[DEFAULT_DB_ALIAS]
        if self.returning_pk and not connection.features.can_return_rows_from_bulk_insert:
            self.model._default_manager.bulk_create(objs)  # pragma: no cover - PostgreSQL, SQLite >= 3.35 return rows
            return
        pks: list[Any] = []
        with connection.cursor() as cursor:
            for sql, params in self.batches(objs):
                cursor.execute(sql, params)
                if self.returning_pk:
                    pks += [pk for (pk,) in cursor.fetchall()]
        self.inserted(objs, pks if self.returning_pk else None)


class RowUpdater:
    """UPDATE of some fields of one row by primary key, from an instance's current values."""

    def __init__(self, model: type[models.Model], field_names: Iterable[str]) -> None:
        self.model = model
        self.fields = [model._meta.get_field(name) for name in field_names]
        quote = connections[DEFAULT_DB_ALIAS].ops.quote_name
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in self.fields)
        self.sql = f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE {quote(model._meta.pk.column)} = %s"

    def statement(self, obj: models.Model) -> tuple[str, list[Any]]:
        connection = connections[DEFAULT_DB_ALIAS]
        params = [field.get_db_prep_save(getattr(obj, field.attname), connection) for field in self.fields]
        params.append(self.model._meta.pk.get_db_prep_value(obj.pk, connection))
        return self.sql, params

    def update(self, obj: models.Model) -> None:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(*self.statement(obj))


def _together(connection) -> bool:
    return connection.vendor == "postgresql" and not connection.settings_dict["OPTIONS"].get("server_side_binding")


# Statements prepared on each open PostgreSQL connection: {psycopg connection: names}. A
# prepared statement lasts as long as its connection (a transaction's rollback keeps it), so a
# new connection starts empty. At most MAX_PREPARED per connection: batch INSERTs of many sizes
# would otherwise each keep a plan on the server.
_PREPARED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
MAX_PREPARED = 64
_FORMS: dict[str, tuple[str, str, str]] = {}  # statement -> _forms(statement), once per process
MAX_FORMS = 256
_NOT_PREPARED = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})


def prepared(connection, cursor, sql: str) -> str:
    """What to send for `sql` (with %s parameters): on PostgreSQL with COMPACTOR_DB_PREPARE,
    `EXECUTE` of it prepared on this connection, preparing it first (a query of its own, once per
    connection) when it is not; else `sql` itself. The parameters stay the same, in order."""
    if not _together(connection) or not settings.COMPACTOR_DB_PREPARE or sql in _NOT_PREPARED or "%%" in sql:
        return sql
    known = _FORMS.get(sql)
    if known is None:
        known = _forms(sql)
        if len(_FORMS) < MAX_FORMS:  # the append's few shapes; not every size of a large batch
            _FORMS[sql] = known
    name, preparing, executing = known
    names = _PREPARED.setdefault(connection.connection, set())
    if name not in names:
        if len(names) >= MAX_PREPARED:
            return sql
        cursor.execute(preparing)
        names.add(name)
    return executing


def _forms(sql: str) -> tuple[str, str, str]:
    """(name, PREPARE statement, EXECUTE statement) of `sql`, named by its text."""
    name = "compactor_" + hashlib.blake2b(sql.encode(), digest_size=8).hexdigest()
    parts = sql.split("%s")
    numbered = parts[0] + "".join(f"${index}{part}" for index, part in enumerate(parts[1:], start=1))
    arguments = f"({', '.join(['%s'] * (len(parts) - 1))})" if len(parts) > 1 else ""
    return name, f"PREPARE {name} AS {numbered}", f"EXECUTE {name}{arguments}"


_EXECUTE = re.compile(r"EXECUTE (compactor_[0-9a-f]{16})\b")


def statement_text(sql: str) -> str:
    """A logged query with each `EXECUTE` of a prepared statement shown as the statement it runs
    (its parameters as %s, not their values), for tests and debugging. Statements sent together
    are split at ";\n", which the append's values do not hold (JSON escapes its newlines)."""
    texts = {name: statement for statement, (name, _, _) in _FORMS.items()}
    parts = []
    for part in sql.split(";\n"):
        found = _EXECUTE.match(part)
        parts.append(texts.get(found.group(1), part) if found else part)
    return ";\n".join(parts)


def execute_together(statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
    """Run the statements in order, in one round trip where the driver sends several statements
    as one query (psycopg 3 binding parameters client-side, Django's default for PostgreSQL),
    else one by one. Returns the rows each statement returned (RETURNING; [] for none), in order.

    A failing statement fails the call, and the later ones are not run: inside a transaction,
    the same outcome as running them one by one.
    """
    connection = connections[DEFAULT_DB_ALIAS]
    together = _together(connection)
    results: list[list[tuple[Any, ...]]] = []
    with connection.cursor() as cursor:
        if together and len(statements) > 1:
            query = ";\n".join(prepared(connection, cursor, sql) for sql, _ in statements)
            cursor.execute(query, [p for _, params in statements for p in params])
            # One result per statement: psycopg's nextset() steps through them.
            results.append(cursor.fetchall() if returns_rows(cursor) else [])
            while cursor.nextset():
                results.append(cursor.fetchall() if returns_rows(cursor) else [])
            return results
        for sql, params in statements:
            cursor.execute(sql, params)
            results.append(cursor.fetchall() if returns_rows(cursor) else [])
        return results


def returns_rows(cursor) -> bool:
    """Whether the cursor's current result has columns (`cursor.description is not None`, what a
    SELECT or a RETURNING gives), without psycopg 3 building a Column object per column, as it does
    on every read of `description` (a sixth of the append's driver time went there)."""
    result = getattr(cursor.cursor, "pgresult", None)
    if result is None:
        return cursor.description is not None  # SQLite, or psycopg before any result
    return result.nfields > 0 or result.status == ExecStatus.TUPLES_OK


class Transaction:
    """A transaction whose BEGIN and COMMIT ride on its first and last statements where that is
    possible: on PostgreSQL (statements sent together) when no transaction is open (autocommit,
    as a request is). There, `opened(sql)` prefixes the first statement with BEGIN, and
    `closing()` gives the COMMIT to send with the last writes: two round trips fewer than
    BEGIN and COMMIT of their own, which under load cost both processes a wake-up each. When
    the caller's code leaves it open (an error, or no `closing()` sent), leaving the block
    commits it, or rolls it back on an exception, as `transaction.atomic()` would.

    Elsewhere (inside an atomic block: a test's, an idempotent request's; SQLite), it is
    `transaction.atomic()`, and `opened` and `closing` change nothing.
    """

    def __init__(self) -> None:
        connection = connections[DEFAULT_DB_ALIAS]
        self.inline = _together(connection) and connection.get_autocommit() and not connection.in_atomic_block
        self._atomic = None if self.inline else transaction.atomic()
        self._begin = self.inline

    def __enter__(self) -> Transaction:
        if self._atomic is not None:
            self._atomic.__enter__()
        return self

    def opened(self, sql: str) -> str:
        """`sql`, preceded by the BEGIN when this is the transaction's first statement."""
        if not self._begin:
            return sql
        self._begin = False
        return "BEGIN;\n" + sql

    def closing(self) -> list[tuple[str, list[Any]]]:
        """The COMMIT to send as the last of the writes (nothing may follow it), if inline."""
        return [("COMMIT", [])] if self.inline and not self._begin else []

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if self._atomic is not None:
            return bool(self._atomic.__exit__(exc_type, exc, traceback))
        connection = connections[DEFAULT_DB_ALIAS]
        status = connection.connection.info.transaction_status.name if connection.connection is not None else "IDLE"
        if status == "IDLE":
            return False  # never opened, or committed by its last writes
        commit = exc_type is None and status != "INERROR"
        try:
            with connection.cursor() as cursor:
                cursor.execute("COMMIT" if commit else "ROLLBACK")
        except Exception:  # noqa: BLE001 - whatever failed, the block's own exception is the one to see
            if exc_type is None:
                raise
            connection.close()  # the ROLLBACK failed (a lost connection): nothing stays open
        if exc_type is None and not commit:
            raise TransactionManagementError("a statement failed in the transaction: rolled back")
        return False
