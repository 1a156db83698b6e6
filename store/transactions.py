"""Connections and short transactions on a store's engine: a driver's connect error made a store
fault, write transactions that take SQLite's lock up front, and read transactions that end at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .masking import masked
from .store_errors import StoreUnavailable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer imports the ORM: loaded only where an async engine is made.
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


@asynccontextmanager
async def connect(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """`async with engine.connect()`, with a driver's raw connect error turned into a store fault."""
    conn = engine.connect()
    try:
        await conn.start()
    except Exception as exc:
        if type(exc).__module__.split(".")[0] == "asyncpg":
            raise StoreUnavailable(masked(str(exc)) or type(exc).__name__) from exc
        from sqlalchemy.exc import InvalidRequestError  # late: only an async engine's connect gets here, SQLAlchemy loaded

        if isinstance(exc, InvalidRequestError):
            # The pool found its connection dead and the ones it made in its place dead too (its
            # reconnect attempts at checkout, engine.py's ping): the store is away, as a refused connect.
            raise StoreUnavailable(f"the store's connections were gone: {masked(str(exc))}") from exc
        raise
    try:
        yield conn
    finally:
        import asyncio  # late: only the full store's engines run here, on the loop; a lite store loads no asyncio

        await asyncio.shield(conn.close())


@asynccontextmanager
async def write_tx(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A short write transaction: BEGIN IMMEDIATE on SQLite, committed on exit."""
    async with connect(engine) as conn:
        await conn.execution_options(swarmkit_write=True)
        async with conn.begin():
            yield conn


@asynccontextmanager
async def read_tx(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A short read transaction, ended before the caller goes on.

    Nothing holds a read snapshot between operations: a long one pins the WAL
    and hides other processes' writes (the stale-flag trap).
    """
    async with connect(engine) as conn:
        async with conn.begin():
            yield conn
