"""What the store raises, and whether an error is the store's.

No SQLAlchemy here: a one-shot verb on SQLite and the console's first poll run without it.
"""

from __future__ import annotations

import sqlite3
import sys


class StoreError(Exception):
    """The store cannot be used; the message says which store and why."""


class StoreUrlError(StoreError):
    pass


class SchemaTooNewError(StoreError):
    pass


class SchemaTooOldError(StoreError):
    pass


class NoStoreError(StoreError):
    """Nothing is there to open, and this verb does not create stores."""


def is_store_fault(exc: BaseException) -> bool:
    """`isinstance(exc, store.STORE_FAULTS)`, without loading SQLAlchemy for it: an error raised
    before SQLAlchemy loaded is none of its own (the console's first poll runs without it)."""
    if isinstance(exc, (StoreError, OSError, sqlite3.Error)):
        return True
    sa = sys.modules.get("sqlalchemy.exc")
    # getattr: the module may be half-loaded, by the thread that imports SQLAlchemy after the first frame.
    return sa is not None and isinstance(exc, (getattr(sa, "OperationalError", ()), getattr(sa, "DBAPIError", ())))


class StoreUnavailable(StoreError):
    """The driver's own error while connecting (asyncpg raises its own types there, unwrapped by
    SQLAlchemy): the store is away. `is_transient` reads its cause's SQLSTATE."""
