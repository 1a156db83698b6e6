"""The main screen: the run table, its header and detail pane, the poll loop, and the acts."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from swarmkit.runtime import control
from swarmkit.runtime.errors import SwarmkitError
from swarmkit.runtime.report import age
from swarmkit.runtime.settings import default_actor
from swarmkit.runtime.workspaces import dir_size
from swarmkit.store import STORE_FAULTS, TERMINAL_STATUSES, StoreError, describe_db_error, masked
from swarmkit.store.queries import audit_for, checkpoints_for, events_before, get_job, workspaces_for
from swarmkit.store.records import JobRecord
from swarmkit.widgets.confirm_dialog import Choice, ConfirmDialog
from swarmkit.widgets.run_detail import DetailSection, RunDetail
from swarmkit.widgets.run_table import RunRow, RunTable
from swarmkit.widgets.safe_text import safe, safe_lines
from swarmkit.widgets.state_counts import StateCounts, StoreSummary

from .act_commands import ActCommands
from .config import ConsoleConfig
from .help_screen import HelpScreen
from .log_screen import LogScreen
from .poller import LINGER, Poller, Snapshot
from .run_views import clock_time, detail_data, detail_sections, human_size, run_row, shown_path
from .store_link import StoreLink

log = logging.getLogger("swarmkit.console")

ACTS = ("stop", "resume", "cancel", "cancel_keep", "approve")
# A poll that takes longer than this is reported: the store may be locked.
SLOW_POLL_S = 3.0


def problem_text(exc: BaseException, link: StoreLink) -> str:
    # The banner is read over shoulders and in screenshots: no password in it.
    if isinstance(exc, StoreError):
        return masked(str(exc))
    if isinstance(exc, STORE_FAULTS):
        return describe_db_error(exc, link.loc)
    return masked(f"poll failed: {type(exc).__name__}: {exc}")


class MainScreen(Screen):
    """Watches one store and acts on its runs."""

    COMMANDS = {ActCommands}

    BINDINGS = [
        Binding("s", "stop", "Stop", id="act.stop"),
        Binding("r", "resume", "Resume", id="act.resume"),
        Binding("c", "cancel", "Cancel", id="act.cancel"),
        Binding("k", "cancel_keep", "Cancel+keep", id="act.cancel_keep"),
        Binding("a", "approve", "Approve", id="act.approve"),
        Binding("l", "logs", "Logs", id="view.logs"),
        Binding("slash", "filter", "Filter", key_display="/", id="view.filter"),
        Binding("e", "toggle_ended", "Ended", id="view.ended"),
        Binding("d", "toggle_detail", "Detail", id="view.detail"),
        Binding("question_mark", "help", "Help", key_display="?", id="view.help"),
        Binding("q", "app.quit", "Quit", id="app.quit"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="view.clear_filter"),
    ]

    # What each act is, for the help screen and the command palette.
    ACT_HELP = {
        "stop": "stop the run at its next agent boundary (resumable)",
        "resume": "queue a stopped, deferred or lost run again (on a deferred run: approve its gate)",
        "cancel": "end the run for good and destroy its workspaces (asks first)",
        "cancel_keep": "end the run for good, keeping its workspaces (asks first)",
        "approve": "approve the gate a deferred run waits at",
    }

    def __init__(self, config: ConsoleConfig) -> None:
        super().__init__()
        self.config = config
        self.read_only = config.read_only
        self.clock = config.clock
        self.poll_interval = config.poll_interval
        self.link = StoreLink(config.store, config.workspace)
        self.poller = Poller(self.link, clock=config.clock, lease_s=config.lease_s, detect_lost=config.detect_lost)
        self.actor = default_actor()
        self.jobs: dict[str, JobRecord] = {}
        self.snapshot: Snapshot | None = None
        self.show_ended = False
        self.text_filter = ""
        self.polls = 0  # finished polls, good or bad
        self.problem: str | None = None
        self.failures = 0
        self.last_message = ""
        self._last_ok_at: datetime | None = None
        self._polling_since: float | None = None
        self._poll_again = False
        self._timer: Timer | None = None
        self._retry_delay: float | None = None
        self._detail_key: str | None = None
        self._detail_dirty = False
        self._detail_busy = False
        self._sections: dict[str, tuple[datetime, tuple[DetailSection, ...]]] = {}
        self._row_at: datetime | None = None  # the time the table's rows are shown at
        self._applied_at: float | None = None  # monotonic time of the last poll applied
        self._closing = False

    # --- layout -----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StateCounts(self._summary(), id="header")
        yield Static(id="banner")
        yield Input(placeholder="filter runs by flow, id, status or node; enter keeps it, escape clears it", id="filter")
        yield Static(id="empty")
        yield RunTable(id="runs")
        yield RunDetail(id="detail")
        yield Static(id="message")
        yield Footer()

    def _row_of(self, key: str) -> RunRow | None:
        job = self.jobs.get(key)
        return run_row(job, self._row_at) if job is not None and self._row_at is not None else None

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
        self._closing = True
        if self._timer is not None:
            self._timer.stop()
        await self.link.close()

    # --- polling ------------------------------------------------------------------

    def poll_now(self) -> None:
        """Poll as soon as possible, never two at once."""
        if self._closing:
            return
        if self._polling_since is not None:
            self._poll_again = True
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._poll()

    @work(exclusive=True, group="poll")
    async def _poll(self) -> None:
        self._timer = None
        self._polling_since = time.monotonic()
        snap: Snapshot | None = None
        error: BaseException | None = None
        try:
            snap = await self.link.shielded(self.poller.poll(show_ended=self.show_ended, text_filter=self.text_filter))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the console never dies of its store
            error = exc
        finally:
            self._polling_since = None
        if self._closing:
            return
        if snap is None:
            assert error is not None
            if not isinstance(error, STORE_FAULTS + (StoreError,)):
                log.error("poll failed", exc_info=error)
            self.poller.forget()
            await self.link.shielded(self.link.drop())
            self.failures += 1
            cap = max(self.poll_interval, min(5.0, self.poll_interval * 10))
            delay = min(cap, self.poll_interval * 2 ** min(self.failures - 1, 8))
            self._retry_delay = round(delay, 1)
            self._fail(error)
        else:
            self._retry_delay = None
            self._apply(snap)
            # A first read of the newest runs only: the rest comes right after the first paint.
            delay = 0.05 if snap.partial else self.poll_interval
        self.polls += 1
        if self._poll_again:
            self._poll_again = False
            delay = 0.01  # Textual timers need a delay above zero
        self._timer = self.set_timer(delay, self._poll)

    def _fail(self, exc: BaseException) -> None:
        self.problem = problem_text(exc, self.link)
        self._show_banner()
        self._refresh_header()

    def _apply(self, snap: Snapshot) -> None:
        self._applied_at = time.monotonic()
        self.snapshot = snap
        self.failures = 0
        self.problem = None
        self._last_ok_at = snap.at
        previous, self.jobs = self.jobs, {j.id: j for j in snap.jobs}
        table = self.query_one(RunTable)
        # Rows are made only for the runs whose record changed (the poller
        # hands back the same record while a run does not change); ages on
        # screen are refreshed through the table's row source.
        self._row_at = snap.at
        fresh = {j.id: run_row(j, snap.at) for j in snap.jobs if previous.get(j.id) is not j}
        table.show([j.id for j in snap.jobs], fresh)
        empty = self.query_one("#empty", Static)
        empty.display = not snap.jobs
        if not snap.jobs:
            empty.update(Text(self._empty_words(), style="dim"))
        self._show_banner()
        self._refresh_header()
        self._selection_changed()

    def _empty_words(self) -> str:
        if self.text_filter:
            return f"No run matches the filter {safe(self.text_filter)!r}. Escape clears it."
        if self.show_ended:
            return "No runs in this store yet. Queue one with `swarmkit run FLOW --detach`, host it with `swarmkit worker`."
        return (
            f"No active runs, and none ended in the last {int(LINGER.total_seconds() // 60)} minutes. "
            "Press e to show ended runs; queue one with `swarmkit run FLOW --detach`."
        )

    def _tick(self) -> None:
        # A poll's apply refreshes the header too: with polls a second apart,
        # a second repaint of the screen each second would be for nothing.
        if self._applied_at is None or time.monotonic() - self._applied_at >= 1.0:
            self._refresh_header()
        if self.problem is not None or self._slow_for() is not None:
            self._show_banner()

    def _slow_for(self) -> float | None:
        if self._polling_since is None:
            return None
        waited = time.monotonic() - self._polling_since
        return waited if waited >= SLOW_POLL_S else None

    def _data_age(self) -> tuple[str, bool]:
        if self._last_ok_at is None:
            return "no data yet", self.problem is not None
        seconds = (self.clock() - self._last_ok_at).total_seconds()
        stale = self.problem is not None or seconds > max(3 * self.poll_interval, 5)
        return f"{age(seconds)} old", stale

    def _view_words(self) -> str:
        words = f"all runs (ended: newest {self.poller.ended_bound})" if self.show_ended else (
            f"active + ended in last {int(LINGER.total_seconds() // 60)}m (e: all)"
        )
        if self.text_filter:
            words += f" · filter {self.text_filter!r}"
        return words

    def _summary(self) -> StoreSummary:
        snap = self.snapshot
        data_age, stale = self._data_age()
        return StoreSummary(
            store=self.link.display,
            workers=snap.workers if snap else None,
            counts=snap.counts if snap else {},
            data_age=data_age,
            stale=stale,
            view=self._view_words(),
            read_only=self.read_only,
            clock=self.clock().strftime("%H:%M:%S UTC"),
            warning=self.link.stale_warning or "",
        )

    def _refresh_header(self) -> None:
        self.query_one(StateCounts).show(self._summary())

    def _show_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        slow = self._slow_for()
        warning = self.snapshot.clock_warning if self.snapshot is not None else None
        if self.problem is None and slow is None:
            banner.display = warning is not None
            if warning is not None:
                banner.update(Text.assemble(("⚠ ", "bold"), safe(warning)))
            return
        text = Text(no_wrap=False)
        if self.problem is not None:
            text.append("⚠ store unavailable: ", style="bold")
            text.append(safe(self.problem))
        else:
            text.append("⚠ ", style="bold")
            text.append(f"the store has not answered for {age(slow)} (busy, or locked by another process?)")
        if self._last_ok_at is not None:
            text.append(f" — showing the data read at {clock_time(self._last_ok_at)} ({self._data_age()[0]})")
        else:
            text.append(" — no data read yet")
        if self.problem is not None and self._retry_delay is not None:
            text.append(f"; retrying every {self._retry_delay:g}s (attempt {self.failures})")
        banner.update(text)
        banner.display = True

    # --- selection and detail -------------------------------------------------------

    @property
    def selected(self) -> JobRecord | None:
        key = self.query_one(RunTable).selected_key
        return self.jobs.get(key) if key else None

    @on(RunTable.RowHighlighted)
    def _row_highlighted(self, event: RunTable.RowHighlighted) -> None:
        self._selection_changed()

    @on(RunTable.RowSelected)
    def _row_selected(self, event: RunTable.RowSelected) -> None:
        self.action_logs()

    def _selection_changed(self) -> None:
        detail = self.query_one(RunDetail)
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
        # A queued run's row does not change when a worker says it cannot load it: look again.
        if cached is not None and cached[0] == job.updated_at and job.status != "queued":
            detail.show(detail_data(job, self.clock(), cached[1]))
            return
        if cached is not None:
            detail.show(detail_data(job, self.clock(), cached[1]))
        self._detail_key = job.id
        self._detail_dirty = True
        if not self._detail_busy:
            self._load_detail()

    async def _read_detail(self, key: str):
        store = await self.link.get()

        def read(conn):
            job = get_job(conn, key)
            recent = events_before(conn, key, None, 50) if job is not None and job.status == "queued" else []
            return job, checkpoints_for(conn, key), audit_for(conn, key), workspaces_for(conn, [key])[key], recent

        # One transaction through run_read, as the poll reads: on SQLite the console's
        # first screen makes no async engine (see Store.engine).
        return await store.run_read(read)

    @work(group="detail")
    async def _load_detail(self) -> None:
        self._detail_busy = True
        try:
            while self._detail_dirty and not self._closing:
                self._detail_dirty = False
                key = self._detail_key
                if key is None:
                    continue
                try:
                    job, cps, trail, wss, recent = await self.link.shielded(self._read_detail(key))
                except Exception as exc:  # shown in the banner by the next poll
                    log.info("reading detail of %s failed: %s", key[:8], exc)
                    continue
                if job is None or self._closing:
                    continue
                sections = detail_sections(cps, trail, wss, recent)
                self._sections[key] = (job.updated_at, sections)
                if len(self._sections) > 64:
                    self._sections.pop(next(iter(self._sections)))
                shown = self.jobs.get(key, job)
                if self.selected is not None and self.selected.id == key:
                    self.query_one(RunDetail).show(detail_data(shown, self.clock(), sections))
        finally:
            self._detail_busy = False

    # --- view actions ---------------------------------------------------------------

    def action_toggle_ended(self) -> None:
        self.show_ended = not self.show_ended
        self.say("showing every recent run, ended ones too" if self.show_ended else "showing active runs and those that ended lately")
        self._refresh_header()
        self.poll_now()

    def action_toggle_detail(self) -> None:
        detail = self.query_one(RunDetail)
        detail.display = not detail.display
        self._selection_changed()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

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
        box = self.query_one("#filter", Input)
        if box.value:
            box.value = ""
        box.display = False
        self.query_one(RunTable).focus()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.help_entries(), read_only=self.read_only))

    def action_logs(self) -> None:
        job = self.selected
        if job is None:
            self.say("no run selected", "warning")
            return
        self.app.push_screen(LogScreen(self.link, job, clock=self.clock, poll_interval=self.poll_interval))

    VIEW_HELP = {
        "logs": "the selected run's log (follows new lines)",
        "filter": "filter runs by flow, id, status or node",
        "toggle_ended": "show ended runs too (newest first), or hide them again",
        "toggle_detail": "show or hide the detail pane",
        "help": "this help",
        "quit": "quit the console",
        "clear_filter": "clear the filter",
    }

    def help_entries(self) -> list[tuple[str, str]]:
        """(key, what it does) for every binding that works here: read-only hides the acts."""
        entries: list[tuple[str, str]] = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            name = binding.action.removeprefix("app.")
            if self.check_action(name, ()) is False:
                continue
            key = binding.key_display or binding.key
            entries.append((key, self.ACT_HELP.get(name) or self.VIEW_HELP.get(name) or binding.description))
            if name == "logs":
                entries.append(("enter", self.VIEW_HELP["logs"]))
        entries.append(("ctrl+p", "command palette: every act and view by name"))
        return entries

    # --- acts ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ACTS and self.read_only:
            return False
        return True

    def palette_commands(self) -> list[tuple[str, str, str]]:
        """(name, help, action) for the command palette; no act when read-only."""
        job = self.selected
        run = f" {job.short_id}" if job and all(c in "0123456789abcdef" for c in job.short_id) else ""
        out: list[tuple[str, str, str]] = []
        if not self.read_only:
            names = {"stop": "Stop run", "resume": "Resume run", "cancel": "Cancel run", "cancel_keep": "Cancel run, keep workspaces", "approve": "Approve run"}
            for act in ACTS:
                out.append((names[act] + run, self.ACT_HELP[act], act))
        out += [
            ("Show logs" + run, "open the run's log; follows new lines", "logs"),
            ("Toggle ended runs", "show every recent run, or the active ones", "toggle_ended"),
            ("Toggle detail pane", "show or hide the selected run's detail", "toggle_detail"),
            ("Filter runs", "filter by flow, id, status or node", "filter"),
            ("Keys and statuses", "the help screen", "help"),
        ]
        return out

    def say(self, message: str, severity: str = "information") -> None:
        """Show what happened, in the words the CLI uses, as a notification and on the message line."""
        text = safe_lines(message)
        self.last_message = text
        style = {"error": "bold red", "warning": "yellow"}.get(severity, "")
        self.query_one("#message", Static).update(Text(text.split("\n")[0], style=style, no_wrap=True, overflow="ellipsis"))
        self.notify(text, severity=severity, markup=False, timeout=6 if severity != "error" else 10)  # type: ignore[arg-type]

    def _target(self) -> JobRecord | None:
        job = self.selected
        if job is None:
            self.say("no run selected", "warning")
        return job

    def action_stop(self) -> None:
        if job := self._target():
            self._act("stop", job.id)

    def action_resume(self) -> None:
        if job := self._target():
            self._act("resume", job.id)

    def action_approve(self) -> None:
        if job := self._target():
            self._act("approve", job.id)

    def action_cancel(self) -> None:
        if job := self._target():
            self._confirm_cancel(job.id, keep=False)

    def action_cancel_keep(self) -> None:
        if job := self._target():
            self._confirm_cancel(job.id, keep=True)

    @work(group="acts")
    async def _act(self, act: str, run_id: str, keep: bool = False) -> None:
        if self.read_only:
            return
        message, severity = await self.link.shielded(self._do_act(act, run_id, keep))
        if self._closing:
            return
        self.say(message, severity)
        self.poll_now()

    async def _do_act(self, act: str, run_id: str, keep: bool) -> tuple[str, str]:
        """One act through the runtime's control functions; the words to show and how loud."""
        try:
            store = await self.link.get()
            if act == "stop":
                res = await control.stop(store, run_id, actor=self.actor)
            elif act == "resume":
                res = await control.resume(store, run_id, actor=self.actor)
            elif act == "approve":
                res = await control.approve(store, run_id, actor=self.actor)
            elif act == "cancel":
                res = await control.cancel(store, run_id, keep=keep, actor=self.actor)
            else:
                raise AssertionError(act)
            message, severity = res.message, ("error" if res.code != control.DONE else "information" if res.changed else "warning")
            if res.changed and act in ("resume", "approve"):
                if await control.live_worker_count(store, self.config.lease_s) == 0:
                    message += "\n" + control.no_worker_hint(res.job.short_id if res.job else run_id[:8])
                    severity = "warning"
        except SwarmkitError as exc:
            message, severity = str(exc), "error"
        except Exception as exc:
            if not isinstance(exc, STORE_FAULTS + (StoreError,)):
                log.exception("%s failed", act)
            message, severity = f"could not {act.replace('_', ' ')} {run_id[:8]}: {problem_text(exc, self.link)}", "error"
        return message, severity

    @work(group="acts")
    async def _confirm_cancel(self, run_id: str, keep: bool) -> None:
        if self.read_only:
            return
        async def read():
            store = await self.link.get()
            async with store.read() as conn:
                return await conn.run_sync(get_job, run_id), (await conn.run_sync(workspaces_for, [run_id]))[run_id]

        try:
            job, wss = await self.link.shielded(read())
        except Exception as exc:
            self.say(f"could not cancel {run_id[:8]}: {problem_text(exc, self.link)}", "error")
            return
        if job is None:
            self.say(f"run {run_id[:8]} no longer exists in {self.link.display}", "error")
            return
        if job.status in TERMINAL_STATUSES:
            # Nothing to confirm: the runtime says why there is nothing to do.
            self._act("cancel", run_id, keep)
            return
        live = [w for w in wss if w.state != "destroyed"]
        sizes = await asyncio.to_thread(lambda: [dir_size(w.path) for w in live])
        now = self.clock()
        shown = job.display_status(now)
        body = Text()
        body.append(f"{job.short_id} ", style="bold")
        body.append(safe(job.flow, 60))
        body.append(f" is {shown}")
        if job.current_node and job.status in ("running", "stopped", "deferred", "lost"):
            body.append(f" at {safe(job.current_node, 40)} ({min(job.step + 1, job.steps)}/{job.steps})")
        body.append(".\n")
        if job.status == "running":
            body.append("Cancel ends it for good: its host interrupts the agent in flight now.\n")
        else:
            body.append("Cancel ends it for good, at once.\n")
        body.append("\nWorkspaces that will be ")
        body.append("KEPT" if keep else "DESTROYED", style="bold green" if keep else "bold red")
        body.append(":\n")
        if not live:
            body.append("  none (no agent has run yet, or they are already gone)\n", style="dim")
        for w, size in zip(live, sizes):
            body.append(f"  {safe(shown_path(w.path))}  ({human_size(size)}, {safe(w.state)})\n")
        choices = [Choice("cancel", "Cancel, keep workspaces" if keep else "Cancel and destroy", "warning" if keep else "error")]
        if job.status in ("running", "queued") and job.cancel_requested_at is None and job.stop_requested_at is None:
            body.append("\nSafer: ")
            body.append("Stop", style="bold")
            body.append(" parks it at the next agent boundary and keeps everything; it can be resumed later.")
            choices.append(Choice("stop", "Stop instead", "primary"))
        elif job.status == "running" and job.cancel_requested_at is None and job.stop_requested_at is not None:
            body.append(f"\nSafer: a stop is already requested (by {safe(job.stop_requested_by or '?', 40)}); waiting lets it park at the next agent boundary, keeping everything.")
        elif job.status in ("stopped", "deferred", "lost"):
            body.append(f"\nSafer: leave it {job.status}; it keeps everything and can be resumed later.")
        title = f"Cancel run {job.short_id}{' (keep workspaces)' if keep else ''}?"
        choice = await self.app.push_screen_wait(ConfirmDialog(title, body, choices, back_label="Back"))
        if choice == "cancel":
            self._act("cancel", run_id, keep)
        elif choice == "stop":
            self._act("stop", run_id)
        else:
            self.say(f"{job.short_id}: nothing done", "information")
