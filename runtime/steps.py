"""The one step numbering: 1-based `k/N name`, the node a run is in, parked before, or ended in.

A run's stored `step` counts the nodes it has completed, so it is the 0-based
index of the node it is in or will run next, and equals `steps` once the last
one is done. Everything an operator reads (the table, the detail, toasts,
audit details, event texts) numbers steps through here, so that a stopped run
and the same run queued again show the same `2/3 review`.
"""

from __future__ import annotations

from .text import plain


def shown_step(step: int, steps: int) -> int:
    """The 1-based number of the node at `step`: the one in flight, parked before, or the last one run."""
    if steps <= 0:
        return 0
    return min(max(step, 0) + 1, steps)


def step_words(step: int, steps: int, node: str | None = None, limit: int | None = 24) -> str:
    """`k/N name` (or `k/N` without a node name); `-` for a flow with no agents."""
    if steps <= 0:
        return "-"
    at = f"{shown_step(step, steps)}/{steps}"
    return f"{at} {plain(node, limit)}" if node else at
