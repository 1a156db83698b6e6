"""The log view: the last page at once however long the log, follow, pause with a count, older pages, search."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from console_helpers import add_events, first_poll, init_store, screen_up, submit, until

from swarmkit.console.app import make_app
from swarmkit.console.log_screen import PAGE, LogScreen
from swarmkit.widgets.log_tail import LogTail
from swarmkit.widgets.run_table import RunTable
from tests.conftest import write_flow


def quick(ws: Path) -> Path:
    return write_flow(ws, "quick", """
        name = "quick"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)


def fill_events(db: Path, run_id: str, count: int) -> None:
    """`count` events straight into SQLite, made by SQLite itself (a writer would take minutes)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute(
            """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :count - 1)
            INSERT INTO events (job_id, at, kind, node, step, text)
            SELECT :run, '2025-01-01 00:00:00.000000',
                   CASE WHEN i % 1000 = 0 THEN 'node.started' ELSE 'log' END,
                   'node-' || (i / 1000), i / 1000,
                   CASE WHEN i = 0 THEN 'needle at the very start'
                        WHEN i = :count - 3000 THEN 'needle three thousand back'
                        ELSE 'line ' || i END
            FROM n
            """,
            {"count": count, "run": run_id},
        )
        conn.commit()
    finally:
        conn.close()


async def open_log(pilot, run_id: str) -> LogScreen:
    screen = await first_poll(pilot)
    await until(pilot, lambda: screen.query_one(RunTable).row_for(run_id), what="the run's row")
    assert screen.query_one(RunTable).select(run_id)
    await pilot.press("l")
    log_screen = await screen_up(pilot, LogScreen, "the log screen")
    return log_screen


async def test_a_million_events_open_at_once_and_page_on_demand(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, quick(workspace))
    fill_events(Path(sqlite_url.removeprefix("sqlite:///")), run, 1_000_000)
    app = make_app(sqlite_url, workspace, poll_interval=0.2)
    async with app.run_test(size=(140, 40)) as pilot:
        log_screen = await open_log(pilot, run)
        # No bound on how soon (a loaded 2-CPU box took 3.9 s once, typically well under 0.5 s: the
        # time is bench/'s business); what is tested is that one page is read, not a million lines.
        await until(pilot, lambda: log_screen.opened, timeout=60, what="the first page")
        tail = log_screen.query_one(LogTail)
        assert len(tail.lines) == PAGE and tail.more_older and tail.follow
        assert tail.lines[-1].text == "line 999999"
        # Older lines are read only when asked for.
        await pilot.press("home")
        await until(pilot, lambda: len(tail.lines) == 2 * PAGE, what="an older page")
        assert tail.lines[0].id < tail.lines[PAGE].id
        # Search reaches back into the store, paging in what lies between.
        await pilot.press("slash")
        await pilot.press(*"three thousand")
        await pilot.press("enter")
        await until(pilot, lambda: tail.current_match is not None, what="the match")
        assert tail.lines[tail.current_match].text == "needle three thousand back"
        assert 3000 <= len(tail.lines) < 10_000
        # Too far back to page in: said, not done.
        await pilot.press("slash")
        await pilot.press(*"very start")
        await pilot.press("enter")
        await until(pilot, lambda: "more than" in log_screen.search_note, timeout=30, what="the search note")
        assert len(tail.lines) < 200_000
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LogScreen), what="back to the runs")


async def test_follow_pause_count_and_resume(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    (run,) = await submit(store_url, workspace, quick(workspace))
    await add_events(store_url, workspace, run, [f"early {i}" for i in range(80)])
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(120, 30)) as pilot:
        log_screen = await open_log(pilot, run)
        await until(pilot, lambda: log_screen.opened, what="the log")
        tail = log_screen.query_one(LogTail)
        assert not tail.more_older and len(tail.lines) == 81  # submitted + 80 lines
        await add_events(store_url, workspace, run, ["new 1", "new 2"])
        await until(pilot, lambda: tail.lines[-1].text == "new 2", what="followed lines")
        assert tail.is_vertical_scroll_end
        await pilot.press("pageup")
        await until(pilot, lambda: not tail.follow, what="paused")
        await add_events(store_url, workspace, run, [f"later {i}" for i in range(7)])
        await until(pilot, lambda: tail.waiting == 7, what="the waiting count")
        status = str(log_screen.query_one("#log-status").render())
        assert "paused" in status and "7 new lines below" in status
        assert not tail.is_vertical_scroll_end
        await pilot.press("f")
        await until(pilot, lambda: tail.follow and tail.is_vertical_scroll_end, what="following again")
        assert "following" in str(log_screen.query_one("#log-status").render())
        # Node boundaries are marked lines of their own.
        await add_events(store_url, workspace, run, ["2/2 second"], node="second", kind="node.started")
        await until(pilot, lambda: tail.lines[-1].kind == "node", what="the boundary")
