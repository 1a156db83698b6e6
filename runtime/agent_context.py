"""What a `call` agent receives, and the usage it reports: shared by the host and the agent's own process.

Imports nothing but the standard library, so that a sync agent's child process
starts quickly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# One report larger than this is not a real model's usage: it is a bug, and
# summed into the row it would overflow the column.
MAX_TOKENS = 10**12
MAX_COST = 10**6


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
