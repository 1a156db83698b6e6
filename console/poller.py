"""What one poll of the store reads: cheap "did anything change?" first, then only what changed.

A poll is one short read transaction (on SQLite one hop to the store's own
thread, not one per statement; on PostgreSQL one REPEATABLE READ transaction,
so that its statements agree with each other). When nothing changed it reads
a handful of index entries:

- is any running row past its lease? (a part of the lease apart, as a
  worker looks, `looks_apart`; only then does it call `control.mark_lost`,
  the one implementation of that rule, and read again);
- the change marker: the newest `updated_at`, the count of active rows and
  the count of rows updated after the oldest ended run on show (the counts,
  ranges as long as the active runs, every COUNT_EVERY_S past RECHECK_RUNS);
- running rows whose `last_event_at` moved (log lines and heartbeats do not
  touch `updated_at`), of the runs on screen only (`set_window`): the others
  tick unread, and a run that comes into view is read whole at once;
- what the header says of every running run, from index ranges: how many
  show stalled (`stalled_count`), and, every COST_EVERY_S, their cost
  together (`running_cost`);
- the run the detail pane shows, and the live workers.

The poller holds every active run and the newest ended ones, and keeps what
it derives from them (the order shown, the counts, the shown statuses) up to
date row by row (`HeldRuns`, held_runs.py): a poll costs what changed and
what is on screen, not what is held (issue 31: bench/console_scale.py).
Whatever it holds after a poll must agree with the marker's counts; when it
does not (a row was deleted), everything is read again; and every
FULL_EVERY_S (longer past RECHECK_RUNS held) each held run's update is checked against the store's, narrow
(a row written by a host whose clock lags ours by more than SKEW). Measured
in bench/console_poll.py.

The poller decides what a poll reads (`PollPlan`) and folds in what it read; the
reads themselves, in their one transaction, are poll_read.py's (`read_poll`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from swarmkit.runtime.report import clock_warning
from swarmkit.runtime.settings import looks_apart
from swarmkit.store.clock import store_now
from swarmkit.store.lite import LiteStore
from swarmkit.store.reads import ChangeMarker
from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import ACTIVE_STATUSES, RUNNING
from swarmkit.store.transactions import connect

from .held_runs import HeldRuns
from .poll_read import SKEW, PollPlan, PollRead, read_poll
from .store_link import PollStore, StoreLink

log = logging.getLogger("swarmkit.console")

# Ended runs kept in view: the most recent ones, never the whole history.
ENDED_BOUND = 200
# Runs that ended this recently stay in the default view, so an operator sees how what they just did (or watched) ended.
LINGER = timedelta(minutes=10)
# Now and then check every held run's update against the store's (PollPlan.recheck): catches
# what the counts cannot (a row changed in place by a writer whose clock lags ours by more than SKEW).
FULL_EVERY_S = 30.0
# ... for up to this many held runs; past it, less often, in proportion: the check reads every held
# run's key (about 40 ms at 20,000 runs) and its cost per second stays that of this many (issue 31).
RECHECK_RUNS = 2_000
# How often the running runs' cost together is read, for the header's burn (a rate over a minute): a
# pass over an index's running entries, a few milliseconds at 20,000 running runs.
COST_EVERY_S = 5.0
# Past RECHECK_RUNS held, the marker's counts (ranges as long as the active runs: 1.5 ms at 20,000)
# come this often; between them a poll reads the newest update alone. What only the counts catch (a
# row deleted, a run added by a writer whose clock lags ours) shows this much later there.
COUNT_EVERY_S = 5.0
# The first read of a poller takes the newest this many active runs and ended
# ones: a screenful (a terminal of up to 100 lines), shown at once; the next poll,
# right after it, reads everything (the first paint of a large store waits for no more).
# Each row read before the first frame is made into a record, a table row and its
# cells: no more of them than the screen can show.
PEEK = 100


@dataclass(frozen=True)
class Snapshot:
    jobs: tuple[JobRecord, ...]
    counts: dict[str, int]
    workers: int
    at: datetime
    full: bool = False
    fetched: int = 0  # rows read, whole or narrow (id and update time)
    whole: int = 0  # of which whole rows
    lost_check: str | None = None  # why lost detection did not run, if it did not
    all_ended: bool = field(default=False)
    text_filter: str | None = None  # the filter the runs were read under
    clock_warning: str | None = None  # workers whose clocks are off the store's, in words
    partial: bool = False  # a first read of the newest runs only: poll again at once for the rest
    # The runs whose records changed in this poll (or were not held before it), with their new
    # records; the others shown are the very records of the poll before.
    changed: Mapping[str, JobRecord] = field(default_factory=dict)
    # Moves when the runs shown may be others (joined, left); the same: the same runs as the last poll.
    runs_version: int = 0
    # The running runs a stop was asked of (their ETA's node durations are read for them), newest
    # first: the poller keeps them indexed, so no poll walks every active run to find them.
    stop_asked: tuple[JobRecord, ...] = ()
    # What the running runs shown cost together (unfiltered: every running run's, the store's sum;
    # None: not read by this poll), and the cost that left them since it was last read (runs that
    # stopped or ended, at their cost now) less the cost that joined them (runs that began or
    # resumed, at their cost before): what the header's burn is measured from (burn_meter.SpendMeter).
    running_cost: float | None = None
    cost_moved: float = 0.0
    running: int = 0  # running runs (of those shown), whatever their shown status


class Poller:
    def __init__(
        self,
        link: StoreLink,
        *,
        clock: Callable[[], datetime],
        lease_s: float,
        detect_lost: bool = True,
        ended_bound: int = ENDED_BOUND,
        linger: timedelta = LINGER,
    ):
        self.link = link
        self.clock = clock
        self.lease_s = lease_s
        self.detect_lost = detect_lost
        # A run whose row is read again at every poll: the one the detail
        # pane shows (its heartbeat moves without touching updated_at).
        self.focus: str | None = None
        self.held = HeldRuns(ended_bound, linger)
        self._marker: ChangeMarker | None = None
        self._filter: str | None = None
        # The runs on screen (set_window), and those of them read fresh since they came into view
        # (None: every run is, read by the last poll).
        self._window: frozenset[str] | None = None  # until told (set_window): every running run
        self._window_read: frozenset[str] | None = frozenset()
        self._cost_moved = 0.0
        self._stalled = 0
        self._running_cost: float | None = None
        self._cost_read = float("-inf")  # when the running runs' cost was last read (time.monotonic)
        self._counted_at = float("-inf")  # ... the marker's counts
        self._lease_looked_at = float("-inf")  # ... the leases: a part of the lease apart, as a worker looks
        self._shown_active: dict[str, int] = {}
        self._last_full = 0.0
        self._partial = False
        self._peeked = False  # only the first read peeks; a read after a fault reads everything
        self._lock = asyncio.Lock()
        # When the previous poll read the store (our clock): running rows whose
        # last_event_at moved after it, less SKEW, are read again.
        self._last_read_at: datetime | None = None
        self._workers = 0
        # Counts: the active statuses as of the last change; the runs ended
        # within LINGER as of the last full read, plus the runs seen ending
        # since (an ended run never changes again). Never the whole history:
        # counting it walked every run (store.queries.current_counts).
        self._active_counts: dict[str, int] = {}
        self._ended_counts: dict[str, int] = {}
        self._ended_since: dict[str, str] = {}
        self._recount_latest: datetime | None = None

    @property
    def ended_bound(self) -> int:
        """Ended runs held, at most: the newest."""
        return self.held.ended_bound

    @property
    def linger(self) -> timedelta:
        """Runs that ended this recently stay in the default view."""
        return self.held.linger

    def forget(self) -> None:
        """Read everything again next time (after a fault, the cache may be of another store)."""
        self._marker = None

    def set_window(self, keys: Collection[str] | None) -> bool:
        """Read the running rows' signs of work of these runs only (the runs on screen); None: of every
        running run (the table sorts on a value they move). True when some of them are not fresh: a
        poll now shows them fresh."""
        self._window = None if keys is None else frozenset(keys)
        return self._window_read is not None and (self._window is None or not self._window <= self._window_read)

    # --- the poll -------------------------------------------------------------

    async def poll(self, *, show_ended: bool = False, text_filter: str | None = None) -> Snapshot:
        async with self._lock:
            return await self._poll(show_ended, text_filter)

    async def _poll(self, show_ended: bool, text_filter: str | None) -> Snapshot:
        text_filter = (text_filter or "").strip() or None
        # An unfiltered poll reads through a lite store on a plain SQLite file (sqlite3 alone):
        # the first frame waits for no SQLAlchemy, and a poll a second spends none on its
        # statements. A filter is built with SQLAlchemy: the full store reads it.
        peek = not self._peeked and text_filter is None
        store = await (self.link.reader() if text_filter is None else self.link.get())
        await store.keep_time()
        lost_check = None
        plan = self._plan(text_filter)
        if peek and isinstance(store, LiteStore):
            # Marking a lost run takes the full store (SQLAlchemy, inline on this loop): the next
            # poll, 50 ms after the first frame, checks the leases.
            plan = replace(plan, check_lease=False)
        read_at = store_now()
        got = await self._read(store, plan)
        if got.lease_expired:
            from swarmkit.runtime import control  # late: when first needed; the console's first frame needs none of the acts' code
            from swarmkit.store import STORE_FAULTS  # late: SQLAlchemy's errors, with the full store the lease check opens

            try:
                await control.mark_lost(await self.link.get(), self.lease_s)
            except STORE_FAULTS as exc:
                # A read-only store (or role) cannot mark runs lost; reading
                # still works, and the read below reports a store that is down.
                lost_check = str(exc)
                log.info("marking lost runs failed: %s", exc)
            got = await self._read(store, replace(plan, check_lease=False))
        if plan.check_lease:
            self._lease_looked_at = time.monotonic()
        fetched, whole = self._take(got, plan, read_at)
        marker = got.marker
        if not got.full and text_filter is None and marker is not None and marker.active is not None and (self.held.n_active, self.held.n_window) != (marker.active, marker.window):
            # What we hold disagrees with the store (a row deleted, or changed by
            # a writer whose clock lags ours more than SKEW): read it all again.
            plan = replace(plan, full=True, check_lease=False, window_after=None)
            got = await self._read(store, plan)
            more, more_whole = self._take(got, plan, read_at)
            fetched, whole = fetched + more, whole + more_whole
        now = self.clock()
        jobs = self.held.view(now, show_ended)
        counts = self._counts()
        running = counts.get(RUNNING, 0)
        # Shown statuses (stopping, cancelling, stalled) are derived from running
        # rows, by the rule of JobRecord.display_status.
        if self._filter is None:
            shown = self.held.shown_counts(now)
            shown["stalled"] = self._stalled
        else:
            # Filtered, the poller holds only what matches: the whole store's shown
            # counts come with each full read, so the bar keeps one vocabulary.
            shown = dict(self._shown_active)
        for status, n in shown.items():
            if n:
                counts[RUNNING] = counts.get(RUNNING, 0) - n
                counts[status] = counts.get(status, 0) + n
        # Cleared only once handed out: what a poll that failed half-way took is still news to the next.
        changed = self.held.take_changed()
        return Snapshot(
            jobs=jobs,
            counts={k: v for k, v in counts.items() if v},
            workers=self._workers,
            at=now,
            full=got.full,
            fetched=fetched,
            whole=whole,
            lost_check=lost_check,
            all_ended=show_ended,
            text_filter=text_filter,
            clock_warning=clock_warning(got.skewed),
            partial=got.partial,
            changed=changed,
            runs_version=self.held.runs_version,
            stop_asked=self.held.stop_asked(),
            running_cost=self._running_cost,
            running=running,
            cost_moved=self._take_cost_moved() if self._running_cost is not None else 0.0,
        )

    def _take_cost_moved(self) -> float:
        moved, self._cost_moved = self._cost_moved, 0.0
        return moved

    def _plan(self, text_filter: str | None) -> PollPlan:
        full = self._marker is None or text_filter != self._filter or self._partial
        mono = time.monotonic()
        due = mono - self._last_full > FULL_EVERY_S * max(1.0, len(self.held) / RECHECK_RUNS)
        if text_filter is not None:
            full = full or due  # filtered, the held runs are only the matching: read them again
        unfiltered = not full and text_filter is None
        window = None if text_filter is not None or self._window is None else tuple(self._window)
        return PollPlan(
            text_filter=text_filter,
            full=full,
            check_lease=self.detect_lost and mono - self._lease_looked_at >= looks_apart(0.0, self.lease_s),
            lease_s=self.lease_s,
            now=self.clock(),
            previous=self._marker,
            expect=(self.held.n_active, self.held.n_window) if unfiltered else None,
            window_after=self.held.window_after if unfiltered else None,
            event_since=None if full or self._last_read_at is None else self._last_read_at - SKEW,
            focus=self.focus,
            peek=PEEK if not self._peeked and text_filter is None else 0,  # as in _poll
            window=window,
            gained=() if full or window is None or (read := self._window_read) is None else tuple(key for key in window if key not in read),
            recheck=unfiltered and due,
            count=not unfiltered or len(self.held) <= RECHECK_RUNS or mono - self._counted_at >= COUNT_EVERY_S,
            # A full read reads it too: the first, and the one after a filter is cleared (the header's burn starts again).
            cost=text_filter is None and (full or mono - self._cost_read >= COST_EVERY_S),
        )

    async def _read(self, store: PollStore, plan: PollPlan) -> PollRead:
        if store.loc.is_sqlite:
            # A deferred BEGIN: every statement reads the same snapshot.
            return await store.run_read(lambda conn: read_poll(conn, plan, self.held))
        async with connect(store.engine) as conn:
            # PostgreSQL's default READ COMMITTED gives each statement a
            # snapshot of its own; the counts must agree with the rows.
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                return await conn.run_sync(lambda c: read_poll(c, plan, self.held))

    # --- what the poller holds ---------------------------------------------------

    def _take(self, got: PollRead, plan: PollPlan, read_at: datetime) -> tuple[int, int]:
        """Fold one poll's reads into the cache and the counts; returns how many rows were read (all, whole)."""
        text_filter = plan.text_filter
        assert got.marker is not None
        whole = len(got.rows) + len(got.running) + (1 if got.focus is not None else 0)
        narrow = {job_id for job_id, _ in got.narrow} - {j.id for j in got.rows}
        held = self.held
        held_only = not got.full and text_filter is not None  # filtered: only rows already shown are refreshed
        read = {job.id: job for job in (*got.rows, *got.running, *((got.focus,) if got.focus is not None else ()))}
        moved = sum(self._cost_moved_by(job) for key, job in read.items() if not held_only or key in held)
        if got.full:
            held.reset(got.rows)
            if got.focus is not None and got.focus.id in held:
                held.put(got.focus)
            # After a partial first read, the next poll reads everything.
            self._last_full = float("-inf") if got.partial else time.monotonic()
            self._partial = got.partial
            self._peeked = True
            self._shown_active = dict(got.shown_counts)
        else:
            for job in got.rows:
                if not held_only or job.id in held:
                    held.put(job)
            for job in got.running:
                if not held_only or job.id in held:
                    held.put(job)
            if got.focus is not None and got.focus.id in held:
                held.put(got.focus)
            if got.rechecked is not None:
                assert got.window_after is not None
                held.trim(got.rechecked, got.window_after)
                self._last_full = time.monotonic()
            elif got.counts is not None:
                self._active_counts = dict(got.counts)
            for job in got.rows:
                if job.status not in ACTIVE_STATUSES and (self._recount_latest is None or job.updated_at > self._recount_latest):
                    self._ended_since[job.id] = job.status
        if got.full or got.rechecked is not None:
            counts = got.counts or {}
            self._active_counts = {s: n for s, n in counts.items() if s in ACTIVE_STATUSES}
            self._ended_counts = {s: n for s, n in counts.items() if s not in ACTIVE_STATUSES}
            self._ended_since = {}
            self._recount_latest = got.marker.latest
        if got.stalled is not None:
            self._stalled = got.stalled
        if got.running_cost is not None:
            self._running_cost, self._cost_read = got.running_cost, time.monotonic()
        else:
            # Filtered, every running run held is read fresh: their sum. Else not read by this poll.
            self._running_cost = held.running_cost() if text_filter is not None else None
        self._cost_moved += moved
        # Read fresh now: the runs that were on screen when the poll was planned; every run, after a full
        # read or a poll of every running row.
        self._window_read = None if got.full or plan.window is None else frozenset(plan.window)
        self._marker = got.marker
        if got.marker.active is not None:
            self._counted_at = time.monotonic()
        self._filter = text_filter
        self._workers = got.workers
        self._last_read_at = read_at
        return whole + len(narrow), whole

    def _cost_moved_by(self, job: JobRecord) -> float:
        """What this record, in place of the one held, moves into or out of the running runs' cost together."""
        old = self.held.get(job.id)
        was = old is not None and old.status == RUNNING
        if was == (job.status == RUNNING):
            return 0.0
        if was:
            return job.cost  # it left, with all it spent (its new record's cost)
        # It joined: from its cost before (a run held, or first seen now: what it costs now, not money spent since the last poll).
        return -(old.cost if old is not None else job.cost)

    def _counts(self) -> dict[str, int]:
        counts = dict(self._ended_counts)
        for status in self._ended_since.values():
            counts[status] = counts.get(status, 0) + 1
        for status in ACTIVE_STATUSES:
            counts.pop(status, None)
        # Unfiltered, every active run is held (and the marker checked it):
        # their count needs no query. Filtered, the last full read's.
        # A partial first read holds only the newest: the store's counts, read with it.
        counts.update(self.held.status_counts if self._filter is None and not self._partial else self._active_counts)
        return counts

