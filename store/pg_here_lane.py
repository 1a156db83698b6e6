"""A `Store`'s short reads `here` on PostgreSQL: named statements run with asyncpg alone, on a connection
of the store's main lane (`PgHereLane`).

Through SQLAlchemy a read of one row costs about 300 us of CPU, nearly all of it around the statement:
the pool's checkout, its ping, the execution context and the result's making (the statement itself,
with asyncpg alone, about 20 us; bench/http_throughput.py, the HTTP door's reads). So, as
store/here_lane.py does on SQLite, the reads of `Store.run_read(here=True)` run each named statement
(store/named.py) compiled once for the PostgreSQL dialect, with bound parameters converted as SQLAlchemy
would, straight on the driver's connection; their rows come back as SQLAlchemy's do.

The connection is the main lane's own, checked out of its pool (the connection budget is unchanged)
and kept for `SLICE_S` at most: the reads of that slice pay for one checkout (with its ping) between
them. The store gives it back at once before its own work on that lane (`Store.write`, `Store.read`);
anything else on the engine waits for the slice's end at most. Each statement is a transaction of its
own (no BEGIN nor COMMIT), as `run_read(here=True)` allows. Not through PgBouncer: there the schema is
set in each transaction's BEGIN (engine.py), and asyncpg's prepared statements would land on any
server connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.util import await_only, greenlet_spawn

from .here_lane import as_sqlalchemy_error
from .lite_connection import LiteResult, row_class
from .named import Statement
from .transactions import connect

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from sqlalchemy.engine import Dialect
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")

# How long the lane keeps the main lane's connection checked out: what a write that bypasses `Store` may wait.
SLICE_S = 0.05


class _Compiled:
    """One named statement compiled for the PostgreSQL dialect: its SQL, its parameters' order and
    converters, its result columns and theirs. A statement with an expanding list (`IN (...)`) is
    expanded per call, by SQLAlchemy, for the list's length."""

    __slots__ = ("compiled", "sql", "order", "binds", "row_cls", "reads", "expanding", "_by_length")

    def __init__(self, stmt: Statement, dialect: Dialect):
        compiled = stmt.core.compile(dialect=dialect)
        self.compiled = compiled
        self.expanding = "__[POSTCOMPILE_" in compiled.string
        self._by_length: dict[tuple[tuple[str, int], ...], tuple[str, tuple[str, ...], dict[str, Any]]] = {}
        state = None if self.expanding else compiled.construct_expanded_state(dict.fromkeys(compiled.binds))  # the SQL and converters, whatever the values
        self.sql = state.statement if state is not None else compiled.string
        self.order = tuple(state.positiontup or ()) if state is not None else ()
        self.binds = dict(compiled._bind_processors)  # as SQLAlchemy's execution converts each parameter (its types' bind processors)
        columns = compiled._result_columns  # (key, name, objects, type) of each column, as SQLAlchemy's result reads them
        self.row_cls = row_class(tuple(c[0] for c in columns)) if columns else None
        self.reads: list[tuple[int, Callable[[Any], Any]]] | None = None  # at the first execution: some converters need the column's type on the server

    def learn_reads(self, raw: Any, sql: str, dialect: Dialect) -> list[tuple[int, Callable[[Any], Any]]]:
        """Each result column's converter, as SQLAlchemy makes it from the server's description of the column (once a statement)."""
        oids = [a.type.oid for a in await_only(raw.prepare(sql)).get_attributes()]
        columns = self.compiled._result_columns
        self.reads = [(i, p) for i, (c, oid) in enumerate(zip(columns, oids, strict=True)) if (p := c[3].dialect_impl(dialect).result_processor(dialect, oid)) is not None]
        return self.reads

    def bound(self, params: dict[str, Any]) -> tuple[str, list[Any]]:
        if self.expanding:
            return self._expanded(params)
        values = self.compiled.construct_params(params)
        binds = self.binds
        return self.sql, [conv(values[name]) if (conv := binds.get(name)) is not None else values[name] for name in self.order]

    def _expanded(self, params: dict[str, Any]) -> tuple[str, list[Any]]:
        """A statement with an expanding list, expanded by SQLAlchemy once for each length of its lists."""
        lists = tuple(sorted((k, len(v)) for k, v in params.items() if isinstance(v, (list, tuple))))
        known = self._by_length.get(lists)
        if known is None:
            state = self.compiled.construct_expanded_state(params)
            known = self._by_length[lists] = (state.statement, tuple(state.positiontup or ()), {**self.binds, **state.processors})
        sql, order, binds = known
        values = self.compiled.construct_params(params)
        for name, items in params.items():
            if isinstance(items, (list, tuple)):
                values.update((f"{name}_{i}", item) for i, item in enumerate(items, 1))
        return sql, [conv(values[name]) if (conv := binds.get(name)) is not None else values[name] for name in order]


