"""Running one node on its host: its tries and timeouts, its agent, and interrupting it.

A timed-out node is tried again from its start while it has retries left
(with backoff, a boundary before each new try); a node in flight is
interrupted by a cancel, a stop --now, a lapsed lease or a fenced epoch, and an
async agent that ignores its cancellation ends its host process.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable
from typing import Any

from swarmkit.store.models import RUNNING

from .agent_process import LineSink
from .agents import ProcessHooks, Usage, is_async_call, make_context, run_call, run_command, run_sync_call
from .errors import AgentFailed, FencedError, NodeParked, NodeTimedOut
from .flow import Agent
from .host_parts import HostParts
from .host_writes import read_flags
from .steps import step_words

log = logging.getLogger("swarmkit.executor")
# The longest wait between two tries of a timed-out node.
MAX_BACKOFF_S = 60.0


class NodeRuns(HostParts):
    """The host's part that runs a node's agent."""

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
                ctx._boundary, ctx._aboundary = self.stops.inside_heard, self._aboundary_here
                coro = run_call(agent, ctx, self.calls)
            else:
                coro = run_sync_call(agent, ctx, self.calls, hooks)
        self._node_task = task = asyncio.create_task(coro, name=f"node-{self.job_id[:8]}-{agent.name}")
        self._node_agent, self._node_in_process, self._escalation = agent, in_process, None
        if self.stops.interrupts() or self._fenced:
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
            why = self.stops.interrupted(agent, step)
            if why is not None:
                raise why
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
