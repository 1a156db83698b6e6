"""Whether a hosted run stops here, and why: one object per host owns every stop it has heard.

A host hears of a stop, a stop --now or a cancel on its heartbeat and at each
boundary it reads fresh, and of a park from its own worker shutting down.
`StopState` keeps what was heard (a cancel, a stop seen, a stop taken, a stop
--now, a park) and answers every place a run can stop:

- `why`: at a node boundary, from the flags read fresh there (a cancel first,
  then a stop, which latches once taken, then a worker's park, then a gate);
- `heard`: on a heartbeat, whether the node in flight must be interrupted
  (a cancel or a stop --now, newly heard);
- `inside_heard` and `inside_fresh`: at a boundary an agent offers inside its
  node (`ctx.boundary`, `ctx.aboundary`);
- `parked_inside`: an agent that parked at a boundary of its own;
- `interrupted`: a node in flight that was interrupted, and what that means.

It writes nothing and reads nothing itself: the host reads the flags (fenced by
its epoch) and hands them over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarmkit.store.clock import store_now

from . import host_metrics
from .agent_context import PARKED_EXIT, StopHere
from .errors import AgentFailed, GateDeferredError, HITLDeferredError, NodeParked, RunCancelledError, RunParkedError, RunStoppedError
from .journal import state_json

if TYPE_CHECKING:
    from .flow import Agent
    from .host_writes import Flags


def _reaction(flags: Flags) -> None:
    """How long the stop took to be taken, from its request on the store's clock."""
    host_metrics.STOP_REACTION.observe(max(0.0, (store_now() - flags.stop_requested_at).total_seconds()))


class StopState:
    """What this host heard of stops, cancels and parks for its run, and where the run stops because of them."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        # A cancel heard: its flags say who asked and whether the workspaces are kept.
        self.cancel: Flags | None = None
        # A stop taken at a boundary (who asked): every later boundary stops too.
        self.stopped_by: str | None = None
        # Any stop heard (who asked): what the node's own boundaries see.
        self.seen_by: str | None = None
        # A stop --now heard (who asked): the node in flight is interrupted.
        self.now_by: str | None = None
        # Set by a worker shutting down: park at the next boundary, back to the queue.
        self.park_by: str | None = None
        # Why the stop heard was asked for, where nobody typed it (its budget), else None.
        self.reason: str | None = None

    def request_park(self, by: str) -> None:
        """The host is shutting down: at the next boundary the run goes back to the queue (not a person's stop)."""
        self.park_by = self.park_by or by

    # --- at a node boundary ------------------------------------------------------

    def why(self, flags: Flags, step: int, agent: Agent) -> RunCancelledError | HITLDeferredError | None:
        """Does the run stop at the boundary before `agent` (node `step`), by these fresh flags, and why.

        None: it goes on. Else the error that ends or parks it: a cancel, a
        stop (latched: once taken it holds), a worker's park, or a gate not yet
        approved for this step.
        """
        if flags.cancel_requested_at is not None:
            self.cancel = flags
            return RunCancelledError(self.job_id)
        if flags.stop_requested_at is not None and self.stopped_by is None:
            self.stopped_by = flags.stop_requested_by or "unknown"
            self.reason = self.reason or flags.stop_reason
            if self.now_by is None:  # a stop --now was measured when the heartbeat heard it
                _reaction(flags)
        if self.stopped_by is not None:
            return RunStoppedError(agent.name, step, self.stopped_by, now=bool(flags.stop_now) or self.now_by is not None, reason=self.reason)
        if self.park_by is not None:
            return RunParkedError(agent.name, step, self.park_by)
        if agent.approve and flags.approved_step != step:
            return GateDeferredError(agent.name, step, f"waiting for approval at {agent.name}")
        return None

    def decide(self, flags: Flags, step: int, agent: Agent) -> None:
        """`why`, raised: go on, or raise what stops the run here."""
        why = self.why(flags, step, agent)
        if why is not None:
            raise why

    # --- while a node runs -------------------------------------------------------

    def heard(self, flags: Flags) -> bool:
        """What a heartbeat read. True when the node in flight must be interrupted: a cancel or a
        stop --now, newly heard. A plain stop reaches the node's own boundaries."""
        if flags.stop_requested_at is not None and self.seen_by is None:
            self.seen_by = flags.stop_requested_by or "unknown"
        if flags.cancel_requested_at is not None and self.cancel is None:
            self.cancel = flags
            return True
        if flags.stop_requested_at is not None and flags.stop_now and self.now_by is None:
            self.now_by = flags.stop_requested_by or "unknown"
            self.reason = self.reason or flags.stop_reason
            _reaction(flags)
            return True
        return False

    def interrupts(self) -> bool:
        """A cancel or a stop --now already heard: a node being set up is interrupted at once."""
        return self.cancel is not None or self.now_by is not None

    def interrupted(self, agent: Agent, step: int) -> RunCancelledError | RunStoppedError | None:
        """A node in flight was interrupted: by a cancel, or by a stop --now, which parks the run at
        the boundary before this node (its work in flight is lost, it runs again on resume)."""
        if self.cancel is not None:
            return RunCancelledError(self.job_id)
        if self.now_by is not None:
            self.stopped_by = self.stopped_by or self.now_by
            return RunStoppedError(agent.name, step, self.stopped_by, now=True, interrupted=True, reason=self.reason)
        return None

    def control(self) -> dict[str, Any]:
        """What the node's control file ($SWARMKIT_CONTROL) says of stops and cancels."""
        return dict(stop_requested=self.seen_by is not None or self.stopped_by is not None, requested_by=self.seen_by or self.stopped_by, cancel_requested=self.cancel is not None)

    # --- at a boundary inside a node ---------------------------------------------

    def inside_heard(self, partial: dict[str, Any]) -> None:
        """ctx.boundary for an async agent on the host's loop: the stop last heard (a heartbeat old at most)."""
        if self.seen_by is not None or self.stopped_by is not None:
            raise StopHere(partial)

    def inside_fresh(self, flags: Flags, partial: dict[str, Any]) -> None:
        """ctx.aboundary, by flags just read fresh: a pending stop (and no cancel) stops here."""
        if flags.stop_requested_at is not None and flags.cancel_requested_at is None:
            self.seen_by = self.seen_by or flags.stop_requested_by or "unknown"
            raise StopHere(partial)

    def parked_inside(self, flags: Flags, agent: Agent, step: int, parked: NodeParked) -> BaseException:
        """An agent parked at a boundary of its own, by flags read fresh after: if a stop is pending the
        run stops here with its partial state; a parked exit with no stop asked for is the agent's failure."""
        if flags.cancel_requested_at is not None:
            self.cancel = flags
            return RunCancelledError(self.job_id)
        if flags.stop_requested_at is None:
            return AgentFailed(f"{agent.name}: exited {PARKED_EXIT} (parked at a boundary of its own) but no stop was requested")
        try:
            partial = state_json(parked.partial)
        except (TypeError, ValueError, RecursionError) as exc:
            return AgentFailed(f"{agent.name}: parked with a partial state that JSON cannot hold ({type(exc).__name__}: {str(exc)[:200]})")
        if self.stopped_by is None:
            self.stopped_by = flags.stop_requested_by or "unknown"
            self.reason = self.reason or flags.stop_reason
            _reaction(flags)
        return RunStoppedError(agent.name, step, self.stopped_by, now=bool(flags.stop_now), partial=partial, tokens=parked.tokens, cost=parked.cost, reason=self.reason)
