"""Marks, moving, copying and where the console's words show: acts on several runs, each with its outcome."""

from __future__ import annotations

from console_helpers import dialog_up, first_poll, init_store, job_of, status_cell, submit, until
from textual import events

from swarmkit.console.app import make_app
from swarmkit.runtime import control
from swarmkit.store import Store
from swarmkit.widgets.run_detail import RunDetail
from swarmkit.widgets.run_table import MARK, RunTable
from tests.conftest import write_flow


def quick(ws):
    return write_flow(ws, "quick", """
        name = "quick"
        [[agents]]
        name = "hi"
        command = "echo hi"
    """)


def line_of(table: RunTable, key: str) -> str:
    """The text of a run's row as drawn on screen."""
    y = table.get_row_index(key) - int(table.scroll_y) + 1
    return table.render_line(y).text


async def mark(pilot, table: RunTable, key: str) -> None:
    assert table.select(key)
    await pilot.press("space")
    await until(pilot, lambda: table.is_marked(key), what=f"{key[:8]} marked")


async def test_marked_runs_are_acted_on_together_with_an_outcome_each(store_url, workspace, fast_env):
    await init_store(store_url, workspace)
    a, b, c, ended = await submit(store_url, workspace, quick(workspace), count=4)
    store = await Store.open(store_url, workspace)
    try:
        assert (await control.cancel(store, ended, actor="other@ci")).changed
    finally:
        await store.close()
    app = make_app(store_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: all(status_cell(app, r) for r in (a, b, c, ended)), what="every row")
        for key in (a, b, ended):
            await mark(pilot, table, key)
        assert set(table.marked_keys) == {a, b, ended}
        assert line_of(table, a).startswith(MARK) and not line_of(table, c).startswith(MARK)  # the mark is drawn in the row
        # Space again unmarks; escape clears them all.
        await mark(pilot, table, c)
        assert table.select(c)
        await pilot.press("space")
        assert not table.is_marked(c)
        assert {"Stop run (3 marked)", "Cancel run (3 marked)"} <= {cmd[0] for cmd in screen.palette_commands()}

        # s on three marked runs: no question (a stop keeps everything), an outcome for each.
        assert table.select(c)  # the cursor is elsewhere: the marks decide
        await pilot.press("s")
        dialog = await dialog_up(pilot, "the outcomes")
        assert screen.last_message.startswith(f"2 stopped, 1 unchanged: {ended[:8]} is cancelled"), screen.last_message
        outcomes = str(dialog.query_one("#dialog-body").render())
        assert f"{a[:8]} was queued; stopped at once" in outcomes and f"{ended[:8]} is cancelled; nothing to stop" in outcomes
        await pilot.press("escape")
        assert [(await job_of(store_url, workspace, r)).status for r in (a, b, c)] == ["stopped", "stopped", "queued"]
        assert not table.marked_keys  # carried out: the marks are spent

        # c on two marked runs: one confirmation names both; both end.
        await mark(pilot, table, a)
        await mark(pilot, table, b)
        await pilot.press("c")
        dialog = await dialog_up(pilot, "the cancel dialog")
        words = str(dialog.query_one("#dialog-body").render())
        assert "Cancel 2 marked runs?" in str(dialog.query_one("#dialog-title").render())
        assert a[:8] in words and b[:8] in words and "quick is stopped" in words and "DESTROYED" in words and c[:8] not in words
        await pilot.click("#choice-cancel")
        await until(pilot, lambda: status_cell(app, a) == "cancelled" and status_cell(app, b) == "cancelled", what="both cancelled")
        await until(pilot, lambda: screen.last_message == "2 cancelled", what="the cancel's message")
        assert isinstance(app.screen, type(screen))  # everything went as asked: no outcome dialog
        assert (await job_of(store_url, workspace, c)).status == "queued"


async def test_marks_go_with_their_rows_and_escape_clears_them(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    a, b = await submit(sqlite_url, workspace, quick(workspace), count=2)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: status_cell(app, a) and status_cell(app, b), what="the rows")
        await mark(pilot, table, a)
        await mark(pilot, table, b)
        await pilot.press("escape")
        assert not table.marked_keys and not line_of(table, a).startswith(MARK)
        await mark(pilot, table, a)
        # A filter that hides a marked run takes its mark: nothing is acted on unseen.
        await pilot.press("slash", *b[:8], "enter")
        await until(pilot, lambda: status_cell(app, a) is None, what="the filter")
        assert table.marked_keys == []


