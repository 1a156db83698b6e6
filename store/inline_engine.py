"""An `AsyncEngine`'s face on a sync SQLite engine, for a process that does one thing and exits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine
    from sqlalchemy.engine import Dialect

T = TypeVar("T")


class InlineConnection:
    """An `AsyncConnection`'s face on a sync SQLite connection: each call runs at once, on the caller's thread.

    For a process that does one thing and exits (`swarmkit stop`, `status`):
    nothing else runs on its event loop, so waiting on the file in place costs
    nothing, and the process neither imports SQLAlchemy's asyncio layer (and
    the ORM under it) nor starts aiosqlite's thread, which together were most
    of a verb's start-up after SQLAlchemy itself. The same control
    functions and queries run on it unchanged: it has the methods they call.
    """

    def __init__(self, engine: Engine):
        self._engine = engine
        self._conn: Connection | None = None

    @property
    def sync_connection(self) -> Connection:
        assert self._conn is not None, "not started"
        return self._conn

    @property
    def dialect(self) -> Dialect:
        # As `AsyncConnection.dialect`: a statement with per-dialect parts (store/notification_rows.py) asks it.
        return self._engine.dialect

    async def start(self) -> InlineConnection:
        self._conn = self._engine.connect()
        return self

    async def __aenter__(self) -> InlineConnection:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    async def execute(self, statement: Any, parameters: Any = None, *, execution_options: Any = None) -> Any:
        return self.sync_connection.execute(statement, parameters, execution_options=execution_options)

    async def scalar(self, statement: Any, parameters: Any = None, *, execution_options: Any = None) -> Any:
        return self.sync_connection.scalar(statement, parameters, execution_options=execution_options)

    async def exec_driver_sql(self, statement: str, parameters: Any = None, execution_options: Any = None) -> Any:
        return self.sync_connection.exec_driver_sql(statement, parameters, execution_options=execution_options)

    async def run_sync(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return fn(self.sync_connection, *args, **kw)

    async def execution_options(self, **opts: Any) -> InlineConnection:
        self.sync_connection.execution_options(**opts)
        return self

    def get_execution_options(self) -> Any:
        return self.sync_connection.get_execution_options()

    async def commit(self) -> None:
        self.sync_connection.commit()

    async def rollback(self) -> None:
        self.sync_connection.rollback()

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[Any]:
        with self.sync_connection.begin() as tx:
            yield tx


class InlineEngine:
    """An `AsyncEngine`'s face on a sync SQLite engine, handing out `InlineConnection`s."""

    def __init__(self, sync_engine: Engine):
        self.sync_engine = sync_engine

    def connect(self) -> InlineConnection:
        return InlineConnection(self.sync_engine)

    async def dispose(self) -> None:
        self.sync_engine.dispose()

