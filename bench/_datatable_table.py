"""The console's run table before the line API (Textual's DataTable), kept for bench/console_render.py.

Not used by the console: the benchmark swaps it in to measure the two tables
side by side in one run. It shows the owner's order, as it did.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

from swarmkit.widgets.run_row import COLUMNS, RunRow, TableChange, cell_text
from swarmkit.widgets.run_table import RunTable as LineRunTable

_FIELD_TO_COLUMN = {field: col for col, _, field in COLUMNS}


class DataTableRunTable(DataTable):
    """A DataTable of runs.

    Never cleared and rebuilt: `show` removes gone rows, adds new ones and
    updates only the cells whose text changed, inside one batch update, and
    puts the cursor back on the run it was on.

    A poll costs what changed, not what is shown: the owner hands over rows
    only for runs whose values may have changed. Cells that move with the
    clock alone (ages) are refreshed from `row_source` for the rows on screen,
    at every `show` and as rows scroll into view; a row off screen is brought
    up to date when it is scrolled to.
    """

    DEFAULT_CSS = """
    DataTableRunTable {
        height: 1fr;
        scrollbar-size-vertical: 1;
    }
    DataTableRunTable > .datatable--header {
        text-style: bold;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._shown: dict[str, RunRow] = {}
        # The keys in the order shown, kept here: DataTable.ordered_rows is
        # rebuilt after every cell update, O(rows).
        self._order: list[str] = []
        # The id cell of each row, by run id: DataTable.sort only hands its key
        # function cell values, and the id cell's identity names the run.
        self._id_cells: dict[str, Text] = {}
        # The owner's current row for a run, for rows on screen between two `show` calls.
        self.row_source: Callable[[str], RunRow | None] | None = None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The screen listens to the line table's messages.
        self.post_message(LineRunTable.RowHighlighted(self, self.selected_key))  # type: ignore[arg-type]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if self.selected_key is not None:
            self.post_message(LineRunTable.RowSelected(self, self.selected_key))  # type: ignore[arg-type]

    def on_mount(self) -> None:
        for key, header, _ in COLUMNS:
            self.add_column(header, key=key)

    @property
    def selected_key(self) -> str | None:
        if not self._shown or self.row_count == 0:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # the cursor is past the end while rows change
            return None
        return row_key.value

    @property
    def shown_keys(self) -> list[str]:
        return [row.key.value for row in self.ordered_rows if row.key.value is not None]

    def row_for(self, key: str) -> RunRow | None:
        return self._shown.get(key)

    def select(self, key: str) -> bool:
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index)
        return True

    def show_rows(self, rows: Sequence[RunRow]) -> TableChange:
        """Make the table show exactly `rows`, in that order."""
        return self.show([row.key for row in rows], {row.key: row for row in rows})

    def show(self, order: Sequence[str] | None, fresh: Mapping[str, RunRow], *, stale: Collection[str] = (), reframe: bool = False) -> TableChange:
        """Make the table show the runs `order` names, in that order (None: the same as before).

        `fresh` holds the row of every run not shown yet and of every run whose
        values may have changed; the others keep what they show, but for the
        rows on screen, which are refreshed from `row_source`. `stale` names more
        runs whose values may have changed: their rows are made from `row_source`
        at once, as the console made every changed run's row before the line
        table came (the line table leaves those off screen until they are seen).
        """
        if stale and self.row_source is not None:
            fresh = dict(fresh)
            for key in stale:
                if key not in fresh and (row := self.row_source(key)) is not None:
                    fresh[key] = row
        order = list(self._order if order is None else order)
        wanted = set(order)
        cursor_key = self.selected_key
        cursor_index = self.cursor_row
        added = removed = updated = 0
        reordered = False
        with self.app.batch_update():
            gone = [k for k in self._shown if k not in wanted]
            for key in gone:
                self.remove_row(key)
                del self._shown[key]
                del self._id_cells[key]
                removed += 1
            if gone:
                self._order = [k for k in self._order if k in wanted]
            for key in order:
                row = fresh.get(key)
                if key not in self._shown:
                    if row is None:
                        row = self.row_source(key) if self.row_source else None
                        assert row is not None, f"no row for the new run {key}"
                    cells = [cell_text(col, getattr(row, field)) for col, _, field in COLUMNS]
                    self.add_row(*cells, key=row.key)
                    self._id_cells[row.key] = cells[0]
                    self._shown[row.key] = row
                    self._order.append(row.key)
                    added += 1
                elif row is not None:
                    updated += self._update(row)
            if order != self._order:
                rank = {id(self._id_cells[key]): i for i, key in enumerate(order)}
                self.sort("id", key=lambda cell: rank[id(cell)])
                self._order = order
                reordered = True
            if order:
                if cursor_key is not None and cursor_key in wanted:
                    target = self.get_row_index(cursor_key)
                else:
                    # The run under the cursor went away: stay at the same
                    # height, on the run that took its place.
                    target = min(max(cursor_index, 0), len(order) - 1)
                if target != self.cursor_row or reordered or added or removed:
                    self.move_cursor(row=target)
            updated += self.refresh_visible(skip=fresh)
        return TableChange(added, removed, updated, reordered)

    def _update(self, row: RunRow) -> int:
        """Update the cells of a shown row whose text changed; returns how many."""
        old = self._shown[row.key]
        if old == row:
            return 0
        n = 0
        for field, column in _FIELD_TO_COLUMN.items():
            value = getattr(row, field)
            if value != getattr(old, field):
                cell = cell_text(column, value)
                # Widen a column for a wider value; never re-measure a whole
                # column for a narrower one (DataTable does that per cell,
                # O(rows) each: seconds for a poll of a hundred changes).
                wider = cell.cell_len > self.columns[ColumnKey(column)].content_width
                self.update_cell(row.key, column, cell, update_width=wider)
                n += 1
        self._shown[row.key] = row
        return n

    def visible_keys(self) -> list[str]:
        """The runs whose rows are on screen now."""
        if not self._order:
            return []
        top = int(self.scroll_y)
        height = max(1, self.scrollable_content_region.height)
        return self._order[top : top + height + 1]

    def refresh_visible(self, skip: Mapping[str, RunRow] | None = None) -> int:
        """Bring the rows on screen up to date from `row_source`; returns how many cells changed."""
        if self.row_source is None:
            return 0
        n = 0
        for key in self.visible_keys():
            if skip is not None and key in skip:
                continue
            row = self.row_source(key)
            if row is not None and key in self._shown:
                n += self._update(row)
        return n

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(old_value) != int(new_value) and self.row_source is not None:
            # Rows come into view with values as old as the last time they were shown.
            self.refresh_visible()


def swap_table(table: type) -> None:
    """Make the console build and find its run table as `table`: every screen that names the class by module global."""
    import swarmkit.console.acting_screen as acting_screen
    import swarmkit.console.detail_screen as detail_screen
    import swarmkit.console.main_screen as main_screen

    for module in (main_screen, acting_screen, detail_screen):
        module.RunTable = table  # type: ignore[attr-defined]


def use() -> None:
    """Make the console build this table (the screen looks its table class up by name)."""
    swap_table(DataTableRunTable)


def use_blank(after_s: float = 2.5) -> None:
    """The console's floor: its run table paints blank rows `after_s` seconds after start (the header stays).

    Everything else runs as usual (polls, diffing, the lines refreshed, the
    header, the detail): the CPU at idle minus this floor is what painting rows costs.
    """
    import time

    from textual.strip import Strip

    start = time.monotonic()
    real = LineRunTable.render_line

    def render_line(self: LineRunTable, y: int) -> Strip:
        if y == 0 or time.monotonic() - start < after_s:
            return real(self, y)
        return Strip.blank(self.size.width, self.rich_style)

    LineRunTable.render_line = render_line  # type: ignore[method-assign]
