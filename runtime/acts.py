"""The acts on a run: submit, stop, resume, approve, cancel, and what each said.

The CLI, the console and the HTTP API call these (through `control`) and
nothing else. Every transition is one conditional UPDATE (compare-and-set on
status and epoch) with its audit row in the same transaction; a terminal
status never changes because no statement here matches one.

A submit is runtime/submit.py's. The four acts on a run, `resolve_run` and what they write run by named
statements (store/named.py): on a lite SQLite store (store/lite.py) `swarmkit
stop`, `resume`, `approve`, `cancel` and `status` load no SQLAlchemy. A submit
writes through store/run_writes.py, imported where it writes: it builds its
statements with SQLAlchemy.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from swarmkit.store.clock import store_now
from swarmkit.store.named import S
from swarmkit.store.reads import node_durations
from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import DEFERRED, LOST, QUEUED, RESUMABLE_STATUSES, RUNNING, STOPPED, TERMINAL_STATUSES
from swarmkit.store.wakeups import announce, flags, queued

from .act_base import DONE as DONE
from .act_base import REFUSED as REFUSED
from .act_base import RETRIES as RETRIES
from .act_base import USAGE as USAGE
from .act_base import ActResult as ActResult
from .act_base import at_words, resolved_with_view
from .act_base import reload_run as reload_run
from .act_base import resolve_run as resolve_run
from .act_base import resolve_view as resolve_view
from .act_table import ACTS, Act, no_worker_hint
from .errors import FlowError
from .journal import record_audit, record_event
from .leases import live_worker_count
from .notify import record_notification
from .settings import Settings, default_actor
from .steps import step_words
from .workspaces import carry_out, decide

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: a one-shot verb loads none
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from typing import Any

    from swarmkit.store import Store
    from swarmkit.store.connections import AsyncConn


# --- stop -----------------------------------------------------------------


NOW_LOSES = "The node's work in flight is lost: it runs again from its start on resume."
# A stop not taken within this many times its node's usual duration shows "stop overdue";
# never sooner than the floor (a heartbeat, an interrupt's graces), and with no history of the
# node, after its flow's stall threshold.
OVERDUE_FACTOR = 3.0
OVERDUE_FLOOR_S = 5.0


async def overdue_at(store: Store, job: JobRecord, at: datetime) -> datetime:
    """When a stop asked for at `at` shows overdue: a few times the node's usual duration later."""
    from .run_columns import usual as median_of  # late: one rule for a node's usual time, as the console's ETA; only a stop of a running run asks

    usual = None
    if job.current_node:
        node = job.current_node
        usual = await store.run_read(lambda c: median_of(node_durations(c, job.flow, node, job.id)))
    if usual is None:
        try:
            from .flow import parse_flow  # late: flows (and tomllib) load only where a run's flow is read

            usual = (parse_flow(job.flow_source, job.flow_path).stall_after_s or Settings.from_env().stall_after_s) / OVERDUE_FACTOR
        except FlowError:
            usual = Settings.from_env().stall_after_s / OVERDUE_FACTOR
    return at + timedelta(seconds=max(OVERDUE_FLOOR_S, OVERDUE_FACTOR * usual))


