"""A run's log: follows new lines, pauses when scrolled up, pages older lines in on demand.

A Line API widget: it renders only the rows on screen, so a long log costs
memory for its lines and nothing more. Lines arrive as `LogLine` records made
by the caller; the widget never parses them as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .safe_text import safe
from .tcss import load_css

# One runaway line must not make the whole view as wide as a megabyte.
MAX_SHOWN_CHARS = 2000
NODE_WIDTH = 14


@dataclass(frozen=True)
class LogLine:
    """One line of a run's trail.

    kind: "log" (an agent printed it), "node" (a node boundary), "event"
    (the run changed: stop requested, stopped, cancelled...), "note" (the
    runtime's own remarks, e.g. signals sent).
    """

    id: int
    time: str
    kind: str
    node: str
    text: str

    @property
    def searchable(self) -> str:
        return f"{self.node} {self.text}"


class LineList:
    """The lines a log holds, kept as plain tuples and handed out as `LogLine`.

    The garbage collector stops tracking a tuple of strings and numbers; it
    tracks every dataclass instance. A fast log followed for a while holds
    hundreds of thousands of lines, and as objects each full collection walked
    them all: long pauses, the display's worst lag (bench/logs.py).
    """

    __slots__ = ("_rows",)

    def __init__(self, lines: Iterable[LogLine] = ()) -> None:
        self._rows: list[tuple] = [_row(line) for line in lines]

    def __len__(self) -> int:
        return len(self._rows)

    def __bool__(self) -> bool:
        return bool(self._rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [LogLine(*row) for row in self._rows[index]]
        return LogLine(*self._rows[index])

    def __setitem__(self, index: slice, lines: Iterable[LogLine]) -> None:
        self._rows[index] = [_row(line) for line in lines]

    def __delitem__(self, index) -> None:
        del self._rows[index]

    def __iter__(self):
        return (LogLine(*row) for row in self._rows)

    def extend(self, lines: Iterable[LogLine]) -> None:
        self._rows.extend(_row(line) for line in lines)

    def id_at(self, index: int) -> int:
        return self._rows[index][0]

    def searchable_at(self, index: int) -> str:
        row = self._rows[index]
        return f"{row[3]} {row[4]}"


def _row(line: LogLine) -> tuple:
    return (line.id, line.time, line.kind, line.node, line.text)


def line_text(line: LogLine) -> Text:
    text = safe(line.text, MAX_SHOWN_CHARS, tabs=True)
    out = Text(no_wrap=True, end="")
    out.append(safe(line.time) + " ", style="dim")
    if line.kind == "node":
        out.append("━━ " + text + " ", style="bold cyan")
        out.append("━" * max(4, 48 - len(text)), style="cyan")
    elif line.kind == "event":
        out.append("▸ " + text, style="bold yellow")
    elif line.kind == "note":
        out.append("· " + text, style="dim italic")
    else:
        node = safe(line.node, NODE_WIDTH)
        out.append(node.ljust(NODE_WIDTH), style="cyan")
        out.append(" │ ", style="dim")
        out.append(text)
    out.expand_tabs(8)
    return out


def line_width(line: LogLine) -> int:
    """The cells `line_text(line)` takes, without building it (tabs may make it a little wider)."""
    text = cell_len(safe(line.text, MAX_SHOWN_CHARS, tabs=True))
    prefix = cell_len(safe(line.time)) + 1
    if line.kind == "node":
        return prefix + 3 + text + 1 + max(4, 48 - text)
    if line.kind in ("event", "note"):
        return prefix + 2 + text
    return prefix + NODE_WIDTH + 3 + text


class LogTail(ScrollView, can_focus=True):
    """Shows log lines; follows the end unless the reader scrolled away from it."""

    DEFAULT_CSS = load_css("log_tail.tcss")

    BINDINGS = [
        Binding("end", "follow", "Follow", id="log.follow_end", show=False),
        Binding("f", "follow", "Follow", id="log.follow"),
    ]

    follow: var[bool] = var(True)

    class FollowChanged(Message):
        """Follow switched on or off, or the count of unseen lines changed."""

        def __init__(self, log: LogTail, follow: bool, waiting: int) -> None:
            super().__init__()
            self.log = log
            self.follow = follow
            self.waiting = waiting

        def can_replace(self, message: Message) -> bool:
            # A burst of appends while paused only needs the latest count.
            return isinstance(message, LogTail.FollowChanged) and message.log is self.log

    class NeedOlder(Message):
        """The reader reached the top of what is loaded and older lines exist."""

        def __init__(self, log: LogTail, before_id: int) -> None:
            super().__init__()
            self.log = log
            self.before_id = before_id

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogTail.NeedOlder) and message.log is self.log

    def __init__(self, *, max_lines: int = 200_000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines = LineList()
        self.max_lines = max_lines
        self.waiting = 0
        self.more_older = False
        self.search_term = ""
        self.current_match: int | None = None
        self._width = 0
        # A few screens of rendered lines: a bigger cache only holds lines that
        # scrolled by, and every Strip in it is objects for the collector to walk.
        self._cache: LRUCache[tuple[int, str, bool], Strip] = LRUCache(512)
        # Scrolls made by the widget itself (prepend, trim) are not the reader's.
        self._adjusting = False

    # --- content ------------------------------------------------------------

    @property
    def first_id(self) -> int | None:
        return self.lines.id_at(0) if self.lines else None

    @property
    def last_id(self) -> int | None:
        return self.lines.id_at(-1) if self.lines else None

    def _measure(self, lines: Iterable[LogLine]) -> None:
        # Arithmetic, not rendering: a page of thousands of lines is measured at once.
        for line in lines:
            self._width = max(self._width, line_width(line))

    def append(self, lines: Sequence[LogLine]) -> None:
        if not lines:
            return
        self.lines.extend(lines)
        self._measure(lines)
        if len(self.lines) > self.max_lines and self.follow:
            drop = len(self.lines) - self.max_lines
            del self.lines[:drop]
            self.more_older = True
            if self.current_match is not None:
                self.current_match = self.current_match - drop if self.current_match >= drop else None
        self.virtual_size = Size(self._width, len(self.lines))
        if self.follow:
            self._adjusting = True
            self._to_end()
            self._adjusting = False
            self.refresh()
        else:
            self.waiting += len(lines)
            self.post_message(self.FollowChanged(self, self.follow, self.waiting))
            self.refresh()

    def prepend(self, lines: Sequence[LogLine], *, more_older: bool) -> None:
        """Older lines above the first one; the view stays on the lines it showed."""
        self.more_older = more_older
        if not lines:
            self.refresh()
            return
        self.lines[:0] = lines
        self._measure(lines)
        if self.current_match is not None:
            self.current_match += len(lines)
        self.virtual_size = Size(self._width, len(self.lines))
        self._adjusting = True
        self.scroll_to(y=self.scroll_y + len(lines), animate=False, immediate=True, force=True)
        self._adjusting = False
        self.refresh()

    def reset(self, lines: Sequence[LogLine], *, more_older: bool) -> None:
        self.lines = LineList(lines)
        self._width = 0
        self._measure(lines)
        self.more_older = more_older
        self.waiting = 0
        self.current_match = None
        self._cache.clear()
        self.virtual_size = Size(self._width, len(self.lines))
        self._adjusting = True
        self._to_end()
        self._adjusting = False
        self.refresh()

    def _to_end(self) -> None:
        # Forced: right after the content grew, the scrollbars are not laid
        # out yet and an unforced scroll would be refused.
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)

    # --- follow ---------------------------------------------------------------

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.waiting = 0
        self.post_message(self.FollowChanged(self, follow, self.waiting))

    def action_follow(self) -> None:
        self.follow = True
        self.waiting = 0
        self.post_message(self.FollowChanged(self, True, 0))
        self._adjusting = True
        self._to_end()
        self._adjusting = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._adjusting:
            return
        if self.follow and new_value < old_value and new_value < self.max_scroll_y:
            self.follow = False
        elif not self.follow and new_value > old_value and new_value >= self.max_scroll_y:
            # The reader scrolled back down to the end: follow again.
            self.follow = True
        if new_value < old_value and new_value <= 1:
            self._want_older()

    def _want_older(self) -> None:
        if self.more_older and self.lines:
            self.post_message(self.NeedOlder(self, self.lines.id_at(0)))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if self.scroll_y <= 1:
            self._want_older()

    def action_scroll_up(self) -> None:
        super().action_scroll_up()
        if self.scroll_y <= 1:
            self._want_older()

    def action_page_up(self) -> None:
        super().action_page_up()
        if self.scroll_y <= 1:
            self._want_older()

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._want_older()

    # --- search ---------------------------------------------------------------

    def search(self, term: str, *, older: bool = True) -> bool:
        """Move to the next line holding `term` (case-insensitive), older or newer; False when none is loaded."""
        term = term.strip()
        if term != self.search_term:
            self.search_term = term
            self._cache.clear()
            self.refresh()
        if not term or not self.lines:
            return False
        needle = term.lower()
        if self.current_match is not None:
            start = self.current_match
        else:
            start = min(len(self.lines), int(self.scroll_y) + self.scrollable_content_region.height)
        indexes = range(start - 1, -1, -1) if older else range(start + 1, len(self.lines))
        for i in indexes:
            if needle in self.lines.searchable_at(i).lower():
                self.go_to_index(i)
                return True
        return False

    def go_to_index(self, index: int) -> None:
        self.current_match = index
        self._cache.clear()
        self.follow = False
        height = max(1, self.scrollable_content_region.height)
        self._adjusting = True
        self.scroll_to(y=max(0, index - height // 2), animate=False, immediate=True, force=True)
        self._adjusting = False
        self.refresh()

    def clear_search(self) -> None:
        self.search_term = ""
        self.current_match = None
        self._cache.clear()
        self.refresh()

    def index_of(self, event_id: int) -> int | None:
        for i in range(len(self.lines) - 1, -1, -1):
            if self.lines.id_at(i) == event_id:
                return i
        return None

    # --- rendering ------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        rich_style = self.rich_style
        if index >= len(self.lines):
            return Strip.blank(width, rich_style)
        line = self.lines[index]
        current = index == self.current_match
        key = (line.id, self.search_term, current)
        strip = self._cache.get(key)
        if strip is None:
            text = line_text(line)
            if self.search_term:
                text.highlight_words([self.search_term], style="reverse", case_sensitive=False)
            if current:
                text.stylize("on grey30")
            text.style = rich_style
            strip = Strip(text.render(self.app.console), text.cell_len)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, rich_style).apply_offsets(scroll_x, index)
