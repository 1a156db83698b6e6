"""Run control: submit, stop, resume, cancel, approve, claim, mark lost.

The CLI, the console and any future HTTP route call these and nothing else.
Every transition is one conditional UPDATE (compare-and-set on status and
epoch) with its audit row in the same transaction; a terminal status never
changes because no statement here matches one.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from swarmkit.store import clock
from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.engine import SQLITE_BUSY_TIMEOUT_S, connect, masked
from swarmkit.store.named import S
from swarmkit.store.reads import get_job, jobs_by_prefix, node_durations
from swarmkit.store.records import UNLOADABLE, JobRecord
from swarmkit.store.statuses import CANCELLED, DEFERRED, LOST, QUEUED, RESUMABLE_STATUSES, RUNNING, STOPPED, TERMINAL_STATUSES

from .errors import AmbiguousRun, FlowError, RunNotFound
from .exit_code import ExitCode
from .notify import record_notification
from .settings import MAX_LEASE_S, Settings, default_actor, host_name
from .steps import step_words

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from swarmkit.store import Store

    from .flow import Flow

# `stop`, `resolve_run` and what they write run by named statements (store/named.py):
# on a lite SQLite store (store/lite.py) `swarmkit stop` and `status` load no
# SQLAlchemy (issue 13). The other acts import it where they build their statements.

# Exit codes: 0 done or no-op, 1 refused or failed, 2 bad usage or unknown run.
# The exit codes the CLI gives for an act's result: the one ExitCode list.
DONE, REFUSED, USAGE = ExitCode.OK, ExitCode.FAILED, ExitCode.USAGE
_RETRIES = 20
# How many runs a worker cannot load it looks past, at most, to find one it can.
_UNLOADABLE_WINDOW = 1000


@dataclass(frozen=True)
class ActResult:
    """What an act did, in words an operator reads as they are."""

    code: int
    changed: bool
    message: str
    job: JobRecord | None = None
    # A stop or cancel that found the same request already pending (re-reported, nothing stacked).
    already: bool = False

    @property
    def ok(self) -> bool:
        return self.code == DONE


def _ts(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "an unknown time"


async def record_audit(conn: AsyncConnection, actor: str, action: str, job_id: str | None, detail: dict[str, Any] | None = None, at: datetime | None = None) -> None:
    await conn.execute(
        S.INSERT_AUDIT, {"b_at": at or store_now(), "b_actor": actor, "b_action": action, "b_job_id": job_id, "b_detail": json.dumps(detail or {}, sort_keys=True)}
    )


def storable(text: str) -> str:
    """Text as the store keeps it: every machine sharing the store reads it.

    A password in it (an agent that printed a store URL, a driver's error
    quoting its DSN) is masked. PostgreSQL text cannot hold NUL; the same
    stand-in on both stores keeps them alike.
    """
    text = masked(text)
    return text.replace("\x00", "\u2400") if "\x00" in text else text


async def record_event(conn: AsyncConnection, job_id: str, kind: str, text: str = "", node: str | None = None, step: int | None = None, at: datetime | None = None) -> None:
    await conn.execute(S.INSERT_EVENT, {"b_job_id": job_id, "b_at": at or store_now(), "b_kind": kind, "b_node": node, "b_step": step, "b_text": storable(text)})


async def resolve_run(store: Store, ref: str) -> JobRecord:
    """A run by its id or any unique prefix of it (in either case: ids are hex). Nothing is stripped:
    `abc ` is not `abc`."""
    ref = ref or ""
    if not ref or len(ref) > 32 or any(ch not in "0123456789abcdefABCDEF" for ch in ref):
        raise RunNotFound(f"no run matches {ref!r}", store.loc.display)  # no id holds anything else: no store read
    async with store.read() as conn:
        job = await conn.run_sync(get_job, ref.lower()) if len(ref) == 32 else None
        if job is not None:
            return job
        found = await conn.run_sync(jobs_by_prefix, ref, limit=11)
    if not found:
        raise RunNotFound(f"no run matches {ref!r}", store.loc.display)
    if len(found) > 1:
        shown = ", ".join(f"{j.short_id} ({j.status}, {j.flow})" for j in found[:10])
        more = " and more" if len(found) > 10 else ""
        raise AmbiguousRun(f"{ref!r} matches {len(found)} runs: {shown}{more}; give more of the id", [j.id for j in found[:10]])
    return found[0]


async def _reload(store: Store, job_id: str) -> JobRecord:
    async with store.read() as conn:
        job = await conn.run_sync(get_job, job_id)
    if job is None:  # deleted under us
        raise RunNotFound(f"run {job_id[:8]} no longer exists", store.loc.display)
    return job


def _initial_state(inputs: dict[str, str]) -> dict[str, Any]:
    return {"inputs": dict(inputs)}


def state_json(state: dict[str, Any]) -> str:
    """A run's state as stored: strict JSON (no NaN or infinity), or TypeError/ValueError/RecursionError."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


