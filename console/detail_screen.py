"""The detail pane of the run under the cursor: shown from the poll's record, its checkpoints, audit,
workspaces (and a queued run's recent events) read again only when its row changes."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from textual import on, work

from swarmkit.store.records import JobRecord
from swarmkit.store.statuses import TERMINAL_STATUSES
from swarmkit.widgets.run_detail import DetailSection, RunDetail
from swarmkit.widgets.run_table import RunTable

from .acting_screen import ActingScreen
from .poller import Poller
from .run_views import detail_data, detail_sections
from .usual_durations import UsualDurations

log = logging.getLogger("swarmkit.console")

# How often the detail of a queued run is read again though its row did not change (workers that cannot load it say so in events).
QUEUED_DETAIL_EVERY_S = 3.0


class DetailScreen(ActingScreen):
    """A screen of runs with a detail pane: what it shows of the run under the cursor, and when it reads it."""

    poller: Poller
    clock: Callable[[], datetime]
    usual: UsualDurations

    def __init__(self) -> None:
        super().__init__()
        self._detail_key: str | None = None
        self._detail_dirty = False
        self._detail_busy = False
        self._sections: dict[str, tuple[datetime, tuple[DetailSection, ...], float]] = {}  # by run: updated_at, sections, monotonic read time

    @property
    def selected(self) -> JobRecord | None:
        # A worker that finishes while the app closes may ask after the table is gone.
        key = None if self.closing else self.part(RunTable).selected_key
        return self.jobs.get(key) if key else None

    def action_toggle_detail(self) -> None:
        detail = self.query_one(RunDetail)
        detail.display = not detail.display
        self._selection_changed()

    @on(RunTable.RowHighlighted)
    def _row_highlighted(self, event: RunTable.RowHighlighted) -> None:
        self._selection_changed()

    def _selection_changed(self) -> None:
        detail = self.part(RunDetail)
        if not detail.display:
            self.poller.focus = None
            return
        job = self.selected
        # The poll re-reads the row the detail shows: its heartbeat moves
        # without touching updated_at.
        self.poller.focus = job.id if job is not None else None
        if job is None:
            detail.show(None, "no run selected" if self.jobs else "no runs shown")
            return
        cached = self._sections.get(job.id)
        # A queued run's row does not change when a worker says it cannot load it: look again, every
        # few seconds, not at each poll (that read would be much of an idle console's work).
        if cached is not None and cached[0] == job.updated_at and (job.status != "queued" or time.monotonic() - cached[2] < QUEUED_DETAIL_EVERY_S):
            detail.show(detail_data(job, self.clock(), cached[1], self.usual.usual_s(job), cached[3]))
            return
        if cached is not None:
            detail.show(detail_data(job, self.clock(), cached[1], self.usual.usual_s(job), cached[3]))
        self._detail_key = job.id
        self._detail_dirty = True
        if not self._detail_busy:
            self._load_detail()

    async def _read_detail(self, key: str):
        store = await self.link.get()
        # late: loaded with the store (SQLAlchemy); the first frame needs none of them
        from swarmkit.store.queries import audit_for, checkpoints_for, events_before, get_job, workspaces_for
        from swarmkit.store.reads import node_costs  # late: as above

        def read(conn):
            job = get_job(conn, key)
            recent = events_before(conn, key, None, 50) if job is not None and job.status == "queued" else []
            # What a node of its flow cost in its completed runs: the estimate at completion, for a run not yet ended.
            costs = node_costs(conn, job.flow, key) if job is not None and job.status not in TERMINAL_STATUSES else []
            return job, checkpoints_for(conn, key), audit_for(conn, key), workspaces_for(conn, [key])[key], recent, costs

        # One transaction through run_read, as the poll reads: on SQLite the console's
        # first screen makes no async engine (see Store.engine).
        return await store.run_read(read)

    @work(group="detail")
    async def _load_detail(self) -> None:
        self._detail_busy = True
        try:
            while self._detail_dirty and not self.closing:
                self._detail_dirty = False
                key = self._detail_key
                if key is None:
                    continue
                try:
                    job, cps, trail, wss, recent, costs = await self.link.shielded(self._read_detail(key))
                except Exception as exc:  # shown in the banner by the next poll
                    log.info("reading detail of %s failed: %s", key[:8], exc)
                    continue
                if job is None or self.closing:
                    continue
                sections = detail_sections(cps, trail, wss, recent, steps=job.steps)
                self._sections[key] = (job.updated_at, sections, time.monotonic(), costs)
                if len(self._sections) > 64:
                    self._sections.pop(next(iter(self._sections)))
                shown = self.jobs.get(key, job)
                if self.selected is not None and self.selected.id == key:
                    self.part(RunDetail).show(detail_data(shown, self.clock(), sections, self.usual.usual_s(shown), costs))
        finally:
            self._detail_busy = False
