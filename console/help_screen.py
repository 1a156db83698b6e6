"""`?`: the keys that work here and what every status means."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from swarmkit.widgets.safe_text import safe
from swarmkit.widgets.status_look import STATUS_LOOKS

LOG_KEYS = (
    ("f / End", "follow the end of the log again"),
    ("↑ PgUp Home", "scroll up: follow pauses, new lines are counted; older lines load at the top"),
    ("/", "search the log (n older match, N newer)"),
    ("escape / q", "back to the runs"),
)


def help_text(entries: list[tuple[str, str]], read_only: bool) -> Text:
    out = Text()
    out.append("Keys\n", style="bold underline")
    if read_only:
        out.append("read-only console: stop, resume, cancel and approve are off\n", style="bold yellow")
    width = max([len(k) for k, _ in entries] + [len(k) for k, _ in LOG_KEYS])
    for key, words in entries:
        out.append(f"  {safe(key).rjust(width)}  ", style="bold")
        out.append(safe(words) + "\n")
    out.append("\nIn the log view\n", style="bold underline")
    for key, words in LOG_KEYS:
        out.append(f"  {key.rjust(width)}  ", style="bold")
        out.append(words + "\n")
    out.append("\nStatuses\n", style="bold underline")
    wide = max(len(look.word) for look in STATUS_LOOKS.values())
    for look in STATUS_LOOKS.values():
        out.append(f"  {look.glyph} {look.word.ljust(wide)}", style=look.style)
        out.append(f"  {look.meaning}\n")
    out.append("\nstopping, stop overdue, cancelling and stalled are shown, never stored: a running run with a\n"
               "stop or cancel requested, or with no sign of work for a while.", style="dim")
    return out


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close", id="help.close"),
    ]

    def __init__(self, entries: list[tuple[str, str]], *, read_only: bool = False) -> None:
        super().__init__()
        self.entries = entries
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_text(self.entries, self.read_only))

    def action_close(self) -> None:
        self.dismiss(None)