async def submit(
    store: Store,
    flow: Flow,
    inputs: dict[str, str],
    *,
    actor: str | None = None,
    host_here: bool = False,
    lease_s: float | None = None,
) -> JobRecord:
    """Create a run: queued for a worker, or (host_here) already claimed by this process at epoch 1,
    under its lease (`lease_s`; SWARMKIT_LEASE if not given)."""
    from sqlalchemy import insert

    from swarmkit.store.models import checkpoints, jobs

    actor = actor or default_actor()
    # Read before the run exists: a module too big to store refuses the submit.
    from .flow_modules import collect_modules, encode_modules  # flows load only where one is submitted or claimed

    modules = encode_modules(collect_modules(flow))
    now = store_now()
    job_id = uuid.uuid4().hex
    values: dict[str, Any] = dict(
        id=job_id,
        flow=flow.name,
        flow_path=flow.path,
        flow_source=flow.source,
        flow_modules=modules,
        inputs=json.dumps(inputs, sort_keys=True),
        status=QUEUED,
        created_at=now,
        updated_at=now,
        cancel_keep=False,
        epoch=0,
        step=0,
        steps=flow.steps,
        tokens=0,
        cost=0.0,
        workspace_root=str(store.loc.workspace),
    )
    if host_here:
        values.update(
            status=RUNNING, epoch=1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(), started_at=now, last_event_at=now,
            lease_s=_lease(lease_s),
        )
    async with store.write() as conn:
        await conn.execute(insert(jobs).values(**values))
        await conn.execute(
            insert(checkpoints).values(job_id=job_id, step=0, node=None, state=state_json(_initial_state(inputs)), epoch=values["epoch"], created_at=now)
        )
        await record_event(conn, job_id, "run.submitted", f"{flow.name}: {flow.steps} agents", at=now)
        await record_audit(conn, actor, "run.submitted", job_id, {"flow": flow.name, "inputs": inputs}, at=now)
    return await _reload(store, job_id)


# --- stop -----------------------------------------------------------------


NOW_LOSES = "The node's work in flight is lost: it runs again from its start on resume."
# A stop not taken within this many times its node's usual duration shows "stop overdue";
# never sooner than the floor (a heartbeat, an interrupt's graces), and with no history of the
# node, after its flow's stall threshold.
OVERDUE_FACTOR = 3.0
OVERDUE_FLOOR_S = 5.0


async def overdue_at(store: Store, job: JobRecord, at: datetime) -> datetime:
    """When a stop asked for at `at` shows overdue: a few times the node's usual duration later."""
    from .run_columns import usual as median_of  # one rule for a node's usual time, as the console's ETA

    usual = None
    if job.current_node:
        node = job.current_node
        usual = await store.run_read(lambda c: median_of(node_durations(c, job.flow, node, job.id)))
    if usual is None:
        try:
            from .flow import parse_flow  # flows (and tomllib) load only where a run's flow is read

            usual = (parse_flow(job.flow_source, job.flow_path).stall_after_s or Settings.from_env().stall_after_s) / OVERDUE_FACTOR
        except FlowError:
            usual = Settings.from_env().stall_after_s / OVERDUE_FACTOR
    return at + timedelta(seconds=max(OVERDUE_FLOOR_S, OVERDUE_FACTOR * usual))


