"""One poll's reads, in one short read transaction: the change marker first, then only what changed.

`Poller` (poller.py) decides what to read (`PollPlan`) and folds in what was read
(`PollRead`); `read_poll` runs on the store's thread, between the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Written against named statements (store/reads.py): the first poll runs them on a lite store,
# before SQLAlchemy is loaded.
from swarmkit.store.reads import (
    ChangeMarker,
    change_marker,
    count_live_workers,
    current_counts,
    get_job,
    get_jobs,
    jobs_changed_after,
    lease_expired,
    list_jobs,
    read_keys,
    running_active_among,
    running_active_since,
    running_cost,
    skewed_workers,
    stalled_count,
    updated_between,
)
from swarmkit.store.records import STALL_AFTER, JobRecord
from swarmkit.store.statuses import ACTIVE_STATUSES

from .held_runs import EPOCH, HeldRuns

# How far a writer's clock may lag ours: the updates this far before the newest seen are read again.
SKEW = timedelta(seconds=5)


@dataclass(frozen=True)
class PollPlan:
    """What a poll's transaction needs to know of the poller; decided on the loop, read on the store thread."""

    text_filter: str | None
    full: bool
    check_lease: bool
    lease_s: float
    now: datetime  # the console's clock, for whether a worker is live
    previous: ChangeMarker | None
    expect: tuple[int, int] | None  # (active, window) the cache holds, unfiltered only
    window_after: datetime | None
    event_since: datetime | None
    focus: str | None
    peek: int = 0  # the first read: the newest this many runs of each kind; 0: all of them
    # The runs on screen: only theirs of the running rows' signs of work are read (the others tick
    # unread; issue 31). None: every running row's (a filter, a sort on a column they move).
    window: tuple[str, ...] | None = None
    gained: tuple[str, ...] = ()  # of those, the ones not read fresh since they came into view: read whole
    recheck: bool = False  # check every held run's update against the store's, by (id, updated_at)
    # Count the marker's rows (ChangeMarker): else its newest update alone, and a read that turns full counts.
    count: bool = True
    cost: bool = False  # read what the running runs cost together


@dataclass
class PollRead:
    lease_expired: bool = False
    marker: ChangeMarker | None = None
    full: bool = False
    rows: list[JobRecord] = field(default_factory=list)  # full: everything shown; else: what changed
    counts: dict[str, int] | None = None  # full reads: the active statuses, and the runs ended within LINGER
    running: list[JobRecord] = field(default_factory=list)
    focus: JobRecord | None = None
    workers: int = 0
    narrow: list[tuple[str, datetime]] = field(default_factory=list)  # (id, updated_at) of the skew window
    skewed: list[tuple[str, float]] = field(default_factory=list)  # (host, clock offset) of workers off the store's clock
    shown_counts: dict[str, int] = field(default_factory=dict)  # filtered full reads: the store's stopping/cancelling/stalled
    partial: bool = False  # a peek that did not hold everything
    stalled: int | None = None  # unfiltered: the store's count of running runs shown stalled
    running_cost: float | None = None  # PollPlan.cost: what the running runs cost together
    # PollPlan.recheck: the runs to hold from now on, and the start of the marker's window they make.
    rechecked: set[str] | None = None
    window_after: datetime | None = None


def read_poll(conn, plan: PollPlan, held: HeldRuns) -> PollRead:
    """One poll's reads, in one transaction. Runs on the store's thread: reads what the poller holds, never changes it."""
    got = PollRead()
    if plan.check_lease and lease_expired(conn, plan.lease_s):
        got.lease_expired = True
        return got
    marker = change_marker(conn, plan.window_after, counted=plan.count)
    got.marker = marker
    prev = plan.previous
    full = plan.full or prev is None or prev.latest is None or marker.latest is None
    if not full:
        assert prev is not None and prev.latest is not None and marker.latest is not None
        if plan.text_filter is not None:
            # The cache holds what matches; SQL applies the filter again on any change.
            full = marker.latest != prev.latest or marker.active != prev.active
        elif plan.recheck:
            # Every held run's update against the store's, narrow: whole rows only where one
            # differs. Catches what the marker cannot (a row changed in place by a writer whose
            # clock lags ours by more than SKEW) without reading every run whole.
            active, ended = read_keys(conn, held.ended_bound)
            stale = [key for key, at in active + ended if (kept := held.get(key)) is None or kept.updated_at != at]
            got.rows = get_jobs(conn, stale)
            # From here on the poller holds exactly these runs (HeldRuns.trim lets go of the ended ones
            # pushed out since the last full read), and the marker counts the window they start.
            got.rechecked = {key for key, _ in active + ended}
            got.window_after = ended[-1][1] if len(ended) >= held.ended_bound else EPOCH
            got.marker = marker = change_marker(conn, got.window_after)
            got.counts = current_counts(conn, plan.now - held.linger)
        elif marker.latest == prev.latest:
            # Nothing moved the newest update; yet a deleted row, or a row
            # written with a lagging clock, shows in the counts.
            full = marker.active is not None and (marker.active, marker.window) != plan.expect
        else:
            # What changed since the newest update seen last time, whole;
            # and the updates just before it (a write that committed late,
            # or came from a lagging clock), narrow first: most are held already.
            changed = jobs_changed_after(conn, prev.latest)
            got.narrow = updated_between(conn, prev.latest - SKEW, prev.latest)
            missed = [job_id for job_id, at in got.narrow if (kept := held.get(job_id)) is None or kept.updated_at != at]
            got.rows = changed + get_jobs(conn, missed)
    if full:
        got.full = True
        if marker.active is None:
            got.marker = marker = change_marker(conn, plan.window_after)
        limit = plan.peek or None
        got.rows = list_jobs(
            conn, include_ended=True, ended_limit=min(plan.peek, held.ended_bound) if plan.peek else held.ended_bound,
            text_filter=plan.text_filter, stall_cutoff=plan.now - STALL_AFTER, active_limit=limit,
        )
        if plan.peek:
            active = sum(1 for j in got.rows if j.status in ACTIVE_STATUSES)
            got.partial = active < marker.active or len(got.rows) - active >= min(plan.peek, held.ended_bound)
        got.counts = current_counts(conn, plan.now - held.linger)
        if plan.text_filter is not None:
            from swarmkit.store.queries import shown_running_counts  # late: built with SQLAlchemy, as a filter is

            got.shown_counts = shown_running_counts(conn, plan.now - STALL_AFTER)
    else:
        if plan.event_since is not None:
            if plan.window is None:
                got.running = running_active_since(conn, plan.event_since)
            else:
                got.running = running_active_among(conn, plan.event_since, plan.window)
        if plan.gained:
            got.running += get_jobs(conn, plan.gained)
    if plan.text_filter is None:
        got.stalled = stalled_count(conn, plan.now, STALL_AFTER)
        if plan.cost:
            got.running_cost = running_cost(conn)
    if plan.focus is not None:
        got.focus = get_job(conn, plan.focus)
    got.workers = count_live_workers(conn, plan.lease_s, plan.now)
    got.skewed = skewed_workers(conn, plan.lease_s, plan.now)
    return got
