"""Shared helpers for the console tests: real stores, a real worker, and waiting on a running app.

(No conftest here: the tests' conftest is `tests/conftest.py`, imported as `conftest`.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, update

from swarmkit.runtime import control
from swarmkit.runtime.flow import load_flow
from swarmkit.store import Store
from swarmkit.store.clock import store_now
from swarmkit.store.models import events, jobs
from swarmkit.store.queries import get_job
from swarmkit.store.records import JobRecord
from swarmkit.widgets.run_table import RunTable
from tests.conftest import Cli, write_flow

# Untrusted text: markup that would be live, markup that would crash, and
# escape sequences (OSC title, OSC 8 link, CSI device report, C1 CSI, bidi).
HOSTILE_FLOW = "[@click=app.quit]x[/] [link=https://x]y[/link] [/] [TODO] \x1b]0;pwned-title\x07 \x9b6n"
HOSTILE_NODE = "[b]node[/b] \x1b[6n [/]"
HOSTILE_LINES = [
    "[@click=app.quit]click me[/]",
    "[link=https://evil.example/]y[/link]",
    "[/]",
    "[TODO] fix the \x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\ now",
    "csi \x1b[6n and c1 \x9b6n and bell \x07 and bidi \u202eevil",
]
HOSTILE_ACTOR = "[red]mallory[/red]\x1b[2J"


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group twice (a worker drains on the first), then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def start_worker(store_url: str, workspace: Path, fast_env):
    """Starts `swarmkit worker` subprocesses on the test's store; all are killed at teardown."""
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []

    def start(concurrency: int = 8) -> subprocess.Popen:
        # Its lines go to a file, shown below with the test's output: a run that never reaches the status
        # a test waits for is told apart from a slow one there (a lapsed lease says so, and why).
        logs.append(workspace.parent / f"worker-{len(logs)}.log")
        proc = Cli(store_url, workspace).start("worker", "--concurrency", str(concurrency), str(workspace), log=logs[-1])
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        kill_group(proc)
    for log in logs:
        print(f"--- {log.name} (the end):\n{log.read_text(errors='replace')[-3000:]}")


async def init_store(store_url: str, workspace: Path) -> None:
    store = await Store.open(store_url, workspace)
    await store.close()


async def submit(store_url: str, workspace: Path, flow_path: Path, inputs: dict[str, str] | None = None, count: int = 1) -> list[str]:
    store = await Store.open(store_url, workspace)
    try:
        flow = load_flow(flow_path)
        return [(await control.submit(store, flow, inputs or {}, actor="tester@ci")).id for _ in range(count)]
    finally:
        await store.close()


async def set_rows(store_url: str, workspace: Path, values: dict[str, dict[str, Any]]) -> None:
    """Write these column values on these runs' rows, in one transaction: a run put in a state no flow reaches quickly."""
    store = await Store.open(store_url, workspace)
    try:
        async with store.write() as conn:
            for run, row in values.items():
                await conn.execute(update(jobs).where(jobs.c.id == run).values(**row))
    finally:
        await store.close()


async def job_of(store_url: str, workspace: Path, run_id: str) -> JobRecord | None:
    store = await Store.open(store_url, workspace)
    try:
        async with store.read() as conn:
            return await conn.run_sync(get_job, run_id)
    finally:
        await store.close()


async def add_events(store_url: str, workspace: Path, run_id: str, lines: list[str], node: str = "n", kind: str = "log") -> None:
    store = await Store.open(store_url, workspace)
    try:
        async with store.write() as conn:
            now = store_now()
            await conn.execute(insert(events), [dict(job_id=run_id, at=now, kind=kind, node=node, step=0, text=t) for t in lines])
    finally:
        await store.close()


async def add_hostile_run(store_url: str, workspace: Path) -> str:
    """A stopped run whose every piece of text is hostile; returns its id."""
    flow_path = write_flow(workspace, "plain", """
        name = "plain"
        [[agents]]
        name = "a"
        command = "true"
    """)
    (run_id,) = await submit(store_url, workspace, flow_path)
    store = await Store.open(store_url, workspace)
    try:
        now = store_now()
        async with store.write() as conn:
            await conn.execute(
                update(jobs).where(jobs.c.id == run_id).values(
                    flow=HOSTILE_FLOW, status="stopped", current_node=HOSTILE_NODE, step=0, steps=1,
                    stop_requested_at=now, stop_requested_by=HOSTILE_ACTOR, error="[bold]boom[/] \x1b[31mred",
                    inputs=json.dumps({"k": "[/]\x1b[6n"}), updated_at=now,
                )
            )
            await conn.execute(insert(events), [dict(job_id=run_id, at=now, kind="log", node=HOSTILE_NODE, step=0, text=t) for t in HOSTILE_LINES])
            await conn.execute(insert(events).values(job_id=run_id, at=now, kind="node.started", node=HOSTILE_NODE, step=0, text="1/1 " + HOSTILE_NODE))
    finally:
        await store.close()
    return run_id


def status_cell(app, run_id: str) -> str | None:
    """The status word a row shows (from its rendered cell), or None when the row is not shown."""
    table = main_screen(app).query_one(RunTable)
    if table.row_for(run_id) is None:
        return None
    return table.get_cell(run_id, "status").plain.split(" ", 1)[-1]


async def until(pilot, predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Let the app run until `predicate()` holds; the ceiling has room for a loaded machine (a worker's
    stop or cancel, its graces included, took over 20 s on four test processes beside two CPU hogs)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.05)


async def screen_up(pilot, kind: type, what: str) -> Any:
    """The app's screen once it is a `kind` with all its children mounted. A pushed screen is the
    app's screen before its children are: a query in between found a dialog's body without its
    buttons (CI, 2026-12-05)."""
    app = pilot.app
    return await until(pilot, lambda: isinstance(app.screen, kind) and app.screen.is_mounted and app.screen, what=what)


async def dialog_up(pilot, what: str = "the dialog") -> Any:
    """The confirmation on screen, buttons and all."""
    from swarmkit.widgets.confirm_dialog import ConfirmDialog

    return await screen_up(pilot, ConfirmDialog, what)


def main_screen(app):
    from swarmkit.console.main_screen import MainScreen

    for screen in app.screen_stack:
        if isinstance(screen, MainScreen):
            return screen
    raise AssertionError("no main screen")


async def first_poll(pilot, timeout: float = 20.0):
    await until(pilot, lambda: getattr(pilot.app.screen, "polls", 0) >= 1, timeout, "the first poll")
    return pilot.app.screen