async def test_slash_and_what_follows_in_one_read_is_the_filter_never_an_act(sqlite_url, workspace, fast_env):
    """`/stopping` typed fast or pasted reaches the console in one read of its terminal, and the
    app hands every key of it on before any binding runs. The keys after `/` must be the filter's
    text: they went to the table, where `s` stopped the run under the cursor (by hand, under tmux)."""
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, quick(workspace), count=1)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: table.row_count == 1, what="the row")
        assert table.select(run)
        # As the driver hands over one read: every key posted before the app handles any.
        for ch in "/stopping":
            key = events.Key("slash" if ch == "/" else ch, ch)
            key.set_sender(app)
            app.post_message(key)
        await until(pilot, lambda: screen.text_filter == "stopping", what="the filter's text")
        job = await job_of(sqlite_url, workspace, run)
        assert job is not None and job.status == "queued" and job.stop_requested_at is None
        # A `/` typed into the box is text, not the key that opens it again.
        await pilot.press("slash", "x")
        await until(pilot, lambda: screen.text_filter == "stopping/x", what="the slash as text")


async def test_j_k_move_and_y_copies_the_run_id(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    runs = await submit(sqlite_url, workspace, quick(workspace), count=3)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: table.row_count == 3, what="the rows")
        order = table.shown_keys
        assert table.select(order[0])
        await pilot.press("j")
        assert table.selected_key == order[1]
        await pilot.press("j", "j")
        assert table.selected_key == order[2]  # the last row stays the last
        await pilot.press("k")
        assert table.selected_key == order[1]
        await pilot.press("up")
        assert table.selected_key == order[0]
        await pilot.press("down", "y")
        assert app.clipboard == order[1] and order[1] in runs
        assert screen.last_message == f"copied the run id {order[1]} to the clipboard"
        assert (await job_of(sqlite_url, workspace, order[1])).status == "queued"  # k is no act any more


async def test_toasts_cover_only_the_message_line_and_the_footer(sqlite_url, workspace, fast_env):
    await init_store(sqlite_url, workspace)
    (run,) = await submit(sqlite_url, workspace, quick(workspace))
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    for size in ((160, 45), (80, 24)):
        async with app.run_test(size=size, notifications=True) as pilot:
            screen = await first_poll(pilot)
            assert screen.query_one(RunTable).select(run)
            await pilot.press("s")  # two lines of words
            await until(pilot, lambda: screen.query("Toast"), what="a toast")
            await pilot.press("y")
            await until(pilot, lambda: screen.last_message.startswith("copied the run id") and screen.query("Toast"), what="the second toast")
            await pilot.pause()  # the first toast's removal is processed
            toasts = screen.query("Toast")
            assert len(toasts) == 1, "one toast at a time"
            toast = toasts.first().region
            table, detail, message = (screen.query_one(RunTable).region, screen.query_one(RunDetail).region, screen.query_one("#message").region)
            assert not toast.overlaps(table) and not toast.overlaps(detail), (toast, table, detail)
            assert toast.contains_region(message), "the message line's words are not shown twice"
            assert toast.bottom == size[1]
        app = make_app(sqlite_url, workspace, poll_interval=0.1)


async def test_clearing_the_filter_shows_the_runs_from_the_top_the_cursor_on_its_run(sqlite_url, workspace, fast_env):
    """By hand on the demo: `/deferred`, Enter, Escape. The runs that came back were newer than the
    one under the cursor, and were scrolled above the top (its run kept its line): runs hidden,
    blank lines below. Runs of another view are the operator's asking: they read from the top."""
    await init_store(sqlite_url, workspace)
    runs = await submit(sqlite_url, workspace, quick(workspace), count=6)
    app = make_app(sqlite_url, workspace, poll_interval=0.1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await first_poll(pilot)
        table = screen.query_one(RunTable)
        await until(pilot, lambda: table.row_count == 6, what="the rows")
        oldest = table.shown_keys[-1]
        assert table.select(oldest)
        await pilot.press("slash", *oldest[:8], "enter")
        await until(pilot, lambda: table.row_count == 1, what="the filtered row")
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 6, what="every row again")
        await pilot.pause()
        assert table.selected_key == oldest
        assert table.scroll_y == 0 and table.visible_keys() == table.shown_keys, "runs hidden above the top"
        assert sorted(table.shown_keys) == sorted(runs)
