"""The writes of a run's `jobs` row that have parts known only at run time (runtime/acts.py, claims.py,
leases.py, run_ends.py, executor.py): a run submitted, cancelled, claimed, marked lost,
ended or parked.

Each change of state is one conditional UPDATE, a compare-and-set on the row's
id and epoch and on its status (and on its flags where the act says), and
answers how many rows it moved: the caller decides what a 0 means. The caller
holds the transaction; these only build and run the statement in it. What to
write is the caller's (`values`: column name to value); the conditions are
here, fixed per operation.

The one-shot verbs on SQLite (`status`, `stop`, `resume`, `approve`) load no SQLAlchemy: their
modules import this one where they write, not at their top.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, case, insert, update

from . import clock, liveness
from .models import FAULTED, RUNNING, checkpoints, jobs
from .named import S

if TYPE_CHECKING:
    from .connections import AsyncConn, Conn


# --- an act's writes (runtime/acts.py) ------------------------------------------------------


async def insert_run(conn: AsyncConn, values: dict[str, Any], state: str) -> None:
    """A new run's row, and its checkpoint 0 holding `state` (its inputs), at the row's epoch."""
    await conn.execute(insert(jobs).values(**values))
    await conn.execute(
        insert(checkpoints).values(job_id=values["id"], step=0, node=None, state=state, epoch=values["epoch"], created_at=values["created_at"])
    )


# --- claims (runtime/claims.py) --------------------------------------------------------------


def queued_runs(conn: Conn, limit: int) -> list[Any]:
    """The oldest queued runs, up to `limit`: (id, epoch, flow_source, flow_path, flow_modules) each.
    A named statement: one autocommit statement where the store allows it (`Store.run_read(here=True)`),
    since a worker with room asks it every poll."""
    return [tuple(row) for row in conn.execute(S.QUEUED_RUNS, {"b_limit": limit})]


async def claim(conn: AsyncConn, job_id: str, status: str, epoch: int, now: datetime, values: dict[str, Any]) -> int:
    """A run taken by a host, if it is still `status` at `epoch`; `values` hold the new epoch and the host.
    A run started before keeps its first start."""
    res = await conn.execute(
        update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status == status, jobs.c.epoch == epoch)
        .values(started_at=case((jobs.c.started_at.is_(None), now), else_=jobs.c.started_at), **values)
    )
    return res.rowcount


# --- a lapsed lease (runtime/leases.py) -----------------------------------------------------


async def mark_lapsed(conn: AsyncConn, job_id: str, epoch: int, values: dict[str, Any], *, lease_s: float, sqlite: bool) -> int:
    """A running row moved to `values` (lost, or cancelled), if at `epoch` its heartbeat is still older than the lease:
    a heartbeat that landed since it was read keeps the run."""
    lapsed = liveness.stale(jobs, sqlite)
    res = await conn.execute(
        update(jobs).where(and_(jobs.c.id == job_id, jobs.c.status == RUNNING, jobs.c.epoch == epoch, lapsed)).values(**values),
        clock.age_params(lease_s, sqlite),
    )
    return res.rowcount


# --- a host's last writes (runtime/run_ends.py, runtime/executor.py) ------------------------


async def end_hosted(
    conn: AsyncConn, job_id: str, epoch: int, values: dict[str, Any], *, unless_cancelled: bool, add_usage: tuple[int, float] | None = None,
) -> int:
    """The hosted run's row moved to `values`, if it is still running at the host's `epoch` (and, `unless_cancelled`,
    no cancel was asked). `add_usage` (tokens, cost) is added to what the row holds, in the same statement."""
    cond = [jobs.c.id == job_id, jobs.c.epoch == epoch, jobs.c.status == RUNNING]
    if unless_cancelled:
        cond.append(jobs.c.cancel_requested_at.is_(None))
    if add_usage is not None:
        values = dict(values, tokens=jobs.c.tokens + add_usage[0], cost=jobs.c.cost + add_usage[1])
    res = await conn.execute(update(jobs).where(*cond).values(**values))
    return res.rowcount


async def keep_partial(conn: AsyncConn, job_id: str, step: int, partial: str | None) -> None:
    """Where a node stopped inside itself, on the checkpoint it resumes from."""
    await conn.execute(update(checkpoints).where(checkpoints.c.job_id == job_id, checkpoints.c.step == step).values(partial=partial))


async def fault_claimed(conn: AsyncConn, job_id: str, epoch: int, *, error: str, at: datetime) -> None:
    """A claimed run whose flow cannot be built ends faulted, if the claim at `epoch` still holds it."""
    await conn.execute(
        update(jobs).where(jobs.c.id == job_id, jobs.c.epoch == epoch, jobs.c.status == RUNNING).values(status=FAULTED, error=error, ended_at=at, updated_at=at)
    )
