"""The run table's lines: the header and a line per run on Textual's line API, and the cursor.

`RowLines` holds the runs shown (`RunRow`s by key, in `RowOrder`'s order), the
column widths, the marks and the cursor, and draws them: each row's strip is
kept by `RowPainter`, keyed on the values it shows, the column widths and
whether the cursor is on it, and a change repaints only the lines (or the
cells of a line) marked since the last flush. What the lines show, and when it
changes, is the run table's (`RunTable`, run_table.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.strip import Strip

from .row_order import RowOrder
from .row_painter import MARK, PAD, RowPainter, line, line_width
from .run_row import COLUMNS, RunRow, cell_width
from .scroll_bar import BarredScrollView


class RowLines(BarredScrollView):
    """Keyed rows under a header on the line API, with a cursor; repaints only what was marked changed."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._shown: dict[str, RunRow] = {}
        self._rows = RowOrder()
        self.cursor_row = 0
        self._widths = [len(title) for _, title, _ in COLUMNS]
        self._painter = RowPainter()
        # Row indexes to repaint at the next flush, each with the cells (x from, x to) that
        # changed; None: the whole line (the cursor, a mark).
        self._dirty_lines: dict[int, tuple[int, int] | None] = {}
        self._header: tuple[tuple, Strip] | None = None
        self._marked: set[str] = set()
        self._base: Style | None = None  # the widget's own rich style, until its styles change

    def _announce(self) -> None:
        """The cursor may be on another run: the run table says so."""

    @property
    def _order(self) -> list[str]:
        """The keys in the order shown."""
        return self._rows.keys

    @property
    def sort_column(self) -> str | None:
        """The column the rows are sorted by; None: newest first."""
        return self._rows.column

    @property
    def sort_reverse(self) -> bool:
        return self._rows.reverse

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def selected_key(self) -> str | None:
        if not self._order:
            return None
        return self._order[min(max(self.cursor_row, 0), len(self._order) - 1)]

    def get_row_index(self, key: str) -> int:
        index = self._positions().get(key)
        if index is None:
            raise KeyError(key)
        return index

    def select(self, key: str) -> bool:
        index = self._positions().get(key)
        if index is None:
            return False
        self.move_cursor(index)
        return True

    def _positions(self) -> dict[str, int]:
        return self._rows.positions()

    def _widen(self, row: RunRow, columns: Sequence[int] | None = None) -> bool:
        """Widen a column for a wider value; never narrow one (that would re-measure every row).

        `columns`: only these changed (a live row's usage or age), the others were measured before."""
        wider = False
        shown = row.shown()
        widths = self._widths
        for i in range(len(shown)) if columns is None else columns:
            width = cell_width(COLUMNS[i][0], shown[i])
            if width > widths[i]:
                widths[i] = width
                wider = True
        return wider

    def _resize(self, top: int | None = None) -> None:
        """Set the virtual size: every row and the header, and room to keep the view's top at `top`."""
        top = int(self.scroll_y) if top is None else top
        height = len(self._order) + 1
        view = self.scrollable_content_region.height
        if top > 0:
            height = max(height, top + view)
        bar = self._set_bar(height > view)
        self.virtual_size = Size(self._total_width() + bar, height)

    def _total_width(self) -> int:
        return line_width(self._widths)

    def _refresh_key(self, key: str) -> None:
        index = self._positions().get(key)
        if index is not None:
            self._refresh_row_index(index)

    def visible_keys(self) -> list[str]:
        """The runs whose rows are on screen now."""
        if not self._order:
            return []
        top = int(self.scroll_y)
        height = max(1, self.scrollable_content_region.height)
        return self._order[top : top + height]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._painter.redraw()
        self._header = None
        self._base = None
        self._forget_bar_look()

    def restyle(self) -> None:
        """The status looks changed (a new theme): draw every cell again."""
        self._painter.restyle()
        self.refresh()

    def move_cursor(self, row: int) -> None:
        if not self._order:
            self.cursor_row = 0
            return
        row = min(max(row, 0), len(self._order) - 1)
        old = self.cursor_row
        self.cursor_row = row
        if old != row:
            self._refresh_row_index(old)
            self._refresh_row_index(row)
            self._flush_lines()
        self._scroll_cursor_into_view()
        self._announce()

    def _refresh_row_index(self, index: int) -> None:
        # Marked by row index; the screen lines are worked out once, at the flush
        # (a live poll marks dozens of rows: the widget's size and scroll once, not per row).
        self._dirty_lines[index] = None

    def _refresh_cells(self, index: int, first: int, last: int) -> None:
        """Repaint only columns `first`..`last` of a row: a live row changes its usage or an
        age, and the terminal is sent those cells, not the line (bench/console_render.py)."""
        if index in self._dirty_lines and self._dirty_lines[index] is None:
            return
        x0 = line_width(self._widths[:first])
        x1 = x0 + line_width(self._widths[first : last + 1])
        was = self._dirty_lines.get(index)
        self._dirty_lines[index] = (min(x0, was[0]), max(x1, was[1])) if was is not None else (x0, x1)

    def _flush_lines(self) -> None:
        """Repaint the rows marked since the last flush, in one refresh."""
        if self._dirty_lines:
            # The screen line of a row (the header is line 0). `ScrollView.refresh_line`
            # takes a line of the virtual view and would subtract the scroll a second time.
            top = int(self.scroll_y) - 1
            scroll_x = int(self.scroll_x)
            width, height = self.size
            regions = []
            for index, cells in self._dirty_lines.items():
                y = index - top
                if not 1 <= y < height:
                    continue
                if cells is None:
                    regions.append(Region(0, y, width, 1))
                else:
                    x0, x1 = max(0, cells[0] - scroll_x), min(width, cells[1] - scroll_x)
                    if x1 > x0:
                        regions.append(Region(x0, y, x1 - x0, 1))
            self._dirty_lines.clear()
            if regions:
                self.refresh(*regions)

    def _scroll_cursor_into_view(self) -> None:
        rows_shown = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self._jump_to_line(self.cursor_row)
        elif self.cursor_row >= top + rows_shown:
            self._jump_to_line(self.cursor_row - rows_shown + 1)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)

    def action_cursor_up(self) -> None:
        self.move_cursor(self.cursor_row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(self.cursor_row + 1)

    def action_page_up(self) -> None:
        self.move_cursor(self.cursor_row - self._page())

    def action_page_down(self) -> None:
        self.move_cursor(self.cursor_row + self._page())

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self._order) - 1)

    def column_at(self, x: int) -> str | None:
        """The column key under a content x (scrolled), or None past the last column."""
        x += int(self.scroll_x)
        edge = 0
        for (col, _, _), width in zip(COLUMNS, self._widths):
            edge += width + 2 * PAD
            if x < edge:
                return col
        return None

    def on_focus(self, event: events.Focus) -> None:
        self._base = None
        self._forget_bar_look()
        self.refresh()

    def on_blur(self, event: events.Blur) -> None:
        self._base = None
        self._forget_bar_look()
        self.refresh()

    @property
    def _base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def render_line(self, y: int) -> Strip:
        view = self.scrollable_content_region
        width = view.width
        bar = self._bar if width > 1 else 0
        scroll_x = int(self.scroll_x)
        base = self._base_style
        if y == 0:
            strip = self._header_strip()
        else:
            index = int(self.scroll_y) + y - 1
            if index >= len(self._order):
                if not bar:
                    return Strip.blank(width, base)
                return Strip([Segment(" " * (width - bar), base), self._bar_cell(y, view.height)], width)
            key = self._order[index]
            fill = width - bar - self._total_width()
            if scroll_x == 0 and fill >= 0:
                # The line made whole, one strip: its cells, blank up to the bar, the bar's cell.
                # (Cropped, extended and joined, each step a strip more, for each line a poll changes.)
                tail = ((Segment(" " * fill, base),) if fill else ()) + ((self._bar_cell(y, view.height),) if bar else ())
                return self._row_strip(key, index == self.cursor_row, key in self._marked, tail)
            strip = self._row_strip(key, index == self.cursor_row, key in self._marked)
        strip = strip.crop_extend(scroll_x, scroll_x + width - bar, base)
        return Strip([*strip, self._bar_cell(y, view.height)], width) if bar else strip

    def _header_strip(self) -> Strip:
        sig = (tuple(self._widths), self.sort_column, self.sort_reverse, self.has_focus)
        if self._header is not None and self._header[0] == sig:
            return self._header[1]
        style = self._base_style + self.get_component_rich_style("run-table--header")
        titles = []
        for col, title, _ in COLUMNS:
            mark = (" ▼" if self.sort_reverse else " ▲") if col == self.sort_column else ""
            titles.append(Text(title + mark))
        widths = list(self._widths)
        # The indicator may need room the column lacks: the header grows it.
        for i, t in enumerate(titles):
            if t.cell_len > widths[i]:
                self._widths[i] = widths[i] = t.cell_len
                self._resize()
                self._painter.widened()
        sig = (tuple(self._widths), self.sort_column, self.sort_reverse, self.has_focus)
        strip = line(titles, self._widths, style, self.app.console)
        self._header = (sig, strip)
        return strip

    def _row_strip(self, key: str, cursor: bool, marked: bool = False, tail: tuple[Segment, ...] = ()) -> Strip:
        shown = self._shown[key].shown()
        sig = (shown, tuple(self._widths), cursor, self.has_focus, marked, tail)
        strip = self._painter.kept(key, sig)
        if strip is not None:
            return strip
        style = self._base_style
        if marked:
            style = style + self.get_component_rich_style("run-table--marked")
        if cursor:
            style = style + self.get_component_rich_style("run-table--cursor" if self.has_focus else "run-table--cursor-blurred")
        return self._painter.row(key, sig, shown, self._widths, style, MARK if marked else None, self.app.console, tail)