async def stop(
    store: Store, ref: str | JobRecord, *, actor: str | None = None, now: bool = False,
    when: str | None = None, after: str | None = None, before: str | None = None, clear: bool = False,
) -> ActResult:
    """Stop a run at its next agent boundary; with `now`, its host interrupts the node in flight
    (the cancel's escalation) and parks the run at the boundary before that node. `when`, `after`,
    `before`: a stop set for later instead (runtime/stop_later.py); `clear` takes those off."""
    actor = actor or default_actor()
    later = [(kind, what) for kind, what in (("when", when), ("after", after), ("before", before)) if what]
    if later or clear:
        from .stop_later import clear_stops, stop_later  # late: only a stop set for later loads its rules

        if now or len(later) + clear > 1:
            return ActResult(USAGE, False, "give one of --when, --after, --before or --clear (a stop set for later), and not with --now")
        return await (clear_stops(store, ref, actor=actor) if clear else stop_later(store, ref, kind=later[0][0], what=later[0][1], actor=actor))
    job = await resolve_run(store, ref)
    for _ in range(RETRIES):
        sid = job.short_id
        if job.status == RUNNING:
            if job.cancel_requested_at is not None:
                return ActResult(DONE, False, f"{sid} is already being cancelled (asked by {job.cancel_requested_by} at {at_words(job.cancel_requested_at)}); nothing to stop.", job)
            pending = job.stop_requested_at is not None
            if pending and (job.stop_now or not now):
                how = "its host is interrupting the node in flight" if job.stop_now else "it will stop at the next agent boundary"
                return ActResult(
                    DONE, False,
                    f"stop{' --now' if job.stop_now else ''} already requested for {sid} by {job.stop_requested_by} at {at_words(job.stop_requested_at)} — {how}.",
                    job,
                    already=True,
                )
            # A plain stop not yet taken may be made a stop --now; it keeps who asked first and when.
            at = store_now()  # here, not before: a repeat answered above needs no time
            params: dict[str, Any] = {"b_id": job.id, "b_epoch": job.epoch, "b_at": at, "b_now": now}
            if not pending:
                params.update(b_actor=actor, b_overdue_at=await overdue_at(store, job, at))
            async with store.write() as conn:
                res = await conn.execute(S.STOP_RUNNING_NOW if pending else S.STOP_RUNNING, params)
                if res.rowcount == 1:
                    detail: dict[str, Any] = {"node": job.current_node, "step": step_words(job.step, job.steps)}
                    if now:
                        detail["now"] = True
                    await record_audit(conn, actor, ACTS["stop"].audit, job.id, detail, at=at)
                    text = f"stop --now requested by {actor}: interrupting {job.current_node or 'the node in flight'}" if now else f"stop requested by {actor}"
                    await record_event(conn, job.id, ACTS["stop"].audit, text, node=job.current_node, at=at)
                    await announce(conn, flags(job.id))
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
                return ActResult(DONE, True, message, await reload_run(store, job.id))
        elif job.status == QUEUED:
            at = store_now()
            async with store.write() as conn:
                res = await conn.execute(S.STOP_QUEUED, {"b_id": job.id, "b_epoch": job.epoch, "b_at": at, "b_actor": actor})
                if res.rowcount == 1:
                    await record_audit(conn, actor, ACTS["stop"].audit, job.id, {"node": None, "step": step_words(job.step, job.steps), **({"now": True} if now else {})}, at=at)
                    await record_audit(conn, actor, "run.stopped", job.id, {"boundary": "before it was claimed", "step": step_words(job.step, job.steps)}, at=at)
                    await record_event(conn, job.id, "run.stopped", f"stopped while queued by {actor}", at=at)
                    await record_notification(conn, job.id, "run.stopped", flow=job.flow, text=f"stopped while queued by {actor}", at=at)
            if res.rowcount == 1:
                return ActResult(DONE, True, f"{sid} was queued; stopped at once (no agent ran since it was queued). Resume it with `swarmkit resume {sid}`.", await reload_run(store, job.id))
        elif job.status == STOPPED:
            return ActResult(DONE, False, f"{sid} is already stopped; nothing to stop. Resume it with `swarmkit run --resume {sid}`.", job)
        elif job.status == DEFERRED:
            return ActResult(DONE, False, f"{sid} is deferred at the gate {job.pending_gate!r}, waiting for approval; nothing to stop.", job)
        else:
            return ActResult(DONE, False, f"{sid} is {job.status}; nothing to stop.", job)
        job = await reload_run(store, job.id)  # lost the race: look again
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the stop; try again.", job)


# --- resume and approve -----------------------------------------------------


