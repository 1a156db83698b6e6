"""What the console holds of the store: every active run and the newest ended ones, kept row by row.

The poller (poller.py) reads; `HeldRuns` holds. A poll folds in what it read,
a full read with `reset`, a changed row with `put`, and what derives from the
runs follows row by row: the order shown, the count of each active status,
what the shown statuses of running runs derive from (a stop or cancel
requested: both move `updated_at`, so every poll sees them), and the counts
the change marker is checked against. A poll then costs what changed, not
what is held. Stalled runs are counted by the store (`running_tally`): a
running run's signs of work are read only while it is on screen.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from swarmkit.store.records import OVERDUE, JobRecord
from swarmkit.store.statuses import ACTIVE_STATUSES, RUNNING

# The window of a store holding fewer ended runs than the bound: every row.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class HeldRuns:
    def __init__(self, ended_bound: int, linger: timedelta) -> None:
        self.ended_bound = ended_bound
        self.linger = linger
        self._cache: dict[str, JobRecord] = {}
        # Kept up to date row by row: the counts the marker is checked against (active
        # rows; rows updated after the oldest ended run held, fixed from one full read
        # to the next), the active runs in their order, the ended and the running ones.
        self.window_after: datetime = EPOCH
        self.n_active = 0
        self.n_window = 0
        self._active_keys: list[tuple[datetime, str]] = []  # (created_at, id), ascending
        self._ended: dict[str, JobRecord] = {}
        self._running: dict[str, JobRecord] = {}
        # The active statuses held (the counts shown, when no filter applies),
        # and what the shown statuses of running runs derive from: the runs
        # with a cancel or stop requested, so that counting them is a
        # bisection, not a pass over a thousand running runs each poll.
        self.status_counts: dict[str, int] = {}
        self._cancelling: set[str] = set()
        self._stopping: set[str] = set()
        # Stopping runs by when their stop shows overdue.
        self._stop_due: list[tuple[datetime, str]] = []
        self._order_dirty = True
        self._active_desc: list[str] = []
        self._ended_sorted: list[JobRecord] | None = None
        self._rows_dirty = True
        self._shown: tuple[tuple[bool, int], tuple[JobRecord, ...]] | None = None
        # Runs whose records were swapped since the rows shown were made, and each shown run's place
        # there: a poll that read the 30 runs on screen patches 30 places, not 20,000 (issue 31).
        self._patch: set[str] = set()
        self._place: dict[str, int] = {}
        self._changed: set[str] = set()  # changed since they were last handed out
        # Moves when the runs shown may be others (joined, left); the same: the same runs as before.
        self.runs_version = 0

    def get(self, key: str) -> JobRecord | None:
        return self._cache.get(key)

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        return key in self._cache

    def shown_counts(self, now: datetime) -> dict[str, int]:
        """How many running runs show as cancelling, stopping and stopping overdue at `now` (stalled: the store's tally)."""
        overdue = bisect_left(self._stop_due, (now,))
        return {"cancelling": len(self._cancelling), "stopping": len(self._stopping) - overdue, OVERDUE: overdue}

    def running_cost(self) -> float:
        """The running runs held, their cost together (filtered, every one is read fresh)."""
        return sum(job.cost for job in self._running.values())

    def stop_asked(self) -> tuple[JobRecord, ...]:
        """The running runs a stop was asked of (shown stopping, or cancelling since), newest first."""
        running = self._running
        asked = [running[key] for key in self._stopping if key in running]
        asked += [job for key in self._cancelling if (job := running.get(key)) is not None and job.stop_requested_at is not None]
        return tuple(sorted(asked, key=lambda j: (j.created_at, j.id), reverse=True))

    def take_changed(self) -> dict[str, JobRecord]:
        """The runs changed since the last call, with their records; they count as handed out."""
        changed, self._changed = {key: self._cache[key] for key in self._changed if key in self._cache}, set()
        return changed

    def reset(self, rows: list[JobRecord]) -> None:
        """Hold exactly `rows` (a full read): all active runs and the newest ended ones.

        A run read the same as it was held keeps its held record, and is not
        counted as changed: a full read every FULL_EVERY_S costs the owner
        what changed, not a new row for every run."""
        held = self._cache
        for i, job in enumerate(rows):
            old = held.get(job.id)
            if old is not None and old == job:
                rows[i] = old
            else:
                self._changed.add(job.id)
        self._cache = {j.id: j for j in rows}
        ended = [j for j in rows if j.status not in ACTIVE_STATUSES]
        # From now to the next full read, the marker counts the rows updated
        # after the oldest ended run held: every one of them is held, so a
        # deleted one shows.
        self.window_after = min(j.updated_at for j in ended) if len(ended) >= self.ended_bound else EPOCH
        self.n_window = sum(1 for j in rows if j.updated_at > self.window_after)
        active = [j for j in rows if j.status in ACTIVE_STATUSES]
        self.n_active = len(active)
        self._active_keys = sorted((j.created_at, j.id) for j in active)
        self._ended = {j.id: j for j in ended}
        self._running = {}
        self.status_counts = {}
        self._cancelling, self._stopping, self._stop_due = set(), set(), []
        for job in active:
            self.status_counts[job.status] = self.status_counts.get(job.status, 0) + 1
            if job.status == RUNNING:
                self._running[job.id] = job
                self._index_running(job)
        self._stop_due.sort()
        self._order_dirty = True
        self._ended_sorted = None
        self._rows_dirty = True

    def trim(self, keep: set[str], window_after: datetime) -> None:
        """Let go of the ended runs not in `keep` (a check of every held run: the active ones and the newest ended),
        and count the marker's window from `window_after` (as a full read would)."""
        gone = [key for key in self._ended if key not in keep]
        for key in gone:
            del self._ended[key]
            del self._cache[key]
        if gone:
            self._ended_sorted = None
            self._rows_dirty = True
        self.window_after = window_after
        self.n_window = sum(1 for job in self._cache.values() if job.updated_at > window_after)

    def put(self, job: JobRecord) -> None:
        """Hold `job` in place of what was held under its id, keeping the bookkeeping exact."""
        cache = self._cache
        old = cache.get(job.id)
        if old is not None and old == job:
            # Read again, the same (the detail pane's run, a quiet running row): the held
            # record stays, and a poll that read only such rows shows the very records of the last.
            return
        cache[job.id] = job
        # Its place in the rows shown is patched; a run that joins or leaves them rebuilds them (below).
        self._patch.add(job.id)
        self._changed.add(job.id)
        w = self.window_after
        is_active = job.status in ACTIVE_STATUSES
        was_active = old is not None and old.status in ACTIVE_STATUSES
        if old is not None and old.updated_at > w:
            self.n_window -= 1
        if job.updated_at > w:
            self.n_window += 1
        if was_active != is_active or (is_active and old is not None and old.created_at != job.created_at):
            if was_active:
                assert old is not None
                self.n_active -= 1
                key = (old.created_at, old.id)
                i = bisect_left(self._active_keys, key)
                if i < len(self._active_keys) and self._active_keys[i] == key:
                    del self._active_keys[i]
            if is_active:
                self.n_active += 1
                insort(self._active_keys, (job.created_at, job.id))
            self._order_dirty = True
        if old is not None and not was_active:
            self._ended.pop(job.id, None)
            self._ended_sorted = None
        if not is_active:
            self._ended[job.id] = job
            self._ended_sorted = None
        if was_active:
            assert old is not None
            self.status_counts[old.status] -= 1
        if is_active:
            self.status_counts[job.status] = self.status_counts.get(job.status, 0) + 1
        if old is not None and old.status == RUNNING:
            self._unindex_running(old)
            self._running.pop(job.id, None)
        if job.status == RUNNING:
            self._running[job.id] = job
            self._index_running(job, sorted_insert=True)

    def _index_running(self, job: JobRecord, sorted_insert: bool = False) -> None:
        if job.cancel_requested_at is not None:
            self._cancelling.add(job.id)
        elif job.stop_requested_at is not None:
            self._stopping.add(job.id)
            if job.stop_overdue_at is not None:
                self._add(self._stop_due, (job.stop_overdue_at, job.id), sorted_insert)

    @staticmethod
    def _add(keys: list[tuple[datetime, str]], key: tuple[datetime, str], sorted_insert: bool) -> None:
        if sorted_insert:
            insort(keys, key)
        else:
            keys.append(key)

    @staticmethod
    def _remove(keys: list[tuple[datetime, str]], key: tuple[datetime, str]) -> None:
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]

    def _unindex_running(self, job: JobRecord) -> None:
        self._cancelling.discard(job.id)
        self._stopping.discard(job.id)
        if job.cancel_requested_at is not None:
            return
        if job.stop_requested_at is not None and job.stop_overdue_at is not None:
            self._remove(self._stop_due, (job.stop_overdue_at, job.id))

    def view(self, now: datetime, show_ended: bool) -> tuple[JobRecord, ...]:
        """Active runs, newest first, then the newest ended ones (bounded); rebuilt only when something changed."""
        cache = self._cache
        if self._order_dirty:
            # created_at never changes: the order only moves when runs join or leave.
            self._order_dirty = False
            self._active_desc = [job_id for _, job_id in reversed(self._active_keys)]
            self._rows_dirty = True
            self.runs_version += 1
        if self._ended_sorted is None:
            self._ended_sorted = sorted(self._ended.values(), key=attrgetter("updated_at", "id"), reverse=True)[: self.ended_bound]
            self._rows_dirty = True
            self.runs_version += 1
        ended = self._ended_sorted
        if not show_ended:
            cutoff = now - self.linger
            ended = [j for j in ended if (j.ended_at or j.updated_at) >= cutoff]
        key = (show_ended, len(ended))
        if self._shown is not None and self._shown[0] != key:
            self.runs_version += 1
        patch, self._patch = self._patch, set()
        place = self._place
        if self._rows_dirty or self._shown is None or self._shown[0] != key or not patch <= place.keys():
            self._rows_dirty = False
            rows = tuple(map(cache.__getitem__, self._active_desc)) + tuple(ended)
            self._place = dict(zip([*self._active_desc, *(job.id for job in ended)], range(len(rows))))
            self._shown = (key, rows)
        elif patch:
            patched = list(self._shown[1])
            for job_id in patch:
                patched[place[job_id]] = cache[job_id]
            self._shown = (key, tuple(patched))
        return self._shown[1]
