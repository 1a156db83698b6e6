"""When a listening worker looks for queued runs after a wakeup (store/wakeups.py).

A run queued is announced to every listening worker of the fleet at once. Were each to look at once,
the queue would be read (and the run raced for) once a worker, however large the fleet. Each instead
waits up to `SPREAD_S`, at random, and does not look at all once it has heard every run it was told of
claimed by another host: the fleet reads the queue about once a run, and the first look still comes
within a few milliseconds. A wakeup is a hint: one missed leaves the worker to its next look (a part of
the lease), one that names no run (an earlier version's sender) has it look at once.
"""

from __future__ import annotations

import random

SPREAD_S = 0.25
# Runs told of a worker keeps in mind at most: a full worker hears them all, and looks when it has room.
_MAX = 1000


class QueueHints:
    def __init__(self, spread_s: float = SPREAD_S):
        self.spread_s = spread_s
        self._told: set[str] = set()
        self._at: float | None = None
        self._now = False

    def queued(self, job_id: str | None, now: float) -> None:
        """A run was queued (None: a sender that does not say which)."""
        if job_id is None:
            self._now = True
            return
        if len(self._told) < _MAX:
            self._told.add(job_id)
        if self._at is None:
            self._at = now + random.uniform(0.0, self.spread_s)

    def claimed(self, job_id: str) -> None:
        """A host took the run from the queue: it need not be looked for here."""
        self._told.discard(job_id)
        if not self._told:
            self._at = None

    def look_now(self) -> None:
        """Something here calls for a look at once (a run ended, or was submitted, here)."""
        self._now = True

    def due_at(self) -> float | None:
        """When the next look is called for: None if nothing calls for one."""
        if self._now:
            return float("-inf")
        return self._at

    def due(self, now: float) -> bool:
        at = self.due_at()
        return at is not None and now >= at

    def looked(self) -> None:
        """The queue was read as it is now: what was told of before is in what the look saw."""
        self._told.clear()
        self._at = None
        self._now = False
