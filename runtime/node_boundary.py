"""The node boundary: where a hosted run's flags are read fresh and its stop state decides.

Between two nodes, the checkpoint of the one and the flags for the next are
one write transaction (`checkpoint_and_enter`); before the first node a host
runs, the flags alone (`enter`). A node may offer boundaries of its own: an
async agent's `ctx.boundary` and `ctx.aboundary`, a command agent's control
file ($SWARMKIT_CONTROL), and an agent that parks at one. What the flags mean
is the stop state's to say (`stop_state.StopState`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from swarmkit.store.clock import store_now
from swarmkit.store.named import S
from swarmkit.store.statuses import RUNNING

from . import host_metrics
from .agents import Usage
from .budgets import BUDGET, Spent, budget_of
from .errors import FencedError, HITLDeferredError, NodeParked, RunCancelledError
from .flow import Agent
from .host_parts import HostParts
from .host_writes import Flags, read_flags
from .journal import audit_row
from .steps import step_words
from .stop_conditions import fired

log = logging.getLogger("swarmkit.executor")


class NodeBoundaries(HostParts):
    """The host's part at its run's boundaries: between nodes, and inside one."""

    # When the node in flight was entered (monotonic), and which: its time is added to the run's ran_s, for max_wall.
    _entered_mono: float | None = None
    _entered_node: str | None = None

    def _held_to_limits(
        self, conn: Any, flags: Flags, node: str | None, now: Any, *, inside: bool = False, finished: str | None = None,
    ) -> tuple[Flags, list[dict[str, Any]]]:
        """A limit of the run's budget reached, or a stop set for later that holds, asks the stop in this
        transaction (as the actor `budget`, or as whoever set it, with the reason); from there it is a stop
        like any other. At the boundary before `node`, after `finished` (None: no node ran here). `inside`
        (a heartbeat): only a hard budget, counting the node in flight's time, and as a stop --now. The flags
        as they are now, and the event to write after the boundary's own."""
        if (flags.budget is None and flags.stop_when is None) or flags.stop_requested_at is not None or flags.cancel_requested_at is not None:
            return flags, []
        budget = budget_of(flags.budget)
        if inside and not budget.hard:
            return flags, []
        ran = (flags.ran_s or 0.0) + (time.monotonic() - self._entered_mono if inside and self._entered_mono is not None else 0.0)
        spent = Spent(flags.cost or 0.0, flags.tokens or 0, ran, flags.step or 0)
        actor, reason, left = BUDGET, budget.reached(spent), flags.stop_when
        # Every stop set for later that holds here fires with it: a resume goes on from here, past them all.
        if not inside and (hit := fired(flags.stop_when, spent, finished, node)) is not None:
            actor, reason, left = (BUDGET, f"{reason}; {hit[1]}", hit[2]) if reason is not None else (hit[0].by, hit[1], hit[2])
        if reason is None:
            return flags, []
        params = self._params(b_actor=actor, b_reason=reason, b_stop_now=inside, b_when=left)
        params["b_now"] = now
        if conn.execute(S.STOP_BY_HOST, params).rowcount != 1:
            return flags, []
        detail = {"node": node, "step": step_words(flags.step, self.flow.steps), "reason": reason, **({"now": True} if inside else {})}
        conn.execute(S.INSERT_AUDIT, audit_row(actor, "run.stop_requested", self.job_id, detail, now))
        what = f"stop --now requested by {actor}: {reason}; interrupting {node}" if inside else f"stop requested by {actor}: {reason}"
        said = [dict(job_id=self.job_id, at=now, kind="run.stop_requested", node=node, step=flags.step, text=what)]
        return dataclasses.replace(flags, stop_requested_at=now, stop_requested_by=actor, stop_reason=reason, stop_now=inside, stop_when=left), said

    def _set_control(self, path: Path | None) -> None:
        """The node in flight's control file ($SWARMKIT_CONTROL): written now, rewritten by each heartbeat."""
        self._control_path = path
        self._write_control()

    def _write_control(self) -> None:
        path = self._control_path
        if path is None:
            return
        body = dict(run_id=self.job_id, **self.stops.control(), at=store_now().isoformat())
        tmp = path.with_name(path.name + ".tmp")
        try:
            # Replaced whole, so an agent never reads half a file; a few bytes on a local folder.
            tmp.write_text(json.dumps(body, sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:  # the node's folder went away as it ended
            log.debug("run %s: control file %s not written: %s", self.job_id[:8], path, exc)

    async def _aboundary_here(self, partial: dict[str, Any]) -> None:
        """ctx.aboundary: the stop flag read fresh, one primary-key SELECT, every time."""
        t0 = time.monotonic()
        flags = await self._retrying("the boundary check", lambda: read_flags(self.store, self.job_id))
        host_metrics.BOUNDARY.observe(time.monotonic() - t0)
        if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
            self.fence()
            raise asyncio.CancelledError()
        self.stops.inside_fresh(flags, partial)

    async def _parked_inside(self, agent: Agent, step: int, parked: NodeParked) -> BaseException:
        """An agent parked at a boundary of its own: if a stop is pending the run stops here with
        its partial state; a parked exit with no stop asked for is the agent's failure."""
        flags = await self._retrying("the boundary check", lambda: read_flags(self.store, self.job_id))
        if flags is None or flags.epoch != self.epoch or flags.status != RUNNING:
            return FencedError(self.job_id)
        return self.stops.parked_inside(flags, agent, step, parked)

    def _decide(self, flags: Flags, step: int, agent: Agent) -> None:
        """What the flags say at the boundary before `agent`: go on, or raise (the stop state decides;
        every boundary of the host asks through here)."""
        self.stops.decide(flags, step, agent)

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
            now = store_now()
            flags, said = self._held_to_limits(conn, self.touch_flags(conn, S.ENTER, b_node=agent.name), agent.name, now)
            if said:
                conn.execute(S.INSERT_EVENTS, said)
            if self._clear(flags, step, agent):
                conn.execute(S.INSERT_EVENTS, [self._started_event(step, agent, now)])
            return flags

        t0 = time.monotonic()
        flags = await self._retrying("the boundary check", lambda: self.store.run_write(tx, hot=True, here=True))
        host_metrics.BOUNDARY.observe(time.monotonic() - t0)
        self._entered_mono, self._entered_node = time.monotonic(), agent.name
        self._decide(flags, step, agent)

    async def checkpoint_and_enter(self, step: int, agent: Agent, state_text: str, usage: Usage, nxt: Agent | None) -> None:
        """Checkpoint `agent` (node `step`) and, in the same transaction, read the flags for the next boundary.

        One write transaction a node: the state, its lines, node.finished, the
        usage, and the flags read back fresh under the write lock. If they say
        go on, node.started for the next agent is written with them.
        """
        # Taken under the lock: a heartbeat in flight has landed its part, or not begun.
        async with self._usage_lock:
            written = self._node_live.written if self._node_live is not None else (0, 0.0)
        ran = time.monotonic() - self._entered_mono if self._entered_mono is not None else 0.0

        def tx(conn, batch: list[dict[str, Any]], retry: bool) -> Flags:
            now = store_now()
            if retry:
                done = conn.execute(S.CHECKPOINT_DONE, dict(b_id=self.job_id, b_step=step + 1)).first()
                if done is not None and done.epoch == self.epoch:
                    # The first attempt committed; only its answer was lost.
                    row = conn.execute(S.FLAGS, dict(b_id=self.job_id)).first()
                    if row is None:
                        raise FencedError(self.job_id)
                    flags = Flags(*row)
                    if flags.epoch != self.epoch or flags.status != RUNNING:
                        raise FencedError(self.job_id)
                    return flags
            # Heartbeats already put part of the node's usage on the row.
            flags = self.touch_flags(
                conn, S.CHECKPOINT, b_step=step + 1, b_tokens=usage.tokens - written[0], b_cost=usage.cost - written[1],
                b_node=nxt.name if nxt else agent.name, b_ran=ran,
            )
            said: list[dict[str, Any]] = []
            if nxt is not None:
                flags, said = self._held_to_limits(conn, flags, nxt.name, now, finished=agent.name)
            conn.execute(S.INSERT_CHECKPOINT, dict(job_id=self.job_id, step=step + 1, node=agent.name, state=state_text, epoch=self.epoch, created_at=now))
            usage_text = f" ({usage.tokens} tokens, ${usage.cost:.4f})" if usage.tokens or usage.cost else ""
            rows = batch + [dict(job_id=self.job_id, at=now, kind="node.finished", node=agent.name, step=step, text=f"{step_words(step, self.flow.steps, agent.name, None)} done{usage_text}")] + said
            if nxt is not None and self._clear(flags, step + 1, nxt):
                rows.append(self._started_event(step + 1, nxt, now))
            conn.execute(S.INSERT_EVENTS, rows)
            return flags

        async with self.sink.lock:
            batch = self.sink.take()
            attempts = [0]

            async def op() -> Flags:
                attempts[0] += 1
                return await self.store.run_write(lambda conn: tx(conn, batch, attempts[0] > 1), hot=True, here=True)

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
        self._entered_mono, self._entered_node = time.monotonic(), nxt.name if nxt else None
        if nxt is not None:
            self._decide(flags, step + 1, nxt)
