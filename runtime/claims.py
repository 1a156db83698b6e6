"""Claims: a host takes a run at a new epoch, from the queue or to resume it here.

A claim is one conditional UPDATE on the row's status and epoch that adds one
to the epoch and writes this host, its pid, heartbeat and lease; the epoch it
set travels with the claimed record to the host (`executor.host_claimed`).
"""

from __future__ import annotations

import os
from datetime import datetime

from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.reads import get_job
from swarmkit.store.records import UNLOADABLE, JobRecord
from swarmkit.store.statuses import QUEUED, RESUMABLE_STATUSES, RUNNING
from swarmkit.store.wakeups import announce
from swarmkit.store.wakeups import claimed as claimed_wake

from .acts import DONE, REFUSED, RETRIES, ActResult, audit_resume, refuse_resume, reload_run, resolve_run
from .journal import record_event
from .leases import claim_lease, mark_lost
from .settings import default_actor, host_name
from .steps import step_words

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from typing import Any

    from swarmkit.store import Store

# How many runs a worker cannot load it looks past, at most, to find one it can.
_UNLOADABLE_WINDOW = 1000


async def claim_for_resume(
    store: Store, ref: str, *, actor: str | None = None, lease_s: float | None = None, budget: list[str] | None = None,
) -> tuple[ActResult, JobRecord | None]:
    """`swarmkit run --resume`: take a stopped, deferred, lost (or queued) run and host it here, under `lease_s`;
    `budget`: terms that change its limits as it resumes (runtime/budgets.py), as `swarmkit resume` takes them."""
    from swarmkit.store.run_writes import claim  # late: `swarmkit stop` on SQLite loads no SQLAlchemy (control imports this module)
    from swarmkit.store.statements import resumed_values  # late: as above

    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    lease_s = claim_lease(lease_s)
    await mark_lost(store, lease_s)
    job = await reload_run(store, job.id)
    from .flow_modules import missing_for_row  # late: flows load only where a run is claimed

    missing = missing_for_row(job.flow_source, job.flow_path, job.flow_modules)
    if missing and (job.status in RESUMABLE_STATUSES or job.status == QUEUED):
        return ActResult(
            REFUSED, False,
            f"cannot host {job.short_id} here: {host_name()} cannot load {'; '.join(missing)}. "
            "Install it here (or put it on PYTHONPATH), or leave the run to a worker that can.",
            job,
        ), None
    for _ in range(RETRIES):
        if job.status not in RESUMABLE_STATUSES and job.status != QUEUED:
            return refuse_resume(job), None
        now = store_now()
        values: dict[str, Any] = resumed_values(job.status, job.step, now)
        if job.status != QUEUED and (job.budget is not None or budget):
            from .budgets import held  # late: only a run with a budget, or a door that gives one, reads it

            values["budget"], refusal = held(job, budget)
            if refusal is not None:
                return ActResult(refusal[0], False, refusal[1], job), None
        values.update(
            status=RUNNING, epoch=job.epoch + 1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(), last_event_at=now,
            lease_s=lease_s,
        )
        async with store.write() as conn:
            moved = await claim(conn, job.id, job.status, job.epoch, now, values)
            if moved == 1:
                if job.status != QUEUED:
                    await audit_resume(conn, job, actor, now, f"hosted by {host_name()} pid {os.getpid()}", values.get("budget") if budget else None)
                else:
                    await announce(conn, claimed_wake(job.id))
                await record_event(conn, job.id, "run.claimed", f"claimed by {host_name()} pid {os.getpid()} (epoch {job.epoch + 1})", at=now)
                # Read in the claim's own transaction: the epoch this claim
                # set, never the next owner's that a later read might find.
                claimed = await conn.run_sync(get_job, job.id)
        if moved == 1:
            return ActResult(DONE, True, f"resuming {job.short_id} here at agent {step_words(job.step, job.steps, job.current_node, None)} (was {job.status}).", claimed), claimed
        job = await reload_run(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the resume; try again.", job), None


async def claim_queued(
    store: Store, limit: int, *, worker: str | None = None, told: set[str] | None = None, lease_s: float | None = None,
) -> list[JobRecord]:
    """Claim up to `limit` queued runs, under the claiming host's lease; a run claimed by another worker first is skipped.

    A run whose callables cannot be loaded here is not claimed: it stays
    queued for a worker that can, and an event (`run.unloadable`) names this
    worker and what it lacks, once per run for each `told` set (a worker's).
    """
    from swarmkit.store import STORE_FAULTS  # late: it loads SQLAlchemy, which `swarmkit stop` on SQLite never does (control imports this module)
    from swarmkit.store.run_writes import queued_runs  # late: `swarmkit stop` on SQLite loads no SQLAlchemy (control imports this module)

    if limit <= 0:
        return []
    told = set() if told is None else told
    lease_s = claim_lease(lease_s)
    # Runs this worker cannot load stay at the head of the queue: look past them.
    window = limit * 2 + min(len(told), _UNLOADABLE_WINDOW)
    candidates = await store.run_read(lambda conn: queued_runs(conn, window), here=True)
    claimed: list[JobRecord] = []
    for job_id, epoch, flow_source, flow_path, modules in candidates:
        if len(claimed) >= limit:
            break
        from .flow_modules import missing_for_row  # late: as in claim_run

        missing = missing_for_row(flow_source, flow_path, modules)
        if missing:
            if job_id not in told:
                await _tell_unloadable(store, job_id, worker or f"worker on {host_name()}", missing)
                told.add(job_id)
            continue
        now = store_now()
        try:
            row = await _claim_one(store, job_id, epoch, now, lease_s)
        except STORE_FAULTS:
            if claimed:
                break  # what was claimed is committed: hand it over to be hosted
            raise
        if row is not None:
            claimed.append(row)
    return claimed


async def _tell_unloadable(store: Store, job_id: str, worker: str, missing: list[str]) -> None:
    text = (
        f"{worker} (pid {os.getpid()}) cannot load {'; '.join(missing)}; "
        "left queued for a worker that can (install it there, or put it on PYTHONPATH)"
    )
    async with store.write() as conn:
        await record_event(conn, job_id, UNLOADABLE, text)


async def _claim_one(store: Store, job_id: str, epoch: int, now: datetime, lease_s: float) -> JobRecord | None:
    from swarmkit.store.run_writes import claim  # late: `swarmkit stop` on SQLite loads no SQLAlchemy (control imports this module)

    async with store.write() as conn:
        values = dict(
            status=RUNNING, epoch=epoch + 1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(),
            lease_s=lease_s, last_event_at=now, updated_at=now, stall_at=None,
        )
        if await claim(conn, job_id, QUEUED, epoch, now, values) == 1:
            await record_event(conn, job_id, "run.claimed", f"claimed by worker on {host_name()} pid {os.getpid()} (epoch {epoch + 1})", at=now)
            # The fleet's other workers, woken by its queueing and about to look, need not (runtime/queue_hints.py).
            await announce(conn, claimed_wake(job_id))
            # Read in the claim's own transaction: a claim whose row could
            # not be read back is rolled back, never left unhosted.
            return await conn.run_sync(get_job, job_id)
    return None
