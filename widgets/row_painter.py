"""How the run table's lines are drawn: each row's strip, and each cell's segments, kept until what they show changes.

`RunTable` (widgets/run_table.py) decides which lines to draw and how each
looks (the cursor, a mark, focus); `RowPainter` makes their strips. A row's
strip is kept keyed on everything it depends on; a live run changes a few
cells a second (its usage, ages, burn), and only those cells are made again,
the others are the segments kept from the last time (bench/run_table_lines.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from .run_row import COLUMNS, RunRow, cell_plain, cell_text
from .text_lines import segments_of, under_style

PAD = 1  # cells of padding either side of a column, as DataTable draws them
MARK = "*"  # drawn in a marked row's first cell of padding (as Midnight Commander tags files)

# A cell as last drawn: its value, width, style and mark, and its segments.
_Kept = tuple[str, int, Style, "str | None", list[Segment]]


def line_width(widths: Sequence[int]) -> int:
    """The cells a line of columns this wide takes, their padding included."""
    return sum(w + 2 * PAD for w in widths)


def _lead(mark: str, style: Style) -> Segment:
    """A marked row's first cell of padding: the mark, in bold."""
    return Segment(mark + " " * (PAD - 1), style + Style(bold=True))


class RowPainter:
    """The run table's strips, one kept a row, keyed on what it shows and how."""

    def __init__(self) -> None:
        self._strips: dict[str, tuple[tuple, Strip]] = {}
        self._cell_segments: dict[str, dict[int, _Kept]] = {}
        self._texts: dict[str, tuple[tuple[str, ...], list[Text]]] = {}

    def kept(self, key: str, sig: tuple) -> Strip | None:
        """The row's strip if it was last drawn under `sig` (its values, widths and looks)."""
        cached = self._strips.get(key)
        return cached[1] if cached is not None and cached[0] == sig else None

    def row(
        self, key: str, sig: tuple, shown: tuple[str, ...], widths: Sequence[int], style: Style, mark: str | None, console: Console,
        tail: Sequence[Segment] = (),
    ) -> Strip:
        """Draw a run's line: its cells end to end, each made again only when its value, width, style or mark changed,
        then `tail` (one cell a character: the blank up to the table's edge, its scrollbar's cell).

        A plain cell that fits, its padding included, is one segment, made here; Rich
        renders only a status (its look) or a value too wide for its column."""
        kept = self._cell_segments.setdefault(key, {})
        segments: list[Segment] = []
        for i, (value, width) in enumerate(zip(shown, widths)):
            lead = mark if i == 0 else None
            done = kept.get(i)
            if done is not None and done[0] == value and done[1] == width and (done[2] is style or done[2] == style) and done[3] == lead:
                segments.extend(done[4])
                continue
            column = COLUMNS[i][0]
            rendered: list[Segment] | None = None
            if column != "status":
                plain = cell_plain(column, value)
                used = cell_len(plain)
                if used <= width:
                    body = plain + " " * (width - used + PAD)
                    rendered = [Segment(" " * PAD + body, style)] if lead is None else [_lead(lead, style), Segment(body, style)]
            if rendered is None:
                rendered = _cell(cell_text(column, value), width, style, lead, console)
            kept[i] = (value, width, style, lead, rendered)
            segments.extend(rendered)
        segments.extend(tail)
        strip = Strip(segments, line_width(widths) + sum(len(t.text) for t in tail))
        self._strips[key] = (sig, strip)
        return strip

    def texts(self, row: RunRow) -> list[Text]:
        """The Text each of a row's cells shows (made safe): its status in its look."""
        shown = row.shown()
        cached = self._texts.get(row.key)
        if cached is not None and cached[0] == shown:
            return cached[1]
        if cached is None:
            cells = [cell_text(col, value) for (col, _, _), value in zip(COLUMNS, shown)]
        else:
            # A live run changes a cell or two a poll (its usage, an age): the others keep their Text.
            before, old = cached
            cells = [cell if value == was else cell_text(col, value) for (col, _, _), value, was, cell in zip(COLUMNS, shown, before, old)]
        self._texts[row.key] = (shown, cells)
        return cells

    def forget(self, key: str) -> None:
        """A run left the table."""
        self._strips.pop(key, None)
        self._texts.pop(key, None)
        self._cell_segments.pop(key, None)

    def redraw(self) -> None:
        """Draw every row again: the widget's styles changed (its strips are in the old ones)."""
        self._strips.clear()
        self._cell_segments.clear()

    def restyle(self) -> None:
        """The status looks changed (a new theme): every cell again, its Text too."""
        self._texts.clear()
        self._cell_segments.clear()  # kept by value: a status's look is not in its value
        self._strips.clear()

    def widened(self) -> None:
        """A column's width changed: the rows' strips are of the old widths (their cells are kept by width)."""
        self._strips.clear()


def line(cells: Sequence[Text], widths: Sequence[int], style: Style, console: Console) -> Strip:
    """A line of Texts (the header's titles), every cell rendered."""
    segments: list[Segment] = []
    for cell, width in zip(cells, widths):
        segments.extend(_cell(cell, width, style, None, console))
    return Strip(segments, line_width(widths))


def _cell(cell: Text, width: int, style: Style, lead: str | None, console: Console) -> list[Segment]:
    """A cell's segments through Rich: its padding (a mark in the first), its Text cut to `width`."""
    pad = Segment(" " * PAD, style)
    rendered = [_lead(lead, style) if lead else pad]
    used = cell_len(cell.plain)
    if not cell.spans and used <= width:
        rendered.append(Segment(cell.plain + " " * (width - used), under_style(cell, console, style)))
    else:
        text = cell.copy()
        text.truncate(width, overflow="ellipsis", pad=True)
        rendered.extend(segments_of(text, console, style))
    rendered.append(pad)
    # Joined once, when the cell is made: the line is then its cells end to end.
    return list(Segment.simplify(rendered))
