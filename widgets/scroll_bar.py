"""The run table's scrollbar: the last cell of the table's own lines, drawn with its rows.

Textual's scrollbar is a widget laid over the scrolled widget's last column: at
every frame the compositor cuts each repainted line of the table in two there
(`Strip.divide`) to lay the bar over it. With 50 live runs ticking, that cost
the console 12 % of its CPU at idle (two consoles side by side, one with it and
one without, bench/console_render.py's idle case). Drawn by the table as one
more cell of each line, the bar costs a segment; it is repainted with the lines,
and the lines are all repainted when the table scrolls, grows or changes size.

The geometry is here, kept apart from the widget, so that it can be tested
alone: a track of `shown` lines for `total` lines, the view's top line at `top`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style


def thumb_span(total: int, shown: int, top: float) -> tuple[int, int]:
    """The track lines [start, end) the thumb covers: its length is the share of the rows
    in view, its place how far down the view is. All of the track when every row fits."""
    if shown <= 0:
        return (0, 0)
    if total <= shown:
        return (0, shown)
    size = max(1, round(shown * shown / total))
    room = shown - size
    start = round(min(max(top, 0), total - shown) * room / (total - shown))
    start = min(max(start, 0), room)
    return (start, start + size)


def top_for(total: int, shown: int, y: int) -> int:
    """The view's top row that puts the thumb's middle on track line `y` (a click or a drag there)."""
    if total <= shown or shown <= 0:
        return 0
    size = max(1, round(shown * shown / total))
    room = shown - size
    if room <= 0:
        return 0
    start = min(max(y - size // 2, 0), room)
    return round(start * (total - shown) / room)


class BarCells:
    """The bar's two cells, the track's and the thumb's, made once per look."""

    def __init__(self) -> None:
        self._cells: tuple[Segment, Segment] | None = None
        self._look: tuple[Style, Style] | None = None

    def cell(self, thumb: bool, look: tuple[Style, Style]) -> Segment:
        """The thumb's cell or the track's; `look`: their styles, the track's first."""
        if look != self._look or self._cells is None:
            self._look = look
            self._cells = (Segment(" ", look[0]), Segment(" ", look[1]))
        return self._cells[thumb]
