"""The store's engines: async (aiosqlite, asyncpg), sync (pysqlite) and inline, and the hooks
each connection and transaction runs (SQLite's pragmas and BEGIN, PostgreSQL's settings).

Engines are made at run time and disposed by their owner: each Textual test
and each CLI command runs its own event loop, and an `AsyncEngine` must never
outlive the loop it was made on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError

from .inline_engine import InlineEngine
from .store_errors import NoStoreError, StoreError
from .store_location import SQLITE_BUSY_TIMEOUT_S, StoreLocation, sqlite_file_uri, sqlite_pragmas, sqlite_read_only_query

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine


def _prepare_sqlite_dir(path: Path) -> None:
    """The store folder and file are readable by their owner only, and the file is born in WAL mode."""
    parent = path.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, mode=0o700, exist_ok=True)  # two first opens at once both get here
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {parent}: {exc.strerror or exc}") from None
    if not path.exists():
        try:
            _give_birth(path)
        except OSError as exc:
            raise StoreError(f"cannot create the store file {path}: {exc.strerror or exc}") from None


def _give_birth(path: Path) -> None:
    """Make the store file already in WAL mode, whole or not at all.

    Every connection asks for WAL (`sqlite_pragmas`). On a file still in rollback mode that
    request is a write made from inside a read, and SQLite answers a second process doing the
    same at that moment "database is locked" at once, whatever the busy timeout (it would
    deadlock otherwise): eight `swarmkit run`s on a new store lost one that way. So the file is
    made under a name of its own, switched to WAL there, and linked into place; whoever links
    second finds the store already there.
    """
    import sqlite3  # late: only a store's first open makes its file

    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: that one is the store
        except OSError:
            # A file system without hard links: an empty file, switched to WAL by its first connection.
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
    finally:
        for leftover in (tmp, *(Path(f"{tmp}-{end}") for end in ("journal", "wal", "shm"))):
            leftover.unlink(missing_ok=True)


def _sqlite_url(loc: StoreLocation, driver: str) -> URL:
    if not loc.read_only:
        return loc.url.set(drivername=driver)
    return URL.create(driver, database=sqlite_file_uri(loc.url.database or ""), query={**sqlite_read_only_query(loc), "uri": "true"})


PG_IDLE_IN_TRANSACTION_MS = 5000
# Longer than any Swarmkit transaction, short enough that a wedged connection is reported.
POOL_TIMEOUT_S = 60.0


def make_engine(
    loc: StoreLocation, *, create: bool = True, inline: bool = False, application_name: str | None = None, connections: int = 1,
) -> AsyncEngine:
    """The store's engine. `inline` (SQLite only): an `InlineEngine`, for a process that does one thing and exits.

    On PostgreSQL the engine holds at most `connections` server connections (callers
    queue for them), named `application_name` in `pg_stat_activity`.
    """
    if loc.is_sqlite:
        path = Path(loc.url.database or "")
        if create and not loc.read_only:
            _prepare_sqlite_dir(path)
        elif not path.exists():
            raise NoStoreError(f"no store at {path}")
        if inline:
            return cast("AsyncEngine", InlineEngine(make_sync_engine(loc)))
        from sqlalchemy.ext.asyncio import create_async_engine  # late: it loads the ORM, which an inline engine (a one-shot verb) needs none of

        engine = create_async_engine(
            _sqlite_url(loc, "sqlite+aiosqlite"),
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
            pool_size=8,
            max_overflow=32,
        )
        _install_sqlite_hooks(engine, loc.read_only)
        return engine
    from sqlalchemy.ext.asyncio import create_async_engine  # late: as above

    # A host frozen inside a transaction (SIGSTOP, a suspended VM) would keep
    # its row locks for ever: the server's default has no limit, and every
    # act on its run and every lease check would wait behind it. No Swarmkit
    # transaction sits idle for long, so the server ends one that does; a
    # host that wakes finds its connection gone and its epoch fenced.
    server_settings: dict[str, str] = {}
    if application_name:
        server_settings["application_name"] = application_name
    connect_args: dict = {"timeout": 10, "server_settings": server_settings}
    url = loc.url
    if loc.pgbouncer:
        # PgBouncer refuses startup parameters but a few (application_name is one), and
        # in transaction mode a session setting or a named prepared statement would land
        # on whichever server connection served that transaction. So: no statement cache
        # in asyncpg nor in SQLAlchemy's dialect (every statement is an unnamed one, parsed
        # in the transaction that runs it), and the settings are made per transaction.
        connect_args["statement_cache_size"] = 0
        url = url.update_query_dict({"prepared_statement_cache_size": "0"})
    else:
        server_settings["idle_in_transaction_session_timeout"] = str(PG_IDLE_IN_TRANSACTION_MS)
        if loc.schema:
            server_settings["search_path"] = loc.schema
    engine = create_async_engine(
        url,
        connect_args=connect_args,
        pool_size=max(1, connections),
        max_overflow=0,
        pool_timeout=POOL_TIMEOUT_S,
    )
    _install_ping(engine)
    if loc.pgbouncer:
        _install_per_transaction_settings(engine, loc.schema)
    _install_broken_protocol_hook(engine)
    return engine


def _install_ping(engine: AsyncEngine) -> None:
    """A connection is tried before each use, one round trip: a server that restarted since leaves dead
    connections in the pool, and one found dead is replaced (the pool connects anew, up to three times).

    SQLAlchemy's own `pool_pre_ping` does the same in three round trips with asyncpg (BEGIN, the ping,
    ROLLBACK: for PgBouncer, whose transaction mode needs no such thing for a simple-protocol query),
    more than the reads it comes before (bench/http_throughput.py)."""
    from sqlalchemy.util import await_only  # late: with the async engine, which a one-shot verb on SQLite never makes

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping(_dbapi_connection, _record, proxy) -> None:
        try:
            await_only(proxy.driver_connection.execute("SELECT 1"))  # the simple query protocol: no statement prepared
        except Exception as exc:
            raise DisconnectionError(f"the store's connection was gone: {type(exc).__name__}") from exc


def _install_broken_protocol_hook(engine: AsyncEngine) -> None:
    # A connection killed mid-query can leave asyncpg's protocol half-way through an
    # operation ("cannot switch to state 12; another operation (2) is in progress"). The
    # dialect does not call that a disconnect, so the pool would hand the same broken
    # connection out again, and with one connection a lane there is no other: call it one.
    @event.listens_for(engine.sync_engine, "handle_error")
    def _on_error(ctx):
        if type(ctx.original_exception).__name__ == "InternalClientError":
            ctx.is_disconnect = True


# One round trip at each BEGIN, transaction-local (`is_local`): what a direct
# connection gets once as startup parameters, a pooled one gets every time.
_PER_TRANSACTION = "SELECT set_config('idle_in_transaction_session_timeout', $1, true), set_config('search_path', $2, true)"
_PER_TRANSACTION_NO_SCHEMA = "SELECT set_config('idle_in_transaction_session_timeout', $1, true)"


def _install_per_transaction_settings(engine: AsyncEngine, schema: str | None) -> None:
    timeout = str(PG_IDLE_IN_TRANSACTION_MS)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn):
        if schema:
            conn.exec_driver_sql(_PER_TRANSACTION, (timeout, f'"{schema}"'))
        else:
            conn.exec_driver_sql(_PER_TRANSACTION_NO_SCHEMA, (timeout,))


def make_sync_engine(loc: StoreLocation) -> Engine:
    """A stdlib-driver engine on the same SQLite file, for one dedicated thread."""
    assert loc.is_sqlite
    engine = create_engine(
        _sqlite_url(loc, "sqlite+pysqlite"),
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
        pool_size=2,
        max_overflow=2,
    )
    _install_sqlite_hooks(engine, loc.read_only)
    return engine


def _install_sqlite_hooks(engine: AsyncEngine | Engine, read_only: bool = False) -> None:
    sync_engine = cast(Engine, getattr(engine, "sync_engine", engine))

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Take transaction control away from the sqlite3 module, so that we
        # decide when BEGIN happens and of which kind.
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        for pragma in sqlite_pragmas(read_only):
            cur.execute(pragma)
        cur.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn):
        # A deferred BEGIN that reads and then writes gets SQLITE_BUSY at once,
        # ignoring the busy timeout; write transactions take the lock up front.
        if conn.get_execution_options().get("swarmkit_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