class _Dialect:
    name = "postgresql"


class PgLiteConnection:
    """The connection `fn` of `Store.run_read(here=True)` is given on PostgreSQL: it runs named statements
    only (what store/reads.py and runtime/acts.py call), inside the lane's greenlet."""

    dialect = _Dialect()

    def __init__(self, raw: Any, lane: PgHereLane):
        self.raw = raw
        self.lane = lane

    def execute(self, stmt: Any, params: dict[str, Any] | None = None) -> LiteResult:
        if not isinstance(stmt, Statement):
            raise TypeError(f"a read here runs named statements (store/named.py), not {type(stmt).__name__}")
        compiled = self.lane.compiled(stmt)
        sql, args = compiled.bound(params or {})
        try:
            rows = await_only(self.raw.fetch(sql, *args))
        except BaseException as exc:
            # Cancelled or failed, the driver's connection may be half-way through the statement: it is not
            # given back as good (the next read checks out another).
            self.lane.broken = True
            if isinstance(exc, Exception):
                raise as_sqlalchemy_error(exc, Exception) from exc
            raise
        if compiled.row_cls is None:
            return LiteResult([], len(rows))
        reads = compiled.reads if compiled.reads is not None else compiled.learn_reads(self.raw, sql, self.lane.dialect)
        row_cls = compiled.row_cls
        out = []
        for rec in rows:
            values = tuple(rec)
            if reads:
                values = list(values)  # type: ignore[assignment]
                for i, read in reads:
                    values[i] = read(values[i])  # type: ignore[index]
            out.append(row_cls(values))
        return LiteResult(out, len(out))

    def scalar(self, stmt: Any, params: dict[str, Any] | None = None) -> Any:
        return self.execute(stmt, params).scalar()


class PgHereLane:
    def __init__(self, engine: AsyncEngine):
        self.engine = engine
        self.dialect = engine.dialect
        self._statements: dict[str, _Compiled] = {}
        self._lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._expiring: asyncio.Future[None] | None = None
        self._held: tuple[AbstractAsyncContextManager[AsyncConnection], AsyncConnection, Any] | None = None
        self._since = 0.0
        self.broken = False  # the last statement failed or was cancelled: the connection is not given back as good

    def compiled(self, stmt: Statement) -> _Compiled:
        found = self._statements.get(stmt.name)
        if found is None:
            found = self._statements[stmt.name] = _Compiled(stmt, self.dialect)
        return found

    async def read(self, fn: Callable[[PgLiteConnection], T]) -> T:
        """`fn(conn)`, its statements each a transaction of its own, on the main lane's connection."""
        async with self._lock:
            try:
                if self._held is None:
                    holder = connect(self.engine)
                    aconn = await holder.__aenter__()
                    try:
                        raw = (await aconn.get_raw_connection()).driver_connection
                    except BaseException as exc:
                        await holder.__aexit__(type(exc), exc, exc.__traceback__)
                        raise
                    self._held, self._since = (holder, aconn, raw), time.monotonic()
                raw = self._held[2]
                self.broken = False
                try:
                    return await greenlet_spawn(fn, PgLiteConnection(raw, self))
                finally:
                    if self.broken:
                        await self._release(invalidate=True)
            finally:
                if self._held is not None:
                    if time.monotonic() - self._since > SLICE_S:
                        await self._release()
                    elif self._timer is None:
                        self._timer = asyncio.get_running_loop().call_later(SLICE_S, self._expire)

    def _expire(self) -> None:
        self._timer = None
        # A read in flight gives the connection back at its end (its slice is over by then).
        if self._held is not None and not self._lock.locked():
            self._expiring = asyncio.ensure_future(self.give_back())

    async def give_back(self) -> None:
        """The main lane's connection back to its pool now, unless a read is using it: the store's other
        work on the lane (a write, a sweep) calls this first, and waits for no slice to end."""
        if self._held is not None and not self._lock.locked():
            async with self._lock:
                await self._release()

    async def _release(self, invalidate: bool = False) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        holder, aconn, _raw = held
        if invalidate:
            try:
                await aconn.invalidate()
            except Exception:  # a connection already gone has nothing left to end
                pass
        await holder.__aexit__(None, None, None)

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        async with self._lock:
            await self._release()
