"""Snapshots of the console on a fixed store with a frozen clock (SQLite): every status, the dialogs, the log, the failures.

Update the baselines with `pytest tests/console/test_console_snapshots.py --snapshot-update` and look at them.
"""

from __future__ import annotations

import pytest

from swarmkit.console.app import make_app
from swarmkit.console.help_screen import HelpScreen
from swarmkit.console.log_screen import LogScreen
from swarmkit.store import Store
from swarmkit.widgets.confirm_dialog import ConfirmDialog
from swarmkit.widgets.run_detail import RunDetail
from swarmkit.widgets.run_table import RunTable
from tests.sample_store import FROZEN_NOW, build_sample_store, run_id

SIZE = (150, 42)


@pytest.fixture(scope="module")
def sample_ws(tmp_path_factory):
    ws = tmp_path_factory.mktemp("sample") / "ws"
    ws.mkdir()
    build_sample_store(ws, FROZEN_NOW)
    return ws


@pytest.fixture
def in_sample(sample_ws, monkeypatch):
    # Paths are shown relative to where the console runs: the same in every run of the test.
    monkeypatch.chdir(sample_ws)
    return sample_ws


def frozen_app(store, ws, **kw):
    # One poll only (the interval is long) and no lost-marking: the store stays as built.
    return make_app(store, ws, clock=lambda: FROZEN_NOW, poll_interval=600, detect_lost=False, lease_s=15, **kw)


async def settle(pilot, select: str | None = None) -> None:
    app = pilot.app
    for _ in range(400):
        screen = app.screen
        if getattr(screen, "polls", 0) >= 1:
            break
        await pilot.pause(0.02)
    screen = app.screen
    # The stopping run's ETA is read off the poll; until it is back its node cell is shorter.
    table = screen.query_one(RunTable)
    for _ in range(400):
        if table.row_for(run_id("stopping")) is None or "stops in" in table.get_cell(run_id("stopping"), "node").plain:
            break
        await pilot.pause(0.02)
    if select is not None:
        assert screen.query_one(RunTable).select(run_id(select))
    if screen.jobs:
        for _ in range(400):
            data = screen.query_one(RunDetail).data
            if data is not None and data.sections and (select is None or run_id(select)[:8] in data.title):
                break
            await pilot.pause(0.02)
    await pilot.pause(0.1)


async def wait_screen(pilot, kind, ready=lambda s: True) -> None:
    for _ in range(400):
        if isinstance(pilot.app.screen, kind) and ready(pilot.app.screen):
            break
        await pilot.pause(0.02)
    await pilot.pause(0.2)


def test_main_table_every_status(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="running")

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_cancel_dialog(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="running")
        await pilot.press("c")
        await wait_screen(pilot, ConfirmDialog)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


# --- acts: marks and the confirmations ---------------------------------------------


def test_marks(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="running")
        await pilot.press("space")  # marks it and moves down
        assert pilot.app.screen.query_one(RunTable).select(run_id("stopped"))
        await pilot.press("space")
        assert pilot.app.screen.query_one(RunTable).select(run_id("deferred"))
        await pilot.pause(0.1)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_marked_runs_cancel_dialog(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="running")
        await pilot.press("space")
        assert pilot.app.screen.query_one(RunTable).select(run_id("stopped"))
        await pilot.press("space", "c")
        await wait_screen(pilot, ConfirmDialog)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_approve_dialog(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="deferred")
        await pilot.press("a")
        await wait_screen(pilot, ConfirmDialog)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_log_view(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="running")
        await pilot.press("l")
        await wait_screen(pilot, LogScreen, lambda s: s.opened)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_help(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await wait_screen(pilot, HelpScreen)

    assert snap_compare(frozen_app(None, in_sample), terminal_size=SIZE, run_before=run_before)


def test_read_only(snap_compare, in_sample):
    async def run_before(pilot):
        await settle(pilot, select="deferred")
        await pilot.press("s", "c")  # nothing happens: no act in a read-only console, and it says why

    assert snap_compare(frozen_app(None, in_sample, read_only=True), terminal_size=SIZE, run_before=run_before)


def test_empty_store(snap_compare, tmp_path, monkeypatch):
    import asyncio

    ws = tmp_path / "empty"
    ws.mkdir()

    async def make() -> None:
        store = await Store.open(None, ws)
        await store.close()

    asyncio.run(make())
    monkeypatch.chdir(ws)

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(frozen_app(None, ws), terminal_size=SIZE, run_before=run_before)


def test_store_unreachable(snap_compare, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    async def run_before(pilot):
        await settle(pilot)

    assert snap_compare(frozen_app("/nonexistent-swarmkit/store.db", tmp_path), terminal_size=SIZE, run_before=run_before)


# --- the look: terminal sizes, a light theme, cost and stop ETA ------------------------


def test_small_terminal_80x24(snap_compare, in_sample):
    """A dozen rows and more, the detail pane hidden, every essential key in the footer."""

    async def run_before(pilot):
        await settle(pilot, select="stopping")

    assert snap_compare(frozen_app(None, in_sample), terminal_size=(80, 24), run_before=run_before)


def test_light_theme(snap_compare, in_sample):
    """textual-light: every status readable (stopping was a pale yellow on white)."""

    async def run_before(pilot):
        await settle(pilot, select="stalled")

    assert snap_compare(frozen_app(None, in_sample, theme="textual-light"), terminal_size=SIZE, run_before=run_before)


def test_burn_rate_and_stop_eta_at_200x60(snap_compare, in_sample):
    """BURN per running row and in the header; the stopping row's node time and "stops in ~30s"."""

    async def run_before(pilot):
        await settle(pilot, select="stopping")

    assert snap_compare(frozen_app(None, in_sample), terminal_size=(200, 60), run_before=run_before)


def test_a_table_longer_than_its_view_draws_its_scrollbar(snap_compare, in_sample):
    """A short terminal: the rows overflow, and the table's own scrollbar (widgets/scroll_bar.py) shows
    how many are in view and where, its thumb at the top; the columns end before it."""

    async def run_before(pilot):
        await settle(pilot, select="running")

    assert snap_compare(frozen_app(None, in_sample), terminal_size=(150, 16), run_before=run_before)
