"""A host's statements on its run's row: the flags, the fenced writes of the hot path, and retrying.

Every write by a host carries its epoch (`MINE`): a process from an older
epoch matches no row, writes nothing, and stops itself. The flag columns come
back from the same statement (RETURNING), under the write lock, or from one
primary-key SELECT in a fresh transaction (`read_flags`): never from a cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import BigInteger, Float, bindparam, insert, select, update

from swarmkit.store import Store, is_transient
from swarmkit.store.models import RUNNING, UTCDateTime, checkpoints, events, jobs

from .backoff import Backoff
from .errors import FencedError
from .settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class Flags:
    """A run's flag columns, as a host reads them at a boundary or a heartbeat."""

    status: str
    epoch: int
    stop_requested_at: Any
    stop_requested_by: str | None
    cancel_requested_at: Any
    cancel_requested_by: str | None
    cancel_keep: bool
    approved_step: int | None
    stop_now: bool | None = False


FLAG_COLS = (
    jobs.c.status,
    jobs.c.epoch,
    jobs.c.stop_requested_at,
    jobs.c.stop_requested_by,
    jobs.c.cancel_requested_at,
    jobs.c.cancel_requested_by,
    jobs.c.cancel_keep,
    jobs.c.approved_step,
    jobs.c.stop_now,
)


# Statements of the hot path, built once: building a statement costs more than
# running it on SQLite (bench/per_node.py measures it).
_NOW = bindparam("b_now", type_=UTCDateTime())
MINE = (jobs.c.id == bindparam("b_id"), jobs.c.epoch == bindparam("b_epoch"), jobs.c.status == RUNNING)
FLAGS = select(*FLAG_COLS).where(jobs.c.id == bindparam("b_id"))
# Every sign of work moves the moment the run would show stalled (the flow's stall_after, else SWARMKIT_STALL_AFTER).
_STALL_AT = bindparam("b_stall_at", type_=UTCDateTime())
TOUCH = update(jobs).where(*MINE).values(last_event_at=_NOW, stall_at=_STALL_AT)
HEARTBEAT = update(jobs).where(*MINE).values(heartbeat_at=_NOW, heartbeat_mono=bindparam("b_mono")).returning(*FLAG_COLS)
# A heartbeat that also brings usage reported mid-node: a sign of work, so it moves last_event_at (the console re-reads the row).
HEARTBEAT_USAGE = (
    update(jobs)
    .where(*MINE)
    .values(
        heartbeat_at=_NOW,
        heartbeat_mono=bindparam("b_mono"),
        tokens=jobs.c.tokens + bindparam("b_tokens", type_=BigInteger()),
        cost=jobs.c.cost + bindparam("b_cost", type_=Float()),
        last_event_at=_NOW,
        stall_at=_STALL_AT,
    )
    .returning(*FLAG_COLS)
)
ENTER = update(jobs).where(*MINE).values(current_node=bindparam("b_node"), updated_at=_NOW, last_event_at=_NOW, node_started_at=_NOW, stall_at=_STALL_AT).returning(*FLAG_COLS)
CHECKPOINT = (
    update(jobs)
    .where(*MINE)
    .values(
        step=bindparam("b_step"),
        tokens=jobs.c.tokens + bindparam("b_tokens", type_=BigInteger()),
        cost=jobs.c.cost + bindparam("b_cost", type_=Float()),
        current_node=bindparam("b_node"),
        updated_at=_NOW,
        last_event_at=_NOW,
        node_started_at=_NOW,
        stall_at=_STALL_AT,
    )
    .returning(*FLAG_COLS)
)
CHECKPOINT_DONE = select(checkpoints.c.epoch).where(checkpoints.c.job_id == bindparam("b_id"), checkpoints.c.step == bindparam("b_step"))
INSERT_CHECKPOINT = insert(checkpoints)
INSERT_EVENTS = insert(events)


async def read_flags(store: Store, job_id: str) -> Flags | None:
    """One primary-key SELECT of the flag columns, in a fresh transaction.

    Not `session.get` and not a long-lived session: an identity map or a held
    read snapshot can keep answering "not stopped" after another process set it.
    """

    def tx(conn) -> Flags | None:
        row = conn.execute(FLAGS, dict(b_id=job_id)).first()
        return Flags(*row) if row else None

    return await store.run_read(tx, hot=True)


async def retry_transient(settings: Settings, op: Callable[[], Awaitable[T]], on_retry: Callable[[BaseException], None] | None = None) -> T:
    """`op`, retried through transient store faults for part of the lease (FencedError and
    every other fault are raised at once)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(2 * settings.heartbeat_s, 0.6 * settings.lease_s)
    backoff = Backoff(0.05, 1.0)  # the outage backoff, tighter: a host's lease is running
    while True:
        try:
            return await op()
        except FencedError:
            raise
        except Exception as exc:
            if not is_transient(exc) or loop.time() >= deadline:
                raise
            if on_retry is not None:
                on_retry(exc)
            await asyncio.sleep(backoff.next())
