"""Named statements run with sqlite3 alone: the connection a lite store (store/lite.py) and a `Store`'s
reads and writes `here` (store/store.py) run them on.

Each statement's compiled form (store/compiled_sqlite.py, by name through store/named.py) is bound as
SQLAlchemy would bind it (naive-UTC datetimes, booleans as integers, expanding lists), and its rows
come back as SQLAlchemy's do: by position, by name, and as `_mapping`. Nothing here imports SQLAlchemy
nor the store's other modules: a one-shot verb loads it, and store/store.py imports it.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from pathlib import Path

from .named import Statement
from .store_location import SQLITE_BUSY_TIMEOUT_S, StoreLocation, sqlite_file_uri, sqlite_pragmas, sqlite_read_only_query

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

# Where SQLAlchemy puts an expanding IN list (`IN (__[POSTCOMPILE_b_ids])`).
_POSTCOMPILE = re.compile(r"__\[POSTCOMPILE_(\w+)\]")


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


def row_class(columns: tuple[str, ...]) -> type:
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

    def execute(self, stmt: Any, params: dict[str, Any] | list[dict[str, Any]] | None = None) -> LiteResult:
        if not isinstance(stmt, Statement):
            raise TypeError(f"a lite store runs named statements (store/named.py), not {type(stmt).__name__}")
        if isinstance(params, list):  # many rows, as SQLAlchemy's executemany (no expanding lists, no results)
            bound = [bind_params(stmt, p) for p in params]
            if not bound:
                return LiteResult([], 0)
            cur = self.raw.executemany(bound[0][0], [values for _sql, values in bound])
            return LiteResult([], cur.rowcount)
        sql, values = bind_params(stmt, params)
        cur = self.raw.execute(sql, values)
        _sql, _defaults, _kinds, columns, result_kinds = stmt.compiled
        if not columns:
            return LiteResult([], cur.rowcount)
        readers = [(i, _READ[k]) for i, k in enumerate(result_kinds) if k]
        row_cls = row_class(columns)
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


def connect_raw(loc: StoreLocation) -> sqlite3.Connection:
    """A sqlite3 connection to the store's file, with the PRAGMAs of every connection to it (store/engine.py).
    Raises sqlite3's errors as they are: the caller says what they mean for its store."""
    path = Path(loc.url.database or "")
    if loc.read_only:
        query = "&".join(f"{k}={v}" for k, v in sqlite_read_only_query(loc).items())
        raw = sqlite3.connect(f"{sqlite_file_uri(path)}?{query}", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    else:
        raw = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        for pragma in sqlite_pragmas(loc.read_only):
            raw.execute(pragma)
    except sqlite3.Error:
        raw.close()
        raise
    return raw


def begun(conn: LiteConnection, begin: str) -> contextlib.AbstractContextManager[LiteConnection]:
    """One transaction: `begin`, then COMMIT, or a rollback of an open one if the body raises."""
    conn.raw.execute(begin)
    return begun_already(conn)


@contextmanager
def begun_already(conn: LiteConnection) -> Iterator[LiteConnection]:
    """The rest of a transaction already begun: COMMIT, or a rollback of an open one if the body (or the COMMIT) raises."""
    raw = conn.raw
    try:
        yield conn
        raw.execute("COMMIT")
    except BaseException:
        _rollback(raw)
        raise


def _rollback(raw: sqlite3.Connection) -> None:
    # SQLite may have ended the transaction itself (a full disk, an I/O error): the first error is the one to tell.
    if raw.in_transaction:
        raw.execute("ROLLBACK")
