"""The widgets on their own: safe text, the keyed run table, the log tail. No store involved."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from swarmkit.widgets.log_tail import LogLine, LogTail, line_text
from swarmkit.widgets.run_row import RunRow
from swarmkit.widgets.run_table import RunTable
from swarmkit.widgets.safe_text import safe, safe_lines, safe_text
from swarmkit.widgets.status_look import STATUS_LOOKS, look_of, status_text
from swarmkit.widgets.text_lines import TextLines


def test_safe_replaces_every_control_but_keeps_markup_literal():
    raw = "[@click=app.quit]x[/] \x1b]8;;https://e\x1b\\l\x1b]8;;\x1b\\ \x9b6n \x07 \x00 \x7f \u202eevil\ttab\nnext"
    out = safe(raw)
    assert "[@click=app.quit]x[/]" in out
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in out)
    assert "\u202e" not in out
    assert "␛" in out and "␇" in out and "␀" in out and "␡" in out and "\ufffd" in out and "␊" in out
    assert "\t" not in out and "\t" in safe("a\tb", tabs=True)
    assert safe("x" * 10, limit=5) == "xxxx…"
    assert safe_lines("a\x1b\nb") == "a␛\nb"
    cell = safe_text("[b]bold?[/b]")
    assert isinstance(cell, Text) and cell.plain == "[b]bold?[/b]" and not cell.spans


def test_matches_the_runtime_rule():
    from swarmkit.runtime.text import plain

    sample = "".join(chr(i) for i in range(0, 0xA0)) + "\u061c\u200e\u200f\u202a\u202e\u2066\u2069 [x]"
    assert safe(sample, tabs=True) == plain(sample)


def test_every_status_has_its_own_word_and_colour():
    words = {look.word for look in STATUS_LOOKS.values()}
    styles = {look.style for look in STATUS_LOOKS.values()}
    assert len(words) == len(styles) == len(STATUS_LOOKS) == 13  # nine stored, four shown (stop overdue among them)
    assert status_text("weird\x1b[2J").plain == "? weird␛[2J"


def row(key: str, status: str = "running", **kw) -> RunRow:
    values = dict(key=key, short_id=key[:8], flow="flow-" + key, status=status, node="1/2 a", in_state="1s", last_work="1s ago", requested_by="", usage="-")
    values.update(kw)
    return RunRow(**values)


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield RunTable()


async def test_run_table_diffs_keyed_rows_and_keeps_the_cursor():
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(6)]
        change = table.show_rows([row(k, created_at=i) for i, k in enumerate(keys)])
        assert change.added == 6
        assert table.shown_keys == keys[::-1]  # newest first
        assert table.select(keys[3])
        # One value changes: one cell updated, nothing re-added.
        rows = [row(k, created_at=i) for i, k in enumerate(keys)]
        rows[3] = row(keys[3], status="stopping", created_at=3)
        change = table.show_rows(rows)
        assert (change.added, change.removed, change.updated_cells) == (0, 0, 1)
        assert table.get_cell(keys[3], "status").plain == "◐ stopping"
        # Rows go away, new ones arrive on top, the owner's order changes: the
        # shown rows stay put and the cursor stays on its run.
        new = [f"{i:032x}" for i in range(10, 13)]
        rows = [row(k, created_at=10 + i) for i, k in enumerate(new)] + [row(k, created_at=2 + i) for i, k in enumerate(keys[2:])][::-1]
        change = table.show_rows(rows)
        assert change.added == 3 and change.removed == 2 and not change.reordered
        assert table.selected_key == keys[3]
        assert table.shown_keys == new[::-1] + keys[2:][::-1]
        # The cursor's own run goes: it stays at the same height.
        index = table.cursor_row
        table.show_rows([r for r in rows if r.key != keys[3]])
        assert table.cursor_row == index and table.selected_key is not None
        table.show_rows([])
        assert table.selected_key is None
        await pilot.pause()


async def test_run_table_repaints_only_the_cells_that_changed():
    """A live row's usage ticks: the terminal is sent that cell's span of the line, which then
    reads right; a cursor move repaints its two lines whole."""
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(4)]
        table.show_rows([row(k, created_at=i, usage="10 tok $0.01") for i, k in enumerate(keys)])
        await pilot.pause()
        refreshed = []
        real = table.refresh

        def spy(*regions, **kw):
            refreshed.extend(regions)
            return real(*regions, **kw)

        table.refresh = spy  # type: ignore[method-assign]
        target = keys[1]
        table.show_rows([row(k, created_at=i, usage="99 tok $0.09" if k == target else "10 tok $0.01") for i, k in enumerate(keys)])
        y = screen_line(table, target) + 1  # the header is line 0
        text = table.render_line(y).text
        assert "99 tok $0.09" in text and target[:8] in text and "flow-" + target[:8] in text
        usage_x = text.index("99 tok")
        assert len(refreshed) == 1 and refreshed[0].y == y
        assert refreshed[0].x <= usage_x < usage_x + len("99 tok $0.09") <= refreshed[0].right
        assert refreshed[0].x > text.index(target[:8])  # the id, flow and status cells are not sent again
        refreshed.clear()
        table.move_cursor(table.cursor_row + 1)
        assert sorted(r.y for r in refreshed) == [1, 2] and all(r.x == 0 and r.width == table.size.width for r in refreshed)
        await pilot.pause()


class LinesApp(App):
    def compose(self) -> ComposeResult:
        yield TextLines([Text(f"line {i}") for i in range(4)], wrap=True)


async def test_text_lines_repaint_only_the_line_that_changed_and_wrap_what_does_not_fit():
    """The header's clock and a live run's age in the detail pane change a line a second: that
    line alone is sent again. A line too long for the width wraps, and the widget grows for it."""
    app = LinesApp()
    async with app.run_test(size=(40, 10)) as pilot:
        lines = app.query_one(TextLines)
        await pilot.pause()
        assert lines.size.height == 4
        refreshed = []
        real = lines.refresh

        def spy(*regions, **kw):
            refreshed.append((regions, kw.get("layout", False)))
            return real(*regions, **kw)

        lines.refresh = spy  # type: ignore[method-assign]
        lines.set_lines([Text("line 0"), Text("line 1"), Text("line two", style="bold"), Text("line 3")])
        assert [(tuple(r.y for r in regions), layout) for regions, layout in refreshed] == [((2,), False)]
        await pilot.pause()
        assert lines.render_line(2).text.rstrip() == "line two" and lines.render_line(3).text.rstrip() == "line 3"
        refreshed.clear()
        lines.set_lines([Text("line 0"), Text("line 1"), Text("line two", style="bold"), Text("line 3")])
        assert refreshed == []  # the same lines: nothing to repaint
        long = "word " * 12  # 60 cells in a 40-cell widget
        lines.set_lines([Text("line 0"), Text(long.strip()), Text("line two"), Text("line 3")])
        assert refreshed[-1][1] is True  # another number of screen lines: laid out again
        await pilot.pause()
        assert lines.size.height == 5
        shown = [lines.render_line(y).text.rstrip() for y in range(5)]
        assert " ".join(shown[1:3]).split() == long.split() and shown[3] == "line two"
        # With a hang (the detail's facts: a value goes on under itself, not under its label).
        lines.set_lines([Text("line 0"), Text("error  " + long.strip()), Text("line two"), Text("line 3")], hang=7)
        await pilot.pause()
        shown = [lines.render_line(y).text.rstrip() for y in range(lines.size.height)]
        assert shown[1].startswith("error  word") and shown[2].startswith(" " * 7 + "word"), shown
        assert " ".join(shown[1:-2]).split() == ["error"] + long.split() and shown[-2] == "line two"
        lines.set_lines([], hang=3)  # another hang and no lines: none are shown (not the last ones)
        await pilot.pause()
        assert lines.size.height == 0 and lines.render().plain == ""


async def test_run_table_draws_each_status_in_its_look():
    """The status cell is the status's word in its colour (and background, for a fault): the line
    table drew them in the plain text colour from 2026-12-01 until this test."""
    app = TableApp()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(RunTable)
        statuses = ["queued", "failed", "faulted", "running"]
        keys = [f"{i:032x}" for i in range(len(statuses))]
        table.show_rows([row(k, status=st, created_at=-i) for i, (k, st) in enumerate(zip(keys, statuses))])
        await pilot.pause()
        for key, status in zip(keys, statuses):
            strip = table.render_line(screen_line(table, key) + 1)
            word = next(seg for seg in strip if look_of(status).word in seg.text)
            look = look_of(status).style
            assert word.style is not None and word.style.color == look.color and (word.style.bold or not look.bold), status
            if look.bgcolor is not None:
                assert word.style.bgcolor == look.bgcolor, status


def screen_line(table: RunTable, key: str) -> int:
    return table.get_row_index(key) - int(table.scroll_y)


class BoxAboveTableApp(App):
    """A three-line box above the table, as the console's filter box is."""

    CSS = "#box { height: 3; } RunTable { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static("filter", id="box")
        yield RunTable()


