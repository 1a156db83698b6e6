"""The store's fault rules: which errors are the store's (`STORE_FAULTS`), which are worth retrying
(`is_transient`, `is_lock_wait`), and the one line that names the store and what is wrong with it
(`describe_db_error`)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, ProgrammingError

from .masking import masked
from .store_errors import StoreError, StoreUnavailable
from .store_location import StoreLocation, folder_is_read_only


def _sqlite_folder(loc: StoreLocation) -> Path | None:
    return Path(loc.url.database).parent if loc.is_sqlite and loc.url.database else None


def _free_bytes(folder: Path) -> int | None:
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def describe_db_error(exc: BaseException, loc: StoreLocation) -> str:
    """One line naming the store and what is wrong with it: never the SQL or its parameters."""
    orig = getattr(exc, "orig", None) or exc
    # A driver may quote the DSN it was given, password and all.
    text = masked(str(orig).strip().splitlines()[0]) if str(orig).strip() else type(orig).__name__
    folder = _sqlite_folder(loc)
    if "file is not a database" in text:
        return f"{loc.display} is not a Swarmkit store (file is not a database)"
    if "readonly database" in text or "attempt to write a readonly" in text or (
        folder is not None and "unable to open database file" in text and folder_is_read_only(folder / "x")
    ):
        where = f" (its folder {folder} cannot be written)" if folder is not None else ""
        return f"the store {loc.display} is read-only{where}"
    if "disk is full" in text or "database or disk is full" in text or (
        folder is not None and ("disk I/O error" in text or "unable to open" in text) and _free_bytes(folder) == 0
    ):
        return f"the store {loc.display} has no space left ({text}; 0 bytes free in {folder})"
    if "unsupported startup parameter" in text:
        # PgBouncer's answer to a client that sends session settings at connect.
        return f"store {loc.display}: {text} (is it PgBouncer? add pgbouncer=true to the store URL's query)"
    if "database is locked" in text:
        return f"the store {loc.display} is locked by another process ({text})"
    if isinstance(orig, (ConnectionError, OSError)) or "connect" in text.lower():
        return f"cannot reach the store {loc.display}: {text}"
    return f"store {loc.display}: {text}"


# Errors a caller may treat as "the store is unavailable right now".
STORE_FAULTS = (StoreError, OperationalError, DBAPIError, OSError, sqlite3.Error)


# SQLSTATEs of a server that is briefly away or busy: connection exceptions (08...),
# an administrator's or a crash's shutdown (57P01, 57P02), a server starting up or
# shutting down (57P03), too many connections (53300), and the retryable
# conflicts (40001 serialization, 40P01 deadlock). A restart of the server
# raises these for a second or two; none of them says anything about the run.
_TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "53300", "40001", "40P01")


# asyncpg's names for a connection that is gone or cannot go on. InternalClientError is a protocol
# left half-way through an operation by a connection killed mid-query ("cannot switch to state 12;
# another operation (2) is in progress"): the here lane (store/pg_here_lane.py) raises it unwrapped
# by SQLAlchemy's dialect, and the next read, on another connection, answers.
_ASYNCPG_CONNECTION_LOST = ("ConnectionDoesNotExist", "ConnectionFailure", "InterfaceError", "InternalClientError", "CannotConnectNow", "AdminShutdown", "ConnectionRejection")


def _names_a_lost_connection(exc: object) -> bool:
    return any(w in type(exc).__name__ for w in _ASYNCPG_CONNECTION_LOST)


def is_lock_wait(exc: BaseException) -> bool:
    """A write that waited out the store's lock (SQLite's busy timeout): whoever looks next may try again."""
    return isinstance(exc, OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def _sqlstate(exc: BaseException) -> str | None:
    for e in (exc, getattr(exc, "orig", None), exc.__cause__, exc.__context__):
        code = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """A fault worth retrying: a dropped connection, a store that is briefly away, restarting or locked.

    Not a constraint violation, not a bad statement: retrying those repeats the fault.
    """
    if type(exc) is StoreError and exc.__cause__ is not None:
        # What an open that failed says (describe_db_error), over the fault itself: judged by that
        # fault, but a refusal for good (28: credentials, 3D: no such database) is never retried.
        cause = exc.__cause__
        if (_sqlstate(cause) or "").startswith(("28", "3D")):
            return False
        # A SQLite file that cannot be opened or written (permissions, a read-only folder) stays so.
        if isinstance(cause, (sqlite3.Error, PermissionError, FileNotFoundError)) or isinstance(getattr(cause, "orig", None), sqlite3.Error):
            return False
        return is_transient(exc.__cause__)
    code = _sqlstate(exc)
    if code is not None and code.startswith(_TRANSIENT_SQLSTATES):
        return True
    if isinstance(exc, StoreUnavailable):
        # A connect that failed in the driver: away, unless it was refused for good
        # (28: bad credentials; 3D: no such database).
        return not (code or "").startswith(("28", "3D"))
    if isinstance(exc, (IntegrityError, ProgrammingError)):
        return False
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, OperationalError):
            return True
        return _names_a_lost_connection(getattr(exc, "orig", None))  # SQLAlchemy's adaptor's classes, or asyncpg's
    if type(exc).__module__.startswith("asyncpg") and _names_a_lost_connection(exc):
        return True
    return isinstance(exc, (ConnectionError, TimeoutError, asyncio.TimeoutError, OSError))
