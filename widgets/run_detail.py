"""The selected run in detail: flags, node, checkpoints, audit trail, workspaces."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from .safe_text import safe
from .status_badge import status_text
from .tcss import load_css


@dataclass(frozen=True)
class DetailSection:
    title: str
    lines: tuple[str, ...]
    empty: str = "none"


@dataclass(frozen=True)
class RunDetailData:
    title: str
    status: str
    facts: tuple[tuple[str, str], ...]
    sections: tuple[DetailSection, ...] = ()


def detail_text(data: RunDetailData | None, placeholder: str = "no run selected") -> Text:
    out = Text(end="")
    if data is None:
        out.append(safe(placeholder), style="dim")
        return out
    out.append_text(status_text(data.status))
    out.append("  ")
    out.append(safe(data.title), style="bold")
    width = max((len(label) for label, _ in data.facts), default=0)
    for label, value in data.facts:
        out.append("\n")
        out.append(safe(label).rjust(width), style="dim")
        out.append("  ")
        out.append(safe(value))
    for section in data.sections:
        out.append("\n\n")
        out.append(safe(section.title), style="bold underline")
        if not section.lines:
            out.append("\n  " + safe(section.empty), style="dim")
        for line in section.lines:
            out.append("\n  " + safe(line))
    return out


class RunDetail(VerticalScroll):
    """A scrollable pane of one run's facts; `show(None)` for no run."""

    DEFAULT_CSS = load_css("run_detail.tcss")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.data: RunDetailData | None = None
        self._placeholder = "no run selected"

    def compose(self) -> ComposeResult:
        yield Static(detail_text(None), id="run-detail-body")

    def show(self, data: RunDetailData | None, placeholder: str = "no run selected") -> None:
        if data == self.data and placeholder == self._placeholder:
            return
        keep_place = data is not None and self.data is not None and data.title == self.data.title
        self.data = data
        self._placeholder = placeholder
        self.query_one("#run-detail-body", Static).update(detail_text(data, placeholder))
        if not keep_place:
            self.scroll_home(animate=False)
