"""Plain-text views of runs for the command line and the console's `--once`."""

from __future__ import annotations

from datetime import datetime

from swarmkit.store.records import JobRecord

from .text import plain


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


def node_cell(job: JobRecord) -> str:
    if job.steps == 0:
        return "-"
    if job.current_node:
        shown = min(job.step + 1, job.steps) if job.status in ("running", "stopped", "deferred", "lost", "failed", "faulted") else job.step
        return f"{shown}/{job.steps} {plain(job.current_node, 24)}"
    return f"{job.step}/{job.steps}"


def state_since(job: JobRecord) -> datetime:
    return job.updated_at


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


HEADERS = ("ID", "FLOW", "STATUS", "NODE", "IN STATE", "LAST WORK", "REQUESTED BY", "USAGE")


def run_rows(jobs: list[JobRecord], now: datetime) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for job in jobs:
        last = job.last_event_at or job.heartbeat_at
        rows.append(
            (
                job.short_id,
                plain(job.flow, 28),
                plain(job.display_status(now), 12),
                node_cell(job),
                age((now - state_since(job)).total_seconds()),
                age((now - last).total_seconds()) + " ago" if last else "-",
                requested_by(job),
                usage_cell(job),
            )
        )
    return rows


def pad(text: str, cells: int) -> str:
    """`text` padded to `cells` terminal cells: a CJK character or an emoji takes two, so `str.ljust` would misalign."""
    from rich.cells import cell_len

    return text + " " * max(0, cells - cell_len(text))


def format_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Columns two cells apart, measured in terminal cells (rich.cells), not in characters."""
    from rich.cells import cell_len

    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(cell))
    return "\n".join(format_row(r, widths) for r in (headers, *rows))


def format_row(row: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip()


def runs_table(jobs: list[JobRecord], now: datetime) -> str:
    if not jobs:
        return "no runs"
    return format_table(HEADERS, run_rows(jobs, now))


def clock_warning(skewed: list[tuple[str, float]]) -> str | None:
    """Words for workers whose wall clocks are off the store's (`queries.skewed_workers`), worst first.

    Swarmkit decides leases and ages on the store's clock, so nothing goes
    wrong; but what those hosts log and show in local time is off by as much.
    """
    if not skewed:
        return None
    host, off = skewed[0]
    way = "ahead of" if off > 0 else "behind"
    more = f" (and {len(skewed) - 1} more)" if len(skewed) > 1 else ""
    return f"clock of worker host {plain(host, 40)} is {abs(off):.0f}s {way} the store's{more}: leases use the store's clock; fix its time sync"
