"""The console's hold on its store: opened inside the app's loop, dropped after a fault, reopened on the next try."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from swarmkit.runtime.settings import application_name
from swarmkit.store.lite import LiteStore, lite_location
from swarmkit.store.lite import SqliteFile as _SqliteFile
from swarmkit.store.store_errors import StoreError
from swarmkit.store.store_location import StoreLocation, resolve_store

from .run_views import shown_store

if TYPE_CHECKING:
    from swarmkit.store import Store

T = TypeVar("T")
# What the poller reads through: the first poll's lite store, or the store itself.
PollStore: TypeAlias = "Store | LiteStore"


class StoreLink:
    """Opens the store lazily and reopens it after a fault.

    The engine is made on the loop that first needs it (each Textual test has
    its own loop) and disposed by `close()` on unmount. A console never
    creates a SQLite store: a mistyped path says "no store" instead of showing
    a brand-new empty one.

    On a plain SQLite file the polls read through a lite store (`reader()`,
    store/lite.py: sqlite3 alone, its statements compiled ahead). SQLAlchemy,
    a large part of the console's start-up, loads after the first frame, in a
    thread, while the table is already on screen (issue 12); and a poll each
    second spends no SQLAlchemy execution on its dozen statements. Acts, the
    detail pane, the logs and a filtered poll use the full store (`get()`).
    """

    def __init__(self, store: str | None, workspace: str | os.PathLike | None):
        self._where = (store, workspace)
        # A plain SQLite file is found without SQLAlchemy (its URL type loads all of it).
        self._lite_loc = lite_location(store, workspace)
        self.loc: StoreLocation = self._lite_loc or resolve_store(store, workspace)
        self._store: Store | None = None
        self._lite: LiteStore | None = None
        self._lite_id: tuple[int, int] | None = None
        self._opening = asyncio.Lock()
        # Set by an owner that draws: SQLAlchemy loads only once the lite store's rows are on
        # screen (it costs the loop nothing then; before, it would share the GIL with the first frame).
        self.first_frame: asyncio.Event | None = None
        # The schema is checked (and migrated) at the first open only; a
        # reopen after a fault must not recreate a store someone removed.
        self._checked = False
        self._file_id: tuple[int, int] | None = None
        self._tasks: set[asyncio.Task] = set()
        self._closed = False
        # Set at each open: a read-only store read without its WAL says so in the header.
        self.stale_warning: str | None = None

    @property
    def display(self) -> str:
        return shown_store(self.loc)

    @property
    def sqlite_path(self) -> Path | None:
        return Path(self.loc.url.database) if self.loc.is_sqlite and self.loc.url.database else None

    def _stat(self) -> tuple[int, int]:
        path = self.sqlite_path
        assert path is not None
        try:
            st = os.stat(path)
        except FileNotFoundError:
            gone = " (the file is gone)" if self._checked else ""
            raise StoreError(f"no store at {path}{gone}") from None
        except OSError as exc:
            raise StoreError(f"cannot reach the store {path}: {exc.strerror or exc}") from None
        return st.st_dev, st.st_ino

    async def reader(self) -> PollStore:
        """The store an unfiltered poll reads through: a lite one on a plain SQLite file, kept
        open while the file is the same one; else `get()`."""
        if self._lite_loc is None:
            return await self.get()
        if self._closed:
            raise StoreError("the console is closing")
        if self._lite is not None:
            try:
                same = self._stat() == self._lite_id
            except StoreError:
                await self._drop_lite()
                raise
            if same:
                return self._lite
            # Replaced under us: the open connection still reads the old file.
            await self._drop_lite()
        self._stat()
        lite = await LiteStore.open(self._lite_loc)
        try:
            self._lite_id = self._stat()
        except BaseException:
            await lite.close()
            raise
        self.stale_warning = lite.loc.stale_warning
        self._lite = lite
        return lite

    async def _drop_lite(self) -> None:
        lite, self._lite = self._lite, None
        if lite is not None:
            await lite.close()

    async def get(self) -> Store:
        async with self._opening:  # a poll and an act asking at once open one store, not two
            return await self._get()

    async def _get(self) -> Store:
        if self._lite is not None and self.first_frame is not None:
            await self.first_frame.wait()
        if self._closed:
            raise StoreError("the console is closing")
        if isinstance(self.loc.url, _SqliteFile):
            # SQLAlchemy, in a thread: the loop goes on drawing and reading keys while it loads.
            await asyncio.to_thread(import_module, "swarmkit.store.store")
            if self._closed:
                raise StoreError("the console is closing")
            self.loc = resolve_store(*self._where)
        if self._store is not None and self.sqlite_path is not None:
            try:
                same = self._stat() == self._file_id
            except StoreError:
                await self.drop()
                raise
            if not same:
                # Replaced under us: pooled connections still read the old
                # file, which would show stale data as if it were live.
                await self.drop()
        if self._store is None:
            if self.sqlite_path is not None:
                self._stat()
            from swarmkit.store import Store  # late: SQLAlchemy; the first frame reads through the lite store

            # One connection on PostgreSQL: polls and acts take turns on it.
            store = await Store.open(loc=self.loc, create=False, upgrade=False, migrate=not self._checked, application_name=application_name("console"))
            self._checked = True
            self._file_id = self._stat() if self.sqlite_path is not None else None
            self.stale_warning = store.loc.stale_warning
            self._store = store
        return self._store

    async def shielded(self, work: Awaitable[T]) -> T:
        """Run store work so that cancelling the caller never cancels it half-way.

        Textual cancels a screen's workers when it goes away. A database call
        cancelled mid-flight leaves its connection to be torn down by a task
        that can outlive the loop; instead the work finishes, and `close()`
        waits for it before disposing of the engine.
        """
        if self._closed:
            raise StoreError("the console is closing")
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return await asyncio.shield(task)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a caller that went away does not want it

    async def drop(self) -> None:
        await self._drop_lite()
        store, self._store = self._store, None
        if store is not None:
            try:
                await store.close()
            except Exception:  # a broken engine still lets go of its pool
                pass

    async def close(self) -> None:
        self._closed = True
        if self.first_frame is not None:
            self.first_frame.set()  # nothing waits for a frame that will not come
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=15)
        await self.drop()
