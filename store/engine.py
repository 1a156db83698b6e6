"""Store URLs, engines and transactions.

Engines are made at run time and disposed by their owner: each Textual test
and each CLI command runs its own event loop, and an `AsyncEngine` must never
outlive the loop it was made on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote

if TYPE_CHECKING:
    # SQLAlchemy is imported where an engine is made or a URL parsed: a one-shot verb on
    # SQLite runs through the standard library's sqlite3 without it (store/lite.py; issue 13).
    from sqlalchemy import Connection, Engine
    from sqlalchemy.engine import URL

    # SQLAlchemy's asyncio layer imports the ORM: loaded only where an async engine is made.
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")

STORE_ENV = "SWARMKIT_STORE"
STORE_DIRNAME = ".swarmkit"
STORE_FILENAME = "store.db"
# Long enough to ride out a burst of writers, short enough that a truly
# stuck store is reported instead of hanging a terminal.
SQLITE_BUSY_TIMEOUT_S = 30.0


class StoreError(Exception):
    """The store cannot be used; the message says which store and why."""


class StoreUrlError(StoreError):
    pass


def is_store_fault(exc: BaseException) -> bool:
    """`isinstance(exc, store.STORE_FAULTS)`, without loading SQLAlchemy for it: an error raised
    before SQLAlchemy loaded is none of its own (the console's first poll runs without it)."""
    if isinstance(exc, (StoreError, OSError, sqlite3.Error)):
        return True
    sa = sys.modules.get("sqlalchemy.exc")
    # getattr: the module may be half-loaded, by the thread that imports SQLAlchemy after the first frame.
    return sa is not None and isinstance(exc, (getattr(sa, "OperationalError", ()), getattr(sa, "DBAPIError", ())))


MASK = "***"
# `scheme://user:password@`: the user part stops at the first `:`, the password
# runs to the last `@` of the word (a raw URL may hold an unescaped `@` in it).
_USERINFO_PASSWORD = re.compile(r"(?P<pre>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'\"]*:)[^\s'\"]*@")
# `?password=...`, `&password=...`, and libpq's `password=...` keyword form;
# punctuation that ends a sentence after the value is the sentence's.
_PARAM_PASSWORD = re.compile(r"(?i)(?<![A-Za-z0-9])(password=)[^&\s'\"]*?(?=[:,;.)\]]*(?:[&\s'\"]|$))")


def masked(text_or_url: object) -> str:
    """The text (or URL) with every password in it shown as `***`.

    Store URLs, driver errors and agents' log lines are read on every machine
    that shares the store, and printed into terminals and CI logs: each of
    those goes through here before it is shown or stored.
    """
    render = getattr(text_or_url, "render_as_string", None)  # a URL (SQLAlchemy's, or lite.SqliteFile)
    if render is not None:
        text = render(hide_password=True)
    else:
        text = str(text_or_url)
    if "://" in text:
        text = _USERINFO_PASSWORD.sub(lambda m: m["pre"] + MASK + "@", text)
    if "=" in text:
        text = _PARAM_PASSWORD.sub(lambda m: m[1] + MASK, text)
    return text


class MaskedFormatter(logging.Formatter):
    """Log records as `masked` shows them: an exception logged from a driver may quote its DSN."""

    def format(self, record: logging.LogRecord) -> str:
        return masked(super().format(record))


def log_to_stderr(level: str, prefix: str) -> None:
    """What hosts and verbs log goes to stderr at `level`, passwords masked."""
    handler = logging.StreamHandler()
    handler.setFormatter(MaskedFormatter(f"{prefix}: %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])


@dataclass(frozen=True)
class StoreLocation:
    url: URL
    # Where run workspaces live: `<workspace>/.swarmkit/runs`.
    workspace: Path
    schema: str | None = None
    # A SQLite store whose folder cannot be written (a read-only mount): it is
    # opened for looking only; every write is refused as read-only.
    read_only: bool = False
    # Opened without its WAL (see read_only_location): what it shows is the
    # last checkpoint, and `stale_warning` says so to whoever looks.
    immutable: bool = False
    stale_warning: str | None = None
    # PostgreSQL reached through PgBouncer in transaction pooling mode (`?pgbouncer=true`):
    # consecutive transactions of one client may run on different server connections.
    pgbouncer: bool = False

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @property
    def display(self) -> str:
        """The URL with any password hidden, for headers and messages."""
        shown = masked(self.url)
        notes = ([f"schema {self.schema}"] if self.schema else []) + (["through PgBouncer"] if self.pgbouncer else [])
        if notes:
            shown += f" ({', '.join(notes)})"
        return shown

    @property
    def runs_dir(self) -> Path:
        return self.workspace / STORE_DIRNAME / "runs"


def default_sqlite_path(workspace: Path) -> Path:
    return workspace / STORE_DIRNAME / STORE_FILENAME


def resolve_store(store: str | None = None, workspace: str | os.PathLike | None = None) -> StoreLocation:
    """`--store` wins, then `SWARMKIT_STORE`, then SQLite in the workspace."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    ws = Path(workspace if workspace is not None else os.getcwd()).resolve()
    raw = store or os.environ.get(STORE_ENV) or None
    if raw is None:
        return StoreLocation(URL.create("sqlite+aiosqlite", database=str(default_sqlite_path(ws))), ws)
    raw = raw.strip()
    if "://" not in raw:
        # A bare path is taken as a SQLite file, the common case for `--store`.
        path = Path(raw).expanduser().resolve()
        return StoreLocation(URL.create("sqlite+aiosqlite", database=str(path)), ws)
    try:
        url = make_url(raw)
    except (ArgumentError, ValueError) as exc:
        # The parser's own message quotes the raw string too.
        raise StoreUrlError(masked(f"store URL {raw!r} does not parse: {exc}")) from None
    shown = masked(url)
    backend = url.get_backend_name()
    schema: str | None = None
    if backend == "sqlite":
        url = url.set(drivername="sqlite+aiosqlite")
        if not url.database or url.database == ":memory:":
            raise StoreUrlError(f"store URL {shown!r} names no database file (an in-memory SQLite store is private to one process)")
        url = url.set(database=str(Path(url.database).expanduser().resolve()))
    elif backend in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+asyncpg")
        query = dict(url.query)
        given = query.pop("schema", None)
        schema = given[-1] if isinstance(given, tuple) else given
        bouncer = query.pop("pgbouncer", None)
        bouncer = bouncer[-1] if isinstance(bouncer, tuple) else bouncer
        url = url.set(query=query)
        if schema is not None and not schema.replace("_", "").isalnum():
            raise StoreUrlError(f"store URL {shown!r}: schema {masked(schema)!r} must be letters, digits and underscores")
        if bouncer is not None and bouncer.lower() not in _YES + _NO:
            raise StoreUrlError(f"store URL {shown!r}: pgbouncer={masked(bouncer)!r} must be true or false")
        return StoreLocation(url, ws, schema, pgbouncer=bouncer is not None and bouncer.lower() in _YES)
    else:
        raise StoreUrlError(f"store URL {shown!r}: unsupported database {backend!r} (use sqlite:///path or postgresql://host/db)")
    return StoreLocation(url, ws, schema)


_YES = ("true", "1", "yes", "on")
_NO = ("false", "0", "no", "off")


def _prepare_sqlite_dir(path: Path) -> None:
    """The store folder and file are readable by their owner only."""
    parent = path.parent
    if not parent.exists():
        try:
            parent.mkdir(parents=True, mode=0o700, exist_ok=True)  # two first opens at once both get here
        except OSError as exc:
            raise StoreError(f"cannot create the store folder {parent}: {exc.strerror or exc}") from None
    if not path.exists():
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot create the store file {path}: {exc.strerror or exc}") from None


def folder_is_read_only(path: Path) -> bool:
    """True when the store's folder exists but cannot be written (a read-only mount, or no write permission)."""
    folder = path.parent
    if not folder.is_dir():
        return False
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
    except OSError:
        return False
    return not os.access(folder, os.W_OK)


STALE_WARNING = (
    "read-only store without its WAL index: what it shows may be stale "
    "(changes since its last checkpoint are not shown)"
)


def sqlite_file_uri(path: str | os.PathLike) -> str:
    """A `file:` URI for SQLite: `%`, `?` and `#` in a path are its own, not URI syntax."""
    return "file:" + quote(os.fspath(path))


def _opens_with_wal(path: Path) -> bool:
    try:
        conn = sqlite3.connect(f"{sqlite_file_uri(path)}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S)
    except sqlite3.Error:
        return False
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def read_only_location(loc: StoreLocation) -> StoreLocation:
    """How to look at a SQLite store whose folder cannot be written.

    SQLite reads the WAL of a read-only store only when its -wal and -shm
    files are there to read (it cannot create them). Otherwise the store is
    opened immutable: right when there is no WAL (a clean shutdown leaves
    none), and stale when committed pages wait in one, which the location
    then says in `stale_warning`.
    """
    path = Path(loc.url.database or "")
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    if all(os.access(p, os.R_OK) for p in (wal, shm)) and _opens_with_wal(path):
        return dataclasses.replace(loc, read_only=True)
    try:
        pending = wal.stat().st_size > 0
    except OSError:
        pending = False
    return dataclasses.replace(loc, read_only=True, immutable=True, stale_warning=STALE_WARNING if pending else None)


def sqlite_read_only_query(loc: StoreLocation) -> dict[str, str]:
    """The `file:` URI's query that opens a read-only SQLite store (here, and on a lite store: store/lite.py)."""
    query = {"mode": "ro"}
    if loc.immutable:
        # No locks and no WAL: the one way to open a WAL store on a read-only
        # mount that lacks its -shm (read_only_location decides).
        query["immutable"] = "1"
    return query


def _sqlite_url(loc: StoreLocation, driver: str) -> URL:
    from sqlalchemy.engine import URL

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
            from .schema import NoStoreError

            raise NoStoreError(f"no store at {path}")
        if inline:
            return cast("AsyncEngine", InlineEngine(make_sync_engine(loc)))
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(
            _sqlite_url(loc, "sqlite+aiosqlite"),
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
            pool_size=8,
            max_overflow=32,
        )
        _install_sqlite_hooks(engine, loc.read_only)
        return engine
    from sqlalchemy.ext.asyncio import create_async_engine

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
        pool_pre_ping=True,
    )
    if loc.pgbouncer:
        _install_per_transaction_settings(engine, loc.schema)
    _install_broken_protocol_hook(engine)
    return engine


def _install_broken_protocol_hook(engine: AsyncEngine) -> None:
    from sqlalchemy import event

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
    from sqlalchemy import event

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
    from sqlalchemy import create_engine

    engine = create_engine(
        _sqlite_url(loc, "sqlite+pysqlite"),
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S},
        pool_size=2,
        max_overflow=2,
    )
    _install_sqlite_hooks(engine, loc.read_only)
    return engine


def sqlite_pragmas(read_only: bool) -> list[str]:
    """What every connection to a SQLite store runs first (here, and on a lite store: store/lite.py)."""
    pragmas = [] if read_only else ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"]
    return pragmas + ["PRAGMA foreign_keys=ON", f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}"]


def _install_sqlite_hooks(engine: AsyncEngine | Engine, read_only: bool = False) -> None:
    from sqlalchemy import Engine, event

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


class InlineConnection:
    """An `AsyncConnection`'s face on a sync SQLite connection: each call runs at once, on the caller's thread.

    For a process that does one thing and exits (`swarmkit stop`, `status`):
    nothing else runs on its event loop, so waiting on the file in place costs
    nothing, and the process neither imports SQLAlchemy's asyncio layer (and
    the ORM under it) nor starts aiosqlite's thread, which together were most
    of a verb's start-up after SQLAlchemy itself (issue 13). The same control
    functions and queries run on it unchanged: it has the methods they call.
    """

    def __init__(self, engine: Engine):
        self._engine = engine
        self._conn: Connection | None = None

    @property
    def sync_connection(self) -> Connection:
        assert self._conn is not None, "not started"
        return self._conn

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


class StoreUnavailable(StoreError):
    """The driver's own error while connecting (asyncpg raises its own types there, unwrapped by
    SQLAlchemy): the store is away. `is_transient` reads its cause's SQLSTATE."""


@asynccontextmanager
async def connect(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """`async with engine.connect()`, with a driver's raw connect error turned into a store fault."""
    conn = engine.connect()
    try:
        await conn.start()
    except Exception as exc:
        if type(exc).__module__.split(".")[0] == "asyncpg":
            raise StoreUnavailable(masked(str(exc)) or type(exc).__name__) from exc
        raise
    try:
        yield conn
    finally:
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