async def stop(store: Store, ref: str, *, actor: str | None = None, now: bool = False) -> ActResult:
    """Stop a run at its next agent boundary; with `now`, its host interrupts the node in flight
    (the cancel's escalation) and parks the run at the boundary before that node."""
    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    for _ in range(_RETRIES):
        sid = job.short_id
        at = store_now()
        if job.status == RUNNING:
            if job.cancel_requested_at is not None:
                return ActResult(DONE, False, f"{sid} is already being cancelled (asked by {job.cancel_requested_by} at {_ts(job.cancel_requested_at)}); nothing to stop.", job)
            pending = job.stop_requested_at is not None
            if pending and (job.stop_now or not now):
                how = "its host is interrupting the node in flight" if job.stop_now else "it will stop at the next agent boundary"
                return ActResult(
                    DONE, False,
                    f"stop{' --now' if job.stop_now else ''} already requested for {sid} by {job.stop_requested_by} at {_ts(job.stop_requested_at)} — {how}.",
                    job,
                    already=True,
                )
            # A plain stop not yet taken may be made a stop --now; it keeps who asked first and when.
            params: dict[str, Any] = {"b_id": job.id, "b_epoch": job.epoch, "b_at": at, "b_now": now}
            if not pending:
                params.update(b_actor=actor, b_overdue_at=await overdue_at(store, job, at))
            async with store.write() as conn:
                res = await conn.execute(S.STOP_RUNNING_NOW if pending else S.STOP_RUNNING, params)
                if res.rowcount == 1:
                    detail: dict[str, Any] = {"node": job.current_node, "step": step_words(job.step, job.steps)}
                    if now:
                        detail["now"] = True
                    await record_audit(conn, actor, "run.stop_requested", job.id, detail, at=at)
                    text = f"stop --now requested by {actor}: interrupting {job.current_node or 'the node in flight'}" if now else f"stop requested by {actor}"
                    await record_event(conn, job.id, "run.stop_requested", text, node=job.current_node, at=at)
            if res.rowcount == 1:
                if now:
                    node = job.current_node or "the node in flight"
                    message = (
                        f"stop --now requested for {sid} — its host will interrupt {node} within seconds and park the run stopped before it.\n"
                        + NOW_LOSES
                    )
                else:
                    node = f" ({job.current_node} is in flight)" if job.current_node else ""
                    message = (
                        f"stop requested for {sid} — it will stop at the next agent boundary{node}.\n"
                        "Runs mid-call (a harness session, a slow tool) finish that call first."
                    )
                return ActResult(DONE, True, message, await _reload(store, job.id))
        elif job.status == QUEUED:
            async with store.write() as conn:
                res = await conn.execute(S.STOP_QUEUED, {"b_id": job.id, "b_epoch": job.epoch, "b_at": at, "b_actor": actor})
                if res.rowcount == 1:
                    await record_audit(conn, actor, "run.stop_requested", job.id, {"node": None, "step": step_words(job.step, job.steps), **({"now": True} if now else {})}, at=at)
                    await record_audit(conn, actor, "run.stopped", job.id, {"boundary": "before it was claimed", "step": step_words(job.step, job.steps)}, at=at)
                    await record_event(conn, job.id, "run.stopped", f"stopped while queued by {actor}", at=at)
                    await record_notification(conn, job.id, "run.stopped", flow=job.flow, text=f"stopped while queued by {actor}", at=at)
            if res.rowcount == 1:
                return ActResult(DONE, True, f"{sid} was queued; stopped at once (no agent ran since it was queued). Resume it with `swarmkit resume {sid}`.", await _reload(store, job.id))
        elif job.status == STOPPED:
            return ActResult(DONE, False, f"{sid} is already stopped; nothing to stop. Resume it with `swarmkit run --resume {sid}`.", job)
        elif job.status == DEFERRED:
            return ActResult(DONE, False, f"{sid} is deferred at the gate {job.pending_gate!r}, waiting for approval; nothing to stop.", job)
        else:
            return ActResult(DONE, False, f"{sid} is {job.status}; nothing to stop.", job)
        job = await _reload(store, job.id)  # lost the race: look again
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the stop; try again.", job)


# --- resume and approve -----------------------------------------------------


def _resume_values(job: JobRecord, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        stop_requested_at=None,
        stop_requested_by=None,
        stop_now=False,
        stop_overdue_at=None,
        stall_at=None,
        pending_gate=None,
        ended_at=None,
        error=None,
        updated_at=now,
    )
    if job.status == DEFERRED:
        values["approved_step"] = job.step
    return values


