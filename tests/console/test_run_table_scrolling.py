"""The run table past its view: the scrollbar it draws itself (widgets/scroll_bar.py) and the rows of
runs that changed off screen, made when they come into view (`RunTable.show(..., stale=...)`)."""

from __future__ import annotations

from dataclasses import replace

from textual.app import App, ComposeResult
from textual.events import MouseScrollDown

from swarmkit.widgets.run_row import RunRow
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.scroll_bar import thumb_span, top_for

SIZE = (100, 20)  # the table's view: 20 lines, its header's among them


def row(i: int, **kw) -> RunRow:
    key = f"{i:032x}"
    values = dict(key=key, short_id=key[-8:], flow=f"flow-{i}", status="running", node="1/2 a", in_state="1s",
                  last_work="1s ago", requested_by="", usage="10 tok $0.01", created_at=float(i))
    values.update(kw)
    return RunRow(**values)


class TableApp(App):
    def __init__(self, rows: list[RunRow]) -> None:
        super().__init__()
        self.current = {r.key: r for r in rows}  # the owner's rows, as the console's records are
        self.asked: list[str] = []

    def compose(self) -> ComposeResult:
        yield RunTable()

    def on_mount(self) -> None:
        table = self.query_one(RunTable)
        table.row_source = self.source
        table.show_rows(list(self.current.values()))

    def source(self, key: str) -> RunRow | None:
        self.asked.append(key)
        return self.current.get(key)


def bar_of(table: RunTable) -> list[object]:
    """The background of each line's last cell, top to bottom."""
    return [list(table.render_line(y))[-1].style.bgcolor for y in range(table.scrollable_content_region.height)]


def test_the_thumb_is_the_share_of_lines_in_view_and_sits_where_the_view_is():
    assert thumb_span(10, 20, 0) == (0, 20)  # everything fits: the whole track
    assert thumb_span(100, 10, 0) == (0, 1)
    assert thumb_span(100, 10, 90) == (9, 10)
    assert thumb_span(100, 20, 40) == (8, 12)  # 4 lines of 20, halfway down
    for top in range(81):
        start, end = thumb_span(100, 20, top)
        assert 0 <= start < end <= 20 and end - start == 4
    # A click or a drag puts the thumb's middle on the line, as far as the track allows.
    assert top_for(100, 20, 0) == 0 and top_for(100, 20, 19) == 80
    assert thumb_span(100, 20, top_for(100, 20, 10)) == (8, 12)
    assert top_for(10, 20, 5) == 0


async def test_the_table_draws_its_scrollbar_and_it_scrolls_with_the_wheel_and_a_click():
    app = TableApp([row(i) for i in range(100)])
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.pause()
        height = table.scrollable_content_region.height
        bar = bar_of(table)
        thumb, track = bar[0], bar[-1]
        assert thumb != track
        # 101 lines (the header's and 100 rows'), `height` in view: the thumb is that share of the track.
        assert bar == [thumb] * round(height * height / 101) + [track] * (height - round(height * height / 101))
        # The bar's cell is its own: the columns end before it.
        assert all(list(table.render_line(y))[-1].text == " " for y in range(height))

        await pilot.press("end")
        assert table.cursor_row == 99 and bar_of(table)[-1] == thumb and bar_of(table)[0] == track
        await pilot.press("home")
        assert table.scroll_y == 0

        # The wheel scrolls the view; the cursor stays on its run.
        for _ in range(3):
            table.post_message(MouseScrollDown(table, 5, 5, 0, 0, 0, False, False, False, screen_x=5, screen_y=5))
        await pilot.pause()
        assert table.scroll_y > 0 and table.cursor_row == 0
        assert bar_of(table)[0] == track

        # A click on the bar's last line scrolls to the end; it picks no row.
        await pilot.click(RunTable, offset=(table.size.width - 1, height - 1))
        await pilot.pause()
        assert table.scroll_y == table.max_scroll_y > 0
        assert table.cursor_row == 0
        assert bar_of(table)[-1] == thumb


async def test_a_table_that_fits_its_view_draws_no_scrollbar():
    app = TableApp([row(i) for i in range(5)])
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.pause()
        # The table's own background down its last column (a bar there, its thumb the whole
        # track, would be one colour too, but the scrollbar's).
        assert set(bar_of(table)) == {table.rich_style.bgcolor}


async def test_a_run_that_changed_off_screen_shows_its_values_in_view_and_sorts_on_them():
    app = TableApp([row(i) for i in range(100)])
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(RunTable)
        await pilot.pause()
        on_screen, off_screen = table.visible_keys()[2], table.shown_keys[90]
        for key in (on_screen, off_screen):
            app.current[key] = replace(app.current[key], usage="99,999 tok $9.99")
        app.asked.clear()
        table.show(None, {}, stale=[on_screen, off_screen])
        await pilot.pause()
        # The rows on screen are made again (their ages move); the one off screen is not made yet.
        assert on_screen in app.asked and off_screen not in app.asked
        assert "99,999 tok $9.99" in table.render_line(3).text
        # In view, it shows what it is now.
        table.move_cursor(90)
        await pilot.pause()
        line = table.shown_keys.index(off_screen) - int(table.scroll_y) + 1
        assert "99,999 tok $9.99" in table.render_line(line).text

        # Changed off screen again, then sorted on the column: the sort reads its new value.
        table.move_cursor(0)
        await pilot.pause()
        far = table.shown_keys[80]
        assert far not in table.visible_keys()
        app.current[far] = replace(app.current[far], flow="aaa-first")
        table.show(None, {}, stale=[far])
        table.sort_by("flow")
        await pilot.pause()
        assert table.shown_keys[0] == far
        assert table.row_for(far).flow == "aaa-first"