async def audit_resume(conn: AsyncConn, job: JobRecord, actor: str, now: datetime, how: str, budget: str | None = None) -> None:
    """The audit and event of a resume; `budget`: the limits it set (JSON), when it changed them."""
    if job.status == DEFERRED:
        await record_audit(conn, actor, ACTS["approve"].audit, job.id, {"gate": job.pending_gate, "step": step_words(job.step, job.steps)}, at=now)
        await record_event(conn, job.id, ACTS["approve"].audit, f"{job.pending_gate} approved by {actor}", node=job.pending_gate, step=job.step, at=now)
    detail: dict[str, Any] = {"from": job.status, "how": how, "step": step_words(job.step, job.steps)}
    if budget is not None:
        from .budgets import Budget  # late: only a resume that changed the limits

        detail["budget"] = Budget.from_json(budget).words()
    await record_audit(conn, actor, ACTS["resume"].audit, job.id, detail, at=now)
    await record_event(conn, job.id, ACTS["resume"].audit, f"resumed from {job.status} by {actor} ({how})", at=now)


def refuse_resume(job: JobRecord) -> ActResult:
    sid = job.short_id
    if job.status == RUNNING:
        return ActResult(REFUSED, False, f"cannot resume {sid}: it is running.", job)
    if job.status == QUEUED:
        return ActResult(DONE, False, f"{sid} is already queued; a worker will pick it up.", job)
    return ActResult(REFUSED, False, f"cannot resume {sid}: it is {job.status}.", job)


