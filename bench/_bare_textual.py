"""The floor under the console's figures: a Textual app of one Static and a Footer, nothing else.

    python bench/_bare_textual.py NEEDLE [--tick]

Shows NEEDLE; `--tick` writes the time into the Static every second, the
least a screen with a clock repaints. `q` quits. bench/console_render.py runs
it in a pseudo-terminal beside the console: its first paint there is what
Python and Textual take before any app of theirs shows a line, and its CPU
at idle what a Textual app costs to be open at all.
"""

from __future__ import annotations

import sys
import time

from textual.app import App, ComposeResult
from textual.widgets import Footer, Static


class Bare(App[None]):
    BINDINGS = [("q", "quit", "Quit")]

    def __init__(self, needle: str, tick: bool) -> None:
        super().__init__()
        self.needle = needle
        self.tick = tick

    def compose(self) -> ComposeResult:
        yield Static(self.needle, id="body")
        yield Footer()

    def on_mount(self) -> None:
        if self.tick:
            self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        self.query_one("#body", Static).update(f"{self.needle} {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    Bare(sys.argv[1], "--tick" in sys.argv[2:]).run()
