"""How fast running runs spend: cost per minute over the last minute the console watched them.

`BurnMeter`, each run's (its row's BURN): the cost of a run is a step function
(it moves when a heartbeat or a boundary brings usage), so a sample is kept
only where it steps: at first sight and at each change. The cost a minute ago
is then the newest sample at or before that time; the rate is what was spent
since, over the time since. Only the runs on screen are read fresh
(poller.py), so a run's samples are dropped when it leaves the screen: back in
view, it is measured from then, never across the time it was not watched.

`SpendMeter`, every running run's together (the header's burn): from what the
store sums of them each poll, not from each run's record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from swarmkit.store.records import JobRecord

WINDOW = timedelta(seconds=60)
# A rate over less than this is noise: the rate since each run started stands in.
MIN_WATCH = timedelta(seconds=10)


class BurnMeter:
    def __init__(self, window: timedelta = WINDOW) -> None:
        self.window = window
        self._samples: dict[str, deque[tuple[datetime, float]]] = {}

    def observe(self, jobs: Iterable[JobRecord], at: datetime, changed: Iterable[JobRecord] | None = None) -> None:
        """Take a poll's records: a sample for each running run whose cost moved (or first seen).

        `changed`: only these records are new since the last call (the others
        are the same records as then); `jobs` is then not looked at."""
        if changed is not None:
            for job in changed:
                if job.status == "running":
                    self._sample(job, at)
                else:
                    self._samples.pop(job.id, None)
            return
        running = set()
        for job in jobs:
            if job.status != "running":
                continue
            running.add(job.id)
            self._sample(job, at)
        for gone in self._samples.keys() - running:
            del self._samples[gone]

    def forget(self, keys: Iterable[str]) -> None:
        """These runs are no longer read fresh (off screen): their next sample starts them anew."""
        for key in keys:
            self._samples.pop(key, None)

    def _sample(self, job: JobRecord, at: datetime) -> None:
        samples = self._samples.get(job.id)
        if samples is None:
            self._samples[job.id] = deque([(at, job.cost)])
        elif samples[-1][1] != job.cost:
            samples.append((at, job.cost))
            # Keep the newest sample at or before the window's start, and all after it.
            while len(samples) > 1 and samples[1][0] <= at - self.window:
                samples.popleft()

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


class SpendMeter:
    """What the running runs spent together over the last minute watched: the header's burn.

    Fed each poll with what the running runs cost together (a sum the store
    reads from an index: poll_read.py's tally) and the cost that joined or
    left them since the last poll (Snapshot.cost_moved), so that a run that
    ends takes its cost with it instead of reading as money given back, and
    one that resumes brings its past spending without counting it again.
    """

    def __init__(self, window: timedelta = WINDOW) -> None:
        self.window = window
        self.reset()

    def reset(self) -> None:
        """Watch anew (the runs summed are others: a filter set or cleared, another store)."""
        self._samples: deque[tuple[datetime, float]] = deque()  # (time, spent since first watched)
        self._spent = 0.0
        self._last: float | None = None
        self._running = 0

    def observe(self, at: datetime, running_cost: float | None, moved: float, running: int) -> None:
        """A poll: the running runs' cost together (None: not read by this poll), what joined or left it
        since it was last read (`moved`), how many run."""
        self._running = running
        if running_cost is None:
            return
        if self._last is not None:
            # Never negative: a run that left unseen (a fault between polls) is not money given back.
            self._spent += max(0.0, running_cost - self._last + moved)
        self._last = running_cost
        samples = self._samples
        samples.append((at, self._spent))
        while len(samples) > 1 and samples[1][0] <= at - self.window:
            samples.popleft()

    def total(self, now: datetime, newly: Callable[[], float | None]) -> float | None:
        """Cost per minute over the last minute watched; None when none runs. Watched for less
        than MIN_WATCH: `newly()`, the running runs' rates since each started."""
        if not self._running or not self._samples:
            return None
        start = now - self.window
        base_at, base = self._samples[0]
        for at, spent in self._samples:
            if at > start:
                break
            base_at, base = at, spent
        since = max(base_at, start)
        if now - since < MIN_WATCH:
            return newly()
        return (self._samples[-1][1] - base) / ((now - since).total_seconds() / 60)
