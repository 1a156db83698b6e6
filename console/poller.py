"""What one poll of the store reads: cheap "did anything change?" first, then only what changed."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable

from runtime import control
from store import ACTIVE_STATUSES, STORE_FAULTS, TERMINAL_STATUSES
from store.queries import change_marker, jobs_changed_since, list_jobs, live_workers, running_jobs, status_counts
from store.records import JobRecord

from .store_link import StoreLink

log = logging.getLogger("swarmkit.console")

# Ended runs kept in view: the most recent ones, never the whole history.
ENDED_BOUND = 200
# Runs that ended this recently stay in the default view, so an operator sees
# how what they just did (or watched) ended.
LINGER = timedelta(minutes=10)
# Now and then read everything again: catches deletions and writers whose
# clocks lag ours by more than SKEW.
FULL_EVERY_S = 30.0
SKEW = timedelta(seconds=5)


@dataclass(frozen=True)
class Snapshot:
    jobs: tuple[JobRecord, ...]
    counts: dict[str, int]
    workers: int
    at: datetime
    full: bool = False
    fetched: int = 0
    lost_check: str | None = None  # why lost detection did not run, if it did not
    all_ended: bool = field(default=False)


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
        self.ended_bound = ended_bound
        self.linger = linger
        self._cache: dict[str, JobRecord] = {}
        self._marker: tuple[datetime | None, int] | None = None
        self._filter: str | None = None
        self._last_full = 0.0

    def forget(self) -> None:
        """Read everything again next time (after a fault, the cache may be of another store)."""
        self._marker = None

    async def poll(self, *, show_ended: bool = False, text_filter: str | None = None) -> Snapshot:
        store = await self.link.get()
        lost_check = None
        if self.detect_lost:
            try:
                await control.mark_lost(store, self.lease_s)
            except STORE_FAULTS as exc:
                # A read-only store (or role) cannot mark runs lost; reading
                # still works, and the read below reports a store that is down.
                lost_check = str(exc)
                log.info("marking lost runs failed: %s", exc)
        now = self.clock()
        text_filter = (text_filter or "").strip() or None
        fetched = 0
        async with store.read() as conn:
            marker = await change_marker(conn)
            counts = await status_counts(conn)
            workers = len(await live_workers(conn, now - timedelta(seconds=self.lease_s)))
            full = (
                self._marker is None
                or text_filter != self._filter
                or marker[1] < self._marker[1]
                or self._marker[0] is None
                or time.monotonic() - self._last_full > FULL_EVERY_S
            )
            if not full and marker != self._marker and text_filter is not None:
                # The filter is SQL's to apply; its result is small.
                full = True
            if full:
                rows = await list_jobs(conn, include_ended=True, ended_limit=self.ended_bound, text_filter=text_filter)
                self._cache = {j.id: j for j in rows}
                self._last_full = time.monotonic()
                fetched += len(rows)
            elif marker != self._marker:
                assert self._marker is not None and self._marker[0] is not None
                for job in await jobs_changed_since(conn, self._marker[0] - SKEW):
                    self._cache[job.id] = job
                    fetched += 1
            running = await running_jobs(conn)
        self._marker = marker
        self._filter = text_filter
        fetched += len(running)
        running_ids = set()
        for job in running:
            running_ids.add(job.id)
            if job.id in self._cache or text_filter is None:
                self._cache[job.id] = job
        for job_id in [j.id for j in self._cache.values() if j.status == "running" and j.id not in running_ids]:
            # No longer running, yet its change was not seen (a lagging clock):
            # read everything next time rather than show it running.
            self._marker = None
            del self._cache[job_id]
        shown = dict(counts)
        for job in running:
            status = job.display_status(now)
            if status != "running":
                shown["running"] = shown.get("running", 0) - 1
                shown[status] = shown.get(status, 0) + 1
        return Snapshot(
            jobs=tuple(self._view(now, show_ended)),
            counts={k: v for k, v in shown.items() if v},
            workers=workers,
            at=now,
            full=full,
            fetched=fetched,
            lost_check=lost_check,
            all_ended=show_ended,
        )

    def _view(self, now: datetime, show_ended: bool) -> list[JobRecord]:
        active = sorted((j for j in self._cache.values() if j.status in ACTIVE_STATUSES), key=lambda j: (j.created_at, j.id), reverse=True)
        ended = sorted(
            (j for j in self._cache.values() if j.status in TERMINAL_STATUSES or j.status not in ACTIVE_STATUSES),
            key=lambda j: (j.updated_at, j.id),
            reverse=True,
        )[: self.ended_bound]
        # Keep the cache bounded too: ended rows past the bound are dropped.
        keep = {j.id for j in ended}
        for job_id in [j.id for j in self._cache.values() if j.status not in ACTIVE_STATUSES and j.id not in keep]:
            del self._cache[job_id]
        if not show_ended:
            cutoff = now - self.linger
            ended = [j for j in ended if (j.ended_at or j.updated_at) >= cutoff]
        return active + ended
