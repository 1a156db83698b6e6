"""A run's log: the last page at once, new lines as they come, older pages on demand."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static

from swarmkit.runtime.event_follower import FAST, EventFollower, FollowedBatch
from swarmkit.runtime.steps import step_words
from swarmkit.store import masked
from swarmkit.store.queries import count_events_between, events_before, find_event_before, get_job
from swarmkit.store.records import JobRecord
from swarmkit.widgets.log_tail import LogTail
from swarmkit.widgets.safe_text import safe
from swarmkit.widgets.status_look import status_text

from .run_views import log_line
from .store_link import StoreLink

log = logging.getLogger("swarmkit.console")

# The first screenful comes from one indexed read of the newest events,
# however long the log is; older pages are read as the reader scrolls up.
PAGE = 500
# New lines are read by runtime/event_follower.py: fast while they come, backing off to the poll interval.
FOLLOW_FAST = FAST
# A search pages older lines in until it finds a match, up to this many.
SEARCH_REACH = 100_000


class LogScreen(Screen):
    BINDINGS = [
        Binding("escape,q", "back", "Back", id="log.back"),
        # Priority, and the box focused at once: the keys read with `/` are the search's text (main_screen's filter).
        Binding("slash", "search", "Search", key_display="/", id="log.search", priority=True),
        Binding("n", "next_match", "Older match", id="log.next_match"),
        Binding("N", "previous_match", "Newer match", id="log.previous_match"),
    ]

    def __init__(self, link: StoreLink, job: JobRecord, *, clock: Callable[[], datetime], poll_interval: float) -> None:
        super().__init__()
        self.link = link
        self.job = job
        self.clock = clock
        self.poll_interval = poll_interval
        self.opened = False
        self.problem: str | None = None
        self.search_note = ""
        self._loading_older = False
        self._timer: Timer | None = None
        self._follower = EventFollower(job.id, slow=poll_interval)
        self._closing = False

    def compose(self) -> ComposeResult:
        yield Static(self._header_text(), id="log-header")
        yield LogTail(id="log")
        yield Static(id="log-status")
        yield Input(placeholder="search the log; enter finds the previous match, escape closes", id="log-search")
        yield Footer()

    @property
    def tail(self) -> LogTail:
        return self.query_one(LogTail)

    def on_mount(self) -> None:
        self.query_one("#log-search").display = False
        self.tail.focus()
        self._open()

    def on_unmount(self) -> None:
        self._closing = True
        if self._timer is not None:
            self._timer.stop()

    def _header_text(self) -> Text:
        job = self.job
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("log of ", style="dim")
        out.append(f"{job.short_id} ", style="bold")
        out.append(safe(job.flow, 60) + "  ")
        out.append_text(status_text(job.display_status(self.clock())))
        if job.current_node:
            out.append("  at " + safe(step_words(job.step, job.steps, job.current_node, 40)))
        if self.problem:
            out.append("   ⚠ " + safe(self.problem), style="bold red")
        return out

    def _status_text(self) -> Text:
        tail = self.tail
        out = Text(no_wrap=True, overflow="ellipsis")
        if not self.opened:
            out.append("reading the newest lines…", style="dim")
            return out
        if tail.follow:
            out.append("● following", style="bold green")
        else:
            out.append("‖ paused", style="bold yellow")
            out.append(f" — {tail.waiting:,} new line{'s' if tail.waiting != 1 else ''} below; f or End to follow" if tail.waiting else " — f or End to follow")
        out.append(f"   {len(tail.lines):,} lines loaded", style="dim")
        out.append(" · older lines above (scroll up to load)" if tail.more_older else " · from the start of the run", style="dim")
        if self.search_note:
            out.append("   " + safe(self.search_note), style="bold")
        return out

    def _refresh_status(self) -> None:
        # One line each (CSS height: 1): no layout of the screen for a new count,
        # many times a second while a fast log is followed (bench/logs.py).
        self.query_one("#log-status", Static).update(self._status_text(), layout=False)

    # --- reading ------------------------------------------------------------------

    @work(group="log-open")
    async def _open(self) -> None:
        job_id = self.job.id

        async def read():
            store = await self.link.get()
            return await store.run_read(lambda conn: (events_before(conn, job_id, None, PAGE), get_job(conn, job_id)))

        try:
            events, job = await self.link.shielded(read())
        except Exception as exc:
            if self._closing:
                return
            self.problem = masked(f"cannot read the log: {exc}")
            self.query_one("#log-header", Static).update(self._header_text(), layout=False)
            self._timer = self.set_timer(max(self.poll_interval, 1.0), self._open)
            return
        if self._closing:
            return
        self.problem = None
        if job is not None:
            self.job = job
        self.tail.reset([log_line(ev) for ev in events], more_older=len(events) == PAGE)
        self.opened = True
        self.query_one("#log-header", Static).update(self._header_text(), layout=False)
        self._refresh_status()
        self._follower = EventFollower(job_id, self.tail.last_id or 0, slow=self.poll_interval)
        self._timer = self.set_timer(FOLLOW_FAST, self._follow)

    @work(exclusive=True, group="log-follow")
    async def _follow(self) -> None:
        # The one event follower (runtime/event_follower.py), as `swarmkit logs -f` reads.
        follower = self._follower
        follower.last_id = self.tail.last_id or follower.last_id

        async def read():
            return await follower.poll(await self.link.get())

        got: FollowedBatch | None
        try:
            got = await self.link.shielded(read())
            self.problem = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.problem = masked(f"store unavailable: {exc}")
            got = None
        if self._closing:
            return
        if got is not None and got.events:
            self.tail.append([log_line(ev) for ev in got.events])
        if got is not None and got.job is not None:
            self.job = got.job
        self.query_one("#log-header", Static).update(self._header_text(), layout=False)
        self._refresh_status()
        if not self._closing:
            self._timer = self.set_timer(follower.next_delay(got), self._follow)

    @on(LogTail.NeedOlder)
    def _need_older(self, event: LogTail.NeedOlder) -> None:
        if not self._loading_older:
            self._older(event.before_id)

    @work(group="log-older")
    async def _older(self, before_id: int) -> None:
        self._loading_older = True
        async def read():
            store = await self.link.get()
            async with store.read() as conn:
                return await conn.run_sync(events_before, self.job.id, before_id, PAGE)

        try:
            events = await self.link.shielded(read())
            if self._closing:
                return
            self.tail.prepend([log_line(ev) for ev in events], more_older=len(events) == PAGE)
        except Exception as exc:
            self.notify(safe(masked(f"could not read older lines: {exc}")), severity="error", markup=False)
        finally:
            self._loading_older = False
        self._refresh_status()

    @on(LogTail.FollowChanged)
    def _follow_changed(self, event: LogTail.FollowChanged) -> None:
        self._refresh_status()

    # --- search -------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "search" and isinstance(self.focused, Input):
            return False  # a `/` typed into the box is text
        return True

    def action_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.display = True
        self.set_focus(box)

    @on(Input.Submitted, "#log-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        term = event.value.strip()
        event.input.display = False
        self.tail.focus()
        if not term:
            self.tail.clear_search()
            self.search_note = ""
            self._refresh_status()
            return
        self._find(term, older=True)

    def action_next_match(self) -> None:
        if self.tail.search_term:
            self._find(self.tail.search_term, older=True)

    def action_previous_match(self) -> None:
        if self.tail.search_term:
            self._find(self.tail.search_term, older=False)

    @work(exclusive=True, group="log-search")
    async def _find(self, term: str, older: bool) -> None:
        tail = self.tail
        if tail.search(term, older=older):
            self.search_note = f"match for {term!r}"
            self._refresh_status()
            return
        if older and tail.more_older and tail.first_id is not None:
            self.search_note = f"searching older lines for {term!r}…"
            self._refresh_status()
            first_id = tail.first_id

            async def read():
                store = await self.link.get()
                async with store.read() as conn:
                    found = await conn.run_sync(find_event_before, self.job.id, term, first_id)
                    if found is None:
                        return None, [], False
                    between = await conn.run_sync(count_events_between, self.job.id, found.id, first_id, SEARCH_REACH + 1)
                if between > SEARCH_REACH:
                    return found, [], True
                # Everything from the match to what is loaded, in short read
                # transactions; never one long one.
                pages: list = []
                before, full = first_id, False
                while True:
                    async with store.read() as conn:
                        page = await conn.run_sync(events_before, self.job.id, before, 2000)
                    full = len(page) == 2000
                    if not page:
                        break
                    pages[:0] = page
                    before = page[0].id
                    if page[0].id <= found.id:
                        break
                return found, pages, full

            try:
                found, older_events, more = await self.link.shielded(read())
                if self._closing:
                    return
                if older_events:
                    tail.prepend([log_line(ev) for ev in older_events], more_older=more)
            except Exception as exc:
                self.search_note = masked(f"search failed: {exc}")
                self._refresh_status()
                return
            if found is None:
                self.search_note = f"no match for {term!r} in the whole log"
            elif tail.index_of(found.id) is None:
                self.search_note = f"the next match for {term!r} is more than {SEARCH_REACH:,} lines back; `swarmkit logs {self.job.short_id}` reads it all"
            elif tail.search(term, older=True):
                self.search_note = f"match for {term!r}"
            self._refresh_status()
            return
        self.search_note = f"no {'older' if older else 'newer'} match for {term!r}"
        self._refresh_status()

    def action_back(self) -> None:
        box = self.query_one("#log-search", Input)
        if box.display and box.has_focus:
            box.display = False
            self.tail.focus()
            return
        self.dismiss()
