"""The footer's keys, fitted to the terminal: every key shown, its word dropped where there is no room.

Textual's `Footer` cuts off what does not fit: at 80 columns the console's
ended at "/ Fil", hiding e, d, ? and q. This bar measures first: the keys and
their words if they fit; else the acts' keys without their words (help and
the palette name them); else only quit and help keep theirs. A click on a key
presses it. It reads the screen's active bindings (public API) and follows
their changes.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget

from .tcss import load_css

# Keys that keep their word to the last: how to leave, and where every other key is explained.
KEEP_WORDS = frozenset({"app.quit", "view.help"})
GAP = 2


class KeyBar(Widget):
    """One line of keys; binding ids that start with `act.` lose their words first."""

    DEFAULT_CSS = load_css("key_bar.tcss")
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--word"}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._spans: list[tuple[int, int, str]] = []  # (from x, to x, key) of what is drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, lambda _screen: self.refresh())

    def keys(self) -> list[tuple[str, str, str, str]]:
        """(id, key, key shown, word) of every binding shown in the footer, in order."""
        out = []
        for _, binding, enabled, _ in self.screen.active_bindings.values():
            if binding.show and enabled:
                out.append((binding.id or binding.action, binding.key, self.app.get_key_display(binding), binding.description))
        return out

    @staticmethod
    def plan(keys: list[tuple[str, str, str, str]], width: int) -> set[str]:
        """The ids whose word is dropped so that the keys fit `width` cells."""

        def need(dropped: set[str]) -> int:
            return sum(cell_len(shown) + (1 + cell_len(word) if word and id_ not in dropped else 0) + GAP for id_, _, shown, word in keys)

        acts = {k[0] for k in keys if k[0].startswith("act.")}
        for dropped in (set(), acts):
            if need(dropped) <= width:
                return dropped
        return {k[0] for k in keys if k[0] not in KEEP_WORDS}

    def render(self) -> Text:
        keys = self.keys()
        dropped = self.plan(keys, self.content_region.width)
        key_style = self.get_component_rich_style("key-bar--key")
        word_style = self.get_component_rich_style("key-bar--word")
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        self._spans = []
        for id_, key, shown, word in keys:
            start = line.cell_len
            line.append(shown, key_style + Style(bold=True))
            if word and id_ not in dropped:
                line.append(" " + word, word_style)
            self._spans.append((start, line.cell_len, key))
            line.append(" " * GAP)
        return line

    def on_resize(self, event: events.Resize) -> None:
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        for start, end, key in self._spans:
            if start <= offset.x < end:
                event.stop()
                self.app.simulate_key(key)
                return
