"""Plain-text views of runs for the command line and the console's `--once`."""

from __future__ import annotations

from .run_columns import HEADERS, age, cell_width, format_row, format_table, node_cell, requested_by, run_rows, runs_table, usage_cell
from .text import plain

# The run table's columns and their cells live in run_columns.py, shared with the console.
__all__ = ["HEADERS", "age", "cell_width", "clock_warning", "format_row", "format_table", "node_cell", "requested_by", "run_rows", "runs_table", "usage_cell"]


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
