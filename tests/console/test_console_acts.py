"""Each key does what it says, on runs hosted by a real worker process, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from console_helpers import (
    dialog_up,
    first_poll,
    init_store,
    job_of,
    start_worker,  # noqa: F401  (a fixture)
    status_cell,
    submit,
    until,
)

from swarmkit.console.app import make_app
from swarmkit.store import Store
from swarmkit.store.queries import workspaces_for
from swarmkit.widgets.confirm_dialog import ConfirmDialog
from swarmkit.widgets.run_table import RunTable
from tests.conftest import ALSO_PGBOUNCER, hold, release, write_flow


def flows(ws: Path) -> dict[str, Path]:
    return {
        # Its first node waits for the test (release): under load, a node of 2.5 s ended between two
        # polls of the console, which never saw "stopping" (CI, 2026-12-05).
        "stopper": write_flow(ws, "stopper", f"""
            name = "stopper"
            [[agents]]
            name = "first"
            command = "echo first; {hold(ws / 'gates', 'first')}"
            [[agents]]
            name = "second"
            command = "echo second"
        """),
        # Works until it is cancelled (its gate is never released): a `sleep 30` ended on its own, completed,
        # before a loaded CI's test reached its cancel (CI, 2026-12-07).
        "canceller": write_flow(ws, "canceller", f"""
            name = "canceller"
            [[agents]]
            name = "work"
            command = "echo data > out.txt; echo working; {hold(ws / 'gates', 'never')}"
        """),
        "gated": write_flow(ws, "gated", """
            name = "gated"
            [[agents]]
            name = "build"
            command = "echo built"
            [[agents]]
            name = "ship"
            approve = true
            command = "echo shipped"
        """),
        "quick": write_flow(ws, "quick", """
            name = "quick"
            [[agents]]
            name = "hi"
            command = "echo hi"
        """),
    }


async def workspace_states(store_url: str, ws: Path, run_id: str) -> list[str]:
    store = await Store.open(store_url, ws)
    try:
        async with store.read() as conn:
            return [w.state for w in (await conn.run_sync(workspaces_for, [run_id]))[run_id]]
    finally:
        await store.close()


@ALSO_PGBOUNCER
async def test_every_key_acts_on_its_run(store_url, workspace, start_worker):
    f = flows(workspace)
    await init_store(store_url, workspace)
    (stopper,) = await submit(store_url, workspace, f["stopper"])
    cancel_destroy, cancel_keep = await submit(store_url, workspace, f["canceller"], count=2)
    (gated,) = await submit(store_url, workspace, f["gated"])
    (quick,) = await submit(store_url, workspace, f["quick"])
    start_worker(8)
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)

        # s: running -> stopping -> stopped, then r: -> queued or running.
        await until(pilot, lambda: (j := screen.jobs.get(stopper)) and j.status == "running" and j.current_node == "first", what="stopper in its first node")
        assert table.select(stopper)
        await pilot.press("s")
        await until(pilot, lambda: status_cell(app, stopper) == "stopping", what="stopping")
        # The poll may show the flag before the act's own message is set: wait for the message too.
        await until(pilot, lambda: screen.last_message.startswith(f"stop requested for {stopper[:8]}"), what="the stop's message")
        release(workspace / "gates", "first")
        await until(pilot, lambda: status_cell(app, stopper) == "stopped", what="stopped")
        assert screen.jobs[stopper].stop_requested_by == "tester@ci"
        await pilot.press("r")
        await until(pilot, lambda: status_cell(app, stopper) in ("queued", "running", "completed"), what="resumed")
        await until(pilot, lambda: "queued (was stopped)" in screen.last_message, what="the resume's message")

        # c: asks first, naming the run, its status and the workspace to be destroyed.
        run_dir = workspace / ".swarmkit" / "runs" / cancel_destroy
        await until(pilot, lambda: status_cell(app, cancel_destroy) == "running" and (run_dir / "out.txt").exists(), what="canceller at work")
        assert table.select(cancel_destroy)
        await pilot.press("c")
        dialog = await dialog_up(pilot, "the cancel dialog")
        body = dialog.query_one("#dialog-body").render()
        words = str(body)
        assert cancel_destroy[:8] in words and "running" in words and "DESTROYED" in words
        assert cancel_destroy in words  # the workspace path, with its size
        assert dialog.query("#choice-stop"), "stop is offered as the safer choice"
        await pilot.click("#choice-cancel")
        await until(pilot, lambda: status_cell(app, cancel_destroy) == "cancelled", what="cancelled")
        assert not run_dir.exists()
        assert await workspace_states(store_url, workspace, cancel_destroy) == ["destroyed"]

        # C: cancel keeping the workspace.
        keep_dir = workspace / ".swarmkit" / "runs" / cancel_keep
        await until(pilot, lambda: status_cell(app, cancel_keep) == "running" and (keep_dir / "out.txt").exists(), what="second canceller at work")
        assert table.select(cancel_keep)
        await pilot.press("C")
        dialog = await dialog_up(pilot, "the cancel-keep dialog")
        assert "KEPT" in str(dialog.query_one("#dialog-body").render())
        await pilot.click("#choice-cancel")
        await until(pilot, lambda: status_cell(app, cancel_keep) == "cancelled", what="cancelled, kept")
        assert (keep_dir / "out.txt").exists()
        assert await workspace_states(store_url, workspace, cancel_keep) == ["kept"]

        # a: approves the gate of a deferred run.
        await until(pilot, lambda: status_cell(app, gated) == "deferred", what="deferred at the gate")
        assert table.select(gated)
        await pilot.press("a")
        dialog = await dialog_up(pilot, "the approve dialog")
        words = str(dialog.query_one("#dialog-body").render())
        assert gated[:8] in words and "gated" in words and "'ship'" in words and "Nothing is destroyed" in words
        assert (await job_of(store_url, workspace, gated)).status == "deferred"  # nothing yet: it asks first
        await pilot.click("#choice-go")
        await until(pilot, lambda: status_cell(app, gated) in ("queued", "running", "completed"), what="approved")
        await until(pilot, lambda: "approved 'ship'" in screen.last_message, what="the approval's message")
        await until(pilot, lambda: status_cell(app, gated) == "completed", what="completed after approval")
        assert table.selected_key == gated  # it moved among the ended runs, the cursor with it

        # A refused or empty act says why, in the runtime's words.
        await until(pilot, lambda: status_cell(app, quick) == "completed", what="quick completed")
        assert table.select(quick)
        await pilot.press("s")
        await until(pilot, lambda: screen.last_message == f"{quick[:8]} is completed; nothing to stop.", what="the no-op message")
        await pilot.press("r")
        await until(pilot, lambda: screen.last_message == f"cannot resume {quick[:8]}: it is completed.", what="the refusal")
        await pilot.press("c")
        await until(pilot, lambda: screen.last_message == f"{quick[:8]} is completed; nothing to cancel.", what="cancel refused without a dialog")
        assert not isinstance(app.screen, ConfirmDialog)


async def test_resume_without_a_worker_says_so(store_url, workspace, fast_env):
    f = flows(workspace)
    await init_store(store_url, workspace)
    (run,) = await submit(store_url, workspace, f["quick"])
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        assert screen.query_one(RunTable).select(run)
        await pilot.press("s")  # queued: stopped at once
        await until(pilot, lambda: status_cell(app, run) == "stopped", what="stopped while queued")
        await until(pilot, lambda: "stopped at once" in screen.last_message, what="the stop's message")
        await pilot.press("r")
        await until(pilot, lambda: status_cell(app, run) == "queued", what="queued again")
        await until(pilot, lambda: "no live worker is watching this store" in screen.last_message, what="the resume's message")
        assert (await job_of(store_url, workspace, run)).status == "queued"


async def test_cancel_dialog_back_and_stop_instead(sqlite_url, workspace, fast_env):
    f = flows(workspace)
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, f["quick"])
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        assert screen.query_one(RunTable).select(run)
        await pilot.press("c")
        await dialog_up(pilot, "the dialog")
        await pilot.press("escape")  # backing out does nothing
        await until(pilot, lambda: app.screen is screen, what="back on the table")
        assert (await job_of(sqlite_url, workspace, run)).status == "queued"
        await pilot.press("c")
        await dialog_up(pilot, "the dialog again")
        await pilot.click("#choice-stop")
        await until(pilot, lambda: status_cell(app, run) == "stopped", what="stopped instead of cancelled")
        assert (await job_of(sqlite_url, workspace, run)).status == "stopped"


async def test_cursor_stays_on_its_run_while_rows_come_and_go(store_url, workspace, fast_env):
    from swarmkit.runtime import control
    from swarmkit.store import Store

    f = flows(workspace)
    await init_store(store_url, workspace)
    runs = await submit(store_url, workspace, f["quick"], count=5)
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: all(status_cell(app, r) for r in runs), what="every row")
        target = runs[2]
        assert table.select(target)
        before = table.get_row_index(target)
        order = table.shown_keys
        line = before - int(table.scroll_y)
        # New runs arrive above it (newest first); another is cancelled, one is stopped: no row moves.
        newer = await submit(store_url, workspace, f["quick"], count=3)
        store = await Store.open(store_url, workspace)
        try:
            await control.cancel(store, runs[4], actor="other@ci")
            await control.stop(store, runs[0], actor="other@ci")
        finally:
            await store.close()
        await until(pilot, lambda: all(status_cell(app, r) for r in newer) and status_cell(app, runs[4]) == "cancelled", what="the changes")
        assert table.selected_key == target
        assert table.get_row_index(target) != before
        assert screen.selected.id == target
        assert [k for k in table.shown_keys if k in order] == order  # statuses changed, places did not
        assert table.get_row_index(target) - int(table.scroll_y) == line  # the same line on screen


async def test_resume_of_a_deferred_run_asks_first_for_it_approves_the_gate(store_url, workspace, fast_env):
    import asyncio

    from tests.conftest import Cli

    f = flows(workspace)
    res = await asyncio.to_thread(Cli(store_url, workspace).call, "run", str(f["gated"]), check=True)
    gated = res.stdout.split()[0]
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        run = await until(pilot, lambda: next((k for k in screen.jobs if k.startswith(gated)), None), what="the deferred run")
        assert status_cell(app, run) == "deferred"
        assert screen.query_one(RunTable).get_cell(run, "node").plain == "2/2 ship"
        assert screen.query_one(RunTable).select(run)
        await pilot.press("r")
        dialog = await dialog_up(pilot, "the question")
        assert str(dialog.query_one("#dialog-title").render()) == f"Resume run {gated}, approving its gate?"
        await pilot.press("escape")  # backing out approves nothing
        await until(pilot, lambda: screen.last_message == f"{gated}: nothing done", what="nothing done")
        assert (await job_of(store_url, workspace, run)).status == "deferred"
        await pilot.press("r")
        await dialog_up(pilot, "the question again")
        await pilot.click("#choice-go")
        await until(pilot, lambda: status_cell(app, run) == "queued", what="approved and queued")
        # The poll may show the queued row before the act's own message is set: wait for the message too.
        await until(pilot, lambda: screen.last_message.startswith(f"{gated} approved 'ship' and queued (was deferred); a worker will pick it up at agent 2/2 ship."), what="the approval's message")
        assert screen.query_one(RunTable).get_cell(run, "node").plain == "2/2 ship"  # the same numbering, queued


async def test_stop_now_asks_first_then_interrupts_the_node_in_flight(store_url, workspace, start_worker):
    from swarmkit.store.queries import audit_for

    f = flows(workspace)
    await init_store(store_url, workspace)
    (run,) = await submit(store_url, workspace, f["canceller"])  # its one node sleeps 30 s
    start_worker(2)
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        await until(pilot, lambda: status_cell(app, run) == "running" and (workspace / ".swarmkit" / "runs" / run / "out.txt").exists(), what="the node at work")
        assert screen.query_one(RunTable).select(run)
        await pilot.press("S")
        dialog = await dialog_up(pilot, "the stop-now dialog")
        words = str(dialog.query_one("#dialog-body").render())
        assert run[:8] in words and "canceller" in words and "lost" in words  # its work in flight is lost
        assert (await job_of(store_url, workspace, run)).stop_requested_at is None  # nothing yet: it asks first
        await pilot.click("#choice-go")
        # Long before the 30 s node could end: the host interrupts it.
        await until(pilot, lambda: status_cell(app, run) == "stopped", what="stopped now", timeout=15)
    job = await job_of(store_url, workspace, run)
    assert job.status == "stopped" and job.step == 0  # parked before the node it interrupted
    store = await Store.open(store_url, workspace)
    try:
        async with store.read() as conn:
            stopped = [a for a in await conn.run_sync(lambda c: audit_for(c, run)) if a.action == "run.stopped"]
    finally:
        await store.close()
    assert stopped and stopped[-1].detail.get("now") is True and stopped[-1].detail.get("interrupted") == "work"
