"""Plain-text views of runs for the command line and the console's `--once`."""

from __future__ import annotations

from datetime import datetime

from store.records import JobRecord

from .text import plain


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def node_cell(job: JobRecord) -> str:
    if job.steps == 0:
        return "-"
    if job.current_node:
        shown = min(job.step + 1, job.steps) if job.status in ("running", "stopped", "deferred", "lost") else job.step
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
    rows = []
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


def format_table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return "\n".join(lines)


def runs_table(jobs: list[JobRecord], now: datetime) -> str:
    if not jobs:
        return "no runs"
    return format_table(HEADERS, run_rows(jobs, now))
