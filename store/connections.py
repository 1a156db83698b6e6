"""The connection types the rest of Swarmkit names in its annotations, so that no module outside the
store imports SQLAlchemy (import-linter's contract "runtime-sql" in pyproject.toml holds it).

A transaction is opened by the store (`Store.begin`, `Store.connect`, `Store.run_read`) and handed to
the store's named operations; the caller only passes it along.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a one-shot verb loads no SQLAlchemy)
if TYPE_CHECKING:
    from sqlalchemy import Connection as Conn
    from sqlalchemy.ext.asyncio import AsyncConnection as AsyncConn

__all__ = ["AsyncConn", "Conn"]
