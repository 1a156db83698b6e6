"""Leases: how long a host's silence is allowed, and what any looker does past it.

A host renews its lease with every heartbeat; a running row whose heartbeat is
older than its lease is `lost` (or `cancelled` when a cancel was asked: nobody
is left to carry it out), marked by whichever process looks first. Ages are
judged in SQL on the store's clock (`store.clock`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from swarmkit.store import clock
from swarmkit.store.clock import store_now
from swarmkit.store.named import S
from swarmkit.store.reads import count_live_workers
from swarmkit.store.statuses import CANCELLED, LOST

from .journal import record_audit, record_event
from .notify import record_notification
from .settings import MAX_LEASE_S, Settings, host_name
from .workspaces import carry_out, decide

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store


def claim_lease(lease_s: float | None) -> float:
    """The lease a claim writes on the row: the hosting process's (its SWARMKIT_LEASE unless it says).
    Every judge adds it to the row's heartbeat in SQL: a lease no interval holds is refused here."""
    if lease_s is None:
        return Settings.from_env().lease_s
    if not 0 < lease_s <= MAX_LEASE_S:  # nan fails both
        raise ValueError(f"a lease of {lease_s!r} s: a host's lease is more than zero and at most {MAX_LEASE_S:g} s")
    return lease_s


async def mark_lost(store: Store, lease_s: float, hosting: Mapping[str, int] | None = None) -> list[str]:
    """Mark running rows whose host stopped heart-beating past the lease.

    Any process that looks may do this. A row whose cancel was requested
    ends `cancelled` instead: nobody is left to carry the cancel out, and it
    must not sit in "cancelling" forever. `hosting` (run id: epoch): the runs
    the looking process hosts itself; their host is alive, since it is the
    one looking, however late its heartbeats (others still mark them, and its
    agents end with the lease).
    """
    if store.loc.read_only:
        return []  # looking only: a read-only store cannot be marked
    await store.keep_time()
    sqlite = store.loc.is_sqlite
    stmt, params = S.STALE_RUNNING_SQLITE if sqlite else S.STALE_RUNNING, clock.age_params(lease_s, sqlite)
    # One autocommit statement where the store allows (Store.run_read(here=True)): every looker asks it.
    stale = await store.run_read(lambda conn: conn.execute(stmt, params).all(), here=True)
    if not stale:
        return []
    from swarmkit.store.lite import LiteStore  # late: a one-shot verb on SQLite (`stop`, `status`) loads no SQLAlchemy unless a host died
    from swarmkit.store.run_writes import mark_lapsed  # late: a one-shot verb on SQLite (`stop`, `status`) loads no SQLAlchemy unless a host died
    from swarmkit.store.store_faults import is_lock_wait  # late: a one-shot verb on SQLite (`stop`, `status`) loads no SQLAlchemy unless a host died

    if isinstance(store, LiteStore):
        # A host died: rare, and what it takes (workspaces, a cancel carried out) runs on SQLAlchemy.
        store = await store.full_store()
    marked: list[str] = []
    for row in stale:
        if hosting and hosting.get(row.id) == row.epoch:
            continue
        now = store_now()
        to = CANCELLED if row.cancel_requested_at is not None else LOST
        values: dict[str, Any] = dict(status=to, updated_at=now)
        if to == CANCELLED:
            values["ended_at"] = now
        try:
            async with store.quick_write() as conn:
                if await mark_lapsed(conn, row.id, row.epoch, values, lease_s=lease_s, sqlite=sqlite) != 1:
                    continue
                beat = row.heartbeat_at  # timezone-aware from both paths (UTCDateTime, store/lite.py)
                last = f"last {beat.strftime('%H:%M:%S')}, {(now - beat).total_seconds():.1f}s ago" if beat else "never"
                # Who judged, and on what clock: a healthy run marked lost is told apart from a dead host by this.
                said_lost = f"host {row.host} pid {row.pid} stopped heart-beating ({last}); marked {to} by {host_name()} pid {os.getpid()}"
                await record_event(conn, row.id, f"run.{to}", said_lost, at=now)
                if to == LOST:
                    await record_notification(conn, row.id, "run.lost", flow=row.flow, text=said_lost, node=row.current_node, at=now)
                if to == CANCELLED:
                    said = await decide(conn, row.id, destroy=not row.cancel_keep, reason="cancelled")
                    await record_audit(conn, row.cancel_requested_by or "swarmkit", "run.cancelled", row.id, {"keep": bool(row.cancel_keep), "host_lost": True, "workspaces": said}, at=now)
        except Exception as exc:
            if is_lock_wait(exc):
                # The store's write lock is held (perhaps by the frozen host
                # itself): whoever looks next marks it; looking must not hang.
                continue
            raise
        marked.append(row.id)
        if to == CANCELLED and not row.cancel_keep:
            await carry_out(store, row.id)
    return marked


async def live_worker_count(store: Store, lease_s: float) -> int:
    """Workers that have not stopped and heart-beat within the lease: one count, by a named statement
    (a `resume` on a lite SQLite store asks it, with no SQLAlchemy loaded)."""
    return await store.run_read(lambda conn: count_live_workers(conn, lease_s))
