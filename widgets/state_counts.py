"""The console's header: which store, how many workers, counts per status, and how old the data is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.text import Text

from .safe_text import safe
from .status_look import STATUS_ORDER, look_of
from .tcss import load_css
from .text_lines import TextLines


@dataclass(frozen=True)
class StoreSummary:
    store: str
    workers: int | None = None  # None: not known yet
    counts: Mapping[str, int] = field(default_factory=dict)
    data_age: str = "no data yet"
    stale: bool = False
    view: str = ""
    read_only: bool = False
    clock: str = ""
    warning: str = ""  # e.g. that a read-only store may show stale data
    burn: str = ""  # what every running run spends together, per minute
    burn_filtered: bool = False  # the burn is of the runs a filter shows only (the counts are of every run)


def summary_lines(s: StoreSummary) -> list[Text]:
    """The store and its health; the counts per shown status."""
    line = Text(no_wrap=True, overflow="ellipsis", end="")
    line.append("swarmkit ", style="bold")
    line.append("store ", style="dim")
    line.append(safe(s.store), style="bold")
    line.append("   workers ", style="dim")
    if s.workers is None:
        line.append("?", style="dim")
    else:
        line.append(str(s.workers), style="bold green" if s.workers else "bold red")
    if s.burn:
        line.append("   burn of the filtered " if s.burn_filtered else "   burn ", style="dim")
        line.append(safe(s.burn), style="bold")
    line.append("   data ", style="dim")
    line.append(safe(s.data_age), style="bold red" if s.stale else "")
    if s.clock:
        line.append("   " + safe(s.clock), style="dim")
    if s.read_only:
        line.append("   ")
        line.append(" READ-ONLY ", style="bold black on yellow")
    if s.warning:
        line.append("   ⚠ " + safe(s.warning), style="bold yellow")
    if s.view:
        line.append("   · " + safe(s.view), style="dim")
    counts = Text(no_wrap=True, overflow="ellipsis", end="")
    shown = [(status, n) for status in STATUS_ORDER if (n := s.counts.get(status, 0))]
    shown += [(status, n) for status, n in sorted(s.counts.items()) if status not in STATUS_ORDER and n]
    if not shown:
        counts.append("no runs", style="dim")
    # Words in their colours, no glyphs: twelve statuses must fit one line.
    for i, (status, n) in enumerate(shown):
        look = look_of(status)
        if i:
            counts.append("  ")
        counts.append(look.word + " ", style=look.style)
        counts.append(str(n), style="bold")
    return [line, counts]


class StateCounts(TextLines):
    """Two lines: the store and its health, then counts per shown status.

    Lines of their own (TextLines): the clock ticks the first every second, and
    only that line is drawn and repainted."""

    DEFAULT_CSS = load_css("state_counts.tcss")

    def __init__(self, summary: StoreSummary, **kwargs) -> None:
        super().__init__(summary_lines(summary), **kwargs)
        self.summary = summary

    def show(self, summary: StoreSummary) -> None:
        if summary != self.summary:
            self.summary = summary
            self.set_lines(summary_lines(summary))

    def restyle(self) -> None:
        """The status looks changed (a new theme): the same summary in the new colours."""
        self.set_lines(summary_lines(self.summary))
