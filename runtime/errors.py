"""The runtime's exceptions. A stop is a deferral without a gate."""

from __future__ import annotations


class SwarmkitError(Exception):
    """An error whose message is meant for the operator as it is."""


class HITLDeferredError(Exception):
    """The run parks here: checkpointed, resumable, waiting on something outside it."""

    def __init__(self, node: str, step: int, message: str = ""):
        super().__init__(message or f"deferred at {node}")
        self.node = node
        self.step = step


class GateDeferredError(HITLDeferredError):
    """An `approve = true` agent waits for a human's approval."""


class RunStoppedError(HITLDeferredError):
    """A human asked this run to stop. Checkpointed and resumable, like any deferral."""

    def __init__(
        self, node: str, step: int, requested_by: str | None = None, *, now: bool = False, interrupted: bool = False,
        partial: str | None = None, tokens: int = 0, cost: float = 0.0, reason: str | None = None,
    ):
        super().__init__(node, step, f"stopped before {node} (requested by {requested_by or 'unknown'})")
        self.requested_by = requested_by
        # Why a stop nobody typed was asked for (its budget: "cost 5.02 of max_cost 5.00").
        self.reason = reason
        # A stop --now; `interrupted`: the node was interrupted in flight (it runs again from its start).
        self.now = now
        self.interrupted = interrupted
        # Landed at a boundary inside the node: its partial state (JSON) and the usage it spent so far.
        self.partial = partial
        self.tokens = tokens
        self.cost = cost


class NodeTimedOut(Exception):
    """A try of a node ran past its `timeout` and was interrupted."""


class NodeParked(Exception):
    """An agent parked at a boundary of its own (ctx.boundary, a command's parked exit) with its partial state."""

    def __init__(self, node: str, partial: dict, tokens: int = 0, cost: float = 0.0):
        super().__init__(f"{node} parked at a boundary of its own")
        self.partial = partial
        self.tokens = tokens
        self.cost = cost


class RunCancelledError(Exception):
    """The run was cancelled; its host ends it `cancelled`."""


class FencedError(Exception):
    """This host's epoch is gone (the run was marked lost, resumed or ended elsewhere).

    The host must write nothing more and stop itself.
    """


class LeaseLapsedError(FencedError):
    """This host did not renew its lease in time; its agents were ended by their supervisor.

    The run may already be someone else's: the host writes nothing more (it shows lost, resumable).
    """


class FlowError(SwarmkitError):
    """A flow file that cannot be run; the message names the file, the line and the fault."""


class AgentFailed(Exception):
    """An agent ended badly: the flow chose to end (the run becomes `failed`)."""


class AgentFault(Exception):
    """The runtime could not carry an agent through (an unreadable output file, a lapsed lease): the run is `faulted`."""


class RunParkedError(HITLDeferredError):
    """The host is shutting down: the run goes back to the queue from its checkpoint, for any worker. Not a person's stop."""

    def __init__(self, node: str, step: int, parked_by: str):
        super().__init__(node, step, f"parked before {node} by {parked_by}")
        self.parked_by = parked_by


class RunNotFound(SwarmkitError):
    """No run by that id. `what` names the id alone; the message adds the store it was looked for in
    (the CLI says it; the HTTP API, whose clients must not learn a path or a URL, says `what`)."""

    def __init__(self, what: str, where: str | None = None):
        super().__init__(f"{what} in {where}" if where else what)
        self.what = what


class AmbiguousRun(SwarmkitError):
    def __init__(self, message: str, candidates: list[str] | None = None):
        super().__init__(message)
        self.candidates = list(candidates or [])  # the full ids the prefix matched (the first ten)


class UsageError(Exception):
    """Bad usage of a verb: said on stderr, exit 2."""
