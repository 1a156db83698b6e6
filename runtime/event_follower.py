"""Following a run's events: the one reader behind `swarmkit logs -f`, the console's log view and
the HTTP API's event stream, and the one rule for when a run has ended (`FollowedBatch.ended`).

Events are read by id, after the last one given: after a lost connection or a
reconnect nothing is given twice and nothing is skipped. While lines keep
coming the log is read every FAST seconds (one index range read); each read
that finds nothing doubles the wait, up to `slow`. A fast writer's lines are
shown within the README's target for it (bench/logs.py); a quiet run costs
one read every `slow` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from swarmkit.store.queries import events_after, get_job
from swarmkit.store.statuses import QUEUED, RUNNING

if TYPE_CHECKING:
    from swarmkit.store import Store
    from swarmkit.store.records import JobRecord
    from swarmkit.store.trail_records import EventRecord

BATCH = 2000
FAST = 0.05
# A full batch means more are waiting: read again almost at once.
BEHIND = 0.01


@dataclass(frozen=True)
class FollowedBatch:
    events: list[EventRecord]
    job: JobRecord | None  # the run's row as read with the events (None: gone)
    more: bool  # a full batch: more events are already waiting

    @property
    def ended(self) -> bool:
        """Whether following is over: the run is gone, or its hosting ended (any status but queued or
        running; a stopped or deferred run may be resumed later, and is followed anew)."""
        return self.job is None or self.job.status not in (QUEUED, RUNNING)


class EventFollower:
    def __init__(self, job_id: str, after: int = 0, *, slow: float = 1.0, batch: int = BATCH):
        self.job_id = job_id
        self.last_id = after
        self.slow = max(slow, FAST)
        self.batch = batch
        self.delay = FAST

    async def poll(self, store: Store) -> FollowedBatch:
        """The events after the last one given, and the run's row, in one read."""
        job_id, after, batch = self.job_id, self.last_id, self.batch
        events, job = await store.run_read(lambda conn: (events_after(conn, job_id, after, batch), get_job(conn, job_id)))
        if events:
            self.last_id = events[-1].id
        return FollowedBatch(events, job, len(events) == batch)

    async def rest(self, store: Store) -> list[EventRecord]:
        """Once `ended`: the events written with the ending that the read which saw it may have missed
        (each statement of it sees its own snapshot on PostgreSQL), to the last."""
        rest: list[EventRecord] = []
        while True:
            got = await self.poll(store)
            rest += got.events
            if not got.more:
                return rest

    def next_delay(self, got: FollowedBatch | None) -> float:
        """How long to wait before the next poll, after one that gave `got` (None: it failed)."""
        if got is not None and got.more:
            self.delay = FAST
            return BEHIND
        if got is not None and got.events:
            self.delay = FAST
        else:
            self.delay = min(self.slow, self.delay * 2)
        return self.delay
