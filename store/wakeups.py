"""Wakeups on PostgreSQL: a NOTIFY in the transaction that queues a run or sets its flags, heard by a
worker's LISTEN, so that an idle worker need not poll the store to learn of it (issue 31).

Both ends are a hint, never the truth: the row is read after a wake exactly as after a poll, and a
worker that does not listen (SQLite, PgBouncer in transaction mode, a listening connection lost)
polls as before. A notification is delivered at its transaction's commit, so what it names is there
to read. One channel serves every schema of a database; the payload says which schema
(`current_schema()`, evaluated in the sender's transaction, so through PgBouncer too) and what:
`queued:<run id>` (a run was queued), `claimed:<run id>` (a host took it from the queue), or
`flags:<run id>`. A bare `queued` (an earlier version's sender) names no run.

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
CLAIMED = "claimed"
FLAGS = "flags"
_notify: Any = None


def queued(job_id: str) -> str:
    """The payload that says a run was queued: a listening worker with room looks for it."""
    return f"{QUEUED}:{job_id}"


def claimed(job_id: str) -> str:
    """The payload that says a host took a queued run: a worker about to look for it need not."""
    return f"{CLAIMED}:{job_id}"


def flags(job_id: str) -> str:
    """The payload that says a run's stop or cancel flags changed: its host reads them now."""
    return f"{FLAGS}:{job_id}"


def parse(payload: str) -> tuple[str, str | None]:
    """(what, the run id it names or None): `queued`, `claimed`, `flags`, or what an unknown sender said."""
    what, _, job_id = payload.partition(":")
    return what, job_id or None


async def announce(conn: Any, what: str) -> None:
    """Tell listening workers `what` (`queued(id)`, `claimed(id)`, `flags(id)`) at the commit of `conn`'s transaction; on SQLite nothing."""
    global _notify
    dialect = getattr(conn, "dialect", None)
    if getattr(dialect, "name", None) != "postgresql":
        return
    if _notify is None:
        from sqlalchemy import String, bindparam, func, literal, select  # late: only a PostgreSQL store, which has loaded SQLAlchemy, sends

        _notify = select(func.pg_notify(literal(CHANNEL, String()), func.concat(func.current_schema(), literal("|", String()), bindparam("b_what", type_=String()))))
    await conn.execute(_notify, {"b_what": what})


class Wakeups:
    """LISTEN on a store's main lane; `on_wake(what)` for each notification of its schema.

    The LISTEN is made by `ensure`, never in the pool's connect: a connection the pool replaces (a
    server restart, a killed backend) is not listening until the next `ensure`, and meanwhile `live`
    says so and the worker polls."""

    def __init__(self, store: Store, on_wake: Callable[[str], None]):
        self.store = store
        self.on_wake = on_wake
        self._conns: weakref.WeakSet = weakref.WeakSet()
        self._schema: str | None = None
        self._said = False

    @property
    def possible(self) -> bool:
        """PostgreSQL direct: PgBouncer in transaction mode would hand LISTEN's session to other clients."""
        loc = self.store.loc
        return not (loc.is_sqlite or loc.pgbouncer or loc.read_only)

    @property
    def live(self) -> bool:
        """A listening connection is open: notifications can arrive (else the caller polls)."""
        return any(not c.is_closed() for c in self._conns)

    async def ensure(self) -> bool:
        """Listen on the main lane's connection unless it does already. False: nothing will be heard, poll.
        Never raises: a LISTEN that fails (the connection killed under it) leaves the caller polling."""
        if not self.possible or self.live:
            return self.live
        try:
            async with connect(self.store.engine) as conn:
                raw: Any = (await conn.get_raw_connection()).driver_connection  # asyncpg's own connection
                if raw not in self._conns:
                    if self._schema is None:
                        self._schema = await raw.fetchval("SELECT current_schema()")
                    await raw.add_listener(CHANNEL, self._heard)
                    self._conns.add(raw)
        except Exception as exc:  # a hint lost, not a fault: the poll carries on without it
            if not self._said:
                self._said = True
                log.warning("LISTEN failed, polling until it can be made again: %s", type(exc).__name__)
        return self.live

    def _heard(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        schema, _, what = payload.partition("|")
        if schema == self._schema:
            self.on_wake(what)