async def _audit_resume(conn: AsyncConnection, job: JobRecord, actor: str, now: datetime, how: str) -> None:
    if job.status == DEFERRED:
        await record_audit(conn, actor, "gate.approved", job.id, {"gate": job.pending_gate, "step": step_words(job.step, job.steps)}, at=now)
        await record_event(conn, job.id, "gate.approved", f"{job.pending_gate} approved by {actor}", node=job.pending_gate, step=job.step, at=now)
    await record_audit(conn, actor, "run.resumed", job.id, {"from": job.status, "how": how, "step": step_words(job.step, job.steps)}, at=now)
    await record_event(conn, job.id, "run.resumed", f"resumed from {job.status} by {actor} ({how})", at=now)


def _refuse_resume(job: JobRecord) -> ActResult:
    sid = job.short_id
    if job.status == RUNNING:
        return ActResult(REFUSED, False, f"cannot resume {sid}: it is running.", job)
    if job.status == QUEUED:
        return ActResult(DONE, False, f"{sid} is already queued; a worker will pick it up.", job)
    return ActResult(REFUSED, False, f"cannot resume {sid}: it is {job.status}.", job)


async def resume(store: Store, ref: str, *, actor: str | None = None, only_deferred: bool = False) -> ActResult:
    """Put a stopped, deferred or lost run back in the queue for a worker."""
    from sqlalchemy import update

    from swarmkit.store.models import jobs

    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    for _ in range(_RETRIES):
        if only_deferred and job.status != DEFERRED:
            if job.status in TERMINAL_STATUSES:
                return ActResult(REFUSED, False, f"cannot approve {job.short_id}: it is {job.status}.", job)
            return ActResult(REFUSED, False, f"cannot approve {job.short_id}: it is {job.status}, not waiting at a gate.", job)
        if job.status not in RESUMABLE_STATUSES:
            return _refuse_resume(job)
        now = store_now()
        async with store.write() as conn:
            res = await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id, jobs.c.status == job.status, jobs.c.epoch == job.epoch)
                .values(status=QUEUED, **_resume_values(job, now))
            )
            if res.rowcount == 1:
                await _audit_resume(conn, job, actor, now, "queued for a worker")
        if res.rowcount == 1:
            what = f"approved {job.pending_gate!r} and queued" if job.status == DEFERRED else "queued"
            return ActResult(DONE, True, f"{job.short_id} {what} (was {job.status}); a worker will pick it up at agent {step_words(job.step, job.steps, job.current_node, None)}.", await _reload(store, job.id))
        job = await _reload(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the resume; try again.", job)


async def approve(store: Store, ref: str, *, actor: str | None = None) -> ActResult:
    return await resume(store, ref, actor=actor, only_deferred=True)


async def claim_for_resume(store: Store, ref: str, *, actor: str | None = None, lease_s: float | None = None) -> tuple[ActResult, JobRecord | None]:
    """`swarmkit run --resume`: take a stopped, deferred, lost (or queued) run and host it here, under `lease_s`."""
    from sqlalchemy import case, update

    from swarmkit.store.models import jobs

    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    lease_s = _lease(lease_s)
    await mark_lost(store, lease_s)
    job = await _reload(store, job.id)
    from .flow_modules import missing_for_row

    missing = missing_for_row(job.flow_source, job.flow_path, job.flow_modules)
    if missing and (job.status in RESUMABLE_STATUSES or job.status == QUEUED):
        return ActResult(
            REFUSED, False,
            f"cannot host {job.short_id} here: {host_name()} cannot load {'; '.join(missing)}. "
            "Install it here (or put it on PYTHONPATH), or leave the run to a worker that can.",
            job,
        ), None
    for _ in range(_RETRIES):
        if job.status not in RESUMABLE_STATUSES and job.status != QUEUED:
            return _refuse_resume(job), None
        now = store_now()
        values = _resume_values(job, now)
        values.update(
            status=RUNNING, epoch=job.epoch + 1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(), last_event_at=now,
            lease_s=lease_s,
        )
        async with store.write() as conn:
            res = await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id, jobs.c.status == job.status, jobs.c.epoch == job.epoch)
                .values(started_at=case((jobs.c.started_at.is_(None), now), else_=jobs.c.started_at), **values)
            )
            if res.rowcount == 1:
                if job.status != QUEUED:
                    await _audit_resume(conn, job, actor, now, f"hosted by {host_name()} pid {os.getpid()}")
                await record_event(conn, job.id, "run.claimed", f"claimed by {host_name()} pid {os.getpid()} (epoch {job.epoch + 1})", at=now)
                # Read in the claim's own transaction: the epoch this claim
                # set, never the next owner's that a later read might find.
                claimed = await conn.run_sync(get_job, job.id)
        if res.rowcount == 1:
            return ActResult(DONE, True, f"resuming {job.short_id} here at agent {step_words(job.step, job.steps, job.current_node, None)} (was {job.status}).", claimed), claimed
        job = await _reload(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the resume; try again.", job), None


async def claim_queued(
    store: Store, limit: int, *, worker: str | None = None, told: set[str] | None = None, lease_s: float | None = None,
) -> list[JobRecord]:
    """Claim up to `limit` queued runs, under the claiming host's lease; a run claimed by another worker first is skipped.

    A run whose callables cannot be loaded here is not claimed: it stays
    queued for a worker that can, and an event (`run.unloadable`) names this
    worker and what it lacks, once per run for each `told` set (a worker's).
    """
    from sqlalchemy import select

    from swarmkit.store import STORE_FAULTS
    from swarmkit.store.models import jobs

    if limit <= 0:
        return []
    told = set() if told is None else told
    lease_s = _lease(lease_s)
    # Runs this worker cannot load stay at the head of the queue: look past them.
    window = limit * 2 + min(len(told), _UNLOADABLE_WINDOW)
    async with store.read() as conn:
        candidates = (
            await conn.execute(
                select(jobs.c.id, jobs.c.epoch, jobs.c.flow_source, jobs.c.flow_path, jobs.c.flow_modules)
                .where(jobs.c.status == QUEUED).order_by(jobs.c.created_at).limit(window)
            )
        ).all()
    claimed: list[JobRecord] = []
    for job_id, epoch, flow_source, flow_path, modules in candidates:
        if len(claimed) >= limit:
            break
        from .flow_modules import missing_for_row

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
    from sqlalchemy import case, update

    from swarmkit.store.models import jobs

    async with store.write() as conn:
        res = await conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id, jobs.c.status == QUEUED, jobs.c.epoch == epoch)
            .values(
                status=RUNNING, epoch=epoch + 1, host=host_name(), pid=os.getpid(), heartbeat_at=now, heartbeat_mono=boot_clock(),
                lease_s=lease_s, last_event_at=now, updated_at=now, stall_at=None,
                started_at=case((jobs.c.started_at.is_(None), now), else_=jobs.c.started_at),
            )
        )
        if res.rowcount == 1:
            await record_event(conn, job_id, "run.claimed", f"claimed by worker on {host_name()} pid {os.getpid()} (epoch {epoch + 1})", at=now)
            # Read in the claim's own transaction: a claim whose row could
            # not be read back is rolled back, never left unhosted.
            return await conn.run_sync(get_job, job_id)
    return None


