"""What a node of a flow costs, for each run's estimated cost at completion (runtime/estimates.py): read from the
store, kept a minute.

Read for the flows of the runs not yet ended that the poll brings (few flows at a time), one indexed query a
flow (`reads.node_costs`), off the poll: a row sorts on its cost so far until the read is back.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable

from swarmkit.store.reads import node_costs
from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import TERMINAL_STATUSES

KEEP_S = 60.0


class NodeCosts:
    def __init__(self, keep_s: float = KEEP_S) -> None:
        self.keep_s = keep_s
        self._known: dict[str, tuple[float, list[float]]] = {}  # flow -> (read at, a node's cost in each completed run)

    def of(self, job: JobRecord) -> list[float] | None:
        """What a node of the run's flow cost in its completed runs; None: not read (yet)."""
        found = self._known.get(job.flow)
        return found[1] if found else None

    def median(self, job: JobRecord) -> float | None:
        costs = self.of(job)
        return statistics.median(costs) if costs else None

    def wanted(self, jobs: Iterable[JobRecord]) -> set[str]:
        """The flows of runs not yet ended whose costs were not read lately. What is handed out counts as
        read now (keeping what was known): a read that is slow or fails is asked for again after `keep_s`."""
        out: set[str] = set()
        t = time.monotonic()
        for job in jobs:
            if job.status in TERMINAL_STATUSES or job.flow in out:
                continue
            found = self._known.get(job.flow)
            if found is None or t - found[0] > self.keep_s:
                out.add(job.flow)
                self._known[job.flow] = (t, found[1] if found else [])
        return out

    def read(self, conn, flows: set[str]) -> None:
        """Read them (a sync connection in a read transaction)."""
        for flow in flows:
            self._known[flow] = (time.monotonic(), node_costs(conn, flow))
