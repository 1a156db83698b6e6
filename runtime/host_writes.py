"""A host's reads of its run's flags, and its retrying through transient store faults.

Its statements are the store's (store/host_statements.py): every write by a
host carries its epoch (`MINE` there), so a process from an older epoch matches
no row, writes nothing, and stops itself. The flag columns come back from the
same statement (RETURNING), under the write lock, or from one primary-key
SELECT in a fresh transaction (`read_flags`): never from a cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from swarmkit.store import Store, is_transient
from swarmkit.store.host_statements import FLAGS

from .backoff import Backoff
from .errors import FencedError
from .settings import Settings

T = TypeVar("T")


@dataclass(frozen=True)
class Flags:
    """A run's flag columns, as a host reads them at a boundary or a heartbeat (in the order of
    store/host_statements.FLAG_COLS)."""

    status: str
    epoch: int
    stop_requested_at: Any
    stop_requested_by: str | None
    cancel_requested_at: Any
    cancel_requested_by: str | None
    cancel_keep: bool
    approved_step: int | None
    stop_now: bool | None = False
    stop_reason: str | None = None
    # What the run has spent (nodes finished: `step`) and its budget's JSON, for runtime/budgets.py.
    tokens: int = 0
    cost: float = 0.0
    step: int = 0
    ran_s: float | None = None
    budget: str | None = None
    stop_when: str | None = None


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