async def test_a_table_that_fits_once_the_box_above_closes_hides_no_run_above_its_top():
    """By hand on the demo: `/deferred`, Escape. The runs that came back above the cursor were
    scrolled above the top (its run kept its line), then the filter box closed and Textual
    clamped the scroll part of the way: runs hidden above, blank lines below."""
    app = BoxAboveTableApp()
    async with app.run_test(size=(100, 14)) as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(10)]
        table.show_rows([row(keys[4], created_at=4)])  # the filter shows one run, the cursor on it
        await pilot.pause()
        table.show_rows([row(k, created_at=i) for i, k in enumerate(keys)])  # cleared: five newer come back above
        await pilot.pause()
        assert table.selected_key == keys[4] and table.cursor_row - int(table.scroll_y) == 0  # its run kept its line
        app.query_one("#box").display = False
        await pilot.pause()
        await pilot.pause()
        assert table.scroll_y == 0, "runs hidden above the top of a table that fits"
        assert table.visible_keys() == keys[::-1] and table.selected_key == keys[4]


async def test_run_table_rows_stay_put_when_statuses_change():
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(8)]
        statuses = ["running", "queued", "stopped", "deferred"]
        table.show_rows([row(k, status=statuses[i % 4], created_at=i) for i, k in enumerate(keys)])
        order = table.shown_keys
        assert table.select(keys[5])
        for turn in range(6):
            table.show_rows([row(k, status=statuses[(i + turn) % 4], created_at=i) for i, k in enumerate(keys)])
            await pilot.pause()
            assert table.shown_keys == order
            assert table.selected_key == keys[5]
        # Even sorted by status: a status change moves nothing until the operator sorts again.
        table.sort_by("status")
        by_status = table.shown_keys
        assert [table.row_for(k).status for k in by_status] == sorted((table.row_for(k).status for k in by_status), key=["queued", "running", "stopped", "deferred"].index)
        table.show_rows([row(k, status="completed", created_at=i) for i, k in enumerate(keys)])
        assert table.shown_keys == by_status


