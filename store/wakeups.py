"""Wakeups on PostgreSQL: a NOTIFY in the transaction that queues a run or sets its flags, heard by a
worker's LISTEN, so that an idle worker need not poll the store to learn of it (issue 31).

Both ends are a hint, never the truth: the row is read after a wake exactly as after a poll, and a
worker that does not listen (SQLite, PgBouncer in transaction mode, a listening connection lost)
polls as before. A notification is delivered at its transaction's commit, so what it names is there
to read. One channel serves every schema of a database; the payload says which schema
(`current_schema()`, evaluated in the sender's transaction, so through PgBouncer too) and what:
`queued`, or `flags:<run id>`.

The listener is the worker's main lane (store.py: a host's two connections): LISTEN costs no
connection of its own, and asyncpg hands a notification over whenever it arrives, the connection
idle in its pool or busy. No SQLAlchemy at import: a one-shot verb on SQLite sends nothing and loads
none of it.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

from .transactions import connect

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from .store import Store

log = logging.getLogger("swarmkit.store")

CHANNEL = "swarmkit_wake"
QUEUED = "queued"
_FLAGS = "flags:"
_notify: Any = None


def flags(job_id: str) -> str:
    """The payload that says a run's stop or cancel flags changed: its host reads them now."""
    return _FLAGS + job_id


def flagged(payload: str) -> str | None:
    """The run id a `flags` payload names, else None."""
    return payload[len(_FLAGS):] if payload.startswith(_FLAGS) else None


async def announce(conn: Any, what: str) -> None:
    """Tell listening workers `what` (`QUEUED`, `flags(id)`) at the commit of `conn`'s transaction; on SQLite nothing."""
    global _notify
    dialect = getattr(conn, "dialect", None)
    if getattr(dialect, "name", None) != "postgresql":
        return
    if _notify is None:
        from sqlalchemy import String, bindparam, func, literal, select  # late: only a PostgreSQL store, which has loaded SQLAlchemy, sends

        _notify = select(func.pg_notify(literal(CHANNEL, String()), func.concat(func.current_schema(), literal("|", String()), bindparam("b_what", type_=String()))))
    await conn.execute(_notify, {"b_what": what})


class Wakeups:
    """LISTEN on a store's main lane, every connection it makes; `on_wake(what)` for each notification of its schema."""

    def __init__(self, store: Store, on_wake: Callable[[str], None]):
        self.store = store
        self.on_wake = on_wake
        self._conns: weakref.WeakSet = weakref.WeakSet()
        self._schema: str | None = None

    @property
    def live(self) -> bool:
        """A listening connection is open: notifications can arrive (else the caller polls)."""
        return any(not c.is_closed() for c in self._conns)

    async def start(self) -> bool:
        """Listen where the connection allows it: PostgreSQL direct (PgBouncer in transaction mode would
        hand LISTEN's session to other clients). False: nothing will be heard, poll."""
        loc = self.store.loc
        if loc.is_sqlite or loc.pgbouncer or loc.read_only:
            return False
        from sqlalchemy import event  # late: as in announce

        engine = self.store.engine
        event.listen(engine.sync_engine, "connect", self._on_connect)
        # The pool's connection may predate the hook: listen on it too.
        async with connect(engine) as conn:
            raw = await conn.get_raw_connection()
            await self._listen(raw.driver_connection)
        return self.live

    def _on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        from sqlalchemy.util import await_only  # late: as in announce

        try:
            await_only(self._listen(dbapi_connection.driver_connection))
        except Exception as exc:  # the poll goes on without it; a failed LISTEN must not fail the connection
            log.warning("LISTEN failed, polling instead: %s", type(exc).__name__)

    async def _listen(self, conn: Any) -> None:
        if conn in self._conns:
            return
        self._schema = await conn.fetchval("SELECT current_schema()")
        await conn.add_listener(CHANNEL, self._heard)
        self._conns.add(conn)

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        schema, _, what = payload.partition("|")
        if schema == self._schema:
            self.on_wake(what)
