"""The run filter's input box: an Input whose keys the footer names while it has focus.

While it has focus, every printable key is text, so the footer has none of
the screen's keys to show (each is a letter); it shows the two that act on
the box instead.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class FilterBox(Input):
    BINDINGS = [
        Binding("enter", "submit", "Keep filter", id="filter.keep"),
        # The screen clears the filter, hides the box and gives the table its focus back.
        Binding("escape", "screen.clear_filter", "Clear filter", id="filter.clear"),
    ]