async def test_run_table_new_rows_keep_the_cursor_on_its_screen_line():
    app = TableApp()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(100)]
        table.show_rows([row(k, created_at=i) for i, k in enumerate(keys)])
        await pilot.pause()
        for _ in range(4):
            await pilot.press("down")
        target = table.selected_key
        assert target == keys[-5] and screen_line(table, target) == 4
        before = screen_line(table, target)
        # Newer runs arrive (newest first: above the cursor).
        newer = [row(f"{i:032x}", created_at=i) for i in range(100, 110)]
        table.show_rows([row(k, created_at=i) for i, k in enumerate(keys)] + newer)
        await pilot.pause()
        assert table.selected_key == target
        assert screen_line(table, target) == before
        assert table.get_row_index(target) == 14
        # On screen too: the highlighted line shows the same run at the same height.
        assert target[:8] in table.render_line(before + 1).text
        await pilot.press("up")
        assert table.selected_key == keys[-4]


async def test_run_table_sorts_by_header_click_and_keys():
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(RunTable)
        flows = ["delta", "alpha", "charlie", "bravo"]
        keys = [f"{i:032x}" for i in range(4)]
        table.show_rows([row(k, flow=f, created_at=i) for i, (k, f) in enumerate(zip(keys, flows))])
        await pilot.pause()
        assert table.select(keys[2])
        x = 2 + table._widths[0] + 2  # inside the FLOW header
        await pilot.click(RunTable, offset=(x, 0))
        await pilot.pause()
        assert [table.row_for(k).flow for k in table.shown_keys] == sorted(flows)
        assert table.selected_key == keys[2]  # the cursor kept its run
        # A short table sorted anew shows from its top: no row hidden above the cursor.
        assert table.scroll_y == 0 and all(table.row_for(k).flow in table.render_line(i + 1).text for i, k in enumerate(table.shown_keys))
        assert "FLOW ▲" in table.render_line(0).text
        await pilot.click(RunTable, offset=(x, 0))
        await pilot.pause()
        assert [table.row_for(k).flow for k in table.shown_keys] == sorted(flows, reverse=True)
        assert "FLOW ▼" in table.render_line(0).text
        # A new row goes where the sort puts it.
        table.show_rows([row(k, flow=f, created_at=i) for i, (k, f) in enumerate(zip(keys, flows))] + [row("e" * 32, flow="echo", created_at=9)])
        assert table.shown_keys[0] == "e" * 32
        # The keys 1..8 sort by the columns in order: 1 is the id (ties: newest first).
        await pilot.press("1")
        assert table.shown_keys == keys[::-1] + ["e" * 32]
        assert "ID ▲" in table.render_line(0).text
        await pilot.press("0")  # back to newest first
        assert table.shown_keys == ["e" * 32] + keys[::-1]
        assert "▲" not in table.render_line(0).text


