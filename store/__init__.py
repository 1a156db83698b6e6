"""The shared jobs store: SQLite (WAL) by default, PostgreSQL across machines.

Knows nothing of flows or of any UI.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import asynccontextmanager
from typing import AsyncIterator

from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .engine import (
    STORE_ENV,
    StoreError,
    StoreLocation,
    StoreUrlError,
    make_engine,
    read_tx,
    resolve_store,
    write_tx,
)
from .models import (
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    DEFERRED,
    FAILED,
    FAULTED,
    LOST,
    QUEUED,
    RESUMABLE_STATUSES,
    RUNNING,
    STOPPED,
    STORED_STATUSES,
    TERMINAL_STATUSES,
)
from .records import JobRecord, merged_view, utcnow
from .schema import SchemaTooNewError, ensure_schema

__all__ = [
    "ACTIVE_STATUSES",
    "CANCELLED",
    "COMPLETED",
    "DEFERRED",
    "FAILED",
    "FAULTED",
    "JobRecord",
    "LOST",
    "QUEUED",
    "RESUMABLE_STATUSES",
    "RUNNING",
    "STOPPED",
    "STORED_STATUSES",
    "STORE_ENV",
    "SchemaTooNewError",
    "Store",
    "StoreError",
    "StoreLocation",
    "StoreUrlError",
    "TERMINAL_STATUSES",
    "describe_db_error",
    "merged_view",
    "resolve_store",
    "utcnow",
]


def describe_db_error(exc: BaseException, loc: StoreLocation) -> str:
    """One line naming the store and what is wrong with it."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    if "file is not a database" in text:
        return f"{loc.display} is not a Swarmkit store (file is not a database)"
    if "readonly database" in text or "attempt to write a readonly" in text:
        return f"the store {loc.display} is read-only ({text})"
    if "disk is full" in text or "database or disk is full" in text:
        return f"the store {loc.display} has no space left ({text})"
    if "database is locked" in text:
        return f"the store {loc.display} is locked by another process ({text})"
    if isinstance(orig, (ConnectionError, OSError)) or "connect" in text.lower():
        return f"cannot reach the store {loc.display}: {text}"
    return f"store {loc.display}: {text}"


class Store:
    """An open store: its location and its engine. Close it on the loop that opened it."""

    def __init__(self, loc: StoreLocation, engine: AsyncEngine):
        self.loc = loc
        self.engine = engine

    @classmethod
    async def open(
        cls,
        store: str | None = None,
        workspace: str | os.PathLike | None = None,
        *,
        loc: StoreLocation | None = None,
        create: bool = True,
        migrate: bool = True,
    ) -> "Store":
        loc = loc or resolve_store(store, workspace)
        engine = make_engine(loc, create=create)
        self = cls(loc, engine)
        try:
            if migrate:
                await ensure_schema(engine, loc)
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

    async def close(self) -> None:
        await self.engine.dispose()

    async def __aenter__(self) -> "Store":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with write_tx(self.engine) as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with read_tx(self.engine) as conn:
            yield conn


# Errors a caller may treat as "the store is unavailable right now".
STORE_FAULTS = (StoreError, OperationalError, DBAPIError, OSError, sqlite3.Error)
