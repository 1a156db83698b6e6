"""A `Store`'s reads and writes `here`: on the event loop's own thread, with sqlite3 alone (SQLite only).

A `Store` on SQLite runs its transactions on a thread of its own, through SQLAlchemy: a hop there and
back for each, and SQLAlchemy's execution around each statement. For the hottest of them that is most
of their cost: a host's node boundary (bench/per_node.py) and the HTTP door's reads
(bench/http_throughput.py). Those run named statements only (store/named.py), so they can run here, on
the sqlite3 connections of store/lite_connection.py:

- a read, on a connection of its own: a reader of a WAL file never waits for the writer;
- a write, on another that never waits for the lock (busy_timeout 0): when no other writer holds it
  (a host's boundary, nearly always) the write costs its statements alone; when one does, the caller
  waits for it on the store's thread as any write does. Its commits checkpoint the WAL as any
  connection's do (SQLite's autocheckpoint, every 1,000 pages or so: a few milliseconds on the loop
  now and then). A checkpoint elsewhere, on the store's thread, would not do: it lands while the loop
  writes on, so the WAL is never all copied when a write begins, never starts over, and grows for as
  long as the host writes (66 MB over 1,500 boundaries; tests/test_here_lane.py).

Only the thread that opened the store uses them (a connection is one thread's at a time).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, StatementError

from .lite_connection import LiteConnection, begun, begun_already, connect_raw
from .store_location import StoreLocation

T = TypeVar("T")


class HereLane:
    def __init__(self, loc: StoreLocation):
        self.loc = loc
        self._thread = threading.get_ident()
        self._reader: LiteConnection | None = None
        self._writer: LiteConnection | None = None

    def usable(self) -> bool:
        """On SQLite, and on the thread that opened the store."""
        return self.loc.is_sqlite and threading.get_ident() == self._thread

    def read(self, fn: Callable[[LiteConnection], T]) -> T:
        """`fn(conn)` in one read transaction."""
        try:
            if self._reader is None:
                self._reader = LiteConnection(connect_raw(self.loc))
            with begun(self._reader, "BEGIN") as conn:
                return fn(conn)
        except sqlite3.Error as exc:
            raise as_sqlalchemy_error(exc) from exc

    def write(self, fn: Callable[[LiteConnection], T]) -> tuple[bool, T | None]:
        """(True, what `fn(conn)` gave) in one write transaction, or (False, None) when another writer holds the lock."""
        try:
            if self._writer is None:
                raw = connect_raw(self.loc)
                raw.execute("PRAGMA busy_timeout=0")
                self._writer = LiteConnection(raw)
            conn = self._writer
            try:
                conn.raw.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:  # SQLITE_BUSY_RECOVERY and its kin too
                    return False, None
                raise
            with begun_already(conn):
                return True, fn(conn)
        except sqlite3.Error as exc:
            raise as_sqlalchemy_error(exc) from exc

    def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.raw.close()
        self._reader = self._writer = None


def as_sqlalchemy_error(exc: Exception, driver_error: type[Exception] = sqlite3.Error) -> StatementError:
    """A driver's error (sqlite3's; asyncpg's for store/pg_here_lane.py) as SQLAlchemy raises it: the store's
    callers judge faults by SQLAlchemy's classes (is_transient, is_lock_wait, describe_db_error), which
    read the server's SQLSTATE and the driver's class off `orig`."""
    return DBAPIError.instance(None, None, exc, driver_error)
