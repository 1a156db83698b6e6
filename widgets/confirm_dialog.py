"""A modal question with named choices; dismissed with the chosen key, or None to go back."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .safe_text import safe, safe_lines
from .tcss import load_css


@dataclass(frozen=True)
class Choice:
    key: str  # what the dialog returns
    label: str
    variant: str = "default"  # a Button variant: default, primary, success, warning, error


class ConfirmDialog(ModalScreen[str | None]):
    """Asks before something that cannot be undone.

    Not a yes/no: besides going ahead it can offer a safer alternative (stop
    instead of cancel), so it returns the key of the chosen `Choice`, or None
    when the operator backs out. The back button has the focus, so a stray
    Enter never destroys anything.
    """

    DEFAULT_CSS = load_css("confirm_dialog.tcss")

    BINDINGS = [
        Binding("escape", "back", "Back", id="dialog.back"),
        Binding("left", "app.focus_previous", "Previous", show=False),
        Binding("right", "app.focus_next", "Next", show=False),
    ]

    def __init__(self, title: str, body: str | Text, choices: list[Choice], *, back_label: str = "Back") -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.choices = choices
        self.back_label = back_label

    def compose(self) -> ComposeResult:
        body = self.body if isinstance(self.body, Text) else Text(safe_lines(self.body))
        with Vertical(id="dialog"):
            yield Static(Text(safe(self.title_text), style="bold"), id="dialog-title")
            yield Static(body, id="dialog-body")
            with Horizontal(id="dialog-buttons"):
                for choice in self.choices:
                    yield Button(Text(safe(choice.label)), variant=choice.variant, id=f"choice-{choice.key}")  # type: ignore[arg-type]
                yield Button(Text(safe(self.back_label)), id="choice-back")

    def on_mount(self) -> None:
        self.query_one("#choice-back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button_id = event.button.id or ""
        if button_id == "choice-back":
            self.dismiss(None)
        else:
            self.dismiss(button_id.removeprefix("choice-"))

    def action_back(self) -> None:
        self.dismiss(None)
