"""The run table's columns: one definition for `swarmkit status` and the console.

Each column is a key, a header, the most cells it shows and the text of one
run in it. `swarmkit status` prints them as text (`runs_table`), the console
maps them into its widget's plain rows (`console/run_views.py` `run_row`: the
widget's `RunRow` has a field per key, which a test holds to these).

Widths are terminal cells, not characters: a CJK flow name or an emoji takes
two cells each, and a table measured with `len()` goes out of line.

Pure: the store's records in, strings out; no Textual, no I/O.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from swarmkit.store import TERMINAL_STATUSES
from swarmkit.store.records import JobRecord

from .steps import step_words
from .text import plain

# --- cells ----------------------------------------------------------------------


def cell_width(text: str) -> int:
    """How many terminal cells `text` takes: wide (CJK, emoji) two, combining marks none."""
    if text.isascii():  # nearly every cell; plain() has replaced the control characters
        return len(text)
    n = 0
    for ch in text:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def fit(text: str, cells: int) -> str:
    """`text` cut to at most `cells` cells, ending in … when cut."""
    if cell_width(text) <= cells:
        return text
    out, used = [], 0
    for ch in text:
        w = cell_width(ch)
        if used + w > cells - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, cells: int) -> str:
    return text + " " * max(0, cells - cell_width(text))


# --- what a row says ---------------------------------------------------------------


def age(seconds: float | None) -> str:
    """A duration as kubectl and k9s show one: exact while it is short, coarser as it grows.

    Seconds up to 2 minutes, minutes and seconds up to 10, minutes up to 3
    hours, and so on. Besides being what operators already read, a table of
    long-running runs then changes once a minute, not every second: the
    console repaints only rows whose text changed (bench/console_render.py).
    """
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        d = h // 24
        return f"{d // 365}y{d % 365}d" if d % 365 else f"{d // 365}y"
    return f"{h // (24 * 365)}y"


def in_state_since(job: JobRecord) -> datetime:
    """When the run entered the state it is shown in (a stop request starts `stopping`)."""
    if job.status in TERMINAL_STATUSES and job.ended_at is not None:
        return job.ended_at
    if job.cancel_requested_at is not None and job.status == "running":
        return job.cancel_requested_at
    if job.stop_requested_at is not None and job.status == "running":
        return job.stop_requested_at
    return job.updated_at


def node_cell(job: JobRecord) -> str:
    return step_words(job.step, job.steps, job.current_node)


def requested_by(job: JobRecord) -> str:
    if job.cancel_requested_by:
        return "cancel: " + plain(job.cancel_requested_by, 24)
    if job.stop_requested_by:
        return "stop: " + plain(job.stop_requested_by, 24)
    return ""


def usage_cell(job: JobRecord) -> str:
    if not job.tokens and not job.cost:
        return "-"
    return f"{job.tokens:,} tok ${job.cost:.2f}"


def node_ran_s(job: JobRecord, now: datetime) -> float | None:
    """How long the node in flight has run, for a running row."""
    if job.status != "running" or job.node_started_at is None:
        return None
    return max(0.0, (now - job.node_started_at).total_seconds())


def usual(durations: Sequence[float], samples: int = 20) -> float | None:
    """How long a node usually takes: the median of its newest `samples` durations."""
    recent = list(durations)[:samples]
    if not recent:
        return None
    import statistics  # late: it loads fractions and decimal; only a stopping row asks

    return statistics.median(recent)


def stop_eta(job: JobRecord, now: datetime, usual_s: float | None) -> str:
    """For a stopping run: how long its node has run and, from past runs, when it should reach its boundary."""
    ran = node_ran_s(job, now)
    if ran is None:
        return ""
    if usual_s is None:  # no past runs of it, or not looked up (`swarmkit status`)
        return f"{age(ran)} in"
    left = usual_s - ran
    if left <= 0:
        return f"{age(ran)} in, usually ~{age(usual_s)}: any moment"
    return f"{age(ran)} in, stops in ~{age(left)}"


def burn_rate(job: JobRecord, now: datetime, since: tuple[datetime, float] | None = None) -> float | None:
    """Cost per minute of a running run: since `since` (a time and the cost then) when the caller watched
    it long enough, else over its time since it started. None for a run not running."""
    if job.status != "running":
        return None
    if since is not None:
        at, cost = since
        minutes = (now - at).total_seconds() / 60
        if minutes >= 10 / 60:
            return max(0.0, job.cost - cost) / minutes
    if job.started_at is None:
        return None
    minutes = (now - job.started_at).total_seconds() / 60
    return job.cost / minutes if minutes >= 10 / 60 else None


def burn_text(rate: float | None) -> str:
    """Two significant figures: a rate that wobbles in its third digit does not repaint the row."""
    if rate is None:
        return "-"
    if rate == 0:
        return "$0/m"
    if rate >= 10:
        return f"${rate:,.0f}/m"
    if rate >= 0.1:
        return f"${rate:.2g}/m" if rate < 1 else f"${rate:.1f}/m"
    return f"${rate:.1g}/m"


# --- the columns -------------------------------------------------------------------


@dataclass(frozen=True)
class RunView:
    """One run as a table shows it: its record, the time it is shown at, and what a watcher knows besides."""

    job: JobRecord
    now: datetime
    burn_since: tuple[datetime, float] | None = None  # (time, cost then), for the burn rate
    usual_s: float | None = None  # how long its current node usually takes, for a stopping run

    # Worked out once a view: several columns (and the console's sort values) use them.
    @cached_property
    def shown(self) -> str:
        return self.job.display_status(self.now)

    @cached_property
    def burn(self) -> float | None:
        return burn_rate(self.job, self.now, self.burn_since)


def _node(v: RunView) -> str:
    cell = node_cell(v.job)
    if v.shown == "stopping":
        eta = stop_eta(v.job, v.now, v.usual_s)
        if eta:
            return f"{cell} · {eta}"
    return cell


def _last_work(v: RunView) -> str:
    last = v.job.last_event_at or v.job.heartbeat_at
    return age((v.now - last).total_seconds()) + " ago" if last else "-"


@dataclass(frozen=True)
class Column:
    key: str  # the console's RunRow field of the same name
    header: str
    width: int  # the most cells it shows
    value: Callable[[RunView], str]


COLUMNS: tuple[Column, ...] = (
    Column("short_id", "ID", 8, lambda v: v.job.short_id),
    Column("flow", "FLOW", 32, lambda v: plain(v.job.flow, 32)),
    Column("status", "STATUS", 12, lambda v: plain(v.shown, 12)),
    Column("node", "NODE", 64, _node),
    Column("in_state", "IN STATE", 10, lambda v: age((v.now - in_state_since(v.job)).total_seconds())),
    Column("last_work", "LAST WORK", 12, _last_work),
    Column("requested_by", "REQUESTED BY", 32, lambda v: requested_by(v.job)),
    Column("usage", "USAGE", 28, lambda v: usage_cell(v.job)),
    Column("burn", "BURN", 10, lambda v: burn_text(v.burn) if v.job.status == "running" else ""),
)


def cells(view: RunView) -> dict[str, str]:
    """Every column's text for one run, by key, each within its width."""
    out = {}
    for c in COLUMNS:
        text = c.value(view)
        # Two cells a character at most: a short text needs no measuring (the common case, and the hot path).
        out[c.key] = text if 2 * len(text) <= c.width else fit(text, c.width)
    return out


HEADERS: tuple[str, ...] = tuple(c.header for c in COLUMNS)


def run_rows(jobs: Sequence[JobRecord], now: datetime) -> list[tuple[str, ...]]:
    """Each run's cells in the columns' order."""
    return [tuple(row[c.key] for c in COLUMNS) for row in (cells(RunView(job, now)) for job in jobs)]


def format_row(row: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip()


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns two cells apart, measured in terminal cells."""
    widths = [max([cell_width(h)] + [cell_width(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "\n".join(format_row(r, widths) for r in (headers, *rows))


def runs_table(jobs: Sequence[JobRecord], now: datetime) -> str:
    """The runs as `swarmkit status` prints them: the columns, aligned in terminal cells."""
    if not jobs:
        return "no runs"
    return format_table(HEADERS, run_rows(jobs, now))
