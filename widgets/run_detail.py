"""The selected run in detail: flags, node, checkpoints, audit trail, workspaces."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from .safe_text import safe
from .status_look import status_text
from .tcss import load_css
from .text_lines import TextLines, hang_wrap


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
    return Text("\n", end="").join(facts_lines(data, placeholder))


def facts_hang(data: RunDetailData | None) -> int:
    """Where a fact's value starts: a value that wraps goes on under itself."""
    return max((len(label) for label, _ in data.facts), default=0) + 2 if data is not None else 0


def facts_lines(data: RunDetailData | None, placeholder: str = "no run selected") -> list[Text]:
    """The status and title, then a line per fact."""
    if data is None:
        return [Text(safe(placeholder), style="dim", end="")]
    head = Text(end="")
    head.append_text(status_text(data.status))
    head.append("  ")
    head.append(safe(data.title), style="bold")
    lines = [head]
    width = facts_hang(data) - 2
    for label, value in data.facts:
        line = Text(end="")
        line.append(safe(label).rjust(width), style="dim")
        line.append("  ")
        line.append(safe(value))
        lines.append(line)
    return lines


INDENT, HANG = 2, 4  # a section's entries, and an entry's lines after its first


def _section_lines(data: RunDetailData) -> Iterator[tuple[Text, bool]]:
    """Each line of the sections, and whether it is an entry (wrapped, it goes on under itself)."""
    for i, section in enumerate(data.sections):
        if i:
            yield Text(end=""), False
        yield Text(safe(section.title), style="bold underline", end=""), False
        if not section.lines:
            yield Text(" " * INDENT + safe(section.empty), style="dim", end=""), False
        for line in section.lines:
            yield Text(" " * INDENT + safe(line), end=""), True


def sections_text(data: RunDetailData | None) -> Text:
    if data is None:
        return Text(end="")
    return Text("\n", end="").join(line for line, _ in _section_lines(data))


class SectionsView:
    """The sections as the pane draws them: an entry too long for the pane (a workspace's path, an
    audit entry's detail) goes on under itself, not at the pane's left edge among the titles."""

    def __init__(self, data: RunDetailData | None) -> None:
        self.data = data

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.data is None:
            yield Text(end="")  # as an empty Text draws: the pane's layout is the same with and without a run
            return
        for line, entry in _section_lines(self.data):
            if not entry:
                line.end = "\n"
                yield line
                continue
            for piece in hang_wrap(line, console, options.max_width, HANG):
                piece.no_wrap, piece.overflow, piece.end = True, "crop", "\n"
                yield piece


def detail_text(data: RunDetailData | None, placeholder: str = "no run selected") -> Text:
    """Everything the pane shows, as one text (facts, then sections)."""
    out = facts_text(data, placeholder)
    if data is not None and data.sections:
        out.append("\n\n")
        out.append_text(sections_text(data))
    return out


class RunDetail(Horizontal):
    """The run's facts on the left; checkpoints, audit trail and workspaces on the right. `show(None)` for no run."""

    DEFAULT_CSS = load_css("run_detail.tcss")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.data: RunDetailData | None = None
        self._placeholder = "no run selected"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="run-detail-facts"):
            # Lines of their own: a live run's age and usage change a line or two a second.
            yield TextLines(facts_lines(None), wrap=True, id="run-detail-facts-body")
        with VerticalScroll(id="run-detail-sections"):
            yield Static(SectionsView(None), id="run-detail-sections-body")

    @cached_property
    def _facts(self) -> TextLines:
        # Found once: the pane is told of the selected run at every poll.
        return self.query_one("#run-detail-facts-body", TextLines)

    def restyle(self) -> None:
        """The status looks changed (a new theme): the same run in the new colours."""
        self._facts.set_lines(facts_lines(self.data, self._placeholder), hang=facts_hang(self.data))

    def show(self, data: RunDetailData | None, placeholder: str = "no run selected") -> None:
        if data == self.data and placeholder == self._placeholder:
            return
        keep_place = data is not None and self.data is not None and data.title == self.data.title
        old = self.data
        self.data = data
        self._placeholder = placeholder
        # Only the lines that changed are drawn and repainted; the screen is laid out again only
        # when the facts take another number of lines (bench/console_render.py).
        self._facts.set_lines(facts_lines(data, placeholder), hang=facts_hang(data))
        if old is None or data is None or old.sections != data.sections:
            self.query_one("#run-detail-sections-body", Static).update(SectionsView(data))
        if not keep_place:
            for pane in self.query(VerticalScroll):
                pane.scroll_home(animate=False)
