"""What a `call` agent receives, and the usage it reports: shared by the host and the agent's own process.

Imports nothing but the standard library, so that a sync agent's child process
starts quickly.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# One report larger than this is not a real model's usage: it is a bug, and
# summed into the row it would overflow the column.
MAX_TOKENS = 10**12
MAX_COST = 10**6
# A command agent that exits with this status parked at a boundary of its own: a stop
# landed there, and what it wrote to $SWARMKIT_OUTPUT is its partial state (EX_TEMPFAIL).
PARKED_EXIT = 75


class StopHere(BaseException):
    """A stop landed at `ctx.boundary`: the node parks here with its partial state.

    A BaseException, like KeyboardInterrupt, so that a tool loop's `except
    Exception` does not swallow it; let it propagate.
    """

    def __init__(self, partial: dict[str, Any]):
        super().__init__("a stop landed at this boundary")
        self.partial = partial


class BadUsage(ValueError):
    """An agent reported usage that cannot be true; its run ends failed, naming the agent and the value."""


def checked_usage(tokens: Any, cost: Any) -> tuple[int, float]:
    """Tokens and cost as numbers a row can hold, or BadUsage saying what is wrong."""
    if isinstance(tokens, bool) or not isinstance(tokens, int | float):
        raise BadUsage(f"tokens must be a number, not {tokens!r}")
    if not math.isfinite(tokens) or tokens != int(tokens):
        raise BadUsage(f"tokens must be a whole number, not {tokens!r}")
    if tokens < 0:
        raise BadUsage(f"tokens cannot be negative ({tokens!r})")
    if tokens > MAX_TOKENS:
        raise BadUsage(f"tokens={tokens!r} is more than {MAX_TOKENS:,} in one report")
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        raise BadUsage(f"cost must be a number, not {cost!r}")
    if not math.isfinite(cost):
        raise BadUsage(f"cost must be a finite number, not {cost!r}")
    if cost < 0:
        raise BadUsage(f"cost cannot be negative ({cost!r})")
    if cost > MAX_COST:
        raise BadUsage(f"cost={cost!r} is more than {MAX_COST:,} in one report")
    return int(tokens), float(cost)


@dataclass
class Usage:
    tokens: int = 0
    cost: float = 0.0
    # The first bad report: the run fails on it even if the agent caught the error.
    bad: str | None = None

    def add(self, tokens: Any = 0, cost: Any = 0.0) -> None:
        try:
            t, c = checked_usage(0 if tokens is None else tokens, 0.0 if cost is None else cost)
        except BadUsage as exc:
            self.bad = self.bad or str(exc)
            raise
        self.tokens += t
        self.cost += c


@dataclass
class AgentContext:
    """What a `call` agent receives."""

    run_id: str
    node: str
    step: int
    state: dict[str, Any]
    inputs: dict[str, Any]
    workspace: Path
    _log: Callable[[str], None]
    usage: Usage = field(default_factory=Usage)
    # Passes each report on as it is made (a sync agent's child writes it to the usage file).
    _report: Callable[[int, float], None] | None = None
    # The partial state this node handed to the boundary where a stop landed, on the resume after it.
    resumed_from: dict[str, Any] | None = None
    _boundary: Callable[[dict[str, Any]], None] | None = None
    _aboundary: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    def log(self, line: str) -> None:
        """Add a line to the run's log (an event, readable from any machine)."""
        for part in str(line).splitlines() or [""]:
            self._log(part)

    def add_usage(self, tokens: int = 0, cost: float = 0.0) -> None:
        """Report tokens and cost spent; they reach the run's row within a heartbeat. Bad values raise BadUsage."""
        before = self.usage.tokens, self.usage.cost
        self.usage.add(tokens, cost)
        if self._report is not None:
            self._report(self.usage.tokens - before[0], self.usage.cost - before[1])

    def boundary(self, partial_state: dict[str, Any]) -> None:
        """A boundary inside this node, between its own steps: returns at once unless a stop
        is pending, in which case it raises StopHere and the run parks `stopped` here with
        `partial_state` (a JSON object) checkpointed; on resume the node is called again with
        it as `ctx.resumed_from`. Sees a stop within the host's heartbeat period."""
        if not isinstance(partial_state, dict):
            raise TypeError(f"boundary() takes the node's partial state as a dict, not {type(partial_state).__name__}")
        if self._boundary is not None:
            self._boundary(partial_state)

    async def aboundary(self, partial_state: dict[str, Any]) -> None:
        """`boundary` for an async agent: reads the stop flag from the store fresh, every time."""
        if not isinstance(partial_state, dict):
            raise TypeError(f"aboundary() takes the node's partial state as a dict, not {type(partial_state).__name__}")
        if self._aboundary is not None:
            await self._aboundary(partial_state)
        else:
            self.boundary(partial_state)
