"""A SQLite store opened through the standard library's sqlite3 alone, for a one-shot verb.

`swarmkit status` and `swarmkit stop` on SQLite start much faster when they
do not import SQLAlchemy (its import alone was most of such a verb; issue 13,
and the README's performance table). Their statements are SQLAlchemy Core all
the same: they run by name (store/named.py), compiled once for SQLite into
store/compiled_sqlite.py, through the same functions as on any store (store/reads.py, runtime/control.py).
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
import re
import sqlite3
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

from . import clock, identity
from .loopless import loop_needed
from .named import Statement
from .schema import _judge, read_schema
from .store_errors import NoStoreError, StoreError
from .store_location import (
    SQLITE_BUSY_TIMEOUT_S,
    StoreLocation,
    folder_is_read_only,
    named_store,
    read_only_location,
    sqlite_file_uri,
    sqlite_pragmas,
    sqlite_read_only_query,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from typing import Any, TypeVar

    from .store import Store

    T = TypeVar("T")

# Where SQLAlchemy puts an expanding IN list (`IN (__[POSTCOMPILE_b_ids])`).
_POSTCOMPILE = re.compile(r"__\[POSTCOMPILE_(\w+)\]")


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


def _bind_datetime(value: datetime) -> str:
    # UTCDateTime's rule (naive UTC), then SQLAlchemy's SQLite DATETIME text.
    if not isinstance(value, datetime):
        raise TypeError(f"a datetime was expected, got {value!r}")
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"


def _bind_bool(value: Any) -> int:
    if value not in (True, False):
        raise TypeError(f"a boolean was expected, got {value!r}")
    return int(value)


_BIND: dict[str, Callable[[Any], Any]] = {"datetime": _bind_datetime, "bool": _bind_bool, "float": float}


@lru_cache(maxsize=8192)
def _parse_datetime(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _read_datetime(value: Any) -> datetime:
    # Kept parsed (datetimes are immutable): a poll reads the same runs' created_at,
    # started_at and updated_at every second; a parse costs several lookups.
    return _parse_datetime(value) if isinstance(value, str) else value.replace(tzinfo=UTC)


_READ: dict[str, Callable[[Any], Any]] = {"datetime": _read_datetime, "bool": bool}


def bind_params(stmt: Statement, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The statement's SQL and its parameters as sqlite3 takes them: converted as SQLAlchemy would, lists expanded."""
    sql, defaults, kinds, _columns, _result_kinds = stmt.compiled
    values = {**defaults, **(params or {})}
    for name, kind in kinds.items():
        if values.get(name) is not None:
            values[name] = _BIND[kind](values[name])

    def expand(m: re.Match[str]) -> str:
        name = m[1]
        items = values.pop(name)
        if not items:
            raise ValueError(f"{stmt!r}: the list {name!r} is empty")
        for i, item in enumerate(items, 1):
            values[f"{name}_{i}"] = item
        return ", ".join(f":{name}_{i}" for i in range(1, len(items) + 1))

    if "__[POSTCOMPILE_" in sql:
        sql = _POSTCOMPILE.sub(expand, sql)
    return sql, values


_ROW_CLASSES: dict[tuple[str, ...], type] = {}


def _row_class(columns: tuple[str, ...]) -> type:
    """Rows as SQLAlchemy's are read here: by position, by column name, and as `_mapping`."""
    cls = _ROW_CLASSES.get(columns)
    if cls is None:
        ns: dict[str, Any] = {name: property(itemgetter(i)) for i, name in enumerate(columns)}
        ns["_mapping"] = property(lambda self: dict(zip(columns, self)))
        ns["__slots__"] = ()
        cls = _ROW_CLASSES[columns] = type("LiteRow", (tuple,), ns)
    return cls


class LiteResult:
    """What code reads of a SQLAlchemy `Result`: its rows (converted as SQLAlchemy would) and `rowcount`."""

    def __init__(self, rows: list[Any], rowcount: int):
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return list(self._rows)

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def one(self) -> Any:
        if len(self._rows) != 1:
            raise LookupError(f"one row was expected, got {len(self._rows)}")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None


class _Dialect:
    name = "sqlite"


class LiteConnection:
    """A sqlite3 connection that runs named statements: what store/reads.py and runtime/control.py call."""

    dialect = _Dialect()

    def __init__(self, raw: sqlite3.Connection):
        self.raw = raw

    def execute(self, stmt: Any, params: dict[str, Any] | None = None) -> LiteResult:
        if not isinstance(stmt, Statement):
            raise TypeError(f"a lite store runs named statements (store/named.py), not {type(stmt).__name__}")
        sql, values = bind_params(stmt, params)
        cur = self.raw.execute(sql, values)
        _sql, _defaults, _kinds, columns, result_kinds = stmt.compiled
        if not columns:
            return LiteResult([], cur.rowcount)
        readers = [(i, _READ[k]) for i, k in enumerate(result_kinds) if k]
        row_cls = _row_class(columns)
        rows = []
        for raw in cur.fetchall():
            if readers:
                raw = list(raw)
                for i, read in readers:
                    if raw[i] is not None:
                        raw[i] = read(raw[i])
            rows.append(row_cls(raw))
        return LiteResult(rows, cur.rowcount)

    def scalar(self, stmt: Any, params: dict[str, Any] | None = None) -> Any:
        return self.execute(stmt, params).scalar()


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
            if loc.read_only:
                query = "&".join(f"{k}={v}" for k, v in sqlite_read_only_query(loc).items())
                raw = sqlite3.connect(f"{sqlite_file_uri(path)}?{query}", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
            else:
                raw = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise _fault(exc, loc) from exc
        self = cls(loc, raw)
        try:
            for pragma in sqlite_pragmas(loc.read_only):
                raw.execute(pragma)
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

    @contextmanager
    def _begun(self, begin: str) -> Iterator[LiteConnection]:
        """One transaction: `begin`, then COMMIT, or a rollback of an open one if the body raises."""
        raw = self._conn.raw
        raw.execute(begin)
        try:
            yield self._conn
        except BaseException:
            _rollback(raw)
            raise
        raw.execute("COMMIT")

    def _tx(self, fn: Callable[[LiteConnection], T], begin: str) -> T:
        with self._begun(begin) as conn:
            return fn(conn)

    async def run_read(self, fn: Callable[[LiteConnection], T]) -> T:
        """Run `fn(conn)` in one short read transaction."""
        return self._tx(fn, "BEGIN")

    async def run_write(self, fn: Callable[[LiteConnection], T]) -> T:
        """Run `fn(conn)` in one write transaction: BEGIN IMMEDIATE (a deferred BEGIN that reads, then
        writes, gets SQLITE_BUSY at once, whatever the busy timeout; store/engine.py)."""
        self.check_file()
        return self._tx(fn, "BEGIN IMMEDIATE")

    @asynccontextmanager
    async def read(self) -> AsyncIterator[_AsyncFace]:
        with self._begun("BEGIN") as conn:
            yield _AsyncFace(conn)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[_AsyncFace]:
        self.check_file()
        with self._begun("BEGIN IMMEDIATE") as conn:
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


def _rollback(raw: sqlite3.Connection) -> None:
    # SQLite may have ended the transaction itself (a full disk, an I/O error): the first error is the one to tell.
    if raw.in_transaction:
        raw.execute("ROLLBACK")


def _fault(exc: BaseException, loc: StoreLocation) -> StoreError:
    from .store import describe_db_error  # late: a fault is rare; describing it may load SQLAlchemy, which this store never does otherwise

    return StoreError(describe_db_error(exc, loc))