async def resume(
    store: Store, ref: str | JobRecord, *, actor: str | None = None, only_deferred: bool = False, budget: list[str] | dict[str, Any] | None = None,
) -> ActResult:
    """Put a stopped, deferred or lost run back in the queue for a worker. `budget`: terms that change
    its limits as it resumes (`cost=+5`, runtime/budgets.py); one whose limit is reached is refused."""
    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    for _ in range(RETRIES):
        if only_deferred and job.status != DEFERRED:
            if job.status in TERMINAL_STATUSES:
                return ActResult(REFUSED, False, f"cannot approve {job.short_id}: it is {job.status}.", job)
            return ActResult(REFUSED, False, f"cannot approve {job.short_id}: it is {job.status}, not waiting at a gate.", job)
        if job.status not in RESUMABLE_STATUSES:
            return refuse_resume(job)
        limits = job.budget
        if limits is not None or budget:
            from .budgets import held  # late: only a run with a budget, or a door that gives one, reads it

            limits, refusal = held(job, budget)
            if refusal is not None:
                return ActResult(refusal[0], False, refusal[1], job)
        now = store_now()
        async with store.write() as conn:
            params: dict[str, Any] = {"b_id": job.id, "b_epoch": job.epoch, "b_at": now, "b_budget": limits}
            if job.status == DEFERRED:
                moved = (await conn.execute(S.APPROVE, {**params, "b_step": job.step})).rowcount
            else:
                moved = (await conn.execute(S.RESUME, {**params, "b_status": job.status})).rowcount
            if moved == 1:
                await audit_resume(conn, job, actor, now, "queued for a worker", limits if budget else None)
                await announce(conn, queued(job.id))
        if moved == 1:
            what = f"approved {job.pending_gate!r} and queued" if job.status == DEFERRED else "queued"
            return ActResult(DONE, True, f"{job.short_id} {what} (was {job.status}); a worker will pick it up at agent {step_words(job.step, job.steps, job.current_node, None)}.", await reload_run(store, job.id))
        job = await reload_run(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the resume; try again.", job)


async def approve(store: Store, ref: str | JobRecord, *, actor: str | None = None) -> ActResult:
    return await resume(store, ref, actor=actor, only_deferred=True)


# --- cancel -----------------------------------------------------------------


async def cancel(store: Store, ref: str | JobRecord, *, keep: bool = False, actor: str | None = None) -> ActResult:
    actor = actor or default_actor()
    job = await resolve_run(store, ref)
    keep_words = "kept" if keep else "destroyed"
    for _ in range(RETRIES):
        sid = job.short_id
        now = store_now()
        if job.status == RUNNING:
            if job.cancel_requested_at is not None:
                return ActResult(DONE, False, f"cancel already requested for {sid} by {job.cancel_requested_by} at {at_words(job.cancel_requested_at)}; its host is ending it.", job, already=True)
            async with store.write() as conn:
                moved = (await conn.execute(S.REQUEST_CANCEL, {"b_id": job.id, "b_epoch": job.epoch, "b_at": now, "b_actor": actor, "b_keep": keep})).rowcount
                if moved == 1:
                    await record_audit(conn, actor, ACTS["cancel"].audit, job.id, {"keep": keep, "node": job.current_node}, at=now)
                    await record_event(conn, job.id, ACTS["cancel"].audit, f"cancel requested by {actor} (workspaces {keep_words})", node=job.current_node, at=now)
                    await announce(conn, flags(job.id))
            if moved == 1:
                node = f"interrupt {job.current_node} and " if job.current_node else ""
                return ActResult(
                    DONE, True,
                    f"cancel requested for {sid} — its host will {node}end it cancelled within seconds; workspaces will be {keep_words}.",
                    await reload_run(store, job.id),
                )
        elif job.status in (QUEUED, STOPPED, DEFERRED, LOST):
            async with store.write() as conn:
                moved = (await conn.execute(S.CANCEL_UNHOSTED, {"b_id": job.id, "b_epoch": job.epoch, "b_status": job.status, "b_at": now, "b_actor": actor, "b_keep": keep})).rowcount
                said: list[str] = []
                if moved == 1:
                    await record_audit(conn, actor, ACTS["cancel"].audit, job.id, {"keep": keep, "from": job.status}, at=now)
                    said = await decide(conn, job.id, destroy=not keep, reason="cancelled")
                    await record_audit(conn, actor, "run.cancelled", job.id, {"keep": keep, "from": job.status, "workspaces": said}, at=now)
                    await record_event(conn, job.id, "run.cancelled", f"cancelled by {actor} while {job.status} (workspaces {keep_words})", at=now)
            if moved == 1:
                if not keep:
                    said = await carry_out(store, job.id)
                ws = ("; " + "; ".join(said)) if said else ""
                words = "kept" if keep else "destroyed" if all(line.startswith("destroyed") for line in said) else "to be destroyed"
                return ActResult(DONE, True, f"{sid} cancelled (it was {job.status}); workspaces {words}{ws}.", await reload_run(store, job.id))
        else:
            return ActResult(DONE, False, f"{sid} is {job.status}; nothing to cancel.", job)
        job = await reload_run(store, job.id)
    return ActResult(REFUSED, False, f"{job.short_id} kept changing under the cancel; try again.", job)


async def perform(act: Act, store: Store, ref: str, *, actor: str | None = None, with_view: bool = False, **options: Any) -> ActResult:
    """An entry of the acts table carried out on run `ref`. `options` are a door's flags (now=, keep=):
    they override the entry's own options, which fill in what a door leaves out. `with_view`: for a
    door that answers with the run's view, read it with the run (`ActResult.view`; given a whole id, in one
    statement, store.reads.run_view: an idempotent repeat, which writes nothing, is that read and its answer)."""
    calls: dict[str, Callable[..., Awaitable[ActResult]]] = {"stop": stop, "resume": resume, "approve": approve, "cancel": cancel}
    call = calls[act.verb]
    job, view = await resolved_with_view(store, ref, with_view)
    result: ActResult = await call(store, job, actor=actor, **{**dict(act.options), **options})
    if view is not None and result.job is job:  # nothing written (a write reloads the run): the view read with it is still the run's
        result = dataclasses.replace(result, view=view)
    return result


async def no_worker_warning(store: Store, short_id: str, lease_s: float) -> str:
    """The warning after an act that queued a run (`Act.wants_worker`) when no live worker watches the store; "" when one does."""
    if await live_worker_count(store, lease_s) > 0:
        return ""
    return no_worker_hint(short_id)
