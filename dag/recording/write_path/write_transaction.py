"""`WriteTransaction`: one short write transaction with a cursor, and callbacks for after its commit.

The recorder makes two tiny transactions per recorded call. Under `transaction.atomic()` Django's
bookkeeping (autocommit switches, a wrapped cursor per statement, commit hooks) costs more CPU than
the database work itself, so outside any atomic block this runs BEGIN ... COMMIT on the driver
connection directly. Inside an atomic block, or with `lean=False` (for code that also uses the ORM),
it is Django's `transaction.atomic()`, so an enclosing rollback still covers it.

SQLite transactions begin IMMEDIATE, as Django's are configured here: a writer takes the write lock
up front and queues behind others (busy timeout) instead of failing to upgrade a read lock later.

On PostgreSQL every statement is a round trip to the server, and on a loaded machine a round trip
costs milliseconds, not microseconds: the server's process and the writer's thread (which waits for
the GIL again after each one) must both be scheduled. So a lean transaction there sends its BEGIN
with its first statement, and `defer`red statements (those whose results nobody reads) with its
COMMIT, each group in one psycopg pipeline; `fetch_all` sends several statements whose results are
read in one pipeline too, with the COMMIT if asked: a group-commit batch, whatever its number of
sessions, is one round trip.
"""
from __future__ import annotations

from typing import Callable, Optional

from django.db import DEFAULT_DB_ALIAS, connections, transaction

# Vendors whose driver connection and cursor are used directly.
DRIVER_VENDORS = frozenset({"sqlite", "postgresql"})
_BEGIN = {"sqlite": "BEGIN IMMEDIATE", "postgresql": "BEGIN"}
# Vendors whose driver pipelines statements (psycopg 3's pipeline mode): BEGIN and deferred statements
# travel with the next statement that is sent.
PIPELINED_VENDORS = frozenset({"postgresql"})