async def test_usage_sorts_by_the_amount_spent_not_its_text():
    """$10.00 is more than $9.00 though "$1" sorts before "$9" as text: the most spent first, then the most tokens."""
    app = TableApp()
    async with app.run_test(size=(160, 20)) as pilot:
        table = app.query_one(RunTable)
        spent = [(9.0, 500), (10.0, 100), (0.5, 90_000), (10.0, 2_000)]
        keys = [f"{i:032x}" for i in range(len(spent))]
        table.show_rows([row(k, usage=f"{t:,} tok ${c:.2f}", cost=c, tokens=t, created_at=i) for i, (k, (c, t)) in enumerate(zip(keys, spent))])
        await pilot.pause()
        table.sort_by("usage")
        await pilot.pause()
        assert [table.row_for(k).usage for k in table.shown_keys] == ["2,000 tok $10.00", "100 tok $10.00", "500 tok $9.00", "90,000 tok $0.50"]


async def test_run_table_click_and_enter_post_messages():
    class Listen(TableApp):
        def __init__(self) -> None:
            super().__init__()
            self.got: list[tuple[str, str | None]] = []

        def on_run_table_row_highlighted(self, event: RunTable.RowHighlighted) -> None:
            self.got.append(("highlighted", event.key))

        def on_run_table_row_selected(self, event: RunTable.RowSelected) -> None:
            self.got.append(("selected", event.key))

    app = Listen()
    async with app.run_test(size=(120, 20)) as pilot:
        table = app.query_one(RunTable)
        keys = [f"{i:032x}" for i in range(4)]
        table.show_rows([row(k, created_at=i) for i, k in enumerate(keys)])
        table.focus()
        await pilot.pause()
        await pilot.click(RunTable, offset=(3, 3))  # the third row
        await pilot.pause()
        assert table.selected_key == keys[1]
        await pilot.press("enter")
        await pilot.pause()
        assert ("highlighted", keys[1]) in app.got and app.got[-1] == ("selected", keys[1])


async def test_run_table_shows_markup_as_text():
    app = TableApp()
    async with app.run_test() as pilot:
        table = app.query_one(RunTable)
        table.show_rows([row("a" * 32, flow="[@click=app.quit]x[/] [/] \x1b[2J", node="[TODO]")])
        await pilot.pause()
        assert table.get_cell("a" * 32, "flow").plain == "[@click=app.quit]x[/] [/] ␛[2J"
        assert table.get_cell("a" * 32, "node").plain == "[TODO]"
        await pilot.click(RunTable, offset=(12, 1))
        await pilot.pause()
        assert app.is_running


class LogApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.follow_events: list[tuple[bool, int]] = []
        self.older_requests: list[int] = []

    def compose(self) -> ComposeResult:
        yield LogTail()

    def on_log_tail_follow_changed(self, message: LogTail.FollowChanged) -> None:
        self.follow_events.append((message.follow, message.waiting))

    def on_log_tail_need_older(self, message: LogTail.NeedOlder) -> None:
        self.older_requests.append(message.before_id)


def lines(start: int, count: int) -> list[LogLine]:
    return [LogLine(i, "12:00:00", "log", "node", f"line {i}") for i in range(start, start + count)]


async def test_log_tail_follows_pauses_counts_and_resumes():
    app = LogApp()
    seen = app.follow_events
    async with app.run_test(size=(80, 20)) as pilot:
        tail = app.query_one(LogTail)
        tail.reset(lines(1, 100), more_older=False)
        await pilot.pause()
        assert tail.follow and tail.is_vertical_scroll_end
        tail.append(lines(101, 10))
        await pilot.pause()
        assert tail.is_vertical_scroll_end
        tail.focus()
        await pilot.press("pageup")
        await pilot.pause()
        assert not tail.follow
        for i in range(5):
            tail.append(lines(111 + i * 10, 10))
        await pilot.pause()
        assert tail.waiting == 50
        assert seen[-1] == (False, 50)
        # A burst of appends while paused coalesces into few messages.
        assert len([e for e in seen if not e[0]]) < 6
        assert not tail.is_vertical_scroll_end
        await pilot.press("end")
        await pilot.pause()
        assert tail.follow and tail.waiting == 0 and tail.is_vertical_scroll_end
        await pilot.press("up")
        await pilot.pause()
        assert not tail.follow
        await pilot.press("f")
        await pilot.pause()
        assert tail.follow


async def test_log_tail_prepends_without_moving_the_view_and_searches():
    app = LogApp()
    asked = app.older_requests
    async with app.run_test(size=(80, 20)) as pilot:
        tail = app.query_one(LogTail)
        tail.reset(lines(1000, 50), more_older=True)
        tail.focus()
        await pilot.pause()
        await pilot.press("home")
        await pilot.pause()
        assert asked and asked[-1] == 1000
        top = tail.scroll_y
        tail.prepend(lines(900, 100), more_older=False)
        await pilot.pause()
        assert tail.scroll_y == top + 100  # the same lines stay on screen
        assert tail.first_id == 900
        assert tail.search("line 950")
        assert tail.lines[tail.current_match].text == "line 950"
        assert not tail.follow
        assert not tail.search("no such line")


def test_log_lines_are_plain_text():
    text = line_text(LogLine(1, "12:00:00", "log", "[b]n[/b]", "[@click=app.quit]x[/] \x1b[6n\tend"))
    assert "[@click=app.quit]x[/] ␛[6n" in text.plain
    assert "\x1b" not in text.plain and "\t" not in text.plain
    assert "━━" in line_text(LogLine(2, "12:00:00", "node", "build", "2/4 build")).plain


def test_a_detail_entry_too_long_for_the_pane_goes_on_under_itself():
    """Before: a workspace path folded to the pane's left edge, among the section titles (a new user, by hand)."""
    from rich.console import Console

    from swarmkit.widgets.run_detail import DetailSection, RunDetailData, SectionsView

    path = "./demo/.swarmkit/runs/d76076523c364893b9299c5f5c3477d1"
    data = RunDetailData("d7607652  flaky", "failed", (), (
        DetailSection("Workspaces", (f"{path}  destroyed  (since 2026-12-03 12:22:19 UTC)",)),
        DetailSection("Checkpoints", ()),
    ))
    console = Console(width=40, record=True, color_system=None)
    console.print(SectionsView(data))
    lines = console.export_text().splitlines()
    assert lines[0] == "Workspaces"
    entry = lines[1 : lines.index("")]
    assert len(entry) > 2 and entry[0].startswith("  ./demo/") and all(line.startswith("    ") for line in entry[1:]), lines
    assert path in "".join(line.strip() for line in entry), "the path, whole, across its lines"
    assert lines[lines.index("") + 1 :] == ["Checkpoints", "  none"]
