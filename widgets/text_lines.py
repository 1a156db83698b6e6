"""Lines of text on Textual's line API: a line is drawn when its text changes, and only its line is repainted.

The console's header and the detail pane's facts change a line or two a
second (a clock, an age, a run's usage). As a `Static` each such change
renders every line of the widget again through Textual's content pipeline and
repaints all of them: a large part of the console's whole idle budget
(bench/console_render.py, issue 12). Here each line is rendered through
Rich once, into a strip kept until its text, the width or the styles change,
and a changed line refreshes that line's region only.

Texts come in made safe (`safe_text`), never parsed as markup. A line that
does not fit is wrapped (`wrap=True`, as a Static wraps) or cut with an
ellipsis.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

_Key = tuple[str, tuple, object]


def under_style(text: Text, console: Console, base: Style) -> Style:
    """`base` with a Text's own style over it. Text.render leaves a Text's own style to its caller
    (for a Text without spans it yields bare segments): without this, the run table would draw every
    status in the plain text colour."""
    own = console.get_style(text.style) if isinstance(text.style, str) else text.style
    return base + own if own else base


def segments_of(text: Text, console: Console, base: Style) -> list[Segment]:
    """A one-line Text's segments over `base`, its own style and its spans included."""
    under = under_style(text, console, base)
    return [Segment(s.text, under + s.style if s.style else under) for s in text.render(console, end="") if s.text]


def hang_wrap(text: Text, console: Console, width: int, hang: int = 0) -> list[Text]:
    """`text` wrapped to `width`, its lines after the first `hang` cells in: a long value goes on
    under itself (the detail pane's facts and entries), not at the left edge."""
    if text.cell_len <= width and "\n" not in text.plain:
        return [text]  # nearly every line; Rich's wrap of one costs more than drawing it
    pieces = list(text.wrap(console, width, overflow="fold"))
    if len(pieces) > 1 and hang and width > hang + 8:
        rest = text[len(pieces[0].plain) :]
        rest = rest[len(rest.plain) - len(rest.plain.lstrip()) :]
        pieces = pieces[:1] + [Text(" " * hang, end="") + piece for piece in rest.wrap(console, width - hang, overflow="fold")]
    return pieces


def _key(text: Text) -> _Key:
    # Text.__eq__ compares the plain text and the spans only: a line restyled as a whole must count as changed.
    return (text.plain, tuple(text.spans), text.style)


class TextLines(Widget):
    """Lines of `Text`, each rendered once; `set_lines` repaints only the lines that changed."""

    DEFAULT_CSS = """
    TextLines {
        height: auto;
    }
    """

    def __init__(self, lines: Sequence[Text] = (), *, wrap: bool = False, hang: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.wrap = wrap
        # Wrapped, a line goes on this many cells in (the detail's facts: under the value, not the label).
        self.hang = hang
        self._texts: list[Text] = list(lines)
        self._keys: list[_Key] = [_key(t) for t in self._texts]
        # Per line: (key, width, base style, its strips at that width).
        self._drawn: list[tuple[_Key, int, Style, list[Strip]] | None] = [None] * len(self._texts)
        self._strips: list[Strip] | None = None  # every line's strips end to end, at `_width`
        self._width = -1
        self._base: Style | None = None

    def render(self) -> Text:
        """Everything shown, as one text (what a test or a dump reads)."""
        return Text("\n").join(self._texts)

    def set_lines(self, lines: Sequence[Text], hang: int | None = None) -> None:
        rehang = hang is not None and hang != self.hang
        if rehang:
            self.hang = hang
            self._drawn = [None] * len(self._drawn)
        keys = [_key(t) for t in lines]
        if keys == self._keys and not rehang:
            return
        same_count = len(keys) == len(self._keys)
        self._texts, self._keys = list(lines), keys
        self._drawn = (self._drawn + [None] * len(keys))[: len(keys)]
        old = self._strips
        self._strips = None
        width = self._content_width()
        if old is None or width <= 0 or not same_count:
            self.refresh(layout=True)
            return
        new = self._lines_at(width)
        if len(new) != len(old):
            self.refresh(layout=True)
            return
        # The same number of screen lines: repaint the ones that differ (regions are the widget's, padding included).
        top, width = self.styles.gutter.top, self.outer_size.width
        regions = [Region(0, top + y, width, 1) for y, (a, b) in enumerate(zip(old, new)) if a is not b]
        if regions:
            self.refresh(*regions)

    def _content_width(self) -> int:
        return self.content_region.width

    @property
    def _base_style(self) -> Style:
        if self._base is None:
            self._base = self.rich_style
        return self._base

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base = None
        self._drawn = [None] * len(self._texts)
        self._strips = None

    def _draw(self, text: Text, width: int, base: Style) -> list[Strip]:
        console = self.app.console
        if self.wrap:
            pieces = hang_wrap(text, console, width, self.hang) if width > 0 else [text]
        else:
            one = text.copy()
            one.no_wrap = True
            one.truncate(width, overflow="ellipsis")
            pieces = [one]
        strips = [Strip(segments_of(piece, console, base)).extend_cell_length(width, base) for piece in pieces]
        return strips or [Strip.blank(width, base)]

    def _lines_at(self, width: int) -> list[Strip]:
        """Every line's strips at `width`, drawing only the lines whose text, width or style changed."""
        if self._strips is not None and self._width == width:
            return self._strips
        base = self._base_style
        out: list[Strip] = []
        for i, (text, key) in enumerate(zip(self._texts, self._keys)):
            drawn = self._drawn[i]
            if drawn is None or drawn[0] != key or drawn[1] != width or drawn[2] != base:
                drawn = (key, width, base, self._draw(text, width, base))
                self._drawn[i] = drawn
            out.extend(drawn[3])
        self._strips, self._width = out, width
        return out

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines_at(width)) if self._texts else 0

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((t.cell_len for t in self._texts), default=0)

    def render_line(self, y: int) -> Strip:
        width = self._content_width()
        lines = self._lines_at(width)
        if 0 <= y < len(lines):
            return lines[y]
        return Strip.blank(width, self._base_style)
