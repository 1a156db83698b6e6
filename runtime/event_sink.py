"""A hosted run's event sink: its log lines and runtime notes, on their way to the events table.

Lines are written in batches fenced by the host's epoch, and ride with each
checkpoint; the buffer is bounded (an agent that prints faster than the store
takes lines waits), and a run's log has a cap.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Protocol

from swarmkit.store import STORE_FAULTS
from swarmkit.store.clock import store_now
from swarmkit.store.host_statements import INSERT_EVENTS

from .errors import FencedError
from .journal import storable

if TYPE_CHECKING:
    from swarmkit.store import Store

    from .settings import Settings

# Log lines are written in batches: at most this long after they were printed.
EVENT_FLUSH_S = 0.1
EVENT_BATCH = 500
EVENT_BATCH_BYTES = 1 << 20
# Past this many lines (or bytes) waiting for the store, an agent's output waits.
EVENT_HIGH_WATER = 4 * EVENT_BATCH
EVENT_HIGH_WATER_BYTES = 4 << 20


class SinkHost(Protocol):
    """What the sink needs of the host it writes for."""

    job_id: str
    store: Store
    settings: Settings
    _fenced: bool

    def fence(self, why: str | None = None) -> None: ...

    def fault_text(self, exc: BaseException) -> str: ...

    def warn_once(self, fault: str, text: str) -> None: ...

    def touch(self, conn: Any) -> None: ...


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

    def __init__(self, host: SinkHost):
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
                    conn.execute(INSERT_EVENTS, batch)

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