class WriteTransaction:
    """`with WriteTransaction() as tx:` gives `tx.execute(sql, params)`, `tx.fetch_all(statements)` (several
    statements' rows in one round trip), `tx.defer(sql, params)` and
    `tx.defer_many(sql, params_seq)` (statements whose results are not read: run at once, or on
    PostgreSQL sent with the COMMIT, where their errors are raised), `tx.connection`,
    `tx.after_commit(fn)` and `tx.discard()` (roll back instead of committing, without an exception).

    A lean transaction on PostgreSQL begins with its first `execute`: ORM queries on `tx.connection`
    belong in it only after one (lean=False is for code that uses the ORM).

    SQL for `execute` uses `%s` placeholders, except on SQLite's driver cursor, which takes `?`:
    `placeholders(sql, vendor)` converts.
    """

    def __init__(self, *, lean: bool = True):
        self.lean = lean

    def __enter__(self) -> "WriteTransaction":
        # `connections[...]`, not the `connection` proxy: every read through the proxy is a lookup.
        self.connection = connection = connections[DEFAULT_DB_ALIAS]
        self.driver = connection.vendor in DRIVER_VENDORS
        self._discarded = False
        self._callbacks: list[Callable[[], None]] = []
        self._deferred: list[tuple[str, str, object]] = []  # (method, sql, params), sent with the COMMIT
        self._own = (self.lean and self.driver and not connection.in_atomic_block
                     and connection.get_autocommit())
        self._pipelined = self._own and connection.vendor in PIPELINED_VENDORS
        self._begun = self._committed = False
        if self._own:
            connection.ensure_connection()
            with connection.wrap_database_errors:
                self.cursor = connection.connection.cursor()
            if not self._pipelined:
                try:
                    self._begin()  # may wait out the busy timeout
                except BaseException:
                    self.cursor.close()
                    raise
        else:
            self._atomic = transaction.atomic()
            self._atomic.__enter__()
            self.cursor = connection.connection.cursor() if self.driver else connection.cursor()
        return self

    def execute(self, sql: str, params=()):
        """Run one statement (its SQL passed through `placeholders`); returns the cursor for fetching."""
        with self.connection.wrap_database_errors:
            if self._pipelined and not self._begun:
                self._begun = True
                with self.connection.connection.pipeline():  # BEGIN and the statement: one round trip
                    self.cursor.execute(_BEGIN[self.connection.vendor])
                    self.cursor.execute(sql, params)
            else:
                self.cursor.execute(sql, params)
        return self.cursor

    def fetch_all(self, statements: list[tuple[str, object]], *, commit: bool = False,
                  meanwhile: Optional[Callable[[], None]] = None) -> list[list[tuple]]:
        """Run the (sql, params) `statements` in order; the rows each one returned ([] for one that returns
        none). On PostgreSQL they travel together, with BEGIN if it was not sent yet: one round trip,
        where `execute` takes one per statement. `commit`: there, the `defer`red statements and the
        COMMIT travel with them too, and the `with` block has nothing left to send (elsewhere the block
        commits as usual). `meanwhile`: called once the statements are sent, before their results are
        awaited, so that it runs while the server works; it must not use the database (on PostgreSQL
        the connection is busy with the statements) and not raise."""
        if not self._pipelined:
            results = [_rows(self.execute(sql, params)) for sql, params in statements]
            if meanwhile is not None:
                meanwhile()
            return results
        driver = self.connection.connection
        cursors = []
        try:
            with self.connection.wrap_database_errors:
                with driver.pipeline():  # its end sends everything and takes every result
                    if not self._begun:
                        self._begun = True
                        self.cursor.execute(_BEGIN[self.connection.vendor])
                    for sql, params in statements:
                        cursors.append(cursor := driver.cursor())
                        cursor.execute(sql, params)
                    if commit:
                        self._send_deferred()
                        self.cursor.execute("COMMIT")
                    if meanwhile is not None:
                        meanwhile()  # the statements are on their way: leaving the block awaits them
                if commit:
                    self._committed = True
                return [_rows(cursor) for cursor in cursors]
        finally:
            for cursor in cursors:
                cursor.close()

    def executemany(self, sql: str, params_seq) -> None:
        """Run one statement once per parameter row (a batch of inserts or updates)."""
        self._ensure_begun()
        with self.connection.wrap_database_errors:
            self.cursor.executemany(sql, params_seq)

    def defer(self, sql: str, params=()) -> None:
        """`execute`, for a statement whose result is not read: on PostgreSQL sent with the COMMIT."""
        self._run_or_defer("execute", sql, params)

    def defer_many(self, sql: str, params_seq) -> None:
        """`executemany`, deferred like `defer`."""
        self._run_or_defer("executemany", sql, params_seq)

    def _run_or_defer(self, method: str, sql: str, params) -> None:
        if self._pipelined:
            self._deferred.append((method, sql, params))
            return
        with self.connection.wrap_database_errors:
            getattr(self.cursor, method)(sql, params)

    def _ensure_begun(self) -> None:
        if self._pipelined and not self._begun:
            self._begin()

    def _begin(self) -> None:
        self._begun = True
        with self.connection.wrap_database_errors:
            self.cursor.execute(_BEGIN[self.connection.vendor])

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the transaction has committed (never if it rolls back)."""
        if self._own:
            self._callbacks.append(callback)
        else:
            transaction.on_commit(callback)

    def discard(self) -> None:
        """End the transaction with a rollback: nothing it wrote is kept."""
        self._discarded = True

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self._own:
            self.cursor.close()
            if self._discarded and exc_type is None:
                transaction.set_rollback(True)
            return self._atomic.__exit__(exc_type, exc, tb)
        try:
            if exc_type is None and not self._discarded:
                self._commit()
            elif self._begun and not self._committed:
                self._rollback(quiet=exc_type is not None)
        finally:
            self.cursor.close()
        if exc_type is None and not self._discarded:
            for callback in self._callbacks:
                callback()
        return False

    def _commit(self) -> None:
        if self._committed or (not self._begun and not self._deferred):
            return  # committed by `fetch_all`, or a pipelined transaction that sent nothing
        try:
            with self.connection.wrap_database_errors:
                if not self._pipelined:
                    self.cursor.execute("COMMIT")
                    return
                # The deferred statements and the COMMIT (with BEGIN if nothing was sent yet): one round
                # trip. An error in any of them aborts the transaction; it is raised here, and rolled back.
                with self.connection.connection.pipeline():
                    if not self._begun:
                        self._begun = True
                        self.cursor.execute(_BEGIN[self.connection.vendor])
                    self._send_deferred()
                    self.cursor.execute("COMMIT")
        except BaseException:
            self._rollback(quiet=True)
            raise

    def _send_deferred(self) -> None:
        deferred, self._deferred = self._deferred, []
        for method, sql, params in deferred:
            getattr(self.cursor, method)(sql, params)

    def _rollback(self, *, quiet: bool) -> None:
        try:
            with self.connection.wrap_database_errors:
                self.cursor.execute("ROLLBACK")
        except Exception:
            # The database may have ended the transaction itself; the error that got us here matters.
            if not quiet:
                raise


def _rows(cursor) -> list[tuple]:
    return cursor.fetchall() if cursor.description is not None else []


def placeholders(sql: str, vendor: str) -> str:
    """`sql`, written with `%s` placeholders, as the cursor of a WriteTransaction on `vendor` takes it."""
    return sql.replace("%s", "?") if vendor == "sqlite" else sql
