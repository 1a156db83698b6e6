"""A SQLite store opened through the standard library's sqlite3 alone, for a one-shot verb.

`swarmkit status` and `swarmkit stop` on SQLite start much faster when they
do not import SQLAlchemy (its import alone was most of such a verb; issue 13,
and the README's performance table). Their statements are SQLAlchemy Core all
the same: they run by name (store/named.py), compiled once for SQLite into
store/compiled_sqlite.py, through the same functions as on any store (store/reads.py, runtime/control.py),
on the sqlite3 connection of store/lite_connection.py.
What a `Store` does on open and around each transaction is done here by the
same rules: the PRAGMAs of store/engine.py, the read-only query of
store/store_location.py, BEGIN IMMEDIATE for a write, the schema check of
store/schema.py, the file identity of store/identity.py. What is rare and
needs more (a lost host to mark) runs on a full `Store` opened beside it
(`full_store`).
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from . import clock, identity
from .lite_connection import LiteConnection, LiteResult, begun, connect_raw
from .loopless import loop_needed
from .schema import _judge, read_schema
from .store_errors import NoStoreError, StoreError
from .store_location import (
    StoreLocation,
    folder_is_read_only,
    named_store,
    read_only_location,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from typing import Any, TypeVar

    from .store import Store

    T = TypeVar("T")

@dataclasses.dataclass(frozen=True)
class SqliteFile:
    """A SQLite store's URL as a `StoreLocation` holds it, without SQLAlchemy's `URL`:
    shown as that one is (`sqlite+aiosqlite:////path`; tests/test_lite_store.py compares)."""

    database: str

    def get_backend_name(self) -> str:
        return "sqlite"

    def render_as_string(self, hide_password: bool = True) -> str:
        return f"sqlite+aiosqlite:///{self.database}"


def lite_location(store: str | None = None, workspace: str | os.PathLike | None = None) -> StoreLocation | None:
    """Where `resolve_store` would find a SQLite file, when it is plainly one; None otherwise (PostgreSQL,
    a URL with options): such a store opens as a full `Store`. tests/test_lite_store.py holds the two alike."""
    named = named_store(store, workspace)
    if named.sqlite_file is None:
        return None
    return StoreLocation(SqliteFile(str(named.sqlite_file)), named.workspace)  # type: ignore[arg-type]


# --- running a compiled statement -------------------------------------------------------


class _AsyncFace:
    """The `AsyncConnection` face of a `LiteConnection` inside `LiteStore.read()` / `write()`: each call runs at once."""

    def __init__(self, conn: LiteConnection):
        self._conn = conn
        self.dialect = conn.dialect

    async def execute(self, stmt: Any, params: dict[str, Any] | None = None) -> LiteResult:
        return self._conn.execute(stmt, params)

    async def scalar(self, stmt: Any, params: dict[str, Any] | None = None) -> Any:
        return self._conn.scalar(stmt, params)

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return fn(self._conn, *args, **kw)


class LiteStore:
    """An open SQLite store, for a process that does one thing and exits (see the module).

    It has the part of `Store`'s face that `status` and `stop` use; everything
    runs at once on the caller's thread, as on an inline `Store`.
    """

    inline = True

    def __init__(self, loc: StoreLocation, raw: sqlite3.Connection):
        self.loc = loc
        self._conn = LiteConnection(raw)
        self._file: tuple[int, int] | None = None
        self.schema_change: tuple[str | None, str] | None = None
        self._full: Store | None = None

    @classmethod
    async def open(cls, loc: StoreLocation) -> LiteStore:
        """`Store.open(loc=loc, create=False, upgrade=False, inline=True)`, by the same rules."""
        path = Path(loc.url.database or "")
        # Everything here runs in place, on the only thread of a process that does one thing.
        if path.exists() and folder_is_read_only(path):  # noqa: ASYNC240
            loc = read_only_location(loc)
        identity.check_not_gone(loc, False)
        if not path.exists():  # noqa: ASYNC240
            raise NoStoreError(f"no store at {path}")
        try:
            raw = connect_raw(loc)
        except sqlite3.Error as exc:
            raise _fault(exc, loc) from exc
        self = cls(loc, raw)
        try:
            state = await self.run_read(lambda conn: read_schema(conn, None))  # type: ignore[arg-type]
            if _judge(state, loc.display, create=False, upgrade=False):
                raise StoreError(f"the store {loc.display} must be migrated first")  # not reached: nothing migrates without create or upgrade
            self.schema_change = (state.current, state.current or state.head)
            if not loc.read_only:
                self._file = await identity.claim(self)  # type: ignore[arg-type]
        except StoreError:
            raw.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            raw.close()
            raise _fault(exc, loc) from exc
        return self

    def check_file(self) -> None:
        """Before a write: is the SQLite file at the path still the one this process opened?"""
        if self._file is not None:
            identity.check_same(self.loc, self._file)

    def now(self) -> datetime:
        return clock.store_now()

    async def keep_time(self, *, hot: bool = False) -> None:
        """Nothing to measure: a SQLite store's time is this machine's."""

    def _tx(self, fn: Callable[[LiteConnection], T], begin: str) -> T:
        with begun(self._conn, begin) as conn:
            return fn(conn)

    async def run_read(self, fn: Callable[[LiteConnection], T], *, here: bool = True) -> T:
        """Run `fn(conn)` in one short read transaction (always `here`: this store has no thread)."""
        return self._tx(fn, "BEGIN")

    async def run_write(self, fn: Callable[[LiteConnection], T]) -> T:
        """Run `fn(conn)` in one write transaction: BEGIN IMMEDIATE (a deferred BEGIN that reads, then
        writes, gets SQLITE_BUSY at once, whatever the busy timeout; store/engine.py)."""
        self.check_file()
        return self._tx(fn, "BEGIN IMMEDIATE")

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_AsyncFace]:
        with begun(self._conn, "BEGIN") as conn:
            yield _AsyncFace(conn)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_AsyncFace]:
        self.check_file()
        with begun(self._conn, "BEGIN IMMEDIATE") as conn:
            yield _AsyncFace(conn)

    async def full_store(self) -> Store:
        """A full `Store` on the same file (SQLAlchemy loads now), for what this one does not run."""
        if self._full is None:
            await loop_needed()  # the full store runs on the event loop (loopless.py)
            from sqlalchemy.engine import URL  # late: a lost host to mark is rare, and that runs on SQLAlchemy

            from .store import Store  # late: as above

            url = URL.create("sqlite+aiosqlite", database=self.loc.url.database)
            loc = dataclasses.replace(self.loc, url=url)
            self._full = await Store.open(loc=loc, create=False, upgrade=False, inline=True)
        return self._full

    async def close(self) -> None:
        if self._full is not None:
            full, self._full = self._full, None
            await full.close()
        self._conn.raw.close()


def _fault(exc: BaseException, loc: StoreLocation) -> StoreError:
    from .store_faults import describe_db_error  # late: a fault is rare; describing it may load SQLAlchemy, which this store never does otherwise

    return StoreError(describe_db_error(exc, loc))
