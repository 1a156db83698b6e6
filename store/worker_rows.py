"""A worker's own row in `workers` (runtime/worker.py): written when it starts, moved by its heartbeats.

Lookers judge a worker alive by this row (store/queries.py `live_workers`,
statements' WORKER_SKEW): what is written here is what they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, update

from .models import workers

if TYPE_CHECKING:
    from .connections import AsyncConn


async def add_worker(conn: AsyncConn, values: dict[str, Any]) -> None:
    """The row of a worker that starts (`values`: its id, host, pid, concurrency, lease and first heartbeat)."""
    await conn.execute(insert(workers).values(**values))


async def update_worker(conn: AsyncConn, worker_id: str, values: dict[str, Any]) -> None:
    """A worker's heartbeat (and, as it stops, its `stopped_at`) on its row."""
    await conn.execute(update(workers).where(workers.c.id == worker_id).values(**values))
