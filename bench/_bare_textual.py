"""The floor under the console's figures: a Textual app of one Static and a Footer, nothing else.

    python bench/_bare_textual.py NEEDLE [--tick] [--lines N]

Shows NEEDLE; `--tick` writes the time into the Static every second, the
least a screen with a clock repaints. `q` quits. bench/console_render.py runs
it in a pseudo-terminal beside the console: its first paint there is what
Python and Textual take before any app of theirs shows a line, and its CPU
at idle what a Textual app costs to be open at all.

`--lines N`: below the Static, a line-API widget of N full-width lines, every
one of them changed and refreshed each second, each line one strip made
straight from one segment. No store, no poll, no cells: what Textual alone
takes to draw N changed lines a second, the least any Textual table costs
whose N rows on screen are live runs ticking.
"""

from __future__ import annotations

import sys
import time

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer, Static


class Lines(Widget):
    DEFAULT_CSS = "Lines { height: 1fr; }"

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.second = 0
        self.strips: list[Strip | None] = [None] * n

    def tick(self) -> None:
        self.second += 1
        self.strips = [None] * self.n
        self.refresh(*(Region(0, y, self.size.width, 1) for y in range(self.n)))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y >= self.n:
            return Strip.blank(width)
        strip = self.strips[y]
        if strip is None or strip.cell_length != width:
            text = f" run {y:04d}  running  3/5 train  {self.second}s  {1000 + 137 * self.second:,} tok".ljust(width)[:width]
            strip = self.strips[y] = Strip([Segment(text)], width)
        return strip


class Bare(App[None]):
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, needle: str, tick: bool, lines: int = 0) -> None:
        super().__init__()
        self.needle = needle
        self.tick = tick
        self.lines = lines

    def compose(self) -> ComposeResult:
        yield Static(self.needle, id="body")
        if self.lines:
            yield Lines(self.lines)
        yield Footer()

    def on_mount(self) -> None:
        if self.tick:
            self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.query_one("#body", Static).update(f"{self.needle} {time.strftime('%H:%M:%S')}")
        if self.lines:
            self.query_one(Lines).tick()


if __name__ == "__main__":
    rest = sys.argv[2:]
    n = int(rest[rest.index("--lines") + 1]) if "--lines" in rest else 0
    Bare(sys.argv[1], "--tick" in rest or n > 0, n).run()
