"""The selected run in detail: flags, node, checkpoints, audit trail, workspaces."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from .safe_text import safe
from .status_look import status_text
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


def facts_text(data: RunDetailData | None, placeholder: str = "no run selected") -> Text:
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
    return out


def sections_text(data: RunDetailData | None) -> Text:
    out = Text(end="")
    if data is None:
        return out
    for i, section in enumerate(data.sections):
        if i:
            out.append("\n\n")
        out.append(safe(section.title), style="bold underline")
        if not section.lines:
            out.append("\n  " + safe(section.empty), style="dim")
        for line in section.lines:
            out.append("\n  " + safe(line))
    return out


def detail_text(data: RunDetailData | None, placeholder: str = "no run selected") -> Text:
    """Everything the pane shows, as one text (facts, then sections)."""
    out = facts_text(data, placeholder)
    if data is not None and data.sections:
        out.append("\n\n")
        out.append_text(sections_text(data))
    return out


def _fits(text: Text, width: int) -> bool:
    return width > 0 and all(cell_len(line) <= width for line in text.plain.split("\n"))


class RunDetail(Horizontal):
    """The run's facts on the left; checkpoints, audit trail and workspaces on the right. `show(None)` for no run."""

    DEFAULT_CSS = load_css("run_detail.tcss")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.data: RunDetailData | None = None
        self._placeholder = "no run selected"
        self._facts_fit: tuple[int, bool] | None = None  # (width, whether the shown facts fit it unwrapped)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="run-detail-facts"):
            yield Static(facts_text(None), id="run-detail-facts-body")
        with VerticalScroll(id="run-detail-sections"):
            yield Static(sections_text(None), id="run-detail-sections-body")

    def restyle(self) -> None:
        """The status looks changed (a new theme): the same run in the new colours."""
        self.query_one("#run-detail-facts-body", Static).update(facts_text(self.data, self._placeholder))

    def show(self, data: RunDetailData | None, placeholder: str = "no run selected") -> None:
        if data == self.data and placeholder == self._placeholder:
            return
        keep_place = data is not None and self.data is not None and data.title == self.data.title
        old = self.data
        self.data = data
        self._placeholder = placeholder
        facts = self.query_one("#run-detail-facts-body", Static)
        text = facts_text(data, placeholder)
        # The same run with the same facts (an age moved on): when every line
        # fits unwrapped, the height is the count of lines and stays; no
        # layout of the whole screen for it (bench/console_render.py).
        same_shape = keep_place and old is not None and data is not None and len(old.facts) == len(data.facts)
        width = facts.content_region.width
        # Whether the old facts fit is remembered from when they were shown: a live run's facts change every poll.
        old_fit = self._facts_fit
        fits = _fits(text, width)
        self._facts_fit = (width, fits)
        old_fits = old_fit[1] if old_fit is not None and old_fit[0] == width else old is not None and _fits(facts_text(old), width)
        facts.update(text, layout=not (same_shape and fits and old_fits))
        if old is None or data is None or old.sections != data.sections:
            self.query_one("#run-detail-sections-body", Static).update(sections_text(data))
        if not keep_place:
            for pane in self.query(VerticalScroll):
                pane.scroll_home(animate=False)
