"""The console outlives its store: gone, unreachable, back again. It keeps the last data and says how old it is."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from console_helpers import first_poll, init_store, status_cell, submit, until

from swarmkit.console.app import make_app
from swarmkit.runtime import control
from swarmkit.store import Store
from tests.conftest import PG_BASE, write_flow


def quick(ws: Path) -> Path:
    return write_flow(ws, "quick", """
        name = "quick"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)


async def pg_exec(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_BASE.replace("postgresql+asyncpg://", "postgresql://"), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def take_away(store_url: str) -> tuple:
    if store_url.startswith("sqlite"):
        db = Path(store_url.removeprefix("sqlite:///"))
        os.rename(db, str(db) + ".away")
        return ("sqlite", db)
    schema = parse_qs(urlparse(store_url).query)["schema"][0]
    await pg_exec(f'ALTER SCHEMA "{schema}" RENAME TO "{schema}_away"')
    return ("pg", schema)


async def bring_back(token: tuple) -> None:
    kind, what = token
    if kind == "sqlite":
        os.rename(str(what) + ".away", what)
    else:
        await pg_exec(f'ALTER SCHEMA "{what}_away" RENAME TO "{what}"')


async def test_store_goes_away_and_comes_back(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    runs = await submit(store_url, workspace, quick(workspace), count=2)
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        await until(pilot, lambda: status_cell(app, runs[0]) == "queued", what="the runs")
        banner = screen.query_one("#banner")
        assert not banner.display
        token = await take_away(store_url)
        try:
            await until(pilot, lambda: screen.problem is not None and banner.display, what="the banner")
            words = str(banner.render())
            assert "store unavailable" in words and "showing the data read at" in words and "retrying" in words
            # The last data stays, and the header says it is stale.
            assert status_cell(app, runs[0]) == "queued" and status_cell(app, runs[1]) == "queued"
            assert screen.query_one("#header").summary.stale
            failures = screen.failures
            await until(pilot, lambda: screen.failures > failures + 1, what="retries")
            # Acts say why they cannot be done, and nothing crashes.
            screen.query_one("RunTable").select(runs[0])
            await pilot.press("s")
            await until(pilot, lambda: screen.last_message.startswith(f"could not stop {runs[0][:8]}"), what="the refusal")
        finally:
            await bring_back(token)
        await until(pilot, lambda: screen.problem is None and not banner.display, timeout=20, what="recovery")
        store = await Store.open(store_url, workspace)
        try:
            await control.stop(store, runs[1], actor="tester@ci")
        finally:
            await store.close()
        await until(pilot, lambda: status_cell(app, runs[1]) == "stopped", what="live data again")
        assert app.is_running


async def test_unreachable_store_at_start(workspace, fast_env):
    for url in ("postgresql://nobody@127.0.0.1:1/nothing", str(workspace / "no-such" / "store.db")):
        app = make_app(url, workspace, poll_interval=0.1)
        async with app.run_test(size=(120, 30)) as pilot:
            screen = await first_poll(pilot)
            await until(pilot, lambda: screen.failures >= 2, what="a retry")
            words = str(screen.query_one("#banner").render())
            assert "store unavailable" in words and "no data read yet" in words
            assert ("cannot reach" in words) if url.startswith("postgresql") else ("no store at" in words)
            await pilot.press("s")  # no run, no crash
            assert app.is_running
        assert not (workspace / "no-such").exists()  # the console never creates a store
