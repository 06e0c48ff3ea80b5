"""The SQLite connection behind a Store: WAL mode, busy timeout, short explicit transactions.

One `Database` is shared by the store's parts and is safe to use from several threads
(calls are serialised by a lock). Writes run in `BEGIN IMMEDIATE` transactions so two
processes that both write (a rollout appending steps, the app adding annotations) queue
on the busy timeout instead of failing; readers never block the writer (WAL).

Queries go to sqlite3 directly (`Handle`); sqlite-utils, which creates the tables in the
migrations, is imported only when a table is asked for. Its import pulls in pandas and
numpy where they are installed (most of the app's start-up once): opening a workspace
that is up to date and reading it never pays for that.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.store.errors import StoreError

if TYPE_CHECKING:
    import sqlite_utils
    from sqlite_utils.db import Table

DEFAULT_BUSY_TIMEOUT_S = 30.0


class Handle:
    """What a transaction's queries use: the connection's execute and executemany, rows
    as dicts (`query`), and sqlite-utils' tables (`table`, imported on first use)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._utils: sqlite_utils.Database | None = None

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                ) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self.conn.executemany(sql, rows)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
              ) -> Iterator[dict[str, Any]]:
        """The rows of one query, each as {column: value}."""
        cursor = self.conn.execute(sql, params)
        names = [column[0] for column in cursor.description or ()]
        for found in cursor:
            yield dict(zip(names, found, strict=True))

    @property
    def utils(self) -> sqlite_utils.Database:
        """sqlite-utils' Database on the same connection (imported here, once)."""
        if self._utils is None:
            import sqlite_utils

            self._utils = sqlite_utils.Database(self.conn)
        return self._utils

    def table(self, name: str) -> Table:
        return self.utils.table(name)

    def table_names(self) -> list[str]:
        return self.utils.table_names()


class Database:
    """A thread-safe handle on workbench.db with read and write transaction helpers."""

    def __init__(self, path: Path, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = path
        try:
            # isolation_level=None: no implicit transactions; we BEGIN explicitly.
            conn = sqlite3.connect(str(path), timeout=busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{path}: could not switch the database to WAL mode "
                                 f"(journal_mode is {mode})")
            # NORMAL is safe in WAL mode: a power loss may drop the newest commits, never
            # corrupt the file; a killed process loses nothing that was committed.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a usable SQLite database ({exc})") from exc
        self.conn = conn
        self.db = Handle(conn)
        self._lock = threading.RLock()
        self._depth = 0  # nesting level of the open transaction (0: none)
        self._writing = False  # whether the open transaction is a write

    def close(self) -> None:
        with self._lock:
            try:
                # Keep the query planner's statistics fresh (SQLite's advice for closing a
                # connection); the limit bounds the cost on large tables.
                self.conn.execute("PRAGMA analysis_limit = 400")
                self.conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                pass  # statistics are an optimisation; closing must not fail for them
            self.conn.close()

    @contextmanager
    def write(self) -> Iterator[Handle]:
        """A short write transaction (BEGIN IMMEDIATE ... COMMIT); nested calls join it."""
        with self._lock:
            if self._depth:
                if not self._writing:
                    # A deferred read transaction cannot wait for the write lock; it would
                    # fail at once with "database is locked" when another process writes.
                    raise StoreError("cannot write inside a read transaction")
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth, self._writing = 1, True
            try:
                yield self.db
            except BaseException:
                self._depth = 0
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self._depth = 0
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise

    @contextmanager
    def read(self) -> Iterator[Handle]:
        """A read transaction: every query inside sees the same snapshot of the database."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN")
            self._depth, self._writing = 1, False
            try:
                yield self.db
            finally:
                self._depth = 0
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """All rows of one query, as dicts."""
        with self._lock:
            return list(self.db.query(sql, params))

    def row(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> dict[str, Any] | None:
        """The first row of one query, or None."""
        with self._lock:
            for found in self.db.query(sql, params):
                return found
            return None

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row, or None."""
        with self._lock:
            got = self.conn.execute(sql, params).fetchone()
            return None if got is None else got[0]
