"""Where the store is: its URL resolved (`--store`, `SWARMKIT_STORE`, the workspace), and how a
SQLite store on a folder that cannot be written is looked at (read only, immutable, stale or not).
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .masking import masked
from .store_errors import StoreUrlError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    # SQLAlchemy is imported where a URL is parsed: a one-shot verb on SQLite runs
    # through the standard library's sqlite3 without it (store/lite.py).
    from sqlalchemy.engine import URL

STORE_ENV = "SWARMKIT_STORE"
STORE_DIRNAME = ".swarmkit"
STORE_FILENAME = "store.db"
# Long enough to ride out a burst of writers, short enough that a truly
# stuck store is reported instead of hanging a terminal.
SQLITE_BUSY_TIMEOUT_S = 30.0


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


@dataclass(frozen=True)
class NamedStore:
    """Which store the operator means, read from the words alone (no URL parsed yet)."""

    workspace: Path
    # The SQLite file the words plainly name (none given, a bare path, `sqlite:///PATH` with no options) ...
    sqlite_file: Path | None
    # ... else the URL to parse (PostgreSQL, or SQLite with options).
    url_text: str | None


def named_store(store: str | None = None, workspace: str | os.PathLike | None = None) -> NamedStore:
    """The one rule for which store a verb means: `--store` wins, then `SWARMKIT_STORE`, then SQLite in
    the workspace. A bare path is a SQLite file (the common case for `--store`). Standard library only:
    `resolve_store` builds the full location from it, and the one-shot verbs' sqlite3 path (lite.py)
    opens the file it names without loading SQLAlchemy."""
    ws = Path(workspace if workspace is not None else os.getcwd()).resolve()
    raw = store or os.environ.get(STORE_ENV) or None
    if raw is None:
        return NamedStore(ws, default_sqlite_path(ws), None)
    raw = raw.strip()
    if "://" not in raw:
        return NamedStore(ws, Path(raw).expanduser().resolve(), None)
    plain = raw.removeprefix("sqlite:///") if raw.startswith("sqlite:///") and not any(ch in raw for ch in "?#%@") else None
    if plain not in (None, "", ".", ":memory:"):
        return NamedStore(ws, Path(plain).expanduser().resolve(), None)
    return NamedStore(ws, None, raw)


def resolve_store(store: str | None = None, workspace: str | os.PathLike | None = None) -> StoreLocation:
    """The store's location: `named_store`'s choice, its URL parsed and checked."""
    from sqlalchemy.engine import URL, make_url  # late: only a full store parses its URL; a one-shot verb on SQLite names its file without SQLAlchemy
    from sqlalchemy.exc import ArgumentError  # late: as above

    named = named_store(store, workspace)
    ws = named.workspace
    if named.sqlite_file is not None:
        return StoreLocation(URL.create("sqlite+aiosqlite", database=str(named.sqlite_file)), ws)
    raw = named.url_text or ""
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


def sqlite_pragmas(read_only: bool) -> list[str]:
    """What every connection to a SQLite store runs first (here, and on a lite store: store/lite.py)."""
    pragmas = [] if read_only else ["PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL"]
    return pragmas + ["PRAGMA foreign_keys=ON", f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}"]
