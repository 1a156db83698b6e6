"""How fast running runs spend: cost per minute over the last minute the console watched them.

The cost of a run is a step function (it moves when a heartbeat or a boundary
brings usage), so a sample is kept only where it steps: at first sight and at
each change. The cost a minute ago is then the newest sample at or before
that time; the rate is what was spent since, over the time since.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta

from swarmkit.runtime.run_columns import burn_rate
from swarmkit.store.records import JobRecord

WINDOW = timedelta(seconds=60)


class BurnMeter:
    def __init__(self, window: timedelta = WINDOW) -> None:
        self.window = window
        self._samples: dict[str, deque[tuple[datetime, float]]] = {}
        self._running: dict[str, JobRecord] = {}
        # Running runs by the time of their newest sample, oldest first: one whose newest is
        # a window old spent nothing in the window, so the total need not look at it.
        self._stepped: dict[str, datetime] = {}

    def observe(self, jobs: Iterable[JobRecord], at: datetime, changed: Iterable[JobRecord] | None = None) -> None:
        """Take a poll's records: a sample for each running run whose cost moved (or first seen).

        `changed`: only these records are new since the last call (the others
        are the same records as then); `jobs` is then not looked at."""
        if changed is not None:
            for job in changed:
                if job.status == "running":
                    self._running[job.id] = job
                    self._sample(job, at)
                else:
                    self._running.pop(job.id, None)
                    self._samples.pop(job.id, None)
                    self._stepped.pop(job.id, None)
            return
        running: dict[str, JobRecord] = {}
        for job in jobs:
            if job.status != "running":
                continue
            running[job.id] = job
            self._sample(job, at)
        for gone in self._samples.keys() - running.keys():
            del self._samples[gone]
            self._stepped.pop(gone, None)
        self._running = running

    def _sample(self, job: JobRecord, at: datetime) -> None:
        samples = self._samples.get(job.id)
        if samples is None:
            self._samples[job.id] = deque([(at, job.cost)])
        elif samples[-1][1] != job.cost:
            samples.append((at, job.cost))
            # Keep the newest sample at or before the window's start, and all after it.
            while len(samples) > 1 and samples[1][0] <= at - self.window:
                samples.popleft()
        else:
            return
        self._stepped.pop(job.id, None)
        self._stepped[job.id] = at

    def since(self, job_id: str, now: datetime) -> tuple[datetime, float] | None:
        """(time, cost then) to measure from: the run's cost as of a window ago, or when first seen."""
        samples = self._samples.get(job_id)
        if not samples:
            return None
        start = now - self.window
        base = samples[0]
        for sample in samples:
            if sample[0] > start:
                break
            base = sample
        # The cost did not step since `base`: as of the window's start it was the same.
        return (max(base[0], start), base[1]) if base[0] <= start else base

    def total(self, now: datetime) -> float | None:
        """The burn of every running run together; None when none runs."""
        if not self._running:
            return None
        # The others' newest sample is at or before the window's start: their cost did not
        # step within it, and their rate (burn_rate over the window) is 0.
        start = now - self.window
        stepped = self._stepped
        while stepped and next(iter(stepped.values())) <= start:
            del stepped[next(iter(stepped))]
        running = self._running
        return sum(burn_rate(running[key], now, self.since(key, now)) or 0.0 for key in stepped)
