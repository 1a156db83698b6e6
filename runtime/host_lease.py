"""A host's lease on its run: the heartbeat that renews it, and self-fencing when it cannot.

The lease's deadline is on this host's monotonic clock: past it the run may be
someone else's, so this host's agents must already be dead. Each heartbeat
that lands renews it (and hands it to the agents' supervisors), brings the
usage the node in flight reported, and reads the flags back for the host's
stop state.
"""

from __future__ import annotations

import asyncio
import logging
import time

from swarmkit.store import STORE_FAULTS, StoreReplaced
from swarmkit.store.clock import boot_clock, store_now
from swarmkit.store.host_statements import HEARTBEAT, HEARTBEAT_USAGE
from swarmkit.store.named import S

from . import host_metrics
from .agent_process import AgentProcess
from .errors import FencedError
from .host_parts import HostParts
from .host_writes import Flags

log = logging.getLogger("swarmkit.executor")


class LeaseKeeping(HostParts):
    """The host's part that keeps its lease: heartbeats, renewals, and the watch that fences it."""

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

    def lapse_words(self, watch_late: float | None = None) -> str:
        """What a host says when its lease lapsed, and where the time went: the heartbeat's phase
        (asleep, reading the store's clock, its write) and how late the watch itself woke."""
        now = time.monotonic()
        phase, since = self._beat_phase
        where = [f"its heartbeat {phase} for {now - since:.1f}s"]
        if self._last_renewal is not None:
            where.insert(0, f"last renewed {now - self._last_renewal:.1f}s ago, lease {self.settings.lease_s:g}s")
        if watch_late is not None:
            where.append(f"this check woke {watch_late:.2f}s late")
        return f"this host could not renew its lease in time ({'; '.join(where)}): its agents are ended and it stops hosting the run (it will show lost, resumable)"

    async def _lease_watch(self) -> None:
        """Self-fencing: when the lease could not be renewed in time, stop hosting before anyone else may start."""
        late = 0.0
        while not self._fenced:
            deadline = self.lease_deadline
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self._lease_lapsed = True
                self.warn_once("lease", self.lapse_words(late))
                self.fence("lease")
                return
            wait = max(0.01, min(self.settings.heartbeat_s, deadline - now) if deadline is not None else self.settings.heartbeat_s)
            await asyncio.sleep(wait)
            late = time.monotonic() - now - wait

    async def _heartbeat(self) -> None:
        stamped = [0.0]

        def tx(conn, delta: tuple[int, float]) -> Flags:
            # Stamped inside the transaction, beside the time others will see:
            # waiting for the write lock does not shorten the lease.
            stamped[0] = time.monotonic()
            if delta == (0, 0.0):
                flags = self.touch_flags(conn, HEARTBEAT, b_mono=boot_clock())
            else:
                flags = self.touch_flags(conn, HEARTBEAT_USAGE, b_mono=boot_clock(), b_tokens=delta[0], b_cost=delta[1])
            if flags.budget is not None:  # a hard budget is held to inside the node, as a stop --now
                now = store_now()
                flags, said = self._held_to_limits(conn, flags, self._entered_node, now, inside=True)
                if said:
                    conn.execute(S.INSERT_EVENTS, said)
            return flags

        while not self._fenced:
            t0 = time.monotonic()
            self._beat_phase = ("asleep", t0)
            try:
                await asyncio.wait_for(self._beat_soon.wait(), timeout=self.settings.heartbeat_s)
            except TimeoutError:
                pass
            self._beat_soon.clear()
            t1 = time.monotonic()
            try:
                self._beat_phase = ("reading the store's clock", t1)
                await self.store.keep_time(hot=True)
                t2 = time.monotonic()
                self._beat_phase = ("writing", t2)
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

    def beat_now(self) -> None:
        """The run's flags changed (a wakeup, store/wakeups.py): beat now, and so hear a cancel or a stop
        --now at once rather than at the next heartbeat. A wakeup lost leaves the heartbeat to hear it."""
        self._beat_soon.set()

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