# --- cancel -----------------------------------------------------------------


async def cancel(store: Store, ref: str, *, keep: bool = False, actor: str | None = None) -> ActResult:
    from sqlalchemy import update

    from swarmkit.store.models import jobs

    from .workspaces import carry_out, decide

    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    keep_words = "kept" if keep else "destroyed"
    for _ in range(_RETRIES):
        sid = job.short_id
        now = store_now()
        if job.status == RUNNING:
            if job.cancel_requested_at is not None:
                return ActResult(DONE, False, f"cancel already requested for {sid} by {job.cancel_requested_by} at {_ts(job.cancel_requested_at)}; its host is ending it.", job, already=True)
            async with store.write() as conn:
                res = await conn.execute(
                    update(jobs)
                    .where(jobs.c.id == job.id, jobs.c.status == RUNNING, jobs.c.epoch == job.epoch, jobs.c.cancel_requested_at.is_(None))
                    .values(cancel_requested_at=now, cancel_requested_by=actor, cancel_keep=keep, updated_at=now)
                )
                if res.rowcount == 1:
                    await record_audit(conn, actor, "run.cancel_requested", job.id, {"keep": keep, "node": job.current_node}, at=now)
                    await record_event(conn, job.id, "run.cancel_requested", f"cancel requested by {actor} (workspaces {keep_words})", node=job.current_node, at=now)
            if res.rowcount == 1:
                node = f"interrupt {job.current_node} and " if job.current_node else ""
                return ActResult(
                    DONE, True,
                    f"cancel requested for {sid} — its host will {node}end it cancelled within seconds; workspaces will be {keep_words}.",
                    await _reload(store, job.id),
                )
        elif job.status in (QUEUED, STOPPED, DEFERRED, LOST):
            async with store.write() as conn:
                res = await conn.execute(
                    update(jobs)
                    .where(jobs.c.id == job.id, jobs.c.status == job.status, jobs.c.epoch == job.epoch)
                    .values(status=CANCELLED, ended_at=now, updated_at=now, cancel_requested_at=now, cancel_requested_by=actor, cancel_keep=keep)
                )
                said: list[str] = []
                if res.rowcount == 1:
                    await record_audit(conn, actor, "run.cancel_requested", job.id, {"keep": keep, "from": job.status}, at=now)
                    said = await decide(conn, job.id, destroy=not keep, reason="cancelled")
                    await record_audit(conn, actor, "run.cancelled", job.id, {"keep": keep, "from": job.status, "workspaces": said}, at=now)
                    await record_event(conn, job.id, "run.cancelled", f"cancelled by {actor} while {job.status} (workspaces {keep_words})", at=now)
            if res.rowcount == 1:
                if not keep:
                    said = await carry_out(store, job.id)
                ws = ("; " + "; ".join(said)) if said else ""
                words = "kept" if keep else "destroyed" if all(line.startswith("destroyed") for line in said) else "to be destroyed"
                return ActResult(DONE, True, f"{sid} cancelled (it was {job.status}); workspaces {words}{ws}.", await _reload(store, job.id))
        else:
            return ActResult(DONE, False, f"{sid} is {job.status}; nothing to cancel.", job)
        job = await _reload(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the cancel; try again.", job)


# --- leases -----------------------------------------------------------------


def _lease(lease_s: float | None) -> float:
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
    async with store.read() as conn:
        stale = (await conn.execute(S.STALE_RUNNING_SQLITE if sqlite else S.STALE_RUNNING, clock.age_params(lease_s, sqlite))).all()
    if not stale:
        return []
    from sqlalchemy import and_, update
    from sqlalchemy.exc import OperationalError

    from swarmkit.store.lite import LiteStore
    from swarmkit.store.models import jobs

    from .workspaces import carry_out, decide

    if isinstance(store, LiteStore):
        # A host died: rare, and what it takes (workspaces, a cancel carried out) runs on SQLAlchemy.
        store = await store.full_store()
    lapsed = clock.stale(jobs, sqlite)
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
            async with _quick_write(store) as conn:
                res = await conn.execute(
                    update(jobs)
                    .where(and_(jobs.c.id == row.id, jobs.c.status == RUNNING, jobs.c.epoch == row.epoch, lapsed))
                    .values(**values),
                    clock.age_params(lease_s, sqlite),
                )
                if res.rowcount != 1:
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
        except OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                # The store's write lock is held (perhaps by the frozen host
                # itself): whoever looks next marks it; looking must not hang.
                continue
            raise
        marked.append(row.id)
        if to == CANCELLED and not row.cancel_keep:
            await carry_out(store, row.id)
    return marked


@asynccontextmanager
async def _quick_write(store: Store):
    """A write transaction that gives up after a second on a locked SQLite store instead of thirty."""
    if not store.loc.is_sqlite:
        async with store.write() as conn:
            yield conn
        return
    store.check_file()  # like every write: never into a file that is not the one this process opened
    async with connect(store.engine) as conn:
        await conn.exec_driver_sql("PRAGMA busy_timeout=1000")
        await conn.commit()
        try:
            await conn.execution_options(swarmkit_write=True)
            async with conn.begin():
                yield conn
        finally:
            await conn.exec_driver_sql(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            await conn.commit()


def no_worker_hint(short_id: str) -> str:
    """What to say after a resume or approve when no worker watches the store."""
    return (
        "no live worker is watching this store: start one with `swarmkit worker`, "
        f"or host it here with `swarmkit run --resume {short_id}`."
    )


async def live_worker_count(store: Store, lease_s: float) -> int:
    from swarmkit.store.queries import live_workers

    async with store.read() as conn:
        return len(await conn.run_sync(live_workers, lease_s))
