"""The executor: hosts one run from its last checkpoint to its end, stop, deferral or cancel.

Every agent goes through `RunHost.node_fn`, the one node boundary: the previous
node's state is already checkpointed, and the flags are read with one fresh
primary-key SELECT before the node does any work. Never cached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import insert, select, update

from store import STORE_FAULTS, Store
from store.models import CANCELLED, COMPLETED, DEFERRED, FAILED, FAULTED, RUNNING, STOPPED, checkpoints, events, jobs
from store.queries import get_job, latest_checkpoint
from store.records import utcnow

from .agents import Usage, make_context, run_call, run_command
from .control import record_audit, record_event, state_json
from .errors import (
    AgentFailed,
    FencedError,
    FlowError,
    GateDeferredError,
    HITLDeferredError,
    RunCancelledError,
    RunStoppedError,
)
from .flow import Agent, Flow, parse_flow
from .settings import Settings
from .workspaces import apply_policy, ensure_workspace

log = logging.getLogger("swarmkit.executor")

# Log lines are written in batches: at most this long after they were printed.
EVENT_FLUSH_S = 0.1
EVENT_BATCH = 500


@dataclass(frozen=True)
class Flags:
    status: str
    epoch: int
    stop_requested_at: Any
    stop_requested_by: str | None
    cancel_requested_at: Any
    cancel_requested_by: str | None
    cancel_keep: bool
    approved_step: int | None


_FLAG_COLS = (
    jobs.c.status,
    jobs.c.epoch,
    jobs.c.stop_requested_at,
    jobs.c.stop_requested_by,
    jobs.c.cancel_requested_at,
    jobs.c.cancel_requested_by,
    jobs.c.cancel_keep,
    jobs.c.approved_step,
)


async def read_flags(store: Store, job_id: str) -> Flags | None:
    """One primary-key SELECT of the flag columns, in a fresh transaction.

    Not `session.get` and not a long-lived session: an identity map or a held
    read snapshot can keep answering "not stopped" after another process set it.
    """
    async with store.read() as conn:
        row = (await conn.execute(select(*_FLAG_COLS).where(jobs.c.id == job_id))).first()
    return Flags(*row) if row else None


class EventSink:
    """Batches log lines into the events table, fenced by the host's epoch."""

    def __init__(self, host: "RunHost"):
        self.host = host
        self.pending: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._lock = asyncio.Lock()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"events-{self.host.job_id[:8]}")

    def emit(self, kind: str, text: str, node: str | None = None, step: int | None = None) -> None:
        self.pending.append(dict(job_id=self.host.job_id, at=utcnow(), kind=kind, node=node, step=step, text=text))
        if len(self.pending) >= EVENT_BATCH:
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=EVENT_FLUSH_S)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.flush()
            except FencedError:
                self.host.fence()
                return
            except STORE_FAULTS as exc:  # try again next round; lines wait in memory
                log.warning("writing events for %s failed: %s", self.host.job_id[:8], exc)

    async def flush(self) -> None:
        async with self._lock:
            if not self.pending:
                return
            batch, self.pending = self.pending, []
            try:
                async with self.host.store.write() as conn:
                    await self.host.fenced_touch(conn)
                    await conn.execute(insert(events), batch)
            except BaseException:
                self.pending[:0] = batch
                raise

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class RunHost:
    """Hosts one claimed run in this process at one epoch."""

    def __init__(
        self,
        store: Store,
        job_id: str,
        epoch: int,
        flow: Flow,
        *,
        settings: Settings | None = None,
        on_line: Callable[[str, str | None, str], None] | None = None,
    ):
        self.store = store
        self.job_id = job_id
        self.epoch = epoch
        self.flow = flow
        self.settings = settings or Settings.from_env()
        self.on_line = on_line  # lets `swarmkit run` echo what the run prints
        self.sink = EventSink(self)
        self._stop_latched: str | None = None
        self._cancel: Flags | None = None
        self._fenced = False
        self._node_task: asyncio.Task | None = None
        self.final_status: str | None = None
        self.workspace = store.loc.runs_dir / job_id

    # --- fencing ------------------------------------------------------------

    def fence(self) -> None:
        """Our epoch is gone: stop everything and write nothing more."""
        if not self._fenced:
            self._fenced = True
            log.warning("run %s: epoch %d is gone; this host stops and writes nothing", self.job_id[:8], self.epoch)
            if self._node_task and not self._node_task.done():
                self._node_task.cancel()

    async def fenced_touch(self, conn, **values: Any) -> None:
        """The first statement of every host write: proves the epoch, or raises FencedError."""
        values.setdefault("last_event_at", utcnow())
        res = await conn.execute(
            update(jobs).where(jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING).values(**values)
        )
        if res.rowcount != 1:
            raise FencedError(self.job_id)

    # --- heartbeat and cancel watch --------------------------------------------

    async def _heartbeat(self) -> None:
        while not self._fenced:
            await asyncio.sleep(self.settings.heartbeat_s)
            try:
                async with self.store.write() as conn:
                    row = (
                        await conn.execute(
                            update(jobs)
                            .where(jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING)
                            .values(heartbeat_at=utcnow())
                            .returning(*_FLAG_COLS)
                        )
                    ).first()
            except STORE_FAULTS as exc:
                # Keep trying: if the store stays away past the lease, someone
                # marks the run lost and our next write is fenced.
                log.warning("heartbeat for %s failed: %s", self.job_id[:8], exc)
                continue
            if row is None:
                self.fence()
                return
            flags = Flags(*row)
            if flags.cancel_requested_at is not None and self._cancel is None:
                self._cancel = flags
                if self._node_task and not self._node_task.done():
                    self._node_task.cancel()

    # --- the node boundary ---------------------------------------------------

    async def node_fn(self, step: int, agent: Agent, state: dict[str, Any]) -> tuple[dict[str, Any], Usage]:
        """The one boundary every agent goes through; then the agent itself."""
        flags = await read_flags(self.store, self.job_id)
        if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
            raise FencedError(self.job_id)
        if flags.cancel_requested_at is not None:
            self._cancel = flags
            raise RunCancelledError(self.job_id)
        if flags.stop_requested_at is not None and self._stop_latched is None:
            self._stop_latched = flags.stop_requested_by or "unknown"
        if self._stop_latched is not None:
            raise RunStoppedError(agent.name, step, self._stop_latched)
        if agent.approve and flags.approved_step != step:
            raise GateDeferredError(agent.name, step, f"waiting for approval at {agent.name}")

        now = utcnow()
        async with self.store.write() as conn:
            await self.fenced_touch(conn, current_node=agent.name, updated_at=now, last_event_at=now)
            await conn.execute(
                insert(events).values(job_id=self.job_id, at=now, kind="node.started", node=agent.name, step=step, text=f"{step + 1}/{self.flow.steps} {agent.name}")
            )

        def emit(line: str) -> None:
            self.sink.emit("log", line, agent.name, step)
            if self.on_line:
                self.on_line(self.job_id, agent.name, line)

        def note(line: str) -> None:
            self.sink.emit("runtime", line, agent.name, step)

        if agent.command is not None:
            coro = run_command(
                agent, run_id=self.job_id, step=step, state=state, workspace=self.workspace, emit=emit, note=note,
                interrupt_grace=self.settings.interrupt_grace_s, term_grace=self.settings.term_grace_s,
            )
        else:
            ctx = make_context(self.job_id, agent, step, state, self.workspace, emit)
            coro = run_call(agent, ctx, self.flow.path)
        self._node_task = asyncio.create_task(coro, name=f"node-{self.job_id[:8]}-{agent.name}")
        await asyncio.wait({self._node_task})
        task, self._node_task = self._node_task, None
        if self._fenced:
            raise FencedError(self.job_id)
        if task.cancelled():
            if self._cancel is not None:
                raise RunCancelledError(self.job_id)
            raise asyncio.CancelledError()
        return task.result()

    async def _checkpoint(self, step: int, agent: Agent, state: dict[str, Any], usage: Usage) -> None:
        await self.sink.flush()
        now = utcnow()
        async with self.store.write() as conn:
            await self.fenced_touch(
                conn, step=step + 1, tokens=jobs.c.tokens + usage.tokens, cost=jobs.c.cost + usage.cost, updated_at=now, last_event_at=now
            )
            await conn.execute(insert(checkpoints).values(job_id=self.job_id, step=step + 1, node=agent.name, state=state_json(state), epoch=self.epoch, created_at=now))
            usage_text = f" ({usage.tokens} tokens, ${usage.cost:.4f})" if usage.tokens or usage.cost else ""
            await conn.execute(
                insert(events).values(job_id=self.job_id, at=now, kind="node.finished", node=agent.name, step=step, text=f"{step + 1}/{self.flow.steps} {agent.name} done{usage_text}")
            )

    # --- ends ----------------------------------------------------------------

    async def _end(self, status: str, *, error: str | None = None, allow_if_cancel: bool = False, **extra: Any) -> bool:
        """Move running -> an end state at our epoch. False when a cancel got there first."""
        now = utcnow()
        cond = [jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING]
        if not allow_if_cancel:
            cond.append(jobs.c.cancel_requested_at.is_(None))
        values: dict[str, Any] = dict(status=status, updated_at=now, error=error, **extra)
        if status in (COMPLETED, FAILED, FAULTED, CANCELLED):
            values["ended_at"] = now
            values["current_node"] = None
        async with self.store.write() as conn:
            res = await conn.execute(update(jobs).where(*cond).values(**values))
            if res.rowcount != 1:
                return False
            await self._after_end(conn, status, error, now)
        self.final_status = status
        return True

    async def _after_end(self, conn, status: str, error: str | None, now) -> None:
        jid = self.job_id
        if status == COMPLETED:
            await record_event(conn, jid, "run.completed", "completed", at=now)
            if not self.flow.keep_workspaces:
                await apply_policy(conn, jid, destroy=True, runs_dir=self.store.loc.runs_dir, reason="completed")
        elif status == FAILED:
            await record_event(conn, jid, "run.failed", error or "failed", at=now)
            if not self.flow.keep_workspaces:
                await apply_policy(conn, jid, destroy=True, runs_dir=self.store.loc.runs_dir, reason="failed")
        elif status == FAULTED:
            await record_event(conn, jid, "run.faulted", error or "faulted", at=now)
            await apply_policy(conn, jid, destroy=False, runs_dir=self.store.loc.runs_dir, reason="faulted")

    async def _end_cancelled(self, step: int, node: str | None) -> None:
        flags = self._cancel or await read_flags(self.store, self.job_id)
        keep = bool(flags.cancel_keep) if flags else False
        actor = (flags.cancel_requested_by if flags else None) or "unknown"
        now = utcnow()
        async with self.store.write() as conn:
            res = await conn.execute(
                update(jobs)
                .where(jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING)
                .values(status=CANCELLED, ended_at=now, updated_at=now, current_node=None)
            )
            if res.rowcount != 1:
                raise FencedError(self.job_id)
            said = await apply_policy(conn, self.job_id, destroy=not keep, runs_dir=self.store.loc.runs_dir, reason="cancelled")
            where = f"at {node} ({step + 1}/{self.flow.steps})" if node else "before any agent"
            await record_event(conn, self.job_id, "run.cancelled", f"cancelled {where} by {actor}; workspaces {'kept' if keep else 'destroyed'}", node=node, step=step, at=now)
            await record_audit(conn, actor, "run.cancelled", self.job_id, {"keep": keep, "node": node, "step": step, "workspaces": said}, at=now)
        self.final_status = CANCELLED

    async def _park(self, exc: HITLDeferredError) -> None:
        stopped = isinstance(exc, RunStoppedError)
        status = STOPPED if stopped else DEFERRED
        now = utcnow()
        values: dict[str, Any] = dict(status=status, updated_at=now, current_node=exc.node)
        if not stopped:
            values["pending_gate"] = exc.node
        async with self.store.write() as conn:
            res = await conn.execute(
                update(jobs)
                .where(jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING, jobs.c.cancel_requested_at.is_(None))
                .values(**values)
            )
            if res.rowcount != 1:
                job = await get_job(conn, self.job_id)
                if job and job.status == RUNNING and job.epoch == self.epoch and job.cancel_requested_at is not None:
                    raise RunCancelledError(self.job_id)
                raise FencedError(self.job_id)
            boundary = f"before {exc.node} ({exc.step + 1}/{self.flow.steps})"
            if stopped:
                actor = exc.requested_by or "unknown"  # type: ignore[attr-defined]
                await record_event(conn, self.job_id, "run.stopped", f"stopped {boundary}; requested by {actor}", node=exc.node, step=exc.step, at=now)
                await record_audit(conn, actor, "run.stopped", self.job_id, {"boundary": exc.node, "step": exc.step}, at=now)
            else:
                await record_event(conn, self.job_id, "run.deferred", f"waiting for approval {boundary}", node=exc.node, step=exc.step, at=now)
        self.final_status = status

    # --- the run ---------------------------------------------------------------

    async def run(self) -> str:
        """Host the run; returns the status it ended in ("fenced" if another host owns it now)."""
        try:
            await self._run()
        except FencedError:
            self._fenced = True
            self.final_status = "fenced"
        return self.final_status or ("fenced" if self._fenced else FAULTED)

    async def _run(self) -> None:
        heartbeat: asyncio.Task | None = None
        step = 0
        node: str | None = None
        try:
            async with self.store.write() as conn:
                await self.fenced_touch(conn)
                self.workspace = await ensure_workspace(conn, self.store.loc.runs_dir, self.job_id)
                cp = await latest_checkpoint(conn, self.job_id)
            state: dict[str, Any] = json.loads(cp.state) if cp else {"inputs": {}}
            step = cp.step if cp else 0
            self.sink.start()
            heartbeat = asyncio.create_task(self._heartbeat(), name=f"heartbeat-{self.job_id[:8]}")
            for i in range(step, self.flow.steps):
                agent = self.flow.agents[i]
                step, node = i, agent.name
                output, usage = await self.node_fn(i, agent, state)
                state = {**state, **output}
                await self._checkpoint(i, agent, state, usage)
            step, node = self.flow.steps, None
            await self.sink.flush()
            if not await self._end(COMPLETED):
                raise RunCancelledError(self.job_id)
        except HITLDeferredError as exc:
            try:
                await self.sink.flush()
                await self._park(exc)
            except RunCancelledError:
                await self._end_cancelled(step, node)
        except RunCancelledError:
            await self.sink.flush()
            await self._end_cancelled(step, node)
        except FencedError:
            self._fenced = True
            self.final_status = "fenced"
        except AgentFailed as exc:
            await self.sink.flush()
            if not await self._end(FAILED, error=str(exc)):
                await self._end_cancelled(step, node)
        except FlowError as exc:
            await self.sink.flush()
            if not await self._end(FAILED, error=str(exc)):
                await self._end_cancelled(step, node)
        except asyncio.CancelledError:
            # The process hosting us is going away: leave the row running; its
            # heartbeat lapses and it becomes lost, resumable from the checkpoint.
            self.final_status = "abandoned"
            raise
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            log.exception("run %s faulted", self.job_id[:8])
            try:
                await self.sink.flush()
            except Exception:
                pass
            try:
                await self._end(FAULTED, error=f"runtime fault: {detail}", allow_if_cancel=True)
            except FencedError:
                raise
            except Exception:
                self.final_status = FAULTED
        finally:
            if heartbeat:
                heartbeat.cancel()
                await asyncio.gather(heartbeat, return_exceptions=True)
            await self.sink.close()


def flow_for_job(source: str, path: str | None) -> Flow:
    """Rebuild a run's flow from the source stored on its row."""
    return parse_flow(source, path)


async def host_claimed(store: Store, job_id: str, *, settings: Settings | None = None, on_line=None) -> str:
    """Host a run this process has just claimed."""
    async with store.read() as conn:
        job = await get_job(conn, job_id)
    if job is None:
        return "fenced"
    try:
        flow = flow_for_job(job.flow_source, job.flow_path)
    except FlowError as exc:
        now = utcnow()
        async with store.write() as conn:
            await conn.execute(
                update(jobs).where(jobs.c.id == job_id, jobs.c.epoch == job.epoch, jobs.c.status == RUNNING).values(status=FAULTED, error=str(exc), ended_at=now, updated_at=now)
            )
        return FAULTED
    host = RunHost(store, job_id, job.epoch, flow, settings=settings, on_line=on_line)
    return await host.run()
