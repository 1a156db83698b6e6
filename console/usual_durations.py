"""How long a node usually takes, for a stopping run's "stops in ~40 s": read from the store, kept a minute.

Read only for stopping runs (few at a time), one indexed query per flow and
node (`queries.node_durations`), off the poll: a stopping row shows how long
its node has run at once, and its ETA when the read is back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from swarmkit.runtime.run_columns import usual
from swarmkit.store.reads import node_durations
from swarmkit.store.records import JobRecord

KEEP_S = 60.0


class UsualDurations:
    def __init__(self, keep_s: float = KEEP_S) -> None:
        self.keep_s = keep_s
        self._known: dict[tuple[str, str], tuple[float, float | None]] = {}  # (flow, node) -> (read at, usual s)

    def usual_s(self, job: JobRecord) -> float | None:
        found = self._known.get((job.flow, job.current_node or ""))
        return found[1] if found else None

    def wanted(self, jobs: Iterable[JobRecord], now: datetime) -> dict[tuple[str, str], str]:
        """(flow, node) -> a run id to leave out, for each stopping run's node not read lately.

        What is handed out counts as read now (keeping what was known): a read
        that is slow or fails is not asked for again at every poll, only after
        `keep_s`."""
        out: dict[tuple[str, str], str] = {}
        t = time.monotonic()
        for job in jobs:
            if job.status != "running" or job.stop_requested_at is None or not job.current_node:
                continue
            key = (job.flow, job.current_node)
            found = self._known.get(key)
            if found is None or t - found[0] > self.keep_s:
                out[key] = job.id
                self._known[key] = (t, found[1] if found else None)
        return out

    def read(self, conn, wanted: dict[tuple[str, str], str]) -> None:
        """Read them (a sync connection in a read transaction)."""
        for (flow, node), exclude in wanted.items():
            self._known[(flow, node)] = (time.monotonic(), usual(node_durations(conn, flow, node, exclude)))
