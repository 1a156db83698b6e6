"""The main screen: the run table, its header and banner, the poll loop and the view's keys.

The acts are a table of their own (acts.py), carried out by act_runner.py;
when the next poll runs is poll_schedule.py's; the detail pane of the run under
the cursor is detail_screen.py's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static

from swarmkit.runtime.run_columns import burn_rate, burn_text
from swarmkit.runtime.settings import default_actor
from swarmkit.store.records import JobRecord
from swarmkit.store.store_errors import is_store_fault
from swarmkit.widgets.filter_box import FilterBox
from swarmkit.widgets.key_bar import KeyBar
from swarmkit.widgets.run_detail import RunDetail
from swarmkit.widgets.run_row import RunRow
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.safe_text import safe
from swarmkit.widgets.state_counts import StateCounts, StoreSummary

from .act_commands import ActCommands
from .acting_screen import ActingScreen, problem_text
from .burn_meter import BurnMeter, SpendMeter
from .config import ConsoleConfig
from .detail_screen import DetailScreen
from .header_words import banner_text, data_age, empty_words, view_words
from .node_costs import NodeCosts
from .poll_schedule import PollSchedule
from .poller import LINGER, Poller, Snapshot
from .run_views import run_row
from .side_reads import SideReads
from .store_link import StoreLink
from .usual_durations import UsualDurations

log = logging.getLogger("swarmkit.console")

# Columns whose values a running run's signs of work move (heartbeats, usage, log lines): the poll
# reads those of the runs on screen only, so while the table sorts on one of them it reads every
# running run's, for the order (poller.Poller.set_window).
TICKING_SORTS = frozenset({"status", "last_work", "usage", "burn", "estimate"})

class MainScreen(SideReads, DetailScreen):
    """Watches one store and acts on its runs."""

    COMMANDS = {ActCommands}
    BINDINGS = ActingScreen.ACT_BINDINGS + [
        Binding("l", "logs", "Logs", id="view.logs"),
        # A priority binding: run as the app reads the key, before it hands the keys read with it
        # to the widget focused then. Else, typed fast or pasted, "/stopping" goes to the table, and its
        # `s` stops the run under the cursor.
        Binding("slash", "filter", "Filter", key_display="/", id="view.filter", priority=True),
        Binding("e", "toggle_ended", "Ended", id="view.ended"),
        Binding("d", "toggle_detail", "Detail", id="view.detail"),
        Binding("question_mark", "help", "Help", key_display="?", id="view.help"),
        Binding("q", "app.quit", "Quit", id="app.quit"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="view.clear_filter"),
    ]

    def __init__(self, config: ConsoleConfig) -> None:
        super().__init__()
        self.config = config
        self.read_only = config.read_only
        self.clock = config.clock
        self.poll_interval = config.poll_interval
        self.link = StoreLink(config.store, config.workspace)
        self.link.first_frame = asyncio.Event()
        self.poller = Poller(self.link, clock=config.clock, lease_s=config.lease_s, detect_lost=config.detect_lost)
        self.actor = default_actor()
        self.jobs: dict[str, JobRecord] = {}
        self._shown_jobs: tuple[JobRecord, ...] | None = None  # the records the last applied poll showed
        self._runs_version = -1  # and its Snapshot.runs_version
        self._shown_view: tuple[str | None, bool] | None = None  # and the filter and ended toggle it was read under
        self.snapshot: Snapshot | None = None
        self.show_ended = False
        self.text_filter = ""
        self.polls = 0  # finished polls, good or bad
        self.problem: str | None = None
        self.last_message = ""
        self._last_ok_at: datetime | None = None
        self.schedule = PollSchedule(config.poll_interval, self.set_timer, self._poll)
        self._row_at: datetime | None = None  # the time the table's rows are shown at
        self._applied_at: float | None = None  # monotonic time of the last poll applied
        self._unmounted = False
        self._read_only_said = False
        self._empty_said: str | None = None  # what the empty table's place says now
        self.burn = BurnMeter()
        self.spend = SpendMeter()
        self._watched: frozenset[str] | None = None  # the runs the poller reads the signs of work of (None: all)
        self.usual = UsualDurations()
        self.costs = NodeCosts()
        self.estimate_sort = False  # the table sorts on the runs' estimated cost at completion ($)

    # --- layout -----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StateCounts(self._summary(), id="header")
        yield Static(id="banner")
        yield FilterBox(placeholder="filter runs by flow, id, status or node; enter keeps it, escape clears it", id="filter")
        yield Static(id="empty")
        yield RunTable(id="runs")
        yield RunDetail(id="detail")
        yield Static(id="message")
        yield KeyBar()

    def _row_of(self, key: str) -> RunRow | None:
        job = self.jobs.get(key)
        return self._run_row(job, self._row_at) if job is not None and self._row_at is not None else None

    def _run_row(self, job: JobRecord, at: datetime) -> RunRow:
        return run_row(job, at, self.burn.since(job.id, at), self.usual.usual_s(job), self.costs.median(job))

    def on_mount(self) -> None:
        self.query_one(RunTable).row_source = self._row_of
        self.query_one("#banner").display = False
        self.query_one("#filter").display = False
        self.query_one("#empty").display = False
        self.query_one(RunTable).focus()
        if self.read_only:
            self.add_class("read-only")
        self.set_interval(1.0, self._tick)
        self._poll()

    async def on_unmount(self) -> None:
        self._unmounted = True
        self.schedule.close()
        await self.link.close()

    # --- polling ------------------------------------------------------------------

    @property
    def failures(self) -> int:
        """Polls failed in a row."""
        return self.schedule.failures

    def poll_now(self) -> None:
        """Poll as soon as possible, never two at once."""
        self.schedule.now()

    @work(exclusive=True, group="poll")
    async def _poll(self) -> None:
        self.schedule.started()
        snap: Snapshot | None = None
        error: BaseException | None = None
        try:
            snap = await self.link.shielded(self.poller.poll(show_ended=self.show_ended, text_filter=self.text_filter))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the console never dies of its store
            error = exc
        finally:
            self.schedule.ended()
        if self.closing:
            return
        if snap is None:
            assert error is not None
            if not is_store_fault(error):
                log.error("poll failed", exc_info=error)
            self.poller.forget()
            await self.link.shielded(self.link.drop())
            if self.closing:
                return
            self.schedule.finished(ok=False)
            self._fail(error)
        else:
            # A first read of the newest runs only (Snapshot.partial): the rest comes right after the first paint.
            self.schedule.finished(ok=True, soon=snap.partial)
            self._apply(snap)
        if not self.polls:
            # Whatever it showed (rows, or why there are none) is drawn: the full store may load.
            self.call_after_refresh(self.link.first_frame.set)
        self.polls += 1

    def _fail(self, exc: BaseException) -> None:
        self.problem = problem_text(exc, self.link)
        self._show_banner()
        self._refresh_header()

    def _apply(self, snap: Snapshot) -> None:
        self._applied_at = time.monotonic()
        self.snapshot = snap
        self.problem = None
        self._last_ok_at = snap.at
        table = self.part(RunTable)
        # Rows are made only for the runs on screen (their ages move) and for runs
        # new to the table; the table is told which runs' records changed (the
        # poller says which it read again; after a full read, any may have), and
        # makes theirs when they come into view. A poll that
        # changed nothing hands back the very records of the last: then
        # nothing here walks every run (bench/console_render.py).
        self._row_at = snap.at
        # The same runs as the last poll (some of them changed): their records are swapped in.
        same_runs = self._shown_jobs is not None and (snap.jobs is self._shown_jobs or snap.runs_version == self._runs_version)
        self._shown_jobs, self._runs_version = snap.jobs, snap.runs_version
        jobs = self.jobs
        if not same_runs:
            self.jobs = jobs = {j.id: j for j in snap.jobs}
        changed = [job for key, job in snap.changed.items() if key in jobs]
        for job in changed:
            jobs[job.id] = job
        # After a full read the runs shown may be others (a filter, a deleted row): the meter looks at all.
        self.burn.observe(snap.jobs, snap.at, changed=None if snap.full else changed)
        if self._shown_view is not None and snap.text_filter != self._shown_view[0]:
            self.spend.reset()  # the runs summed are others
        self.spend.observe(snap.at, snap.running_cost, snap.cost_moved, snap.running)
        # Runs of another view than the last poll's (a filter set or cleared, ended runs shown or
        # hidden): the operator asked for them, and reads them from the top. Runs that merely
        # came in keep the cursor's run on its line. The table makes the rows of the changed
        # runs it shows, through `_row_of`; the others' when they come into view.
        view = (snap.text_filter, snap.all_ended)
        table.show(None if same_runs else list(jobs), {}, stale=[j.id for j in changed], reframe=self._shown_view is not None and view != self._shown_view)
        self._shown_view = view
        empty = self.part(Static, "#empty")
        empty.display = not snap.jobs
        if not snap.jobs and (words := empty_words(self.text_filter, self.show_ended, LINGER)) != self._empty_said:
            # Only when the words change: an update lays the whole screen out again
            # and repaints all of it, every poll of a store with nothing to show.
            self._empty_said = words
            empty.update(Text(words, style="dim"))
        self._show_banner()
        self._refresh_header()
        self._selection_changed()
        self.read_aside(snap)

    def _tick(self) -> None:
        # A poll's apply refreshes the header too: with polls a second apart,
        # a second repaint of the screen each second would be for nothing.
        if self._applied_at is None or time.monotonic() - self._applied_at >= 1.0:
            self._refresh_header()
        if self.problem is not None or self.schedule.slow_for() is not None:
            self._show_banner()

    def _data_age(self) -> tuple[str, bool]:
        return data_age(self.clock(), self._last_ok_at, self.problem, self.poll_interval)

    def _summary(self) -> StoreSummary:
        snap = self.snapshot
        data_age, stale = self._data_age()
        return StoreSummary(
            store=self.link.display,
            workers=snap.workers if snap else None,
            counts=snap.counts if snap else {},
            data_age=data_age,
            stale=stale,
            burn=burn_text(self._burn()) if snap else "",
            # Filtered, a poll reads only the runs that match: the meter sees only their spending.
            burn_filtered=snap is not None and snap.text_filter is not None,
            view=view_words(self.text_filter, self.show_ended, LINGER, self.poller.ended_bound),
            read_only=self.read_only,
            clock=self.clock().strftime("%H:%M:%S UTC"),
            warning=self.link.stale_warning or "",
        )

    def _burn(self) -> float | None:
        """The header's burn: what the running runs spent together over the last minute watched."""
        now = self.clock()

        def newly() -> float | None:
            # Watched for a few seconds only: each running run's rate since it started (a pass over
            # the runs held, for the first seconds only).
            return sum(burn_rate(job, now) or 0.0 for job in self.jobs.values() if job.status == "running")

        return self.spend.total(now, newly)

    def _refresh_header(self) -> None:
        self.part(StateCounts).show(self._summary())

    def _show_banner(self) -> None:
        banner = self.part(Static, "#banner")
        slow = self.schedule.slow_for()
        warning = self.snapshot.clock_warning if self.snapshot is not None else None
        if self.problem is None and slow is None:
            banner.display = warning is not None
            if warning is not None:
                banner.update(Text.assemble(("⚠ ", "bold"), safe(warning)))
            return
        text = banner_text(self.problem, slow, self._last_ok_at, self._data_age()[0], self.schedule.retry_delay, self.failures)
        banner.update(text)
        banner.display = True

    # --- selection ----------------------------------------------------------------

    @on(RunTable.RowSelected)
    def _row_selected(self, event: RunTable.RowSelected) -> None:
        self.action_logs()

    @on(RunTable.WindowChanged)
    def _window_changed(self, event: RunTable.WindowChanged) -> None:
        self._watch(event.table)

    @on(RunTable.Sorted)
    def _sorted(self, event: RunTable.Sorted) -> None:
        self._watch(event.table)
        self.estimate_sort = event.table.sort_column == "estimate"
        if self.estimate_sort:  # no column shows it: said, and its flows' costs read
            self.sorted_on_estimate()
            self.say("sorted by estimated cost at completion, the most first ($ again reverses it, 0 goes back to newest first)", toast=False)

    def _watch(self, table: RunTable) -> None:
        """Tell the poller which runs to read the signs of work of: the runs on screen (or, sorted on a
        column they move, every running run's). Runs that come into view are read at once."""
        keys = None if table.sort_column in TICKING_SORTS else frozenset(table.visible_keys())
        if keys is not None:
            # Runs that left the screen tick unread: back in view, their burn is measured from then.
            self.burn.forget((self._watched if self._watched is not None else frozenset(table.shown_keys)) - keys)
        self._watched = keys
        if self.poller.set_window(keys):
            self.poll_now()

    # --- view actions ---------------------------------------------------------------

    def action_toggle_ended(self) -> None:
        self.show_ended = not self.show_ended
        self.say("showing every recent run, ended ones too" if self.show_ended else "showing active runs and those that ended lately")
        self._refresh_header()
        self.poll_now()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        # At once (Widget.focus waits for what is queued): the keys read with `/` go to the box.
        self.set_focus(box)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "filter" and isinstance(self.focused, Input):
            return False  # a `/` typed into the box is text
        return super().check_action(action, parameters)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.text_filter = event.value.strip()
        self._refresh_header()
        self.poll_now()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            event.input.display = False
        self.query_one(RunTable).focus()

    def action_clear_filter(self) -> None:
        """Escape: clear the filter, else the marks."""
        box = self.query_one("#filter", Input)
        if not box.value and not box.display and self.clear_marks():
            return
        if box.value:
            box.value = ""
        box.display = False
        self.query_one(RunTable).focus()

    # The help and log screens are imported when first opened: the first frame needs neither.
    def action_help(self) -> None:
        from .help_screen import HelpScreen  # late: when first opened; the first frame needs none of it

        self.app.push_screen(HelpScreen(self.help_entries(), read_only=self.read_only))

    def action_logs(self) -> None:
        job = self.selected
        if job is None:
            self.say("no run selected", "warning")
            return
        from .log_screen import LogScreen  # late: when first opened; the first frame needs none of it

        self.app.push_screen(LogScreen(self.link, job, clock=self.clock, poll_interval=self.poll_interval))

    VIEW_HELP: ClassVar[dict[str, str]] = {
        "logs": "the selected run's log (follows new lines)",
        "filter": "filter runs by flow, id, status or node",
        "toggle_ended": "show ended runs too (newest first), or hide them again",
        "toggle_detail": "show or hide the detail pane",
        "help": "this help",
        "quit": "quit the console",
        "clear_filter": "clear the filter, else the marks",
        "mark": "mark or unmark the run (acts then apply to every marked run, with one confirmation)",
        "copy_id": "copy the run's full id to the clipboard",
    }
