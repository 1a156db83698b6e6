"""The `swarmkit-console` Textual app. Thin: it pushes the main screen; the screens do the work."""

from __future__ import annotations

import errno
import gc
import os
import sys
import termios
from collections.abc import Callable
from datetime import datetime

from textual.app import App
from textual.theme import Theme

from swarmkit.runtime.settings import Settings
from swarmkit.store.clock import store_now
from swarmkit.widgets.status_look import use_theme

from .config import ConsoleConfig
from .main_screen import MainScreen
from .user_settings import save_theme, saved_theme


class ConsoleApp(App[None]):
    TITLE = "swarmkit-console"
    CSS_PATH = "console.tcss"
    # Classes on each screen by the terminal's height: the main screen's layout
    # follows them (console.tcss), so that 80x24 shows a dozen rows and more.
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, config: ConsoleConfig, theme: str | None = None) -> None:
        super().__init__()
        self.config = config
        if config.read_only:
            self.sub_title = "read-only"
        # `--theme`, else the last one chosen, else Textual's default.
        chosen = theme or saved_theme()
        if chosen in self.available_themes:
            self.theme = chosen
        use_theme(self.get_css_variables())

    def on_mount(self) -> None:
        # Only a choice made here (the palette's theme picker) is kept for next time.
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.push_screen(MainScreen(self.config))
        self.call_after_refresh(_after_first_frame)
        if not self.is_headless and not self.is_web and sys.__stdin__ is not None and os.isatty(sys.__stdin__.fileno()):
            self.set_interval(1.0, self._end_if_terminal_gone)

    def _end_if_terminal_gone(self) -> None:
        """A terminal that closed with no SIGHUP reaching the console (one started by a program that
        gives it no controlling terminal: setsid, a supervisor) ends it as `q` does. Otherwise
        Textual's input thread reads end-of-file without end, a core at 100 %, and its output
        thread dies at the first write: the app blocks on a full queue and never ends (issue 12)."""
        try:
            termios.tcgetattr(sys.__stdin__.fileno())  # type: ignore[union-attr]
        except termios.error as exc:
            if exc.args and exc.args[0] == errno.EIO:  # hung up
                self.exit()

    def _theme_changed(self, theme: Theme) -> None:
        use_theme(self.get_css_variables())
        save_theme(theme.name)
        for screen in self.screen_stack:
            for widget in screen.query("RunTable, StateCounts, RunDetail"):
                widget.restyle()  # type: ignore[attr-defined]


def _after_first_frame() -> None:
    # What start-up made (modules, the app, its widgets) lives as long as the
    # console: out of the cyclic collector's way, a full collection walks
    # only what came after, not a few hundred thousand objects each time
    # (long pauses, the display's lag, measured in bench/logs.py).
    gc.freeze()
    # `swarmkit-console` starts with the collector off (cli.main); from here on it runs.
    gc.enable()


def make_app(
    store: str | None,
    workspace: str | os.PathLike | None,
    *,
    read_only: bool = False,
    clock: Callable[[], datetime] | None = None,
    poll_interval: float = 1.0,
    lease_s: float | None = None,
    detect_lost: bool = True,
    theme: str | None = None,
) -> ConsoleApp:
    """The console on a store; the CLI and the tests both build it here. Nothing is opened until it runs."""
    config = ConsoleConfig(
        store=store,
        workspace=workspace,
        read_only=read_only,
        clock=clock or store_now,
        poll_interval=poll_interval,
        lease_s=lease_s if lease_s is not None else Settings.from_env().lease_s,
        detect_lost=detect_lost,
    )
    return ConsoleApp(config, theme=theme)
