"""The open store (`Store`); its fault rules are store/store_faults.py's."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from .pg_here_lane import PgHereLane

from . import clock, identity
from .engine import make_engine, make_sync_engine
from .here_lane import HereLane
from .inline_engine import InlineEngine
from .schema import ensure_schema
from .store_errors import StoreError
from .store_faults import describe_db_error
from .store_location import SQLITE_BUSY_TIMEOUT_S, StoreLocation, folder_is_read_only, read_only_location, resolve_store
from .transactions import connect, read_tx, write_tx

T = TypeVar("T")


class Store:
    """An open store: its location and its engine. Close it on the loop that opened it.

    Hot paths (a host's node boundary and checkpoint) run a plain function on a
    sync connection through `run_write` / `run_read`. On SQLite that function
    runs whole on one thread with the stdlib driver: one hop per transaction
    instead of one per statement, which is most of the cost of a node
    (measured in bench/). On PostgreSQL it runs on the async connection
    through `run_sync`.

    `inline` (SQLite only; `Store.open(inline=True)`): everything runs on the
    caller's thread through the stdlib driver (see `engine.InlineConnection`),
    for a process that does one thing and exits. A process that hosts runs,
    polls or serves must not: a busy store would stall its event loop.

    On PostgreSQL a Store holds at most `connections` server connections, in
    lanes: with two, the hot path (`hot=True`: a run's boundary checks, its
    checkpoints and its heartbeats, short transactions on its own row) has a
    connection of its own, so it never queues behind a slow write (a batch of
    log lines, a claim, a lost-run sweep waiting on a frozen host's row lock);
    everything else queues for the other. With one, both lanes are the same
    connection (a console, a one-shot verb).
    """

    def __init__(self, loc: StoreLocation, engine: AsyncEngine | None, *, application_name: str | None = None, connections: int = 1):
        self.loc = loc
        self._engine = engine
        self.application_name = application_name
        self.connections = max(1, connections)
        self._hot_engine: AsyncEngine | None = None
        self.inline = isinstance(engine, InlineEngine)
        self._sync_engine: Engine | None = getattr(engine, "sync_engine", None) if self.inline else None
        self._executor: ThreadPoolExecutor | None = None
        # (device, inode) of the SQLite file this process opened, checked before every write.
        self._file: tuple[int, int] | None = None
        self.schema_change: tuple[str | None, str] | None = None
        # The sqlite3 connections of `run_read(here=True)` and `run_write(here=True)`, for the thread that opened the store.
        self._here = HereLane(loc)
        # PostgreSQL's reads `here` (store/pg_here_lane.py), one lane per engine they read on: made at first use.
        self._pg_here: dict[int, PgHereLane] = {}

    @property
    def engine(self) -> AsyncEngine:
        """The async engine, made at first use: on SQLite a process that only polls through
        `run_read` (the console's first paint) never loads SQLAlchemy's asyncio layer and the
        ORM under it, nor aiosqlite (a large part of its start-up; issue 12)."""
        if self._engine is None:
            self._engine = make_engine(self.loc, create=False)
        return self._engine

    @classmethod
    async def open(
        cls,
        store: str | None = None,
        workspace: str | os.PathLike | None = None,
        *,
        loc: StoreLocation | None = None,
        create: bool = True,
        upgrade: bool = True,
        migrate: bool = True,
        inline: bool = False,
        application_name: str | None = None,
        connections: int = 1,
    ) -> Store:
        """Open a store. `create`: make it when nothing is there; `upgrade`: bring an older schema
        to this code's (see `store.schema`); `migrate=False` skips the schema check altogether;
        `inline`: see the class (ignored on PostgreSQL); `application_name` and `connections`:
        what PostgreSQL sees of this process, and how many server connections it may hold."""
        loc = loc or resolve_store(store, workspace)
        if loc.is_sqlite and loc.url.database and Path(loc.url.database).exists() and folder_is_read_only(Path(loc.url.database)):  # noqa: ASYNC240
            loc = read_only_location(loc)
        if loc.is_sqlite:
            identity.check_not_gone(loc, create)
        # On SQLite the open's own statements run inline, on this thread (nothing
        # else of this store runs yet); that engine then serves `run_read` and
        # `run_write` on the store's thread, and the async one is made when first used.
        connections = max(1, connections)
        # The main lane: all of the budget but the hot lane's connection.
        engine = make_engine(loc, create=create, inline=loc.is_sqlite, application_name=application_name, connections=max(1, connections - 1))
        self = cls(loc, engine if inline or not loc.is_sqlite else None, application_name=application_name, connections=connections)
        if not self.inline and loc.is_sqlite:
            self._sync_engine = engine.sync_engine
        try:
            if migrate:
                self.schema_change = await ensure_schema(engine, loc, create=create, upgrade=upgrade)
            if loc.is_sqlite and not loc.read_only:
                self._file = await identity.claim(self)
            await self.keep_time()
        except StoreError:
            await engine.dispose()
            raise
        except (SQLAlchemyError, OSError, sqlite3.Error) as exc:
            await engine.dispose()
            raise StoreError(describe_db_error(exc, loc)) from exc
        except Exception as exc:  # asyncpg raises its own types on connect
            await engine.dispose()
            raise StoreError(describe_db_error(exc, loc)) from exc
        return self

    def _lane(self, hot: bool) -> AsyncEngine:
        if not hot or self.connections < 2 or self.loc.is_sqlite:
            return self.engine
        if self._hot_engine is None:
            self._hot_engine = make_engine(self.loc, create=False, application_name=self.application_name, connections=1)
        return self._hot_engine

    def check_file(self) -> None:
        """Before a write: is the SQLite file at the path still the one this process opened?"""
        if self._file is not None:
            identity.check_same(self.loc, self._file)

    def now(self):
        """The store's time (see `store.clock`)."""
        return clock.store_now()

    async def keep_time(self, *, hot: bool = False) -> None:
        """Measure the store's clock again when the last measure is a minute old (PostgreSQL only).
        `hot`: on the hot lane, as a heartbeat's own write is (it must not queue behind the main lane)."""
        if not self.loc.is_sqlite and clock.anchor_due():
            async with self.read(hot=hot) as conn:
                t0 = clock.boot_clock()
                server = (await conn.execute(text("SELECT clock_timestamp()"))).scalar_one()
                clock.anchor(server, t0, clock.boot_clock())

    async def close(self) -> None:
        self._here.close()
        for lane in self._pg_here.values():
            await lane.close()
        self._pg_here.clear()
        if self.inline:
            self._close_thread_conns()
        if self._executor is not None:
            ex, self._executor = self._executor, None
            await asyncio.get_running_loop().run_in_executor(ex, self._close_thread_conns)
            ex.shutdown(wait=False)
        elif self._sync_engine is not None:
            self._sync_engine.dispose()
        self._sync_engine = None
        if self._hot_engine is not None:
            await self._hot_engine.dispose()
        if self._engine is not None:
            await self._engine.dispose()

    def _sqlite_thread(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swarmkit-sqlite")
            if self._sync_engine is None:
                self._sync_engine = make_sync_engine(self.loc)
        return self._executor

    def _thread_conn(self, write: bool) -> Connection:
        """The store thread's own connection, kept open: a pool checkout and its reset cost as much as a node's statements."""
        key = "_sync_write" if write else "_sync_read"
        conn = getattr(self, key, None)
        if conn is None or conn.closed or conn.invalidated:
            assert self._sync_engine is not None
            conn = self._sync_engine.connect()
            if write:
                conn = conn.execution_options(swarmkit_write=True)
            setattr(self, key, conn)
        return conn

    def _in_thread(self, fn: Callable[[Connection], T], write: bool) -> T:
        conn = self._thread_conn(write)
        try:
            with conn.begin():
                return fn(conn)
        except BaseException:
            if conn.invalidated:
                setattr(self, "_sync_write" if write else "_sync_read", None)
            raise

    def _close_thread_conns(self) -> None:
        for key in ("_sync_write", "_sync_read"):
            conn = getattr(self, key, None)
            if conn is not None:
                conn.close()
                setattr(self, key, None)
        if self._sync_engine is not None:
            self._sync_engine.dispose()

    async def _lane_free(self, engine: AsyncEngine) -> AsyncEngine:
        """`engine`, with the connection its reads here hold given back to its pool first (store/pg_here_lane.py)."""
        if (lane := self._pg_here.get(id(engine))) is not None:
            await lane.give_back()
        return engine

    @asynccontextmanager
    async def write(self, *, hot: bool = False) -> AsyncIterator[AsyncConnection]:
        self.check_file()
        async with write_tx(await self._lane_free(self._lane(hot))) as conn:
            yield conn

    @asynccontextmanager
    async def quick_write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction that gives up after a second on a locked SQLite store instead of thirty
        (a looker marking a lost run: the lock may be held by the frozen host itself; `is_lock_wait`)."""
        if not self.loc.is_sqlite:
            async with self.write() as conn:
                yield conn
            return
        self.check_file()  # like every write: never into a file that is not the one this process opened
        async with connect(self.engine) as conn:
            await conn.exec_driver_sql("PRAGMA busy_timeout=1000")
            await conn.commit()
            try:
                await conn.execution_options(swarmkit_write=True)
                async with conn.begin():
                    yield conn
            finally:
                await conn.exec_driver_sql(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
                await conn.commit()

    @asynccontextmanager
    async def read(self, *, hot: bool = False) -> AsyncIterator[AsyncConnection]:
        async with read_tx(await self._lane_free(self._lane(hot))) as conn:
            yield conn

    async def run_write(self, fn: Callable[[Connection], T], *, hot: bool = False, here: bool = False) -> T:
        """Run `fn(conn)` in one write transaction (BEGIN IMMEDIATE on SQLite); commit unless it raises.
        `hot`: on the hot path's lane (see the class).

        `here`: `fn` runs named statements only (store/named.py); on SQLite it is tried first on this
        thread (store/here_lane.py), and waits for another writer on the store's thread."""
        if here and not self.inline and self._here.usable():
            self.check_file()
            done, out = self._here.write(fn)  # type: ignore[arg-type]
            if done:
                return out  # type: ignore[return-value]
        if self.inline:
            self.check_file()
            return self._in_thread(fn, True)
        if self.loc.is_sqlite:
            self.check_file()
            ex = self._sqlite_thread()
            return await asyncio.get_running_loop().run_in_executor(ex, self._in_thread, fn, True)
        async with self.write(hot=hot) as aconn:
            return await aconn.run_sync(fn)

    async def run_read(self, fn: Callable[[Connection], T], *, hot: bool = False, here: bool = False) -> T:
        """Run `fn(conn)` in one short read transaction, ended before it returns.

        `here`: `fn` runs named statements only (store/named.py), and on SQLite it runs on this thread
        (store/here_lane.py): the loop waits for it, so for short reads only. On PostgreSQL it runs them
        with asyncpg alone (store/pg_here_lane.py), each a transaction of its own (no BEGIN nor COMMIT:
        two round trips of four for a read of one row), for reads that need no one snapshot across their
        statements (a run and its workspaces; a page after its cursor). Not through PgBouncer: there the
        schema is set in each transaction's BEGIN (engine.py)."""
        if here and self._here.usable():
            return self._here.read(fn)  # type: ignore[arg-type]
        if self.inline:
            return self._in_thread(fn, False)
        if self.loc.is_sqlite:
            ex = self._sqlite_thread()
            return await asyncio.get_running_loop().run_in_executor(ex, self._in_thread, fn, False)
        if here and not self.loc.pgbouncer:
            engine = self._lane(hot)
            if (lane := self._pg_here.get(id(engine))) is None:
                from .pg_here_lane import PgHereLane  # late: PostgreSQL's only (a SQLite process loads none of it)

                lane = self._pg_here[id(engine)] = PgHereLane(engine)
            return await lane.read(fn)  # type: ignore[arg-type]
        async with self.read(hot=hot) as aconn:
            return await aconn.run_sync(fn)
