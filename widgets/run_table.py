"""The run table: a line-API view (one cached strip per row), rows that stay put.

A `ScrollView` whose `render_line` draws the header (line 0) and one run per
line after it (`RowLines`, row_lines.py, which moves the cursor too). Each
row's strip is cached, keyed on the values it shows, the column widths and
whether the cursor is on it; a change to a run refreshes that run's line only,
so a poll that changes nothing costs nothing to paint.

Rows stay put: the table keeps its own order. The default is newest first
(created desc); the operator picks another (a click on a header, or the keys
1..9 for the columns in order, $ for the estimated cost at completion; the same again reverses it; 0 goes back to newest first). A run whose values
change keeps its place; a new run is inserted where the sort puts it, and when
that is above the cursor the view scrolls with it, so that the run under the
cursor stays on the same screen line. Runs of a view the operator asked for
(`show(..., reframe=True)`: a filter set or cleared) are read from the top, as
after a new sort; and a table that fits its view hides no run above its top.

Marks: the owner marks runs to act on several at once; a marked row shows
`MARK` in its first cell of padding and the `run-table--marked` style. A run
that leaves the table loses its mark: nothing is acted on unseen.

The order and its sort are `RowOrder`'s (row_order.py); the lines' strips
and cells are made and kept by `RowPainter` (row_painter.py); the vertical
scrollbar is the last cell of the table's own lines (`BarredScrollView`,
scroll_bar.py, says why).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message

from .row_lines import RowLines
from .row_painter import MARK, PAD
from .run_row import COLUMN_INDEX, COLUMNS, SORT_ONLY_SORTS, RunRow, TableChange
from .tcss import load_css

__all__ = ["MARK", "PAD", "RunTable"]


class RunTable(RowLines, can_focus=True):
    """A table of runs on Textual's line API; `show` diffs keyed rows and refreshes only changed lines.

    A poll costs what changed, not what is shown: the owner hands over rows
    only for runs whose values may have changed. Cells that move with the
    clock alone (ages) are refreshed from `row_source` for the rows on screen,
    at every `show` and as rows scroll into view.
    """

    DEFAULT_CSS = load_css("run_table.tcss")
    COMPONENT_CLASSES = {"run-table--header", "run-table--cursor", "run-table--cursor-blurred", "run-table--sorted", "run-table--marked"}
    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("0", "sort('')", "Newest first", show=False),
    ] + [Binding(str(i + 1), f"sort('{col}')", f"Sort by {title.lower()}", show=False) for i, (col, title, _) in enumerate(COLUMNS)] + [
        Binding("dollar_sign", "sort('estimate')", f"Sort by {SORT_ONLY_SORTS['estimate']}", show=False),
    ]

    class _RowMessage(Message):
        def __init__(self, table: RunTable, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RunTable:
            return self.table

    class RowHighlighted(_RowMessage):
        """The cursor moved to another run (or the rows under it changed)."""

    class RowSelected(_RowMessage):
        """Enter, or a double click on a row."""

    class WindowChanged(Message):
        """The runs on screen are others than before (a scroll, a resize, a sort, runs that came or went)."""

        def __init__(self, table: RunTable, keys: tuple[str, ...]) -> None:
            super().__init__()
            self.table = table
            self.keys = keys

        def can_replace(self, message: Message) -> bool:
            # A scroll by the wheel moves the window many times between two reads of it: the newest tells all.
            return isinstance(message, RunTable.WindowChanged) and message.table is self.table

    class Sorted(Message):
        def __init__(self, table: RunTable, column: str | None, reverse: bool) -> None:
            super().__init__()
            self.table = table
            self.column = column
            self.reverse = reverse

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._last_highlighted: str | None = None
        # The owner's current row for a run, for rows on screen between two `show` calls.
        self.row_source: Callable[[str], RunRow | None] | None = None
        # Shown runs whose values changed while off screen: their rows are made from
        # `row_source` when they come into view, or before anything reads them all (a sort).
        self._stale: set[str] = set()
        self._window: tuple[str, ...] = ()  # the runs on screen, as last announced

    # --- what is shown ------------------------------------------------------------

    @property
    def shown_keys(self) -> list[str]:
        return list(self._order)

    def row_for(self, key: str) -> RunRow | None:
        self._freshen((key,))
        return self._shown.get(key)

    def get_cell(self, key: str, column: str) -> Text:
        """The text a cell shows (as made safe), by run id and column key."""
        self._freshen((key,))
        return self._painter.texts(self._shown[key])[COLUMN_INDEX[column]]

    # --- marks --------------------------------------------------------------------

    @property
    def marked_keys(self) -> list[str]:
        """The marked runs, in the order shown."""
        if not self._marked:
            return []
        return [k for k in self._order if k in self._marked]

    def is_marked(self, key: str) -> bool:
        return key in self._marked

    def toggle_mark(self, key: str) -> bool:
        """Mark or unmark a shown run; returns whether it is marked now."""
        if key not in self._shown:
            return False
        if key in self._marked:
            self._marked.discard(key)
        else:
            self._marked.add(key)
        self._refresh_key(key)
        self._flush_lines()
        return key in self._marked

    def clear_marks(self) -> None:
        marked, self._marked = self._marked, set()
        for key in marked:
            self._refresh_key(key)
        self._flush_lines()

    # --- diffing ------------------------------------------------------------------

    def show_rows(self, rows: Sequence[RunRow]) -> TableChange:
        """Make the table show exactly `rows` (in the table's own order)."""
        return self.show([row.key for row in rows], {row.key: row for row in rows})

    def show(self, order: Sequence[str] | None, fresh: Mapping[str, RunRow], *, stale: Collection[str] = (), reframe: bool = False) -> TableChange:
        """Make the table show the runs `order` names, in the table's sort.

        `fresh` holds rows of runs not shown yet or whose values may have
        changed; `stale` names more runs whose values may have changed, their
        rows not made: the table makes those on screen from `row_source` now,
        the others as they come into view (a poll of 50 live runs, most of them
        off screen, makes the rows it shows). Runs not shown yet and missing
        from `fresh` are made from `row_source`. The others keep what they show,
        but for the rows on screen, which are refreshed from `row_source`. Shown runs keep
        their places; new ones go where the sort puts them. `order` None: the
        same runs as before (a poll that changed none of them costs what it
        changed, not what is shown). `reframe`: the runs are another view's (the
        operator changed the filter): read from the top, as a new sort is; the cursor
        keeps its run, shown as high as it can be without hiding runs above it.
        """
        if stale:
            shown = self._shown
            self._stale.update(key for key in stale if key in shown and key not in fresh)
        if order is None:
            updated = sum(self._update(row) for key, row in fresh.items() if key in self._shown)
            updated += self.refresh_visible(skip=fresh)
            self._flush_lines()
            self._announce()
            return TableChange(0, 0, updated, False)
        wanted = set(order)
        cursor_key = self.selected_key
        cursor_screen = self.cursor_row - int(self.scroll_y)
        added = removed = updated = 0
        structural = False
        gone = [k for k in self._shown if k not in wanted]
        if gone:
            for key in gone:
                del self._shown[key]
                self._marked.discard(key)
                self._stale.discard(key)
                self._painter.forget(key)
            self._rows.keep_only(wanted)
            removed = len(gone)
            structural = True
        new_rows: list[RunRow] = []
        for key in order:
            row = fresh.get(key)
            if key not in self._shown:
                if row is None:
                    row = self.row_source(key) if self.row_source else None
                    assert row is not None, f"no row for the new run {key}"
                new_rows.append(row)
            elif row is not None:
                updated += self._update(row)
        if new_rows:
            self._insert(new_rows)
            added = len(new_rows)
            structural = True
        if structural:
            if reframe and cursor_key in self._positions():
                cursor_screen = min(self._positions()[cursor_key], max(0, self.scrollable_content_region.height - 2))
            self._settle_cursor(cursor_key, cursor_screen)
            self._resize()
            self.refresh()
        updated += self.refresh_visible(skip=fresh)
        self._flush_lines()
        self._announce()
        return TableChange(added, removed, updated, False)

    def _insert(self, rows: list[RunRow]) -> None:
        for row in rows:
            self._shown[row.key] = row
            self._widen(row)
        self._rows.insert(rows)

    def _settle_cursor(self, cursor_key: str | None, cursor_screen: int) -> None:
        if not self._order:
            self.cursor_row = 0
            return
        positions = self._positions()
        if cursor_key is not None and cursor_key in positions:
            target = positions[cursor_key]
        else:
            # The run under the cursor went away: stay at the same height, on the run that took its place.
            target = min(max(self.cursor_row, 0), len(self._order) - 1)
        self.cursor_row = target
        # Keep it on the same screen line: scroll by as much as it moved, even
        # in a table shorter than the screen (the lines below its end stay blank).
        top = max(0, target - max(0, cursor_screen))
        self._resize(top)
        self._jump_to_line(top)

    def sort_by(self, column: str | None, reverse: bool | None = None) -> None:
        """Sort by a column (`None`: newest first); the same column again reverses it. The cursor keeps its run."""
        if reverse is None:
            reverse = (not self.sort_reverse) if column == self.sort_column and column is not None else False
        cursor_key = self.selected_key
        self._freshen(list(self._stale))  # sorted on what the rows show now
        self._rows.sort([self._shown[k] for k in self._order], column, reverse)
        self._header = None
        # A new order asked for is read from its top: the cursor keeps its run, shown
        # as high as it can be without hiding rows above it.
        at = self._positions().get(cursor_key, 0) if cursor_key is not None else 0
        self._settle_cursor(cursor_key, min(at, max(0, self.scrollable_content_region.height - 2)))
        self.refresh()
        self.refresh_visible()  # other runs are on screen now
        self.post_message(self.Sorted(self, column, reverse))
        self._announce()

    def action_sort(self, column: str) -> None:
        self.sort_by(column or None)

    def _update(self, row: RunRow) -> int:
        """Take a shown row's new values; refresh its line if what it shows changed. Returns the cells changed."""
        old = self._shown[row.key]
        if old == row:
            return 0
        self._shown[row.key] = row
        before, after = old.shown(), row.shown()
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        n = len(changed)
        if n:
            if self._widen(row, changed):
                self._header = None
                self._resize()
                self.refresh()
            else:
                index = self._positions().get(row.key)
                if index is not None:
                    self._refresh_cells(index, changed[0], changed[-1])
        return n

    def refresh_visible(self, skip: Mapping[str, RunRow] | None = None) -> int:
        """Bring the rows on screen up to date from `row_source`; returns how many cells changed."""
        if self.row_source is None:
            return 0
        n = 0
        stale = self._stale
        window = tuple(self.visible_keys())
        if window != self._window:
            self._window = window
            self.post_message(self.WindowChanged(self, window))
        for key in window:
            stale.discard(key)
            if skip is not None and key in skip:
                continue
            row = self.row_source(key)
            if row is not None and key in self._shown:
                n += self._update(row)
        self._flush_lines()
        return n

    def _freshen(self, keys: Collection[str]) -> None:
        """Make the rows of these runs again if they are stale (off screen, changed since drawn)."""
        if self.row_source is None or not self._stale:
            return
        for key in keys:
            if key in self._stale:
                self._stale.discard(key)
                row = self.row_source(key)
                if row is not None and key in self._shown:
                    self._update(row)

    def _jump_to_line(self, top: int) -> None:
        """Scroll to line `top` at once, and bring the rows that come into view up to date
        (their ages, and the values of runs that changed while off screen)."""
        was = int(self.scroll_y)
        super()._jump_to_line(top)
        if int(self.scroll_y) != was and self.row_source is not None:
            self.refresh_visible()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(old_value) != int(new_value) and self.row_source is not None:
            # Rows come into view with values as old as the last time they were shown.
            self.refresh_visible()

    # --- the cursor's messages, clicks, size ---------------------------------------

    def _announce(self) -> None:
        key = self.selected_key
        if key != self._last_highlighted:
            self._last_highlighted = key
            self.post_message(self.RowHighlighted(self, key))

    def action_select_cursor(self) -> None:
        key = self.selected_key
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        event.stop()
        if self._on_bar(offset.x):
            return  # the scrollbar's: on_mouse_down
        if offset.y == 0:
            column = self.column_at(offset.x)
            if column is not None:
                self.sort_by(column)
            return
        index = int(self.scroll_y) + offset.y - 1
        if 0 <= index < len(self._order):
            self.move_cursor(index)
            if event.chain >= 2:  # a double click opens it, as enter does
                self.action_select_cursor()

    def on_resize(self, event: events.Resize) -> None:
        # Rows that came in above the cursor were scrolled above the top to keep its run on its
        # line; once the view is tall enough for every run (the filter box closed, the detail
        # pane hidden), none is left hidden above empty lines. Textual would clamp the scroll
        # only part of the way (a run left above the top, blank lines below).
        if self.scroll_y and len(self._order) < self.scrollable_content_region.height:
            self._resize(0)
            self._jump_to_line(0)
        else:
            self._resize()  # the scrollbar comes or goes with the view's height
        # A taller view shows rows that were off screen: their values may be stale.
        self.refresh_visible()
