"""The run table's scrollbar: the last cell of the table's own lines, drawn with its rows.

Textual's scrollbar is a widget laid over the scrolled widget's last column: at
every frame the compositor cuts each repainted line of the table in two there
(`Strip.divide`) to lay the bar over it. With live runs ticking, that was a
large share of the console's CPU at idle (two consoles side by side, one with
the bar and one without, on bench/console_render.py's idle store; issue 12).
Drawn by the table as one more cell of each line, the bar costs a segment; it
is repainted with the lines, and the lines are all repainted when the table scrolls, grows or changes size.

`BarredScrollView` is a `ScrollView` that draws its bar so: its subclass
(the run table) ends each line a cell early and puts `_bar_cell(y, height)`
there. The geometry is kept apart, so that it can be tested alone: a track of
`shown` lines for `total` lines, the view's top line at `top`.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.scroll_view import ScrollView


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


class BarredScrollView(ScrollView):
    """A ScrollView whose vertical scrollbar is the last cell of its own lines (see the module).

    Its CSS gives Textual's bar no room (`scrollbar-size-vertical: 0`): the wheel
    scrolls as before. A click or a drag on the bar scrolls the view there; it picks
    nothing under it (`_on_bar` tells a subclass's click handler so)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._bar = 0  # the columns the bar takes: 1 while the lines overflow the view
        self._bar_cells = BarCells()
        self._bar_look: tuple[Style, Style] | None = None  # (track, thumb), until the styles, focus or a drag change it
        self._dragging = False

    def _set_bar(self, overflows: bool) -> int:
        """Show the bar or not; returns the columns it takes."""
        bar = 1 if overflows else 0
        if bar != self._bar:
            self._bar = bar
            self.refresh()  # every line gains or loses its last cell
        return bar

    def _forget_bar_look(self) -> None:
        """The styles or the focus changed: the bar's colours are made again."""
        self._bar_look = None

    def _bar_cell(self, y: int, height: int) -> Segment:
        """Line `y`'s cell of the bar, in a view `height` lines tall."""
        if self._bar_look is None:
            styles = self.styles
            _, background = self.background_colors
            thumb = styles.scrollbar_color_active if self._dragging else styles.scrollbar_color
            self._bar_look = (
                Style(bgcolor=(background + styles.scrollbar_background).rich_color),
                Style(bgcolor=(background + thumb).rich_color),
            )
        # The bar spans the view's height (a header's line too), as Textual's does.
        start, end = thumb_span(self.virtual_size.height, height, self.scroll_y)
        return self._bar_cells.cell(start <= y < end, self._bar_look)

    def _on_bar(self, x: int) -> bool:
        return bool(self._bar) and x >= self.scrollable_content_region.width - self._bar

    def _jump_to_line(self, top: int) -> None:
        """Scroll to line `top` at once. Textual's `set_scroll` calls no watcher: the lines are repainted here."""
        was = int(self.scroll_y)
        self.set_scroll(None, top)
        if int(self.scroll_y) != was:
            self.refresh()

    def _drag_to(self, y: int) -> None:
        self._jump_to_line(top_for(self.virtual_size.height, self.scrollable_content_region.height, y))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self._on_bar(offset.x):
            return
        event.stop()
        self._dragging, self._bar_look = True, None
        self.capture_mouse()
        self._drag_to(offset.y)
        self.refresh()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            event.stop()
            self._drag_to(event.get_content_offset_capture(self).y)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            event.stop()
            self._dragging, self._bar_look = False, None
            self.release_mouse()
            self.refresh()
