"""Ending or parking a hosted run: the last write of its host at its epoch.

Each end is one conditional UPDATE on the row's id, epoch and status (and no
cancel asked, unless the end allows it), with its events, audit, notification
and the workspaces' fate in the same transaction; the folders are deleted
after the commit. A lost commit answer is checked (`_already`), never written
twice.
"""

from __future__ import annotations

from typing import Any

from swarmkit.store import STORE_FAULTS
from swarmkit.store.clock import store_now
from swarmkit.store.queries import get_job
from swarmkit.store.run_writes import end_hosted, keep_partial
from swarmkit.store.statuses import CANCELLED, COMPLETED, DEFERRED, FAILED, FAULTED, QUEUED, RUNNING, STOPPED
from swarmkit.store.wakeups import announce, queued

from .errors import FencedError, HITLDeferredError, RunCancelledError, RunParkedError, RunStoppedError
from .host_parts import HostParts
from .host_writes import read_flags
from .journal import record_audit, record_event, storable
from .notify import record_notification
from .steps import step_words
from .workspaces import carry_out, decide


class RunEnds(HostParts):
    """The host's part that ends its run (completed, failed, faulted, cancelled) or parks it (stopped, deferred, queued)."""

    async def _already(self, conn, status: str) -> bool:
        """After a lost commit answer: did our first attempt already move the row?"""
        job = await conn.run_sync(get_job, self.job_id)
        return job is not None and job.epoch == self.epoch and job.status == status

    async def _end(self, status: str, *, error: str | None = None, allow_if_cancel: bool = False) -> bool:
        """Move running -> an end state at our epoch. False when a cancel got there first."""
        async def op() -> bool:
            self._ending = True
            now = store_now()
            values: dict[str, Any] = dict(status=status, updated_at=now, error=storable(error) if error else None, ended_at=now)
            if status == COMPLETED:
                values["current_node"] = None  # a failed or faulted run keeps the node it ended in: the operator's first question
            async with self.store.write() as conn:
                if await end_hosted(conn, self.job_id, self.epoch, values, unless_cancelled=not allow_if_cancel) != 1:
                    return await self._already(conn, status)
                await self._after_end(conn, status, error, now)
            return True

        if not await self._retrying(f"ending the run {status}", op):
            return False
        self.final_status = status
        await self._carry_out()
        return True

    async def _carry_out(self) -> None:
        """The workspaces' fate was recorded with the run's end; the deleting comes after the commit."""
        try:
            await carry_out(self.store, self.job_id)
        except STORE_FAULTS as exc:
            # Recorded as due: this host's next worker or swarmkit verb sweeps it.
            self.warn_once("workspaces", f"workspace deletion left for later: {self.fault_text(exc)}")

    async def _after_end(self, conn, status: str, error: str | None, now) -> None:
        jid = self.job_id
        await record_notification(conn, jid, f"run.{status}", flow=self.flow.name, text=error or status, node=self._node_agent.name if self._node_agent else None, at=now)
        if status == COMPLETED:
            await record_event(conn, jid, "run.completed", "completed", at=now)
            # A flow that keeps its workspaces leaves them `kept`: no run uses them now.
            await decide(conn, jid, destroy=not self.flow.keep_workspaces, reason="completed")
        elif status == FAILED:
            await record_event(conn, jid, "run.failed", error or "failed", at=now)
            await decide(conn, jid, destroy=not self.flow.keep_workspaces, reason="failed")
        elif status == FAULTED:
            await record_event(conn, jid, "run.faulted", error or "faulted", at=now)
            await decide(conn, jid, destroy=False, reason="faulted")

    async def _end_cancelled(self, step: int, node: str | None) -> None:
        flags = self.stops.cancel or await self._retrying("reading the cancel", lambda: read_flags(self.store, self.job_id))
        keep = bool(flags.cancel_keep) if flags else False
        actor = (flags.cancel_requested_by if flags else None) or "unknown"

        async def op() -> None:
            self._ending = True
            now = store_now()
            async with self.store.write() as conn:
                moved = await end_hosted(conn, self.job_id, self.epoch, dict(status=CANCELLED, ended_at=now, updated_at=now, current_node=None), unless_cancelled=False)
                if moved != 1:
                    if await self._already(conn, CANCELLED):
                        return
                    raise FencedError(self.job_id)
                said = await decide(conn, self.job_id, destroy=not keep, reason="cancelled")
                where = f"at {step_words(step, self.flow.steps, node, None)}" if node else "after its last agent"
                await record_event(conn, self.job_id, "run.cancelled", f"cancelled {where} by {actor}; workspaces {'kept' if keep else 'destroyed'}", node=node, step=step, at=now)
                await record_audit(conn, actor, "run.cancelled", self.job_id, {"keep": keep, "node": node, "step": step_words(step, self.flow.steps), "workspaces": said}, at=now)

        await self._retrying("ending the run cancelled", op)
        self.final_status = CANCELLED
        await self._carry_out()

    async def _park(self, exc: HITLDeferredError) -> None:
        stopped = isinstance(exc, RunStoppedError)
        parked = isinstance(exc, RunParkedError)
        status = STOPPED if stopped else QUEUED if parked else DEFERRED
        values: dict[str, Any] = dict(status=status, current_node=exc.node)
        if not stopped and not parked:
            values["pending_gate"] = exc.node
        inside = stopped and exc.partial is not None  # type: ignore[attr-defined]
        spent: tuple[int, float] | None = None
        if inside:
            # What the node spent up to the boundary it parked at is spent: on resume it goes on from there.
            # Heartbeats already put part of it on the row (as at a checkpoint).
            async with self._usage_lock:
                written = self._node_live.written if self._node_live is not None else (0, 0.0)
            spent = (exc.tokens - written[0], exc.cost - written[1])  # type: ignore[attr-defined]

        async def op() -> None:
            self._ending = True
            now = store_now()
            async with self.store.write() as conn:
                if await end_hosted(conn, self.job_id, self.epoch, dict(values, updated_at=now), unless_cancelled=True, add_usage=spent) != 1:
                    if await self._already(conn, status):
                        return
                    job = await conn.run_sync(get_job, self.job_id)
                    if job and job.status == RUNNING and job.epoch == self.epoch and job.cancel_requested_at is not None:
                        raise RunCancelledError(self.job_id)
                    raise FencedError(self.job_id)
                boundary = f"before {step_words(exc.step, self.flow.steps, exc.node, None)}"
                if inside:
                    assert isinstance(exc, RunStoppedError)
                    boundary = f"inside {step_words(exc.step, self.flow.steps, exc.node, None)}, at a boundary of its own"
                    await keep_partial(conn, self.job_id, exc.step, exc.partial)
                # A stop nobody typed says why (its budget), in the event, the audit and the notification.
                why = f" by {exc.requested_by}: {exc.reason}" if stopped and exc.reason else ""  # type: ignore[attr-defined]
                if not parked:
                    await record_notification(conn, self.job_id, f"run.{status}", flow=self.flow.name, text=f"{status} {boundary}{why}", node=exc.node, step=exc.step, at=now)
                if stopped:
                    assert isinstance(exc, RunStoppedError)
                    actor = exc.requested_by or "unknown"
                    detail: dict[str, Any] = {"boundary": exc.node, "step": step_words(exc.step, self.flow.steps)}
                    if inside:
                        detail["inside"] = True
                    how = ""
                    if exc.reason:
                        detail["reason"] = exc.reason
                    if exc.now:
                        detail.update(now=True, interrupted=exc.node if exc.interrupted else None)
                        how = f" (stop --now: {exc.node} was interrupted and runs again from its start on resume)" if exc.interrupted else " (stop --now, taken at the boundary)"
                    await record_event(conn, self.job_id, "run.stopped", f"stopped {boundary}{how}; requested by {actor}{': ' + exc.reason if exc.reason else ''}", node=exc.node, step=exc.step, at=now)
                    await record_audit(conn, actor, "run.stopped", self.job_id, detail, at=now)
                elif parked:
                    by = exc.parked_by  # type: ignore[attr-defined]
                    await record_event(conn, self.job_id, "run.parked", f"parked {boundary} by {by}: back in the queue for any worker", node=exc.node, step=exc.step, at=now)
                    await record_audit(conn, by, "run.parked", self.job_id, {"boundary": exc.node, "step": step_words(exc.step, self.flow.steps), "worker": by}, at=now)
                    await announce(conn, queued(self.job_id))
                else:
                    await record_event(conn, self.job_id, "run.deferred", f"waiting for approval {boundary}", node=exc.node, step=exc.step, at=now)

        await self._retrying(f"parking the run {status}", op)
        self.final_status = "parked" if parked else status
