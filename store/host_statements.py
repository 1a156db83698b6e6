"""A host's statements on its run's row (runtime/host_writes.py and the host's parts run them).

Every write by a host carries its epoch (`MINE`): a process from an older
epoch matches no row, writes nothing, and stops itself. The flag columns come
back from the same statement (RETURNING), under the write lock, or from one
primary-key SELECT (`FLAGS`): never from a cache. Parameters are named `b_*`.

They are named statements too (store/named.py: `S.CHECKPOINT`), compiled for sqlite3 with those of
store/statements.py: on SQLite a host's boundary runs them with sqlite3 on the event loop's thread
(`Store.run_write(here=True)`), on PostgreSQL as the Core statements they are.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, bindparam, func, insert, select, update

from .models import RUNNING, UTCDateTime, checkpoints, events, jobs

# The order of runtime/host_writes.Flags' fields: a row of these is made one.
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
    # What a budget is held to at a boundary (runtime/budgets.py), and why a stop was asked for.
    jobs.c.stop_reason,
    jobs.c.tokens,
    jobs.c.cost,
    jobs.c.step,
    jobs.c.ran_s,
    jobs.c.budget,
    jobs.c.stop_when,
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
        # The node's time, for max_wall; NULL (a row an older host ran) counts from nothing.
        ran_s=func.coalesce(jobs.c.ran_s, 0.0) + bindparam("b_ran", type_=Float()),
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
# The host asks its own run to stop (a limit of its budget reached, a stop set for later holds): once, as a
# person's stop would be asked; the stops set for later as they are left (one that fired is taken off).
STOP_BY_HOST = (
    update(jobs)
    .where(*MINE, jobs.c.stop_requested_at.is_(None), jobs.c.cancel_requested_at.is_(None))
    .values(
        stop_requested_at=_NOW, stop_requested_by=bindparam("b_actor"), stop_reason=bindparam("b_reason"), stop_now=bindparam("b_stop_now"),
        stop_when=bindparam("b_when"), updated_at=_NOW,
    )
)
CHECKPOINT_DONE = select(checkpoints.c.epoch).where(checkpoints.c.job_id == bindparam("b_id"), checkpoints.c.step == bindparam("b_step"))
# Rows as dicts of column values (executemany for a batch of events); the columns named, so that the
# statement compiles to the same SQL whichever columns a row gives (store/compiled_sqlite.py holds it).
INSERT_CHECKPOINT = insert(checkpoints).values(**{k: bindparam(k) for k in ("job_id", "step", "node", "state", "epoch", "created_at")})
INSERT_EVENTS = insert(events).values(**{k: bindparam(k) for k in ("job_id", "at", "kind", "node", "step", "text")})
# The run's stored callables, read by its host as it takes the run (runtime/flow_modules.py).
FLOW_MODULES = select(jobs.c.flow_modules).where(jobs.c.id == bindparam("b_id"))
