"""The executor: hosts one run from its last checkpoint to its end, stop, deferral or cancel.

Every agent goes through `RunHost.node_fn`, the one node boundary: the previous
node's state is already checkpointed, and the flags are read with one fresh
primary-key SELECT before the node does any work. Never cached.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import BigInteger, Float, bindparam, insert, select, update

from swarmkit.store import STORE_FAULTS, Store, StoreReplaced, describe_db_error, is_transient
from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.models import CANCELLED, COMPLETED, DEFERRED, FAILED, FAULTED, QUEUED, RUNNING, STOPPED, UTCDateTime, checkpoints, events, jobs
from swarmkit.store.queries import get_job, latest_checkpoint, log_bytes

from . import flow_modules, host_metrics
from .agent_context import PARKED_EXIT, StopHere
from .agent_process import AgentProcess, LineSink
from .agents import ProcessHooks, Usage, is_async_call, make_context, run_call, run_command, run_sync_call
from .control import record_audit, record_event, state_json, storable
from .errors import (
    AgentFailed,
    AgentFault,
    FencedError,
    FlowError,
    GateDeferredError,
    HITLDeferredError,
    LeaseLapsedError,
    NodeParked,
    NodeTimedOut,
    RunCancelledError,
    RunParkedError,
    RunStoppedError,
)
from .flow import Agent, Flow, parse_flow
from .live_usage import LiveUsage
from .notify import record_notification
from .settings import Settings
from .steps import step_words
from .workspaces import carry_out, decide, prepare_dir, record_workspace, run_dir

log = logging.getLogger("swarmkit.executor")
T = TypeVar("T")

# Log lines are written in batches: at most this long after they were printed.
EVENT_FLUSH_S = 0.1
EVENT_BATCH = 500
EVENT_BATCH_BYTES = 1 << 20
# Past this many lines (or bytes) waiting for the store, an agent's output waits.
EVENT_HIGH_WATER = 4 * EVENT_BATCH
EVENT_HIGH_WATER_BYTES = 4 << 20
# The longest wait between two tries of a timed-out node.
MAX_BACKOFF_S = 60.0


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
    stop_now: bool | None = False


_FLAG_COLS = (
    jobs.c.status,
    jobs.c.epoch,
    jobs.c.stop_requested_at,
    jobs.c.stop_requested_by,
    jobs.c.cancel_requested_at,
    jobs.c.cancel_requested_by,
    jobs.c.cancel_keep,
    jobs.c.approved_step,
    jobs.c.stop_now,
)


# Statements of the hot path, built once: building a statement costs more than
# running it on SQLite (measured in bench/per_node.py).
_NOW = bindparam("b_now", type_=UTCDateTime())
_MINE = (jobs.c.id == bindparam("b_id"), jobs.c.epoch == bindparam("b_epoch"), jobs.c.status == RUNNING)
_FLAGS = select(*_FLAG_COLS).where(jobs.c.id == bindparam("b_id"))
# Every sign of work moves the moment the run would show stalled (the flow's stall_after, else SWARMKIT_STALL_AFTER).
_STALL_AT = bindparam("b_stall_at", type_=UTCDateTime())
_TOUCH = update(jobs).where(*_MINE).values(last_event_at=_NOW, stall_at=_STALL_AT)
_HEARTBEAT = update(jobs).where(*_MINE).values(heartbeat_at=_NOW, heartbeat_mono=bindparam("b_mono")).returning(*_FLAG_COLS)
# A heartbeat that also brings usage reported mid-node: a sign of work, so it moves last_event_at (the console re-reads the row).
_HEARTBEAT_USAGE = (
    update(jobs)
    .where(*_MINE)
    .values(
        heartbeat_at=_NOW,
        heartbeat_mono=bindparam("b_mono"),
        tokens=jobs.c.tokens + bindparam("b_tokens", type_=BigInteger()),
        cost=jobs.c.cost + bindparam("b_cost", type_=Float()),
        last_event_at=_NOW,
        stall_at=_STALL_AT,
    )
    .returning(*_FLAG_COLS)
)
_ENTER = update(jobs).where(*_MINE).values(current_node=bindparam("b_node"), updated_at=_NOW, last_event_at=_NOW, node_started_at=_NOW, stall_at=_STALL_AT).returning(*_FLAG_COLS)
_CHECKPOINT = (
    update(jobs)
    .where(*_MINE)
    .values(
        step=bindparam("b_step"),
        tokens=jobs.c.tokens + bindparam("b_tokens", type_=BigInteger()),
        cost=jobs.c.cost + bindparam("b_cost", type_=Float()),
        current_node=bindparam("b_node"),
        updated_at=_NOW,
        last_event_at=_NOW,
        node_started_at=_NOW,
        stall_at=_STALL_AT,
    )
    .returning(*_FLAG_COLS)
)
_CHECKPOINT_DONE = select(checkpoints.c.epoch).where(checkpoints.c.job_id == bindparam("b_id"), checkpoints.c.step == bindparam("b_step"))
_INSERT_CHECKPOINT = insert(checkpoints)
_INSERT_EVENTS = insert(events)


async def read_flags(store: Store, job_id: str) -> Flags | None:
    """One primary-key SELECT of the flag columns, in a fresh transaction.

    Not `session.get` and not a long-lived session: an identity map or a held
    read snapshot can keep answering "not stopped" after another process set it.
    """

    def tx(conn) -> Flags | None:
        row = conn.execute(_FLAGS, dict(b_id=job_id)).first()
        return Flags(*row) if row else None

    return await store.run_read(tx, hot=True)


class EventSink:
    """Buffers log lines; they reach the events table in batches, fenced by the host's epoch.

    Lines also ride along in the checkpoint's transaction, so a completed node's
    lines are always committed with it. The buffer is bounded: an agent that
    prints faster than the store takes lines waits (its pipe fills) instead of
    the host's memory growing, and no transaction holds more than a batch, so
    the heartbeat never waits long behind them. A run's log has a cap
    (SWARMKIT_LOG_CAP bytes of text): past it lines are counted and dropped,
    and an event says how many.
    """

    def __init__(self, host: RunHost):
        self.host = host
        self.pending: list[dict[str, Any]] = []
        self.pending_bytes = 0
        self._plock = threading.Lock()
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task: asyncio.Task | None = None
        # Held by every write of events, so ids follow the order lines were printed.
        self.lock = asyncio.Lock()
        self.cap = int(host.settings.log_cap_bytes)
        self.log_bytes = 0
        self.dropped_lines = 0
        self.dropped_bytes = 0
        self._cap_said = False

    def start(self, log_bytes: int = 0) -> None:
        self.log_bytes = log_bytes
        self._task = asyncio.create_task(self._loop(), name=f"events-{self.host.job_id[:8]}")

    def capped(self) -> bool:
        return self.log_bytes >= self.cap

    def emit(self, kind: str, text: str, node: str | None = None, step: int | None = None) -> None:
        if kind == "log":
            size = len(text.encode("utf-8", "surrogatepass"))
            if self.log_bytes + size > self.cap:
                self.log_bytes = max(self.log_bytes, self.cap)
                self.drop(1, size, node, step)
                return
            if self.host._fenced:
                # This host writes nothing more: the agent's pipe is still read to its end.
                return
            self.log_bytes += size
        record = dict(job_id=self.host.job_id, at=store_now(), kind=kind, node=node, step=step, text=storable(text))
        with self._plock:
            self.pending.append(record)
            self.pending_bytes += len(text) + 64
            full = len(self.pending) >= EVENT_BATCH or self.pending_bytes >= EVENT_BATCH_BYTES
            if len(self.pending) >= EVENT_HIGH_WATER or self.pending_bytes >= EVENT_HIGH_WATER_BYTES:
                self._room.clear()
        if full:
            self._wake.set()

    def drop(self, lines: int, size: int, node: str | None = None, step: int | None = None) -> None:
        """Lines past the cap: counted, never kept."""
        self.dropped_lines += lines
        self.dropped_bytes += size
        if not self._cap_said:
            self._cap_said = True
            self.emit("runtime", f"this run's log reached its cap of {self.cap:,} bytes (SWARMKIT_LOG_CAP): further lines are counted and dropped", node, step)

    def report_dropped(self, node: str | None, step: int | None) -> None:
        """At a node's end: one event saying how many lines were dropped since the last one."""
        if self.dropped_lines:
            lines, size = self.dropped_lines, self.dropped_bytes
            self.dropped_lines = self.dropped_bytes = 0
            self.emit("runtime", f"dropped {lines:,} log line{'s' if lines != 1 else ''} ({size:,} bytes) past the log cap", node, step)

    async def room(self) -> None:
        """Back-pressure for an agent's output: wait while too many lines wait for the store."""
        if not self._room.is_set() and not self.host._fenced:
            self._wake.set()
            await self._room.wait()

    def release(self) -> None:
        """Let every waiting agent go on: the host writes nothing more (fenced)."""
        self._room.set()

    def take(self, limit: int | None = None) -> list[dict[str, Any]]:
        with self._plock:
            if limit is None or len(self.pending) <= limit and self.pending_bytes <= EVENT_BATCH_BYTES:
                batch, self.pending = self.pending, []
            else:
                n, size = 0, 0
                for record in self.pending:
                    size += len(record["text"]) + 64
                    n += 1
                    if n >= limit or size >= EVENT_BATCH_BYTES:
                        break
                batch, self.pending = self.pending[:n], self.pending[n:]
            self.pending_bytes = sum(len(r["text"]) + 64 for r in self.pending) if self.pending else 0
            if len(self.pending) < EVENT_HIGH_WATER and self.pending_bytes < EVENT_HIGH_WATER_BYTES:
                self._room.set()
        return batch

    def give_back(self, batch: list[dict[str, Any]]) -> None:
        with self._plock:
            self.pending[:0] = batch
            self.pending_bytes += sum(len(r["text"]) + 64 for r in batch)

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=EVENT_FLUSH_S)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.flush()
            except FencedError:
                self.host.fence()
                self._room.set()
                return
            except STORE_FAULTS as exc:  # try again next round; lines wait in memory, bounded
                fault = self.host.fault_text(exc)
                self.host.warn_once(fault, f"writing events failed: {fault}")

    async def flush(self) -> None:
        """Write what is waiting, a batch a transaction, so that no write holds the lock for long."""
        host = self.host
        while True:
            async with self.lock:
                batch = self.take(EVENT_BATCH)
                if not batch:
                    return

                def tx(conn, batch=batch) -> None:
                    host.touch(conn)
                    conn.execute(_INSERT_EVENTS, batch)

                try:
                    await host.store.run_write(tx)
                except BaseException:
                    self.give_back(batch)
                    raise
            await asyncio.sleep(0)

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._room.set()


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
        # A stop --now heard by the heartbeat (who asked): the node in flight is interrupted.
        self._stop_now_by: str | None = None
        # Any stop the heartbeat heard (who asked): what the node's own boundaries see.
        self._stop_seen: str | None = None
        self._control_path: Path | None = None
        self._stall_after = timedelta(seconds=flow.stall_after_s or self.settings.stall_after_s)
        self._cancel: Flags | None = None
        self._fenced = False
        self._warned: set[str] = set()
        self._node_task: asyncio.Task | None = None
        self.final_status: str | None = None
        self.workspace = store.loc.runs_dir / job_id
        # Set by a worker shutting down: park at the next boundary, back to the queue.
        self._park_by: str | None = None
        # The lease, on this host's monotonic clock: past it, the run may be
        # someone else's, so this host's agents must already be dead. Renewed by
        # each heartbeat that lands; the agent supervisors hold it too.
        self.lease_deadline: float | None = None
        self._procs: set[AgentProcess] = set()
        self._lease_lapsed = False
        self._store_replaced = False
        self._last_renewal: float | None = None
        self._late_said_at = float("-inf")
        self._node_agent: Agent | None = None
        self._node_in_process = False
        self._escalation: asyncio.Task | None = None
        # Usage of the node in flight: what the agent reported so far, and what
        # heartbeats already added to the row (the checkpoint adds the rest).
        self._live: LiveUsage | None = None  # while the node runs
        self._node_live: LiveUsage | None = None  # the last node's, until its checkpoint
        self._usage_lock = asyncio.Lock()
        # How this run's callables are loaded here; read from the row when the run is taken.
        self.calls = flow_modules.for_run(flow, None, store.loc.runs_dir)

    # --- fencing and retries ------------------------------------------------------

    def fence(self, why: str | None = None) -> None:
        """Our epoch is gone (or may be): stop everything and write nothing more."""
        if not self._fenced:
            self._fenced = True
            if why is None:
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
        self._park_by = self._park_by or by

    # --- the lease ------------------------------------------------------------

    def _late(self, t0: float, slept: float, timed: float, stamped: float) -> None:
        """Say so when heartbeats come further apart than half the lease, and where the time went:
        a run marked lost while its host lives is told apart from a dead host by this line."""
        last = self._last_renewal
        if last is None or stamped - last <= self.settings.lease_s / 2:
            return
        now = time.monotonic()
        if now - self._late_said_at < 10.0:
            return
        self._late_said_at = now
        log.warning(
            "run %s: heartbeat %.1fs after the last (lease %gs): the event loop woke %.2fs late, "
            "the store's clock took %.2fs, the write waited %.2fs to begin and %.2fs to commit",
            self.job_id[:8], stamped - last, self.settings.lease_s, slept - t0 - self.settings.heartbeat_s,
            timed - slept, stamped - timed, now - stamped,
        )

    def _renewed(self, stamped_at: float) -> None:
        """A heartbeat stamped at `stamped_at` (monotonic, taken before its write began) has landed."""
        deadline = stamped_at + self.settings.lease_s - self.settings.lease_margin_s
        if self._last_renewal is not None:
            host_metrics.HEARTBEAT_INTERVAL.observe(max(0.0, stamped_at - self._last_renewal))
        self._last_renewal = stamped_at
        if self.lease_deadline is None or deadline > self.lease_deadline:
            self.lease_deadline = deadline
            for proc in list(self._procs):
                proc.renew(deadline)

    def _register(self, proc: AgentProcess) -> None:
        self._procs.add(proc)
        if self.lease_deadline is not None:
            proc.renew(self.lease_deadline)

    def _unregister(self, proc: AgentProcess) -> None:
        self._procs.discard(proc)

    async def _lease_watch(self) -> None:
        """Self-fencing: when the lease could not be renewed in time, stop hosting before anyone else may start."""
        while not self._fenced:
            deadline = self.lease_deadline
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self._lease_lapsed = True
                self.warn_once("lease", "this host could not renew its lease in time: its agents are ended and it stops hosting the run (it will show lost, resumable)")
                self.fence("lease")
                return
            wait = min(self.settings.heartbeat_s, deadline - now) if deadline is not None else self.settings.heartbeat_s
            await asyncio.sleep(max(0.01, wait))

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

    def _mine(self):
        return (jobs.c.id == self.job_id, jobs.c.epoch == self.epoch, jobs.c.status == RUNNING)

    def _params(self, **more: Any) -> dict[str, Any]:
        now = store_now()
        return dict(b_id=self.job_id, b_epoch=self.epoch, b_now=now, b_stall_at=now + self._stall_after, **more)

    def touch(self, conn) -> None:
        """The first statement of a host write that needs no flags: proves the epoch, or raises FencedError."""
        if conn.execute(_TOUCH, self._params()).rowcount != 1:
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

        return await _retry_transient(self.settings, op, on_retry=say)

    async def _flush(self) -> None:
        await self._retrying("writing events", self.sink.flush)

    # --- heartbeat and cancel watch --------------------------------------------

    async def _heartbeat(self) -> None:
        stamped = [0.0]

        def tx(conn, delta: tuple[int, float]) -> Flags:
            # Stamped inside the transaction, beside the time others will see:
            # waiting for the write lock does not shorten the lease.
            stamped[0] = time.monotonic()
            if delta == (0, 0.0):
                return self.touch_flags(conn, _HEARTBEAT, b_mono=boot_clock())
            return self.touch_flags(conn, _HEARTBEAT_USAGE, b_mono=boot_clock(), b_tokens=delta[0], b_cost=delta[1])

        while not self._fenced:
            t0 = time.monotonic()
            await asyncio.sleep(self.settings.heartbeat_s)
            t1 = time.monotonic()
            try:
                await self.store.keep_time()
                t2 = time.monotonic()
                flags = await self._beat(tx)
            except FencedError:
                self.fence()
                return
            except StoreReplaced as exc:
                self.warn_once("replaced", f"{exc}; its agents are ended and it stops hosting the run")
                self._store_replaced = True
                self.fence("store replaced")
                return
            except STORE_FAULTS as exc:
                # Keep trying: if the store stays away past the lease, someone
                # marks the run lost and our next write is fenced.
                fault = self.fault_text(exc)
                self.warn_once(fault, f"heartbeat failed: {fault}")
                continue
            self._late(t0, t1, t2, stamped[0])
            self._renewed(stamped[0])
            self._heard(flags)

    def _heard(self, flags: Flags) -> None:
        """What a heartbeat read: a cancel or a stop --now interrupts the node in flight; a stop
        reaches the node's own boundaries (its control file, an async agent's ctx.boundary)."""
        if flags.stop_requested_at is not None and self._stop_seen is None:
            self._stop_seen = flags.stop_requested_by or "unknown"
        if flags.cancel_requested_at is not None and self._cancel is None:
            self._cancel = flags
            self._interrupt_node()
        elif flags.stop_requested_at is not None and flags.stop_now and self._stop_now_by is None:
            self._stop_now_by = flags.stop_requested_by or "unknown"
            host_metrics.STOP_REACTION.observe(max(0.0, (store_now() - flags.stop_requested_at).total_seconds()))
            self._interrupt_node()
        # Rewritten every heartbeat: its `at` tells the agent its host is alive and what it says is fresh.
        self._write_control()

    # --- boundaries inside a node ----------------------------------------------

    def _set_control(self, path: Path | None) -> None:
        """The node in flight's control file ($SWARMKIT_CONTROL): written now, rewritten by each heartbeat."""
        self._control_path = path
        self._write_control()

    def _write_control(self) -> None:
        path = self._control_path
        if path is None:
            return
        body = dict(
            run_id=self.job_id, stop_requested=self._stop_seen is not None or self._stop_latched is not None,
            requested_by=self._stop_seen or self._stop_latched, cancel_requested=self._cancel is not None, at=store_now().isoformat(),
        )
        tmp = path.with_name(path.name + ".tmp")
        try:
            # Replaced whole, so an agent never reads half a file; a few bytes on a local folder.
            tmp.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:  # the node's folder went away as it ended
            log.debug("run %s: control file %s not written: %s", self.job_id[:8], path, exc)

    def _boundary_here(self, partial: dict[str, Any]) -> None:
        """ctx.boundary for an async agent on this loop: the stop this host last heard (a heartbeat old at most)."""
        if self._stop_seen is not None or self._stop_latched is not None:
            raise StopHere(partial)

    async def _aboundary_here(self, partial: dict[str, Any]) -> None:
        """ctx.aboundary: the stop flag read fresh, one primary-key SELECT, every time."""
        t0 = time.monotonic()
        flags = await self._retrying("the boundary check", lambda: read_flags(self.store, self.job_id))
        host_metrics.BOUNDARY.observe(time.monotonic() - t0)
        if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
            self.fence()
            raise asyncio.CancelledError()
        if flags.stop_requested_at is not None and flags.cancel_requested_at is None:
            self._stop_seen = self._stop_seen or flags.stop_requested_by or "unknown"
            raise StopHere(partial)

    async def _parked_inside(self, agent: Agent, step: int, parked: NodeParked) -> BaseException:
        """An agent parked at a boundary of its own: if a stop is pending the run stops here with
        its partial state; a parked exit with no stop asked for is the agent's failure."""
        flags = await self._retrying("the boundary check", lambda: read_flags(self.store, self.job_id))
        if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
            return FencedError(self.job_id)
        if flags.cancel_requested_at is not None:
            self._cancel = flags
            return RunCancelledError(self.job_id)
        if flags.stop_requested_at is None:
            return AgentFailed(f"{agent.name}: exited {PARKED_EXIT} (parked at a boundary of its own) but no stop was requested")
        try:
            partial = state_json(parked.partial)
        except (TypeError, ValueError, RecursionError) as exc:
            return AgentFailed(f"{agent.name}: parked with a partial state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})")
        if self._stop_latched is None:
            self._stop_latched = flags.stop_requested_by or "unknown"
            host_metrics.STOP_REACTION.observe(max(0.0, (store_now() - flags.stop_requested_at).total_seconds()))
        return RunStoppedError(agent.name, step, self._stop_latched, now=bool(flags.stop_now), partial=partial, tokens=parked.tokens, cost=parked.cost)

    async def _beat(self, tx) -> Flags:
        """One heartbeat, carrying the usage the node in flight reported since the last one.

        A heartbeat whose commit answer is lost leaves `written` as it was: the
        next one (or the checkpoint) may then count that delta twice; the store
        faults that lose an answer after a commit are rare, and never SQLite's.
        """
        async with self._usage_lock:
            live = self._live
            if live is None:
                return await self.store.run_write(lambda conn: tx(conn, (0, 0.0)), hot=True)
            if live.path is not None:
                await asyncio.to_thread(live.read)
            delta = live.unwritten()
            flags = await self.store.run_write(lambda conn: tx(conn, delta), hot=True)
            live.written = (live.written[0] + delta[0], live.written[1] + delta[1])
            return flags

    # --- the node boundary ---------------------------------------------------

    def _decide(self, flags: Flags, step: int, agent: Agent) -> None:
        """What the flags say at the boundary before `agent`: go on, or raise."""
        if flags.cancel_requested_at is not None:
            self._cancel = flags
            raise RunCancelledError(self.job_id)
        if flags.stop_requested_at is not None and self._stop_latched is None:
            self._stop_latched = flags.stop_requested_by or "unknown"
            if self._stop_now_by is None:  # a stop --now was measured when the heartbeat heard it
                host_metrics.STOP_REACTION.observe(max(0.0, (store_now() - flags.stop_requested_at).total_seconds()))
        if self._stop_latched is not None:
            raise RunStoppedError(agent.name, step, self._stop_latched, now=bool(flags.stop_now) or self._stop_now_by is not None)
        if self._park_by is not None:
            raise RunParkedError(agent.name, step, self._park_by)
        if agent.approve and flags.approved_step != step:
            raise GateDeferredError(agent.name, step, f"waiting for approval at {agent.name}")

    def _clear(self, flags: Flags, step: int, agent: Agent) -> bool:
        try:
            self._decide(flags, step, agent)
        except (RunCancelledError, HITLDeferredError):
            return False
        return True

    def _started_event(self, step: int, agent: Agent, now) -> dict[str, Any]:
        return dict(job_id=self.job_id, at=now, kind="node.started", node=agent.name, step=step, text=step_words(step, self.flow.steps, agent.name, None))

    async def enter(self, step: int, agent: Agent) -> None:
        """The boundary before the first node this host runs: no checkpoint to write, only the flags."""

        def tx(conn) -> Flags:
            flags = self.touch_flags(conn, _ENTER, b_node=agent.name)
            if self._clear(flags, step, agent):
                conn.execute(_INSERT_EVENTS, [self._started_event(step, agent, store_now())])
            return flags

        t0 = time.monotonic()
        flags = await self._retrying("the boundary check", lambda: self.store.run_write(tx, hot=True))
        host_metrics.BOUNDARY.observe(time.monotonic() - t0)
        self._decide(flags, step, agent)

    async def checkpoint_and_enter(self, step: int, agent: Agent, state: dict[str, Any], usage: Usage, nxt: Agent | None) -> None:
        """Checkpoint `agent` (node `step`) and, in the same transaction, read the flags for the next boundary.

        One write transaction a node: the state, its lines, node.finished, the
        usage, and the flags read back fresh under the write lock. If they say
        go on, node.started for the next agent is written with them.
        """
        state_text = state_json(state)
        # Taken under the lock: a heartbeat in flight has landed its part, or not begun.
        async with self._usage_lock:
            written = self._node_live.written if self._node_live is not None else (0, 0.0)

        def tx(conn, batch: list[dict[str, Any]], retry: bool) -> Flags:
            now = store_now()
            if retry:
                done = conn.execute(_CHECKPOINT_DONE, dict(b_id=self.job_id, b_step=step + 1)).first()
                if done is not None and done.epoch == self.epoch:
                    # The first attempt committed; only its answer was lost.
                    row = conn.execute(_FLAGS, dict(b_id=self.job_id)).first()
                    if row is None:
                        raise FencedError(self.job_id)
                    flags = Flags(*row)
                    if flags.epoch != self.epoch or flags.status != RUNNING:
                        raise FencedError(self.job_id)
                    return flags
            # Heartbeats already put part of the node's usage on the row.
            flags = self.touch_flags(
                conn, _CHECKPOINT, b_step=step + 1, b_tokens=usage.tokens - written[0], b_cost=usage.cost - written[1],
                b_node=nxt.name if nxt else agent.name,
            )
            conn.execute(_INSERT_CHECKPOINT, dict(job_id=self.job_id, step=step + 1, node=agent.name, state=state_text, epoch=self.epoch, created_at=now))
            usage_text = f" ({usage.tokens} tokens, ${usage.cost:.4f})" if usage.tokens or usage.cost else ""
            rows = batch + [dict(job_id=self.job_id, at=now, kind="node.finished", node=agent.name, step=step, text=f"{step_words(step, self.flow.steps, agent.name, None)} done{usage_text}")]
            if nxt is not None and self._clear(flags, step + 1, nxt):
                rows.append(self._started_event(step + 1, nxt, now))
            conn.execute(_INSERT_EVENTS, rows)
            return flags

        async with self.sink.lock:
            batch = self.sink.take()
            attempts = [0]

            async def op() -> Flags:
                attempts[0] += 1
                return await self.store.run_write(lambda conn: tx(conn, batch, attempts[0] > 1), hot=True)

            try:
                t0 = time.monotonic()
                flags = await self._retrying("the checkpoint", op)
                host_metrics.BOUNDARY.observe(time.monotonic() - t0)
            except FencedError:
                raise
            except BaseException:
                self.sink.give_back(batch)
                raise
        self._node_live = None
        if nxt is not None:
            self._decide(flags, step + 1, nxt)

    async def run_agent(self, step: int, agent: Agent, state: dict[str, Any], resumed_from: dict[str, Any] | None = None) -> tuple[dict[str, Any], Usage]:
        """The node, tried again from its start after a timed-out try while it has retries left
        (with backoff; each timeout and each new try is an event)."""
        tries = agent.retries + 1
        for attempt in range(1, tries + 1):
            try:
                return await self._try_agent(step, agent, state, resumed_from)
            except NodeTimedOut:
                said = f"{agent.name}: timed out after {agent.timeout}" + (f" (try {attempt} of {tries})" if tries > 1 else "")
                if attempt == tries:
                    self.sink.emit("node.timeout", f"{said}: interrupted; the run ends failed", agent.name, step)
                    raise AgentFailed(said + ("; no retries left" if tries > 1 else "")) from None
                delay = min(self.settings.retry_backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
                self.sink.emit("node.timeout", f"{said}: interrupted; trying again in {delay:g}s", agent.name, step)
            await asyncio.sleep(delay)
            # The boundary before the next try: a stop or cancel asked meanwhile lands here.
            flags = await self._retrying("the boundary check", lambda: read_flags(self.store, self.job_id))
            if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
                raise FencedError(self.job_id)
            self._decide(flags, step, agent)
            self.sink.emit("node.retry", f"{step_words(step, self.flow.steps, agent.name, None)}: try {attempt + 1} of {tries}", agent.name, step)
        raise AssertionError("unreachable")

    async def _try_agent(self, step: int, agent: Agent, state: dict[str, Any], resumed_from: dict[str, Any] | None) -> tuple[dict[str, Any], Usage]:
        def emit(line: str) -> None:
            self.sink.emit("log", line, agent.name, step)
            if self.on_line:
                self.on_line(self.job_id, agent.name, line)

        def note(line: str) -> None:
            self.sink.emit("runtime", line, agent.name, step)

        def drop(lines: int, size: int) -> None:
            self.sink.drop(lines, size, agent.name, step)

        hooks = ProcessHooks(
            lines=LineSink(emit, self.sink.room, self.sink.capped, drop),
            note=note,
            interrupt_grace=self.settings.interrupt_grace_s,
            term_grace=self.settings.term_grace_s,
            fence_grace=self.settings.fence_grace_s,
            lease_deadline=lambda: self.lease_deadline,
            register=self._register,
            unregister=self._unregister,
            control=self._set_control,
        )
        self._live = self._node_live = hooks.live
        coro: Awaitable[tuple[dict[str, Any], Usage]]
        in_process = False
        if agent.command is not None:
            coro = run_command(agent, run_id=self.job_id, step=step, state=state, workspace=self.workspace, hooks=hooks, resumed_from=resumed_from)
        else:
            ctx = make_context(self.job_id, agent, step, state, self.workspace, emit, resumed_from)
            if is_async_call(agent, self.calls):
                in_process = True
                hooks.live.in_process = ctx.usage
                ctx._boundary, ctx._aboundary = self._boundary_here, self._aboundary_here
                coro = run_call(agent, ctx, self.calls)
            else:
                coro = run_sync_call(agent, ctx, self.calls, hooks)
        self._node_task = task = asyncio.create_task(coro, name=f"node-{self.job_id[:8]}-{agent.name}")
        self._node_agent, self._node_in_process, self._escalation = agent, in_process, None
        if self._cancel is not None or self._fenced or self._stop_now_by is not None:
            # The heartbeat saw a cancel or a stop --now (or lost our epoch) while the node was being set up.
            self._interrupt_node()
        timed_out = False
        try:
            done, _ = await asyncio.wait({task}, timeout=agent.timeout_s)
            if not done:
                # Past the node's timeout: interrupted like a cancel's node, then tried again or failed.
                timed_out = True
                self._interrupt_node()
                await asyncio.wait({task})
        except asyncio.CancelledError:
            # This host is leaving its runs (a worker's second signal): the
            # supervisors end the agents on their own (the control pipe closes),
            # and the run becomes lost within its lease.
            for proc in list(self._procs):
                proc.abandon()
            task.cancel()
            if in_process:
                await self._until_ended(task, agent, in_process)
            else:
                # The supervisors end everything within their term grace; waiting
                # for them leaves no agent (and no open pipe) behind this process.
                await asyncio.wait({task}, timeout=self.settings.term_grace_s + 2.0)
            raise
        finally:
            if self._escalation is not None and not self._escalation.done():
                self._escalation.cancel()
            self._live = None
        self._node_task = None
        self.sink.report_dropped(agent.name, step)
        if self._fenced:
            raise FencedError(self.job_id)
        if task.cancelled():
            if self._cancel is not None:
                raise RunCancelledError(self.job_id)
            if self._stop_now_by is not None:
                # Parked at the boundary before this node: its work in flight is lost, it runs again on resume.
                self._stop_latched = self._stop_latched or self._stop_now_by
                raise RunStoppedError(agent.name, step, self._stop_latched, now=True, interrupted=True)
            if not timed_out:
                raise asyncio.CancelledError()
        if timed_out:
            raise NodeTimedOut(agent.name)
        try:
            return task.result()
        except NodeParked as parked:
            raise await self._parked_inside(agent, step, parked) from None

    async def _until_ended(self, task: asyncio.Task, agent: Agent, in_process: bool) -> None:
        """Wait for a cancelled node to end. A process ends through its supervisor's escalation;
        an async agent on this loop that swallows its cancellation is cancelled again through
        the graces, and if it still runs, this host process exits: it is the only way to end it."""
        if not in_process:
            await asyncio.wait({task})
            return
        for grace in (self.settings.interrupt_grace_s, self.settings.term_grace_s):
            done, _ = await asyncio.wait({task}, timeout=grace)
            if done:
                return
            task.cancel()
        if task.done():
            return
        text = f"agent {agent.name} ignored its cancellation for {self.settings.interrupt_grace_s + self.settings.term_grace_s:.0f}s; ending host process {os.getpid()} so that nothing of the run keeps running"
        log.error("run %s: %s", self.job_id[:8], text)
        self.sink.emit("runtime", text, agent.name)
        try:
            await asyncio.wait_for(self.sink.flush(), timeout=2.0)
        except BaseException:
            pass
        for proc in list(self._procs):
            proc.close()
        os._exit(70)

    async def node_fn(self, step: int, agent: Agent, state: dict[str, Any]) -> tuple[dict[str, Any], Usage]:
        """The boundary and the agent, for a node entered on its own (the first this host runs)."""
        await self.enter(step, agent)
        return await self.run_agent(step, agent, state)

    # --- ends ----------------------------------------------------------------

    async def _already(self, conn, status: str) -> bool:
        """After a lost commit answer: did our first attempt already move the row?"""
        job = await conn.run_sync(get_job, self.job_id)
        return job is not None and job.epoch == self.epoch and job.status == status

    async def _end(self, status: str, *, error: str | None = None, allow_if_cancel: bool = False) -> bool:
        """Move running -> an end state at our epoch. False when a cancel got there first."""
        cond = [*self._mine()]
        if not allow_if_cancel:
            cond.append(jobs.c.cancel_requested_at.is_(None))

        async def op() -> bool:
            now = store_now()
            values: dict[str, Any] = dict(status=status, updated_at=now, error=storable(error) if error else None, ended_at=now)
            if status == COMPLETED:
                values["current_node"] = None  # a failed or faulted run keeps the node it ended in: the operator's first question
            async with self.store.write() as conn:
                res = await conn.execute(update(jobs).where(*cond).values(**values))
                if res.rowcount != 1:
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
        flags = self._cancel or await self._retrying("reading the cancel", lambda: read_flags(self.store, self.job_id))
        keep = bool(flags.cancel_keep) if flags else False
        actor = (flags.cancel_requested_by if flags else None) or "unknown"

        async def op() -> None:
            now = store_now()
            async with self.store.write() as conn:
                res = await conn.execute(update(jobs).where(*self._mine()).values(status=CANCELLED, ended_at=now, updated_at=now, current_node=None))
                if res.rowcount != 1:
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
        if inside:
            # What the node spent up to the boundary it parked at is spent: on resume it goes on from there.
            # Heartbeats already put part of it on the row (as at a checkpoint).
            async with self._usage_lock:
                written = self._node_live.written if self._node_live is not None else (0, 0.0)
            values.update(tokens=jobs.c.tokens + (exc.tokens - written[0]), cost=jobs.c.cost + (exc.cost - written[1]))  # type: ignore[attr-defined]

        async def op() -> None:
            now = store_now()
            async with self.store.write() as conn:
                res = await conn.execute(update(jobs).where(*self._mine(), jobs.c.cancel_requested_at.is_(None)).values(updated_at=now, **values))
                if res.rowcount != 1:
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
                    await conn.execute(
                        update(checkpoints).where(checkpoints.c.job_id == self.job_id, checkpoints.c.step == exc.step).values(partial=exc.partial)
                    )
                if not parked:
                    await record_notification(conn, self.job_id, f"run.{status}", flow=self.flow.name, text=f"{status} {boundary}", node=exc.node, step=exc.step, at=now)
                if stopped:
                    assert isinstance(exc, RunStoppedError)
                    actor = exc.requested_by or "unknown"
                    detail: dict[str, Any] = {"boundary": exc.node, "step": step_words(exc.step, self.flow.steps)}
                    if inside:
                        detail["inside"] = True
                    how = ""
                    if exc.now:
                        detail.update(now=True, interrupted=exc.node if exc.interrupted else None)
                        how = f" (stop --now: {exc.node} was interrupted and runs again from its start on resume)" if exc.interrupted else " (stop --now, taken at the boundary)"
                    await record_event(conn, self.job_id, "run.stopped", f"stopped {boundary}{how}; requested by {actor}", node=exc.node, step=exc.step, at=now)
                    await record_audit(conn, actor, "run.stopped", self.job_id, detail, at=now)
                elif parked:
                    by = exc.parked_by  # type: ignore[attr-defined]
                    await record_event(conn, self.job_id, "run.parked", f"parked {boundary} by {by}: back in the queue for any worker", node=exc.node, step=exc.step, at=now)
                    await record_audit(conn, by, "run.parked", self.job_id, {"boundary": exc.node, "step": step_words(exc.step, self.flow.steps), "worker": by}, at=now)
                else:
                    await record_event(conn, self.job_id, "run.deferred", f"waiting for approval {boundary}", node=exc.node, step=exc.step, at=now)

        await self._retrying(f"parking the run {status}", op)
        self.final_status = "parked" if parked else status

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
                    await conn.run_sync(lambda c: self.touch_flags(c, _HEARTBEAT, b_mono=boot_clock()))
                    await record_workspace(conn, self.job_id, path)
                    cp = await conn.run_sync(latest_checkpoint, self.job_id)
                    logged = await conn.run_sync(log_bytes, self.job_id)
                    modules = await conn.scalar(select(jobs.c.flow_modules).where(jobs.c.id == self.job_id))
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
                    state_json(state)
                except (TypeError, ValueError, RecursionError) as exc:
                    raise AgentFailed(f"{agent.name}: returned state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})") from None
                nxt = self.flow.agents[i + 1] if i + 1 < self.flow.steps else None
                if nxt is not None:
                    step, node = i + 1, nxt.name
                await self.checkpoint_and_enter(i, agent, state, usage, nxt)
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
                self.warn_once("lease", "this host could not renew its lease in time: its agents are ended and it stops hosting the run (it will show lost, resumable)")
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


async def _retry_transient(settings: Settings, op: Callable[[], Awaitable[T]], on_retry: Callable[[BaseException], None] | None = None) -> T:
    """`op`, retried through transient store faults for part of the lease (FencedError and
    every other fault are raised at once)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(2 * settings.heartbeat_s, 0.6 * settings.lease_s)
    delay = 0.05
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
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


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
            await conn.execute(
                update(jobs).where(jobs.c.id == job_id, jobs.c.epoch == epoch, jobs.c.status == RUNNING).values(status=FAULTED, error=error, ended_at=now, updated_at=now)
            )

    # A dropped connection here would leave the claimed run unhosted until its
    # lease ran out: retry as a host does.
    job = await _retry_transient(settings, read)
    if job is None or job.epoch != epoch or job.status != RUNNING:
        return "fenced"
    try:
        flow = flow_for_job(job.flow_source, job.flow_path)
    except FlowError as exc:
        error = str(exc)
        await _retry_transient(settings, lambda: fault(error))
        return FAULTED
    host = RunHost(store, job_id, epoch, flow, settings=settings, on_line=on_line)
    if on_host is not None:
        on_host(host)
    return await host.run()
