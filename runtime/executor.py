"""The executor: hosts one run from its last checkpoint to its end, stop, deferral or cancel.

Every agent goes through `RunHost.node_fn`, the one node boundary: the previous
node's state is already checkpointed, and the flags are read with one fresh
primary-key SELECT before the node does any work. Never cached.

`RunHost` is the host: it owns the run's epoch, its fencing and its life
(`run`). Its parts live beside it: the lease and heartbeat (host_lease.py),
the node boundary (node_boundary.py), running a node (node_runs.py), ending or
parking the run (run_ends.py); whether the run stops at a boundary, and why,
is its `StopState` (stop_state.py); its lines go through its `EventSink`
(event_sink.py); its statements are the store's (store/host_statements.py,
store/run_writes.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from swarmkit.store import STORE_FAULTS, Store, StoreReplaced, describe_db_error, is_transient
from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.host_statements import FLOW_MODULES, HEARTBEAT, TOUCH
from swarmkit.store.queries import get_job, latest_checkpoint, log_bytes
from swarmkit.store.run_writes import fault_claimed
from swarmkit.store.statuses import COMPLETED, FAILED, FAULTED, RUNNING

from . import flow_modules
from .agent_process import AgentProcess
from .agents import Usage
from .errors import AgentFailed, AgentFault, FencedError, FlowError, HITLDeferredError, LeaseLapsedError, RunCancelledError
from .event_sink import EventSink
from .flow import Agent, Flow, parse_flow
from .host_lease import LeaseKeeping
from .host_writes import Flags, read_flags, retry_transient
from .journal import state_json
from .live_usage import LiveUsage
from .node_boundary import NodeBoundaries
from .node_runs import NodeRuns
from .run_ends import RunEnds
from .settings import Settings
from .stop_state import StopState
from .workspaces import prepare_dir, record_workspace, run_dir

__all__ = ["Flags", "RunHost", "flow_for_job", "host_claimed", "read_flags"]

log = logging.getLogger("swarmkit.executor")
T = TypeVar("T")


class RunHost(LeaseKeeping, NodeBoundaries, NodeRuns, RunEnds):
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
        # What this host heard of stops, cancels and parks, and where the run stops because of them.
        self.stops = StopState(job_id)
        self._control_path: Path | None = None
        self._stall_after = timedelta(seconds=flow.stall_after_s or self.settings.stall_after_s)
        self._fenced = False
        # The run's last write has begun: a heartbeat or a flush fenced by it landing is no news.
        self._ending = False
        self._warned: set[str] = set()
        self._node_task: asyncio.Task | None = None
        self.final_status: str | None = None
        self.workspace = store.loc.runs_dir / job_id
        # The lease, on this host's monotonic clock: past it, the run may be
        # someone else's, so this host's agents must already be dead. Renewed by
        # each heartbeat that lands; the agent supervisors hold it too.
        self.lease_deadline: float | None = None
        self._procs: set[AgentProcess] = set()
        self._lease_lapsed = False
        self._store_replaced = False
        self._last_renewal: float | None = None
        self._late_said_at = float("-inf")
        # Where the heartbeat is, and since when (monotonic): said if the lease lapses.
        self._beat_phase: tuple[str, float] = ("not started", time.monotonic())
        self._node_agent: Agent | None = None
        self._node_in_process = False
        self._escalation: asyncio.Task | None = None
        # Usage of the node in flight: what the agent reported so far, and what
        # heartbeats already added to the row (the checkpoint adds the rest).
        self._live: LiveUsage | None = None  # while the node runs
        self._node_live: LiveUsage | None = None  # the last node's, until its checkpoint
        self._usage_lock = asyncio.Lock()
        self._beat_soon = asyncio.Event()  # set by beat_now (host_lease.py)
        # How this run's callables are loaded here; read from the row when the run is taken.
        self.calls = flow_modules.for_run(flow, None, store.loc.runs_dir)

    # --- fencing and retries ------------------------------------------------------

    def fence(self, why: str | None = None) -> None:
        """Our epoch is gone (or may be): stop everything and write nothing more."""
        if not self._fenced:
            self._fenced = True
            if why is None and not self._ending:
                log.warning("run %s: epoch %d is gone; this host stops and writes nothing", self.job_id[:8], self.epoch)
            # An agent waiting for room in the buffer goes on (its lines are not kept).
            self.sink.release()
            self._interrupt_node()

    def _interrupt_node(self) -> None:
        """End the node in flight: a process through its supervisor's escalation (the task's
        cancellation starts it); an async agent on this loop by cancellation, escalated."""
        task = self._node_task
        if task is None or task.done():
            return
        task.cancel()
        if self._node_in_process and self._escalation is None and self._node_agent is not None:
            self._escalation = asyncio.create_task(self._until_ended(task, self._node_agent, True), name=f"escalate-{self.job_id[:8]}")

    def request_park(self, by: str) -> None:
        """The host is shutting down: at the next boundary the run goes back to the queue (not a person's stop)."""
        self.stops.request_park(by)

    def warn_once(self, fault: str, text: str) -> None:
        """A store fault repeats at every retry and flush; the operator needs to hear it once."""
        if fault not in self._warned:
            self._warned.add(fault)
            log.warning("run %s: %s", self.job_id[:8], text)

    def fault_text(self, exc: BaseException) -> str:
        """One line for a log or the row's error: a store fault without its SQL and parameters."""
        if isinstance(exc, STORE_FAULTS):
            return describe_db_error(exc, self.store.loc)
        return "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]

    def _params(self, **more: Any) -> dict[str, Any]:
        now = store_now()
        return dict(b_id=self.job_id, b_epoch=self.epoch, b_now=now, b_stall_at=now + self._stall_after, **more)

    def touch(self, conn) -> None:
        """The first statement of a host write that needs no flags: proves the epoch, or raises FencedError."""
        if conn.execute(TOUCH, self._params()).rowcount != 1:
            raise FencedError(self.job_id)

    def touch_flags(self, conn, stmt, **params: Any) -> Flags:
        """The first statement of a host write that reads the flags back: proves the epoch, or raises FencedError.

        These statements (RETURNING) run under the write lock (SQLite) or the
        row lock (PostgreSQL), so what they return is the latest committed
        value, never a cached or snapshot one.
        """
        row = conn.execute(stmt, self._params(**params)).first()
        if row is None:
            raise FencedError(self.job_id)
        return Flags(*row)

    async def _retrying(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """Ride out a dropped connection or a briefly absent store, within part of the lease.

        Past that the run is someone else's to mark lost; give up and let the
        caller fault or fence.
        """

        def say(exc: BaseException) -> None:
            fault = self.fault_text(exc)
            self.warn_once(fault, f"{what} failed ({fault}); retrying")

        return await retry_transient(self.settings, op, on_retry=say)

    async def _flush(self) -> None:
        await self._retrying("writing events", self.sink.flush)

    def _heard(self, flags: Flags) -> None:
        """What a heartbeat read: a cancel or a stop --now interrupts the node in flight; a stop
        reaches the node's own boundaries (its control file, an async agent's ctx.boundary)."""
        if self.stops.heard(flags):
            self._interrupt_node()
        # Rewritten every heartbeat: its `at` tells the agent its host is alive and what it says is fresh.
        self._write_control()

    async def node_fn(self, step: int, agent: Agent, state: dict[str, Any]) -> tuple[dict[str, Any], Usage]:
        """The boundary and the agent, for a node entered on its own (the first this host runs)."""
        await self.enter(step, agent)
        return await self.run_agent(step, agent, state)

    # --- the run ---------------------------------------------------------------

    async def run(self) -> str:
        """Host the run; returns the status it ended in ("fenced" if another host owns it now)."""
        try:
            await self._run()
        except FencedError:
            self._fenced = True
            self.final_status = "fenced"
        if self._lease_lapsed and self.final_status in (None, "fenced"):
            self.final_status = "abandoned"
        return self.final_status or ("fenced" if self._fenced else FAULTED)

    async def _run(self) -> None:
        heartbeat: asyncio.Task | None = None
        lease_watch: asyncio.Task | None = None
        step = 0
        node: str | None = None
        try:
            async def claim_here():
                path = run_dir(self.store.loc.runs_dir, self.job_id)
                async with self.store.write() as conn:
                    stamped = time.monotonic()
                    await conn.run_sync(lambda c: self.touch_flags(c, HEARTBEAT, b_mono=boot_clock()))
                    await record_workspace(conn, self.job_id, path)
                    cp = await conn.run_sync(latest_checkpoint, self.job_id)
                    logged = await conn.run_sync(log_bytes, self.job_id)
                    modules = await conn.scalar(FLOW_MODULES, {"b_id": self.job_id})
                # Recorded first, made after the commit: a claim that did not land leaves no folder behind.
                self.workspace = await asyncio.to_thread(prepare_dir, self.store.loc.runs_dir, self.job_id)
                return stamped, cp, logged, modules

            stamped, cp, logged, modules = await self._retrying("taking the run", claim_here)
            self.calls = flow_modules.for_run(self.flow, modules, self.store.loc.runs_dir)
            self._renewed(stamped)
            lease_watch = asyncio.create_task(self._lease_watch(), name=f"lease-{self.job_id[:8]}")
            state: dict[str, Any] = json.loads(cp.state) if cp else {"inputs": {}}
            step = cp.step if cp else 0
            self.sink.start(logged)
            heartbeat = asyncio.create_task(self._heartbeat(), name=f"heartbeat-{self.job_id[:8]}")
            # Where a stop landed inside the node this host starts at: it goes on from there.
            resumed_from = json.loads(cp.partial) if cp and cp.partial else None
            if step < self.flow.steps:
                node = self.flow.agents[step].name
                await self.enter(step, self.flow.agents[step])
            for i in range(step, self.flow.steps):
                agent = self.flow.agents[i]
                step, node = i, agent.name
                output, usage = await self.run_agent(i, agent, state, resumed_from)
                resumed_from = None
                state = {**state, **output}
                try:
                    state_text = state_json(state)
                except (TypeError, ValueError, RecursionError) as exc:
                    raise AgentFailed(f"{agent.name}: returned state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})") from None
                nxt = self.flow.agents[i + 1] if i + 1 < self.flow.steps else None
                if nxt is not None:
                    step, node = i + 1, nxt.name
                await self.checkpoint_and_enter(i, agent, state_text, usage, nxt)
            step, node = self.flow.steps, None
            await self._flush()
            if not await self._end(COMPLETED):
                raise RunCancelledError(self.job_id)
        except HITLDeferredError as exc:
            try:
                await self._flush()
                await self._park(exc)
            except RunCancelledError:
                await self._end_cancelled(step, node)
        except RunCancelledError:
            await self._flush()
            await self._end_cancelled(step, node)
        except FencedError as exc:
            if isinstance(exc, LeaseLapsedError):
                self._lease_lapsed = True
                self.warn_once("lease", self.lapse_words())
            self._fenced = True
            # A lapsed lease is this host's silence, not another's claim: the run shows lost, resumable.
            self.final_status = "abandoned" if self._lease_lapsed or self._store_replaced else "fenced"
        except (AgentFault, FlowError) as exc:
            # A callable that cannot be loaded here is the runtime's problem, not the flow's choice.
            await self._flush()
            if not await self._end(FAULTED, error=str(exc), allow_if_cancel=True):
                await self._end_cancelled(step, node)
        except AgentFailed as exc:
            await self._flush()
            if not await self._end(FAILED, error=str(exc)):
                await self._end_cancelled(step, node)
        except StoreReplaced as exc:
            # The file at the path is another store (or none): nothing of this run may land in it.
            self.warn_once("replaced", f"{exc}; its agents are ended and it stops hosting the run")
            self._fenced = True
            self.final_status = "abandoned"
        except asyncio.CancelledError:
            # The process hosting us is going away: leave the row running; its
            # heartbeat lapses and it becomes lost, resumable from the checkpoint.
            self.final_status = "abandoned"
            raise
        except Exception as exc:
            detail = self.fault_text(exc)
            if is_transient(exc):
                # The store stayed out of reach past the retries. That is no
                # fault of the run, and `faulted` is for good: leave the row
                # running, write nothing; its heartbeat lapses, it becomes
                # lost, and it resumes from its last checkpoint.
                self.warn_once(detail, f"left to its lease: the store is out of reach ({detail}); it will show lost and can be resumed")
                self.final_status = "abandoned"
                return
            self.warn_once(detail, f"faulted: {detail}")
            log.debug("run %s fault", self.job_id[:8], exc_info=True)
            try:
                await self._flush()
            except Exception:
                pass
            try:
                await self._end(FAULTED, error=f"runtime fault: {detail}", allow_if_cancel=True)
            except FencedError:
                raise
            except Exception:
                self.final_status = FAULTED
        finally:
            if self._node_task and not self._node_task.done():
                # Leaving: nothing may keep running for a run this host no longer tends.
                self._interrupt_node()
                await asyncio.gather(self._node_task, return_exceptions=True)
            for task in (heartbeat, lease_watch):
                if task:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            for proc in list(self._procs):
                proc.close()
            await self.sink.close()


def flow_for_job(source: str, path: str | None) -> Flow:
    """Rebuild a run's flow from the source stored on its row."""
    return parse_flow(source, path)

async def host_claimed(store: Store, job_id: str, epoch: int, *, settings: Settings | None = None, on_line=None, on_host: Callable[[RunHost], None] | None = None) -> str:
    """Host a run this process claimed at `epoch`.

    The epoch comes from the claim itself. A host starved between its claim
    and this call may find the run lost, resumed and claimed by another
    (a newer epoch): it hosts nothing.
    """
    settings = settings or Settings.from_env()

    async def read():
        async with store.read() as conn:
            return await conn.run_sync(get_job, job_id)

    async def fault(error: str) -> None:
        now = store_now()
        async with store.write() as conn:
            await fault_claimed(conn, job_id, epoch, error=error, at=now)

    # A dropped connection here would leave the claimed run unhosted until its
    # lease ran out: retry as a host does.
    job = await retry_transient(settings, read)
    if job is None or job.epoch != epoch or job.status != RUNNING:
        return "fenced"
    try:
        flow = flow_for_job(job.flow_source, job.flow_path)
    except FlowError as exc:
        error = str(exc)
        await retry_transient(settings, lambda: fault(error))
        return FAULTED
    host = RunHost(store, job_id, epoch, flow, settings=settings, on_line=on_line)
    if on_host is not None:
        on_host(host)
    return await host.run()
